//! zring's process-level settings, built once and passed down.
//!
//! A [`Config`] says how many threads the worker pool has, whether and where they are
//! pinned, and how io_uring is used. [`Config::from_env`] reads the `ZRING_*`
//! environment variables (the default); an embedding program builds one in code and
//! either hands it to [`Pool::with_config`](crate::Pool::with_config) for a pool of its
//! own or installs it with [`Config::set_global`] before zring's first read. Nothing
//! below this module reads the environment.
//!
//! Which settings a pool's own `Config` decides, and which only the process's:
//!
//! | setting | [`Pool::with_config`](crate::Pool::with_config) | [`Config::set_global`] |
//! |---------|------------------|-------------------|
//! | `threads`, `pin`, `cores` | that pool's threads | the global pool's ([`Pool::global`](crate::Pool::global)) |
//! | `uring`, `uring_register` | ignored | every ring in the process |
//!
//! The io_uring settings are process-wide because rings are: each thread has one
//! ring, shared by every store and pool that reads on that thread, so they are read
//! from [`Config::global`] when the process first uses io_uring, and only
//! `set_global` (or the environment) sets them. A pool built from a `Config` with
//! `uring: Off` still reads through io_uring where the process's settings allow it;
//! to turn it off for a store, open it with the `pread` backend.

use crate::once::{ForkOnce, InChild};

/// How reads use io_uring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum UringMode {
    /// Never: every read uses pread (`ZRING_URING=0`).
    Off,
    /// Rings owned by one thread that complete work at its next wait
    /// (`SINGLE_ISSUER | DEFER_TASKRUN`, Linux 6.1), else plain rings.
    Tuned,
    /// Plain rings only (`ZRING_URING_PLAIN=1`).
    Plain,
}

/// Process-level settings. Fields not set keep their defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Config {
    /// Threads a gather uses, the caller included (`ZRING_THREADS`); `None` chooses
    /// one per core (see [`Pool::global`](crate::Pool::global)).
    pub threads: Option<usize>,
    /// Pin pool workers to cores (`ZRING_PIN=1`, or implied by `ZRING_CORES`).
    pub pin: bool,
    /// The cores to pin to, in kernel list syntax (`ZRING_CORES`, e.g. `0-3,8`);
    /// `None` lets the topology choose.
    pub cores: Option<String>,
    /// How io_uring is used (`ZRING_URING`, `ZRING_URING_PLAIN`). Process-wide: only
    /// the global settings count (see the module documentation).
    pub uring: UringMode,
    /// Whether rings register files and buffers (`ZRING_URING_REGISTER=0` says no).
    /// Process-wide, like `uring`.
    pub uring_register: bool,
}

impl Default for Config {
    /// Unpinned, one thread per core, tuned io_uring with registration.
    fn default() -> Self {
        Self {
            threads: None,
            pin: false,
            cores: None,
            uring: UringMode::Tuned,
            uring_register: true,
        }
    }
}

/// Whether an environment value says "off".
fn is_off(v: &str) -> bool {
    v == "0" || v.eq_ignore_ascii_case("off")
}

static GLOBAL: ForkOnce<Config> = ForkOnce::new(InChild::Inherit);

impl Config {
    /// The settings the `ZRING_*` environment variables give.
    pub fn from_env() -> Self {
        Self::from_vars(|k| std::env::var(k).ok())
    }

    /// The settings given by `var` (an environment lookup), for tests.
    fn from_vars(var: impl Fn(&str) -> Option<String>) -> Self {
        let cores = var(crate::topology::CORES_ENV);
        let pin = match var("ZRING_PIN") {
            Some(v) => v != "0",
            None => cores.is_some(),
        };
        let uring = if var("ZRING_URING").is_some_and(|v| is_off(&v)) {
            UringMode::Off
        } else if var("ZRING_URING_PLAIN").is_some() {
            UringMode::Plain
        } else {
            UringMode::Tuned
        };
        Self {
            threads: var("ZRING_THREADS")
                .and_then(|v| v.parse::<usize>().ok())
                .filter(|&n| n > 0),
            pin,
            cores,
            uring,
            uring_register: !var("ZRING_URING_REGISTER").is_some_and(|v| is_off(&v)),
        }
    }

    /// The process's settings: the ones [`Config::set_global`] installed, else
    /// [`Config::from_env`] read at first use.
    pub fn global() -> &'static Config {
        GLOBAL.get_or_init(Self::from_env)
    }

    /// Installs `self` as the process's settings: the global pool's threads and
    /// placement, and the io_uring settings of every ring. Fails, handing `self`
    /// back, once they have been used (the global pool and io_uring read them at
    /// their first use) or installed. A forked child inherits them.
    pub fn set_global(self) -> Result<(), Config> {
        let mut mine = Some(self);
        GLOBAL.get_or_init(|| mine.take().unwrap_or_default());
        match mine {
            None => Ok(()),
            Some(c) => Err(c),
        }
    }

    /// The placement pinned workers use, if pinning is on.
    pub fn placement(&self) -> Option<crate::topology::Placement> {
        self.pin
            .then(|| crate::topology::Placement::from_list_or_default(self.cores.as_deref()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from(vars: &[(&str, &str)]) -> Config {
        Config::from_vars(|k| {
            vars.iter()
                .find(|(name, _)| *name == k)
                .map(|(_, v)| (*v).to_owned())
        })
    }

    #[test]
    fn the_environment_maps_to_fields() {
        assert_eq!(from(&[]), Config::default());
        let c = from(&[
            ("ZRING_THREADS", "3"),
            ("ZRING_CORES", "0-1"),
            ("ZRING_URING_PLAIN", "1"),
            ("ZRING_URING_REGISTER", "off"),
        ]);
        assert_eq!(c.threads, Some(3));
        assert!(c.pin, "a core list implies pinning");
        assert_eq!(c.cores.as_deref(), Some("0-1"));
        assert_eq!(c.uring, UringMode::Plain);
        assert!(!c.uring_register);
        let c = from(&[
            ("ZRING_CORES", "0"),
            ("ZRING_PIN", "0"),
            ("ZRING_URING", "0"),
        ]);
        assert!(!c.pin, "ZRING_PIN=0 wins");
        assert_eq!(c.uring, UringMode::Off);
        assert_eq!(from(&[("ZRING_THREADS", "0")]).threads, None);
        assert!(from(&[("ZRING_PIN", "1")]).placement().is_some());
    }
}

//! How a store is read: [`ReadOptions`], and the one set of rules that names,
//! parses and checks each setting.
//!
//! Rust callers build the struct; Python's keyword arguments and the CLI's
//! `--read KEY=VALUE` give `(name, text)` pairs to [`ReadOptions::set`]. Either way
//! [`ReadOptions::validate`] (which every open runs) refuses the same values with
//! the same [`ArgumentError`], so a bad value reads the same from every front end.
//! The settings are plain data, serialised (serde) so that a pickled store or
//! dataset carries them; the worker pool, a runtime handle, is apart from them
//! ([`ReadSetup`]).

use std::ops::{Deref, DerefMut};
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use zring_platform::PoolHandle;

use super::Backend;
use crate::error::{ArgumentError, Error, Result};
use crate::remote::{CacheOptions, RemoteOptions, WholeObjects};
use crate::size::parse_size;

/// The most reads one thread keeps in flight with the `uring` backend.
pub const MAX_QUEUE_DEPTH: usize = 256;
/// The most GETs one remote batch keeps in flight.
pub const MAX_IN_FLIGHT: usize = 1024;

/// The names [`ReadOptions::set`] takes, for the message of an unknown one.
const SETTINGS: &str = "backend, verify_checksums, threads, queue_depth, direct, \
     follow_links_out, remote.max_gap, remote.max_request, remote.in_flight, remote.max_retries, \
     remote.retry_timeout, remote.backoff_initial, remote.backoff_max, remote.timeout, \
     remote.connect_timeout, remote.cache_dir, remote.cache_bytes, \
     remote.cache_chunk_bytes, remote.cache_whole, remote.no_cache, remote.config.KEY";

/// How a store is read.
///
/// The struct is `#[non_exhaustive]`, so it can gain settings without breaking
/// callers: build it from [`Default`] with the setters (one per field, named like
/// it), or assign its public fields. Serialised settings that lack a field read it
/// as its default.
///
/// ```
/// use zring_engine::{Backend, ReadOptions};
///
/// let opts = ReadOptions::default().backend(Backend::Pread).threads(2).queue_depth(16);
/// assert_eq!((opts.threads, opts.queue_depth), (2, 16));
/// let mut more = ReadOptions::default();
/// more.direct = true;
/// ```
///
/// A struct literal, even one that ends in `..Default::default()`, does not compile
/// outside the engine, so a new setting never breaks one:
///
/// ```compile_fail,E0639
/// let opts = zring_engine::ReadOptions { threads: 4, ..Default::default() };
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct ReadOptions {
    /// Which system interface moves record bytes (see [`Backend`]).
    pub backend: Backend,
    /// Check every record's checksum on every read (on by default; one XXH3 pass
    /// over each record's stored bytes while they are in cache). `verify()` always
    /// checks.
    pub verify_checksums: bool,
    /// Threads per gather, counting the caller: 0 means the caller plus every pool
    /// worker (one per core); 1 means the caller alone.
    pub threads: usize,
    /// Reads each thread keeps in flight with the `uring` backend
    /// (1 to 256).
    pub queue_depth: usize,
    /// Read with O_DIRECT, bypassing the page cache (cold-data serving, device
    /// benchmarks). Needs a file system that supports it; not with `mmap`.
    pub direct: bool,
    /// Open the stores of a local dataset that symbolic links lead out of its
    /// directory (off by default). Off, a store whose path, with every link on it
    /// followed, is not inside the dataset directory (also resolved) is refused with
    /// [`Error::LinkOutOfDataset`], which names the store's path in the dataset and
    /// where the link leads; links that stay inside the dataset are followed either
    /// way. Turn it on for a dataset whose stores are linked in on purpose (shared
    /// with another dataset, moved to another disk) and whose directory is trusted.
    /// It changes nothing for a store opened directly or a dataset at a URL.
    pub follow_links_out: bool,
    /// How stores at URLs are read (coalescing, concurrency, retries, timeouts, the
    /// local cache); see docs/remote.md. Ignored for local paths.
    pub remote: RemoteOptions,
}

impl Default for ReadOptions {
    fn default() -> Self {
        Self {
            backend: Backend::Auto,
            verify_checksums: true,
            threads: 0,
            queue_depth: 64,
            direct: false,
            follow_links_out: false,
            remote: RemoteOptions::default(),
        }
    }
}

/// What an open takes: the read settings and the worker pool the store's gathers,
/// verifies and async reads run on. A `ReadOptions` converts into one on the
/// process-wide pool; [`ReadOptions::with_pool`] gives one on a pool of the
/// caller's (a loader or a service sizing its own threads). Reads as its settings
/// (`Deref`).
#[derive(Clone, Debug)]
pub struct ReadSetup {
    pub settings: ReadOptions,
    pub pool: PoolHandle,
}

impl From<ReadOptions> for ReadSetup {
    fn from(settings: ReadOptions) -> Self {
        Self {
            settings,
            pool: PoolHandle::global(),
        }
    }
}

impl From<&ReadOptions> for ReadSetup {
    fn from(settings: &ReadOptions) -> Self {
        settings.clone().into()
    }
}

impl From<&ReadSetup> for ReadSetup {
    fn from(setup: &ReadSetup) -> Self {
        setup.clone()
    }
}

impl Deref for ReadSetup {
    type Target = ReadOptions;

    fn deref(&self) -> &ReadOptions {
        &self.settings
    }
}

impl DerefMut for ReadSetup {
    fn deref_mut(&mut self) -> &mut ReadOptions {
        &mut self.settings
    }
}

impl ReadOptions {
    /// Default options with `backend`.
    pub fn with_backend(backend: Backend) -> Self {
        Self {
            backend,
            ..Self::default()
        }
    }

    /// These settings with the reads run on `pool` (with `threads` 0, a gather uses
    /// the caller and every worker of `pool`).
    pub fn with_pool(self, pool: impl Into<PoolHandle>) -> ReadSetup {
        ReadSetup {
            settings: self,
            pool: pool.into(),
        }
    }

    /// These options with checksum verification on reads turned on (the default) or
    /// off.
    pub fn verify_checksums(mut self, on: bool) -> Self {
        self.verify_checksums = on;
        self
    }

    /// These options with `backend` (see [`Backend`]).
    pub fn backend(mut self, backend: Backend) -> Self {
        self.backend = backend;
        self
    }

    /// These options with `threads` threads per gather, the caller counted (0: the
    /// caller and every pool worker).
    pub fn threads(mut self, threads: usize) -> Self {
        self.threads = threads;
        self
    }

    /// These options with `depth` reads in flight per thread with the `uring` backend.
    pub fn queue_depth(mut self, depth: usize) -> Self {
        self.queue_depth = depth;
        self
    }

    /// These options reading with O_DIRECT (`true`) or through the page cache.
    pub fn direct(mut self, on: bool) -> Self {
        self.direct = on;
        self
    }

    /// These options opening a local dataset's stores that symbolic links lead out
    /// of its directory (`true`), or refusing them (the default; see the field of
    /// the same name).
    pub fn follow_links_out(mut self, on: bool) -> Self {
        self.follow_links_out = on;
        self
    }

    /// These options with `remote` as the settings of stores at URLs.
    pub fn remote(mut self, remote: RemoteOptions) -> Self {
        self.remote = remote;
        self
    }

    /// Sets the setting named `key` from its text, as Python's keyword arguments and
    /// the CLI's `--read KEY=VALUE` give it: `backend`, `verify_checksums`,
    /// `threads`, `queue_depth`, `direct`, `follow_links_out`, and the remote
    /// options as `remote.NAME` (`remote.config.KEY` for an object_store
    /// configuration key). Sizes take units (`4k`, `64MiB`, `2G`: powers of 1024,
    /// see [`parse_size()`](crate::parse_size)), durations are seconds, switches
    /// `true` or `false`. The value is checked by the rule [`validate`] applies.
    ///
    /// [`validate`]: ReadOptions::validate
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        let bad = |expected| setting_error(key, value, expected);
        let r = &mut self.remote;
        match key {
            "backend" => self.backend = Backend::from_str(value).map_err(|_| bad(BACKENDS))?,
            "verify_checksums" => self.verify_checksums = switch(value).ok_or_else(|| bad(BOOL))?,
            "threads" => self.threads = count(value).ok_or_else(|| bad(THREADS))?,
            "queue_depth" => self.queue_depth = count(value).ok_or_else(|| bad(QUEUE_DEPTH))?,
            "direct" => self.direct = switch(value).ok_or_else(|| bad(BOOL))?,
            "follow_links_out" => self.follow_links_out = switch(value).ok_or_else(|| bad(BOOL))?,
            "remote.max_gap" => r.max_gap = parse_size(value).map_err(|_| bad(BYTES))?,
            "remote.max_request" => r.max_request = parse_size(value).map_err(|_| bad(REQUEST))?,
            "remote.in_flight" => r.in_flight = count(value).ok_or_else(|| bad(IN_FLIGHT))?,
            "remote.max_retries" => r.max_retries = count(value).ok_or_else(|| bad(COUNT))?,
            "remote.retry_timeout" => r.retry_timeout = secs(value).ok_or_else(|| bad(SECS))?,
            "remote.backoff_initial" => r.backoff_initial = secs(value).ok_or_else(|| bad(SECS))?,
            "remote.backoff_max" => r.backoff_max = secs(value).ok_or_else(|| bad(SECS))?,
            "remote.timeout" => r.timeout = secs(value).ok_or_else(|| bad(SECS))?,
            "remote.connect_timeout" => r.connect_timeout = secs(value).ok_or_else(|| bad(SECS))?,
            "remote.no_cache" => r.no_cache = switch(value).ok_or_else(|| bad(BOOL))?,
            "remote.cache_dir" if value.is_empty() => return Err(bad(DIR)),
            "remote.cache_dir" => cache(r).dir = PathBuf::from(value),
            "remote.cache_bytes" => {
                cache(r).max_bytes = parse_size(value).map_err(|_| bad(BYTES))?
            }
            "remote.cache_chunk_bytes" => {
                cache(r).chunk_bytes = parse_size(value).map_err(|_| bad(CHUNK))?
            }
            "remote.cache_whole" => {
                cache(r).whole = WholeObjects::parse(value).ok_or_else(|| bad(WHOLE))?
            }
            _ => match key.strip_prefix("remote.config.") {
                Some(k) if !k.is_empty() => r.config.push((k.to_string(), value.to_string())),
                _ => {
                    return Err(Error::InvalidArgument(ArgumentError::UnknownSetting {
                        key: key.to_string(),
                        known: SETTINGS,
                    }))
                }
            },
        }
        self.validate_one(key)
    }

    /// Default options with each `(key, value)` [`set`](ReadOptions::set) in turn,
    /// then [validated](ReadOptions::validate).
    pub fn from_pairs<K: AsRef<str>, V: AsRef<str>>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Result<Self> {
        let mut o = Self::default();
        for (k, v) in pairs {
            o.set(k.as_ref(), v.as_ref())?;
        }
        o.validate()?;
        Ok(o)
    }

    /// Checks every setting against its rule (the rules [`set`](ReadOptions::set)
    /// applies): a `queue_depth` in 1..=256, a `remote.in_flight`
    /// in 1..=1024, a `remote.max_request` and a cache's chunk size of
    /// at least a byte. Every open runs it.
    pub fn validate(&self) -> Result<()> {
        for key in [
            "queue_depth",
            "remote.in_flight",
            "remote.max_request",
            "remote.cache_chunk_bytes",
        ] {
            self.validate_one(key)?;
        }
        Ok(())
    }

    /// Checks the setting named `key` (those with a rule beyond their type).
    fn validate_one(&self, key: &str) -> Result<()> {
        let r = &self.remote;
        let (ok, value, expected) = match key {
            "queue_depth" => (
                (1..=MAX_QUEUE_DEPTH).contains(&self.queue_depth),
                self.queue_depth.to_string(),
                QUEUE_DEPTH,
            ),
            "remote.in_flight" => (
                (1..=MAX_IN_FLIGHT).contains(&r.in_flight),
                r.in_flight.to_string(),
                IN_FLIGHT,
            ),
            "remote.max_request" => (r.max_request >= 1, r.max_request.to_string(), REQUEST),
            "remote.cache_chunk_bytes" => match &r.cache {
                Some(c) => (c.chunk_bytes >= 1, c.chunk_bytes.to_string(), CHUNK),
                None => (true, String::new(), CHUNK),
            },
            _ => (true, String::new(), ""),
        };
        if ok {
            Ok(())
        } else {
            Err(setting_error(key, &value, expected))
        }
    }

    /// The settings as JSON (what a pickle carries); [`ReadOptions::from_json`]
    /// reads them back.
    pub fn to_json(&self) -> String {
        // Every field is a string, number, bool, list or map: this cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Settings written by [`ReadOptions::to_json`], validated; fields it lacks
    /// take their defaults.
    pub fn from_json(json: &str) -> Result<Self> {
        let o: Self = serde_json::from_str(json).map_err(|e| {
            Error::InvalidArgument(ArgumentError::SettingsJson {
                reason: e.to_string(),
            })
        })?;
        o.validate()?;
        Ok(o)
    }
}

const BACKENDS: &str = "auto, pread, mmap or uring";
const BOOL: &str = "true or false";
const THREADS: &str = "a whole number of threads (0: the caller and every pool worker)";
const QUEUE_DEPTH: &str = "a whole number from 1 to 256";
const IN_FLIGHT: &str = "a whole number from 1 to 1024";
const COUNT: &str = "a whole number";
const BYTES: &str = "a size (e.g. 65536, 64k, 2G)";
const REQUEST: &str = "a size of at least 1 byte (e.g. 16M)";
const CHUNK: &str = "a size of at least 1 byte (e.g. 4M)";
const SECS: &str = "a duration in seconds (e.g. 0.5)";
const DIR: &str = "a directory (leave remote.cache_dir out for the default location)";
const WHOLE: &str = "auto, always or never";

const _: () = assert!(MAX_QUEUE_DEPTH == 256 && MAX_IN_FLIGHT == 1024);

fn setting_error(key: &str, value: &str, expected: &'static str) -> Error {
    Error::InvalidArgument(ArgumentError::Setting {
        key: key.to_string(),
        value: value.to_string(),
        expected,
    })
}

/// The cache being configured: an empty directory (the environment's or the default
/// location, see `RemoteOptions::effective_cache`) until `remote.cache_dir` is set.
fn cache(r: &mut RemoteOptions) -> &mut CacheOptions {
    r.cache
        .get_or_insert_with(|| CacheOptions::new(PathBuf::new(), CacheOptions::DEFAULT_MAX_BYTES))
}

fn switch(s: &str) -> Option<bool> {
    match s.trim().to_ascii_lowercase().as_str() {
        "true" | "1" => Some(true),
        "false" | "0" => Some(false),
        _ => None,
    }
}

fn count(s: &str) -> Option<usize> {
    s.trim().parse().ok()
}

fn secs(s: &str) -> Option<Duration> {
    Duration::try_from_secs_f64(s.trim().parse().ok()?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setting(e: Error) -> (String, String) {
        match e {
            Error::InvalidArgument(ArgumentError::Setting { key, value, .. }) => (key, value),
            other => panic!("expected a setting error, got {other:?}"),
        }
    }

    #[test]
    fn bad_values_are_the_typed_setting_error_whether_set_or_built() {
        for (key, value) in [
            ("queue_depth", "0"),
            ("queue_depth", "257"),
            ("remote.in_flight", "0"),
            ("remote.in_flight", "100000"),
            ("threads", "-1"),
            ("backend", "disk"),
            ("remote.cache_bytes", "-5"),
            ("remote.cache_bytes", "lots"),
            ("remote.timeout", "-1"),
            ("direct", "maybe"),
        ] {
            let e = ReadOptions::default().set(key, value).expect_err(key);
            assert_eq!(setting(e), (key.to_string(), value.to_string()));
        }
        // A struct built in Rust is refused with the same error as the text.
        let built = ReadOptions {
            queue_depth: 0,
            ..ReadOptions::default()
        };
        let from_text = ReadOptions::default().set("queue_depth", "0");
        assert_eq!(
            built.validate().expect_err("0").to_string(),
            from_text.expect_err("0").to_string()
        );
        let mut built = ReadOptions::default();
        built.remote.in_flight = 100_000;
        assert_eq!(
            built.validate().expect_err("in_flight").to_string(),
            "invalid argument: read setting remote.in_flight=\"100000\": expected a whole number from 1 to 1024"
        );
    }

    #[test]
    fn unknown_names_are_refused_and_a_cache_bound_alone_keeps_the_default_place() {
        match ReadOptions::default().set("thread", "2") {
            Err(Error::InvalidArgument(ArgumentError::UnknownSetting { key, .. })) => {
                assert_eq!(key, "thread")
            }
            other => panic!("expected an unknown setting, got {other:?}"),
        }
        let o = ReadOptions::from_pairs([("remote.cache_bytes", "2G")]).expect("a bound alone");
        let c = o.remote.cache.expect("configured");
        assert_eq!((c.dir.as_os_str().is_empty(), c.max_bytes), (true, 2 << 30));
    }

    #[test]
    fn settings_parse_from_text_and_round_trip_through_json() {
        let o = ReadOptions::from_pairs([
            ("backend", "pread"),
            ("verify_checksums", "false"),
            ("threads", "3"),
            ("remote.in_flight", "8"),
            ("remote.timeout", "2.5"),
            ("remote.cache_bytes", "1G"),
            ("remote.cache_dir", "/var/cache/z"),
            ("remote.cache_whole", "never"),
            ("remote.config.aws_region", "eu-west-1"),
        ])
        .expect("valid");
        assert_eq!(o.backend, Backend::Pread);
        assert!(!o.verify_checksums);
        assert_eq!((o.threads, o.remote.in_flight), (3, 8));
        assert_eq!(o.remote.timeout, Duration::from_millis(2500));
        let c = o.remote.cache.as_ref().expect("cache");
        assert_eq!((c.max_bytes, c.whole), (1 << 30, WholeObjects::Never));
        assert_eq!(
            o.remote.config,
            vec![("aws_region".into(), "eu-west-1".into())]
        );
        assert_eq!(ReadOptions::from_json(&o.to_json()).expect("json"), o);
        assert_eq!(
            ReadOptions::from_json("{\"threads\": 2}").expect("partial"),
            ReadOptions {
                threads: 2,
                ..ReadOptions::default()
            }
        );
        assert!(ReadOptions::from_json("{\"queue_depth\": 0}").is_err());
        assert!(ReadOptions::from_json("{\"thread\": 2}").is_err());
    }
}

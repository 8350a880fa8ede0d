//! How remote stores are read: request coalescing, concurrency, retries, timeouts,
//! credentials overrides and the local chunk cache. Plain data, compiled with or
//! without the `remote` feature, so configurations build everywhere.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The environment variable naming a cache directory used when none is configured.
pub const CACHE_DIR_ENV: &str = "ZRING_CACHE_DIR";
/// The environment variable bounding that cache (bytes; `K`, `M`, `G`, `T` suffixes
/// in powers of 1024 accepted).
pub const CACHE_BYTES_ENV: &str = "ZRING_CACHE_BYTES";
/// The environment variable that turns off the cache of stores that configure none
/// (any value but empty or `0`): the cache is on by default.
pub const NO_CACHE_ENV: &str = "ZRING_NO_CACHE";
/// The cache's directory inside the user's cache directory.
const DEFAULT_SUBDIR: &str = "zring/remote";

/// How a store at an `s3://`, `gs://`, `az://`, `http(s)://` or `file://` URL is
/// read (the `remote` field of `ReadOptions`; ignored for local paths).
/// Credentials, region and endpoint come from each cloud's standard environment
/// (see docs/remote.md); [`RemoteOptions::config`] overrides them per store.
///
/// `#[non_exhaustive]`, so that a new setting breaks no caller: outside this crate
/// it is built from [`Default`] and the chainable setters (one per field, named
/// like it), e.g. `RemoteOptions::default().max_gap(0).in_flight(4)`; the public
/// fields can still be read and assigned.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct RemoteOptions {
    /// Records of a batch lying within this many bytes of each other in the object
    /// are fetched by one ranged GET (the bytes between are fetched and dropped).
    /// 64 KiB by default (docs/remote.md#tuning): a batch's GETs run `in_flight` at
    /// a time, so a request's round trip overlaps the others' transfers and what a
    /// merge saves is one request's overhead, while what it costs is the gap's bytes
    /// on the link. At 1 MiB, W1 batches (147 KiB records) over a 1 Gbit/s link
    /// fetched 3.5x the bytes they delivered and ran at 0.31x of the link.
    pub max_gap: u64,
    /// The longest coalesced GET in bytes (a single record longer than this is
    /// still one GET).
    pub max_request: u64,
    /// GETs one batch keeps in flight at once (1..=1024).
    pub in_flight: usize,
    /// Retries of a failed request (5xx, throttling, connection reset, timeout),
    /// with exponential backoff; 0 never retries.
    pub max_retries: usize,
    /// No retry starts this long after a request's first attempt.
    pub retry_timeout: Duration,
    /// The first backoff between retries (doubled each time, randomised).
    pub backoff_initial: Duration,
    /// The longest backoff between retries.
    pub backoff_max: Duration,
    /// A request (connect to the last byte of its body) fails after this long.
    pub timeout: Duration,
    /// Connecting fails after this long.
    pub connect_timeout: Duration,
    /// The local cache; `None` uses the environment's (see
    /// [`RemoteOptions::effective_cache`]): on by default, in the user's cache
    /// directory, bounded by [`CacheOptions::DEFAULT_MAX_BYTES`].
    pub cache: Option<CacheOptions>,
    /// Never cache, whatever `cache` and the environment say.
    pub no_cache: bool,
    /// Extra object_store configuration keys (`("aws_endpoint", "http://...")`,
    /// `("google_service_account", ...)`, `("azure_storage_account_name", ...)`,
    /// ...), applied over the environment's.
    pub config: Vec<(String, String)>,
}

impl Default for RemoteOptions {
    fn default() -> Self {
        Self {
            max_gap: 64 << 10,
            max_request: 16 << 20,
            in_flight: 32,
            max_retries: 8,
            retry_timeout: Duration::from_secs(120),
            backoff_initial: Duration::from_millis(50),
            backoff_max: Duration::from_secs(8),
            timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(10),
            cache: None,
            no_cache: false,
            config: Vec::new(),
        }
    }
}

/// A local cache of remote objects' bytes (for example on NVMe), shared by every
/// store and process that names the same directory. See docs/remote.md#the-cache.
///
/// `#[non_exhaustive]`, so that a new setting breaks no caller: outside this crate
/// it is built by [`CacheOptions::new`] and the chainable setters, e.g.
/// `CacheOptions::new(dir, 1 << 30).chunk_bytes(4 << 20)`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct CacheOptions {
    /// The cache directory (created if missing); empty: `ZRING_CACHE_DIR`, else the
    /// default location (see [`RemoteOptions::effective_cache`]).
    pub dir: PathBuf,
    /// The bytes the cache may hold; the least recently used chunks are evicted
    /// beyond it.
    pub max_bytes: u64,
    /// Objects are cached in chunks of this many bytes (an object smaller than a
    /// chunk is one entry).
    pub chunk_bytes: u64,
    /// When an object is cached whole (downloaded once at open, then read as a local
    /// file) instead of in chunks.
    pub whole: WholeObjects,
}

/// When a cache keeps whole objects (see docs/remote.md#whole-objects): a store
/// cached whole is opened as a local store on its cache file, so a warm cache reads
/// at local speed, with every local backend.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WholeObjects {
    /// Objects of at most half the cache's bound are cached whole; larger ones in
    /// chunks.
    #[default]
    Auto,
    /// Every object is cached whole, whatever its size (one larger than the bound
    /// is evicted again by the next write past the bound, but the store that
    /// downloaded it keeps reading its file).
    Always,
    /// Objects are cached in chunks only.
    Never,
}

impl WholeObjects {
    /// `"auto"`, `"always"`, `"never"`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "auto" => Some(Self::Auto),
            "always" => Some(Self::Always),
            "never" => Some(Self::Never),
            _ => None,
        }
    }

    /// The name [`WholeObjects::parse`] takes.
    pub fn name(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Always => "always",
            Self::Never => "never",
        }
    }
}

impl CacheOptions {
    /// The bound when none is given: 16 GiB.
    pub const DEFAULT_MAX_BYTES: u64 = 16 << 30;
    /// The chunk size when none is given: 4 MiB.
    pub const DEFAULT_CHUNK_BYTES: u64 = 4 << 20;

    /// A cache in `dir` bounded to `max_bytes`, with the default chunk size and
    /// whole objects cached by [`WholeObjects::Auto`]'s rule.
    pub fn new(dir: impl Into<PathBuf>, max_bytes: u64) -> Self {
        Self {
            dir: dir.into(),
            max_bytes,
            chunk_bytes: Self::DEFAULT_CHUNK_BYTES,
            whole: WholeObjects::Auto,
        }
    }

    /// This cache in `dir` (empty: `ZRING_CACHE_DIR`, else the default location).
    pub fn dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.dir = dir.into();
        self
    }

    /// This cache bounded to `max_bytes`.
    pub fn max_bytes(mut self, max_bytes: u64) -> Self {
        self.max_bytes = max_bytes;
        self
    }

    /// This cache keeping objects in chunks of `chunk_bytes`.
    pub fn chunk_bytes(mut self, chunk_bytes: u64) -> Self {
        self.chunk_bytes = chunk_bytes;
        self
    }

    /// This cache keeping objects whole by `whole`'s rule.
    pub fn whole(mut self, whole: WholeObjects) -> Self {
        self.whole = whole;
        self
    }

    /// Whether an object of `size` bytes is cached whole. `Auto`'s rule, at most half
    /// the bound: such an object never needs more than half the cache, so entries of
    /// other objects still fit beside it, and evicting it frees a predictable share.
    pub fn caches_whole(&self, size: u64) -> bool {
        match self.whole {
            WholeObjects::Always => true,
            WholeObjects::Never => false,
            WholeObjects::Auto => size <= self.max_bytes / 2,
        }
    }
}

impl RemoteOptions {
    /// These options coalescing records within `max_gap` bytes into one GET.
    pub fn max_gap(mut self, max_gap: u64) -> Self {
        self.max_gap = max_gap;
        self
    }

    /// These options with coalesced GETs of at most `max_request` bytes.
    pub fn max_request(mut self, max_request: u64) -> Self {
        self.max_request = max_request;
        self
    }

    /// These options keeping `in_flight` GETs of a batch in flight.
    pub fn in_flight(mut self, in_flight: usize) -> Self {
        self.in_flight = in_flight;
        self
    }

    /// These options retrying a failed request up to `max_retries` times.
    pub fn max_retries(mut self, max_retries: usize) -> Self {
        self.max_retries = max_retries;
        self
    }

    /// These options starting no retry `retry_timeout` after a first attempt.
    pub fn retry_timeout(mut self, retry_timeout: Duration) -> Self {
        self.retry_timeout = retry_timeout;
        self
    }

    /// These options with a first backoff of `backoff_initial` between retries.
    pub fn backoff_initial(mut self, backoff_initial: Duration) -> Self {
        self.backoff_initial = backoff_initial;
        self
    }

    /// These options with backoffs between retries of at most `backoff_max`.
    pub fn backoff_max(mut self, backoff_max: Duration) -> Self {
        self.backoff_max = backoff_max;
        self
    }

    /// These options failing a request after `timeout`.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// These options failing a connect after `connect_timeout`.
    pub fn connect_timeout(mut self, connect_timeout: Duration) -> Self {
        self.connect_timeout = connect_timeout;
        self
    }

    /// These options with the local cache `cache` (a [`CacheOptions`], or `None`
    /// for the environment's).
    pub fn cache(mut self, cache: impl Into<Option<CacheOptions>>) -> Self {
        self.cache = cache.into();
        self
    }

    /// These options never caching (`true`), whatever `cache` and the environment say.
    pub fn no_cache(mut self, on: bool) -> Self {
        self.no_cache = on;
        self
    }

    /// These options with the object_store configuration keys `config` (replacing
    /// any set before), applied over the environment's.
    pub fn config<K: Into<String>, V: Into<String>>(
        mut self,
        config: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        self.config = config
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        self
    }

    /// The cache in force, `None` for none:
    ///
    /// - none with `no_cache`;
    /// - else the configured `cache`, or, when none is configured, none if
    ///   `ZRING_NO_CACHE` is set (to anything but empty or `0`), else a cache
    ///   bounded by `ZRING_CACHE_BYTES` (default [`CacheOptions::DEFAULT_MAX_BYTES`]);
    /// - in the configured directory, else `ZRING_CACHE_DIR`, else the default
    ///   location: `zring/remote` in the user's cache directory (`$XDG_CACHE_HOME`,
    ///   else `~/.cache`). A default location that cannot be created (no home, a
    ///   read-only file system) means no cache rather than failed reads: nobody
    ///   asked for it.
    ///
    /// A `ZRING_CACHE_BYTES` that does not parse is an error.
    pub fn effective_cache(&self) -> crate::error::Result<Option<CacheOptions>> {
        let env = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        self.resolve_cache(&env)
    }

    /// [`effective_cache`](RemoteOptions::effective_cache) with the environment
    /// read through `env` (tests give one of their own).
    fn resolve_cache(
        &self,
        env: &dyn Fn(&str) -> Option<OsString>,
    ) -> crate::error::Result<Option<CacheOptions>> {
        if self.no_cache {
            return Ok(None);
        }
        let mut cache = match &self.cache {
            Some(c) => c.clone(),
            None if env(NO_CACHE_ENV).is_some_and(|v| v != "0") => return Ok(None),
            None => CacheOptions::new(PathBuf::new(), env_bytes(env)?),
        };
        if cache.dir.as_os_str().is_empty() {
            if let Some(dir) = env(CACHE_DIR_ENV) {
                cache.dir = PathBuf::from(dir);
            } else {
                match default_cache_dir(env) {
                    Some(dir) if std::fs::create_dir_all(&dir).is_ok() => cache.dir = dir,
                    _ => return Ok(None),
                }
            }
        }
        Ok(Some(cache))
    }
}

/// `ZRING_CACHE_BYTES`, else the default bound.
fn env_bytes(env: &dyn Fn(&str) -> Option<OsString>) -> crate::error::Result<u64> {
    let Some(v) = env(CACHE_BYTES_ENV) else {
        return Ok(CacheOptions::DEFAULT_MAX_BYTES);
    };
    let v = v.to_string_lossy().into_owned();
    crate::size::parse_size(&v).map_err(|_| {
        crate::error::Error::InvalidArgument(crate::error::ArgumentError::Environment {
            var: CACHE_BYTES_ENV,
            value: v,
            expected: "a size (e.g. 500G)",
        })
    })
}

/// `zring/remote` in the user's cache directory, by the XDG base directory rule:
/// `$XDG_CACHE_HOME` when it is an absolute path, else `$HOME/.cache`. (Two lines
/// of a published rule, where a crate would add two dependencies.)
fn default_cache_dir(env: &dyn Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    let base = env("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| Some(PathBuf::from(env("HOME")?).join(".cache")))?;
    Some(base.join(DEFAULT_SUBDIR))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_up_to_half_the_bound_are_cached_whole_by_default() {
        let mut c = CacheOptions::new("/tmp/c", 1000);
        assert!(c.caches_whole(0));
        assert!(c.caches_whole(500));
        assert!(!c.caches_whole(501));
        c.whole = WholeObjects::Always;
        assert!(c.caches_whole(u64::MAX));
        c.whole = WholeObjects::Never;
        assert!(!c.caches_whole(1));
        for w in [
            WholeObjects::Auto,
            WholeObjects::Always,
            WholeObjects::Never,
        ] {
            assert_eq!(WholeObjects::parse(w.name()), Some(w));
        }
        assert_eq!(WholeObjects::parse("yes"), None);
    }

    /// `effective_cache` over an environment of `vars` alone.
    fn resolve(o: &RemoteOptions, vars: &[(&str, &str)]) -> Option<CacheOptions> {
        let vars: Vec<(String, OsString)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), OsString::from(v)))
            .collect();
        let env = move |name: &str| {
            vars.iter()
                .find(|(k, v)| k == name && !v.is_empty())
                .map(|(_, v)| v.clone())
        };
        o.resolve_cache(&env).expect("valid environment")
    }

    #[test]
    fn the_cache_is_on_by_default_in_the_users_cache_directory() {
        let home = tempfile::tempdir().expect("tempdir");
        let xdg = tempfile::tempdir().expect("tempdir");
        let h = home.path().to_str().expect("utf-8");
        let x = xdg.path().to_str().expect("utf-8");
        let d = RemoteOptions::default();
        let c = resolve(&d, &[("HOME", h)]).expect("a default cache");
        assert_eq!(c.dir, home.path().join(".cache/zring/remote"));
        assert_eq!(c.max_bytes, CacheOptions::DEFAULT_MAX_BYTES);
        assert!(c.dir.is_dir(), "the default location is created");
        let c = resolve(&d, &[("HOME", h), ("XDG_CACHE_HOME", x)]).expect("cache");
        assert_eq!(c.dir, xdg.path().join("zring/remote"));
        // A relative XDG_CACHE_HOME is ignored, as the XDG rule says.
        let c = resolve(&d, &[("HOME", h), ("XDG_CACHE_HOME", "rel")]).expect("cache");
        assert_eq!(c.dir, home.path().join(".cache/zring/remote"));
        // ZRING_CACHE_DIR and ZRING_CACHE_BYTES choose the place and the bound.
        let c = resolve(
            &d,
            &[
                ("HOME", h),
                ("ZRING_CACHE_DIR", "/nvme/c"),
                ("ZRING_CACHE_BYTES", "2G"),
            ],
        )
        .expect("cache");
        assert_eq!((c.dir, c.max_bytes), (PathBuf::from("/nvme/c"), 2 << 30));
        // No home, or one that cannot hold a cache: no cache, not a failed read.
        assert_eq!(resolve(&d, &[]), None);
        let file = home.path().join("a-file");
        std::fs::write(&file, b"").expect("write");
        assert_eq!(
            resolve(&d, &[("HOME", file.to_str().expect("utf-8"))]),
            None
        );
    }

    #[test]
    fn the_cache_is_off_when_asked_and_explicit_settings_win_over_the_environment() {
        let home = tempfile::tempdir().expect("tempdir");
        let h = home.path().to_str().expect("utf-8");
        let d = RemoteOptions::default();
        assert_eq!(resolve(&d, &[("HOME", h), ("ZRING_NO_CACHE", "1")]), None);
        assert!(resolve(&d, &[("HOME", h), ("ZRING_NO_CACHE", "0")]).is_some());
        assert!(resolve(&d, &[("HOME", h), ("ZRING_NO_CACHE", "")]).is_some());
        let off = RemoteOptions {
            no_cache: true,
            ..RemoteOptions::default()
        };
        assert_eq!(
            resolve(&off, &[("HOME", h), ("ZRING_CACHE_DIR", "/c")]),
            None
        );
        // A configured cache ignores ZRING_NO_CACHE and ZRING_CACHE_BYTES; one
        // configured without a directory takes the environment's or the default.
        let bounded = RemoteOptions {
            cache: Some(CacheOptions::new("", 1 << 20)),
            ..RemoteOptions::default()
        };
        let c = resolve(
            &bounded,
            &[
                ("HOME", h),
                ("ZRING_NO_CACHE", "1"),
                ("ZRING_CACHE_BYTES", "9G"),
            ],
        )
        .expect("cache");
        assert_eq!(
            (c.dir, c.max_bytes),
            (home.path().join(".cache/zring/remote"), 1 << 20)
        );
        let c = resolve(&bounded, &[("ZRING_CACHE_DIR", "/c")]).expect("cache");
        assert_eq!(c.dir, PathBuf::from("/c"));
    }

    #[test]
    fn a_bad_cache_bound_in_the_environment_is_an_error_naming_it() {
        let env = |name: &str| (name == CACHE_BYTES_ENV).then(|| OsString::from("lots"));
        let e = RemoteOptions::default()
            .resolve_cache(&env)
            .expect_err("bad bound");
        assert!(e.to_string().contains("ZRING_CACHE_BYTES"), "{e}");
    }
}

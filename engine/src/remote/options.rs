//! How remote stores are read: request coalescing, concurrency, retries, timeouts,
//! credentials overrides and the local chunk cache. Plain data, compiled with or
//! without the `remote` feature, so configurations build everywhere.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The environment variable naming a cache directory used when none is configured.
pub const CACHE_DIR_ENV: &str = "ZRING_CACHE_DIR";
/// The environment variable bounding that cache (bytes; `K`, `M`, `G`, `T` suffixes
/// in powers of 1024 accepted).
pub const CACHE_BYTES_ENV: &str = "ZRING_CACHE_BYTES";

/// How a store at an `s3://`, `gs://`, `az://`, `http(s)://` or `file://` URL is
/// read (the `remote` field of `ReadOptions`; ignored for local paths).
/// Credentials, region and endpoint come from each cloud's standard environment
/// (see docs/remote.md); [`RemoteOptions::config`] overrides them per store.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
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
    /// The local chunk cache; `None` uses `ZRING_CACHE_DIR` when it is set (bounded
    /// by `ZRING_CACHE_BYTES`, default [`CacheOptions::DEFAULT_MAX_BYTES`]).
    pub cache: Option<CacheOptions>,
    /// Never cache, whatever `ZRING_CACHE_DIR` says.
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
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheOptions {
    /// The cache directory (created if missing).
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
    /// The cache in force: the configured one, else `ZRING_CACHE_DIR`'s, unless
    /// `no_cache`. A `ZRING_CACHE_BYTES` that does not parse is an error.
    pub fn effective_cache(&self) -> crate::error::Result<Option<CacheOptions>> {
        if self.no_cache {
            return Ok(None);
        }
        if let Some(c) = &self.cache {
            return Ok(Some(c.clone()));
        }
        let dir = match std::env::var_os(CACHE_DIR_ENV) {
            Some(d) if !d.is_empty() => PathBuf::from(d),
            _ => return Ok(None),
        };
        let max_bytes = match std::env::var(CACHE_BYTES_ENV) {
            Ok(v) => parse_bytes(&v).ok_or_else(|| {
                crate::error::Error::InvalidArgument(crate::error::ArgumentError::Environment {
                    var: CACHE_BYTES_ENV,
                    value: v.clone(),
                    expected: "a byte count (e.g. 500G)",
                })
            })?,
            Err(_) => CacheOptions::DEFAULT_MAX_BYTES,
        };
        Ok(Some(CacheOptions::new(dir, max_bytes)))
    }
}

/// Parses `123`, `64K`, `500M`, `2G`, `1T` (powers of 1024; an optional `B` or
/// `iB` after the letter).
pub fn parse_bytes(s: &str) -> Option<u64> {
    let s = s.trim();
    let s = s
        .strip_suffix("iB")
        .or_else(|| s.strip_suffix('B'))
        .unwrap_or(s);
    let (digits, shift) = match s.char_indices().last() {
        Some((k, c)) if c.is_ascii_alphabetic() => {
            let shift = match c.to_ascii_uppercase() {
                'K' => 10,
                'M' => 20,
                'G' => 30,
                'T' => 40,
                _ => return None,
            };
            (&s[..k], shift)
        }
        _ => (s, 0),
    };
    digits
        .trim()
        .parse::<u64>()
        .ok()?
        .checked_mul(1u64 << shift)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_counts_parse_with_binary_suffixes() {
        assert_eq!(parse_bytes("123"), Some(123));
        assert_eq!(parse_bytes("64K"), Some(64 << 10));
        assert_eq!(parse_bytes("2G"), Some(2 << 30));
        assert_eq!(parse_bytes("2GiB"), Some(2 << 30));
        assert_eq!(parse_bytes(" 1tb "), None);
        assert_eq!(parse_bytes("1TB"), Some(1 << 40));
        assert_eq!(parse_bytes("x"), None);
        assert_eq!(parse_bytes("99999999999T"), None);
    }

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
}

//! Remote stores: `s3://`, `gs://`, `az://`, `http(s)://` and `file://` URLs open as
//! stores and datasets wherever a path does. Remote is a location, not a format: the
//! object's bytes are the store file's bytes, read with ranged GETs planned from its
//! table and checked and decoded by the same code as local reads (`read/decode.rs`).
//!
//! This module is the layer below the read path, `Store` and datasets: it fetches
//! object bytes (ranges, whole objects, the cache) and knows nothing of stores.
//! `read/remote.rs` opens a store and reads its records through `RemoteSource`;
//! `store.rs` opens whole-object cache entries as local stores; and
//! `dataset/object_dir.rs` reads a dataset's manifest and shards under a prefix.
//!
//! - `options`: [`RemoteOptions`] and [`CacheOptions`] (plain data, always built);
//! - `plan`: the pure GET planner (records sorted by offset, neighbours coalesced,
//!   or the cache's chunks);
//! - `runtime`: the tokio runtime zring owns for object_store (callers need none);
//! - `object`: URLs to object_store clients, credentials from the environment;
//! - `fetch`: a batch's GETs kept `in_flight` deep, each requested range handed to
//!   the caller as soon as its bytes arrive;
//! - `cache`: the local chunk cache shared by processes, and `cache_entry` its
//!   entry format (a chunk, its block hashes, a checked trailer) and checked reads;
//! - `whole`: whole-object cache entries, downloaded once and handed to the caller
//!   to open as local files;
//! - `open`: an object's tail (a store's footer and metadata) and its source;
//! - `location`: objects under a URL prefix (where a dataset lives);
//! - `upload`: a store uploaded as one object while it is written (a conditional
//!   PUT, or a multipart upload of parts in parallel), complete or not at all.
//!
//! Everything but `options`, `plan` and `cache_entry` is behind the `remote` cargo
//! feature.

mod options;
// Public only for the fuzz target that checks its invariants (fuzz/remote_plan).
#[doc(hidden)]
pub mod plan;
// Public only for the fuzz target that reads damaged entries (fuzz/cache_entry).
#[doc(hidden)]
pub mod cache_entry;

#[cfg(feature = "remote")]
mod cache;
#[cfg(feature = "remote")]
mod fetch;
#[cfg(feature = "remote")]
mod location;
#[cfg(feature = "remote")]
mod object;
#[cfg(feature = "remote")]
mod open;
#[cfg(feature = "remote")]
mod runtime;
#[cfg(feature = "remote")]
mod upload;
#[cfg(feature = "remote")]
mod whole;

use std::path::Path;

pub use options::{CacheOptions, RemoteOptions, WholeObjects, CACHE_BYTES_ENV, CACHE_DIR_ENV};

#[cfg(feature = "remote")]
pub use cache::CacheStats;
#[cfg(feature = "remote")]
pub(crate) use fetch::RemoteSource;
#[cfg(feature = "remote")]
pub use location::ObjectDir;
#[cfg(feature = "remote")]
pub(crate) use location::TooLarge;
#[cfg(feature = "remote")]
pub use object::{Connector, RemoteStats};
#[cfg(feature = "remote")]
pub(crate) use open::{fetch_tail, TAIL};
#[cfg(feature = "remote")]
pub(crate) use upload::{exists, put, PartUpload};
#[cfg(feature = "remote")]
pub(crate) use whole::{open as open_whole, seed as seed_whole, Origin};

/// The object_store crate zring is built with (for [`Connector::from_store`]).
#[cfg(feature = "remote")]
pub use object_store;

/// URL schemes read through object storage.
pub const SCHEMES: [&str; 11] = [
    "s3", "s3a", "gs", "az", "azure", "abfs", "abfss", "adl", "http", "https", "file",
];

/// The URL `path` spells, when it is one of [`SCHEMES`] (`s3://bucket/key`, ...):
/// such a path is opened through object storage, never as a local file.
pub fn url_of(path: &Path) -> Option<&str> {
    let s = path.to_str()?;
    let (scheme, rest) = s.split_once("://")?;
    (SCHEMES.contains(&scheme.to_ascii_lowercase().as_str()) && !rest.is_empty()).then_some(s)
}

/// Whether this build reads URLs (the `remote` feature).
pub const fn supported() -> bool {
    cfg!(feature = "remote")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_recognised_by_scheme_and_paths_are_not() {
        assert_eq!(url_of(Path::new("s3://b/k.zr")), Some("s3://b/k.zr"));
        assert_eq!(url_of(Path::new("GS://b/k")), Some("GS://b/k"));
        assert!(url_of(Path::new("file:///tmp/x.zr")).is_some());
        assert!(url_of(Path::new("https://host/x.zr")).is_some());
        for p in ["x.zr", "/tmp/s3://x", "s3:/b/k", "ftp://h/x", "s3://"] {
            assert_eq!(url_of(Path::new(p)), None, "{p}");
        }
    }
}

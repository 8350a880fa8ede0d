//! Opening a remote object for ranged reads: the object's tail (footer and, for
//! most stores, every metadata section) in a first GET, which also gives its
//! version, and the source every later GET goes through. The read path
//! (`read/remote.rs`) checks those bytes exactly as for a local file and asks the
//! source for the superblock and whatever metadata the tail missed.

use std::sync::atomic::Ordering;

use object_store::{GetOptions, GetRange, ObjectStoreExt};

use crate::error::Result;

use super::cache::Cache;
use super::fetch::{RemoteSource, Version};
use super::object::Connector;
use super::options::RemoteOptions;
use super::runtime;

/// Bytes read from the end of the object by the first GET: the footer, and the
/// whole metadata of a store of up to about 8,000 records.
pub(crate) const TAIL: u64 = 256 << 10;

/// The object's last [`TAIL`] bytes (all of a smaller object) and its version.
pub(crate) fn fetch_tail(conn: &Connector) -> Result<(Version, Vec<u8>)> {
    let store = conn.store()?;
    let location = conn.location.clone();
    let site = conn.site();
    runtime::run(async move {
        let suffix = GetOptions {
            range: Some(GetRange::Suffix(TAIL)),
            ..GetOptions::default()
        };
        let r = match store.get_opts(&location, suffix).await {
            // Azure has no suffix ranges: ask for the size first.
            Err(object_store::Error::NotSupported { .. }) => {
                let head = store
                    .head(&location)
                    .await
                    .map_err(|e| site.err("opening the store", e))?;
                let bounded = GetOptions {
                    range: Some(GetRange::Bounded(head.size.saturating_sub(TAIL)..head.size)),
                    ..GetOptions::default()
                };
                store.get_opts(&location, bounded).await
            }
            other => other,
        }
        .map_err(|e| site.err("opening the store", e))?;
        let version = Version::of(&r.meta);
        let bytes = r
            .bytes()
            .await
            .map_err(|e| site.err("opening the store", e))?;
        Ok((version, bytes.to_vec()))
    })?
}

impl RemoteSource {
    /// The source of `version` of the object behind `conn`, through the local cache
    /// when `opts` (or the environment) configures one.
    pub(crate) fn open(conn: Connector, version: Version, opts: &RemoteOptions) -> Result<Self> {
        let cache = match opts.effective_cache()? {
            Some(c) => Some(Cache::open(&c)?),
            None => None,
        };
        Ok(Self::new(conn, version, opts, cache))
    }

    /// Counts a request made outside the executor (the first GET of an open).
    pub(crate) fn count_request(&self, bytes: u64) {
        let c = self.counters();
        c.requests.fetch_add(1, Ordering::Relaxed);
        c.bytes.fetch_add(bytes, Ordering::Relaxed);
    }
}

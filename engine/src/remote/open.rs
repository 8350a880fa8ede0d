//! Opening a remote store in a few ranged GETs: the object's tail (footer and, for
//! most stores, every metadata section) first, which also gives its version; then
//! the superblock and whatever metadata the tail missed, together. The sections are
//! checked exactly as for a local file and kept in memory.

use std::ops::Range;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use object_store::{GetOptions, GetRange, ObjectMeta, ObjectStoreExt};

use crate::error::{Error, ObjectChange, Result, SectionKind, StoreProblem};
use crate::format::{self, Section, BLOCK};
use crate::read::{
    check_schema, check_section, decode_footer, decode_superblock, Backend, Meta, Opened,
    ReadOptions, Reader, Source,
};
use crate::store::Store;

use super::cache::Cache;
use super::fetch::{RemoteSource, Version};
use super::object::{remote_err, Connector};
use super::options::WholeObjects;
use super::runtime;

/// Bytes read from the end of the object by the first GET: the footer, and the
/// whole metadata of a store of up to about 8,000 records.
const TAIL: u64 = 256 << 10;

/// Opens the store at `url`.
pub(crate) fn open_store(url: &str, opts: &ReadOptions) -> Result<Store> {
    open_with(Connector::from_url(url, &opts.remote)?, opts)
}

/// The object's last `TAIL` bytes and its metadata (size, version).
fn fetch_tail(conn: &Connector) -> Result<(ObjectMeta, Vec<u8>)> {
    let store = conn.store()?;
    let location = conn.location.clone();
    let url = conn.url.clone();
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
                    .map_err(|e| remote_err(&url, "opening the store", e))?;
                let bounded = GetOptions {
                    range: Some(GetRange::Bounded(head.size.saturating_sub(TAIL)..head.size)),
                    ..GetOptions::default()
                };
                store.get_opts(&location, bounded).await
            }
            other => other,
        }
        .map_err(|e| remote_err(&url, "opening the store", e))?;
        let meta = r.meta.clone();
        let bytes = r
            .bytes()
            .await
            .map_err(|e| remote_err(&url, "opening the store", e))?;
        Ok((meta, bytes.to_vec()))
    })?
}

/// Opens the store behind `conn`: as a local store on a whole-object cache entry
/// when the cache keeps this object whole (`whole.rs`), else read by ranged GETs.
pub(crate) fn open_with(conn: Connector, opts: &ReadOptions) -> Result<Store> {
    if let Some(cache) = opts.remote.effective_cache()? {
        if cache.whole != WholeObjects::Never {
            if let Some(store) = super::whole::open(&conn, opts, &cache)? {
                return Ok(store);
            }
        }
    }
    let url = conn.url.clone();
    let path: &Path = &url;
    let (meta, tail) = fetch_tail(&conn)?;
    let len = meta.size;
    if len < 2 * BLOCK as u64 {
        return Err(Error::corrupt(
            path,
            StoreProblem::TooSmall { len, object: true },
        ));
    }
    if tail.len() < BLOCK || tail.len() as u64 > len {
        // The tail asked for: the last TAIL bytes, or all of a smaller object.
        return Err(Error::ObjectChanged {
            url: url.clone(),
            change: ObjectChange::RangeLength {
                start: len.saturating_sub(TAIL),
                end: len,
                got: tail.len() as u64,
            },
        });
    }
    let tail_start = len - tail.len() as u64;
    let footer = decode_footer(path, &tail[tail.len() - BLOCK..])?;
    let cache = match opts.remote.effective_cache()? {
        Some(c) => Some(Cache::open(&c)?),
        None => None,
    };
    let source = RemoteSource::new(conn, Version::of(&meta), &opts.remote, cache);
    source.count_request(tail.len() as u64);
    // Metadata starts at the first non-empty section (the footer's claims are only
    // used to choose ranges inside the object here; they are checked below).
    let sections = [footer.dict, footer.shapes, footer.table, footer.schema];
    let meta_start = sections
        .iter()
        .filter(|s| s.len > 0)
        .map(|s| s.offset)
        .min()
        .unwrap_or(len)
        .min(len - BLOCK as u64);
    let mut wanted: Vec<Range<u64>> = Vec::new();
    if tail_start > 0 {
        wanted.push(0..BLOCK as u64);
    }
    if meta_start < tail_start {
        wanted.push(meta_start..tail_start);
    }
    let mut got: Vec<Vec<u8>> = vec![Vec::new(); wanted.len()];
    source.for_each_range(&wanted, |k, b| {
        got[k] = b.to_vec();
        Ok(())
    })?;
    let head: &[u8] = match tail_start {
        0 => &tail[..BLOCK],
        _ => &got[0],
    };
    let superblock = decode_superblock(path, head)?;
    format::check_footer(&footer, &superblock, len).map_err(|p| Error::corrupt(path, p))?;
    // The metadata: [from, len) of the object.
    let from = meta_start.min(tail_start);
    let mut metadata = match meta_start < tail_start {
        true => got.pop().unwrap_or_default(),
        false => Vec::new(),
    };
    metadata.extend_from_slice(&tail);
    let section = |s: Section, name: SectionKind| -> Result<Vec<u8>> {
        let body = s
            .offset
            .checked_sub(from)
            .and_then(|at| metadata.get(at as usize..(at + s.len) as usize))
            .ok_or_else(|| {
                Error::corrupt(
                    path,
                    StoreProblem::SectionOutside {
                        section: name,
                        object: true,
                    },
                )
            })?;
        check_section(path, s, name, body)?;
        Ok(body.to_vec())
    };
    let dict = section(footer.dict, SectionKind::Dictionary)?;
    let schema_json = section(footer.schema, SectionKind::Schema)?;
    let meta = Meta::Memory {
        shapes: section(footer.shapes, SectionKind::Shapes)?.into_boxed_slice(),
        table: section(footer.table, SectionKind::Table)?.into_boxed_slice(),
    };
    drop(metadata);
    let opened = Opened {
        source: Source::Remote(Arc::new(source)),
        backend: Backend::Pread,
        meta,
        dict,
        schema_json,
    };
    let stored = check_schema(path, &opened.schema_json, &footer)?;
    let reader = Reader::new(url.clone(), opened, footer, superblock, stored, opts);
    Ok(Store {
        inner: Arc::new(reader),
        origin: None,
    })
}

impl RemoteSource {
    /// Counts a request made outside the executor (the first GET of `open`).
    pub(crate) fn count_request(&self, bytes: u64) {
        let c = self.counters();
        c.requests.fetch_add(1, Ordering::Relaxed);
        c.bytes.fetch_add(bytes, Ordering::Relaxed);
    }
}

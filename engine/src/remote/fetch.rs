//! Executing a batch's GETs: the plan's pieces are fetched on zring's runtime,
//! `in_flight` at a time, and handed to the calling thread as they arrive: each
//! requested range goes to the caller's callback as soon as all its bytes are there
//! (the other GETs still in flight), so the read path (`read/remote.rs`) checks and
//! decodes each record into its slot with the same code as local reads. With a
//! cache, the calling thread first reads the pieces the cache holds itself (a hit
//! costs a few 4 KiB reads); only the missing chunks are fetched on the runtime.
//!
//! [`RemoteSource::start`] returns the in-flight batch ([`Inflight`]) without waiting:
//! a look-ahead reader can start the next batch's GETs and consume them later.

use std::ops::Range;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::sync::Arc;

use bytes::Bytes;
use object_store::{GetOptions, GetRange, ObjectMeta, ObjectStore};
use tokio::sync::Semaphore;

use crate::error::{Error, InternalError, ObjectChange, Result};

use super::cache::{self, Cache};
use super::object::{remote_err, Connector, Counters, RemoteStats};
use super::options::RemoteOptions;
use super::{plan, runtime};

/// The version of an object a store was opened at: any later response for another
/// version fails with [`Error::ObjectChanged`] instead of mixing two files' bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Version {
    pub(crate) size: u64,
    pub(crate) e_tag: Option<String>,
    pub(crate) last_modified: String,
}

impl Version {
    pub(crate) fn of(meta: &ObjectMeta) -> Self {
        Self {
            size: meta.size,
            e_tag: meta.e_tag.clone(),
            last_modified: meta.last_modified.to_rfc3339(),
        }
    }

    /// The cache key part: size, ETag and modification time.
    pub(crate) fn key(&self) -> String {
        format!(
            "{}\n{}\n{}",
            self.size,
            self.e_tag.as_deref().unwrap_or(""),
            self.last_modified
        )
    }

    /// Whether a response's metadata is for another version.
    fn differs(&self, meta: &ObjectMeta) -> Option<ObjectChange> {
        if meta.size != self.size {
            return Some(ObjectChange::Size {
                expected: self.size,
                found: meta.size,
            });
        }
        match (&self.e_tag, &meta.e_tag) {
            (Some(a), Some(b)) if a != b => Some(ObjectChange::ETag {
                expected: a.clone(),
                found: b.clone(),
            }),
            _ => None,
        }
    }
}

/// The source of a remote store's bytes.
pub(crate) struct RemoteSource {
    pub(crate) conn: Connector,
    pub(crate) version: Version,
    max_gap: u64,
    max_request: u64,
    in_flight: usize,
    /// The cache and this object version's directory in it.
    cache: Option<(Arc<Cache>, PathBuf)>,
    counters: Arc<Counters>,
}

/// One fetch, everything it needs owned (it runs on the runtime).
#[derive(Clone)]
pub(crate) struct Getter {
    store: Arc<dyn ObjectStore>,
    conn: Connector,
    version: Version,
    counters: Arc<Counters>,
}

impl Getter {
    /// The response to a GET of `range`, its headers checked against the version
    /// the store opened (the body is still to be read).
    async fn request(&self, range: Range<u64>) -> Result<object_store::GetResult> {
        let url = &self.conn.url;
        let opts = GetOptions {
            range: Some(GetRange::Bounded(range)),
            ..GetOptions::default()
        };
        self.counters.requests.fetch_add(1, Ordering::Relaxed);
        let r = self
            .store
            .get_opts(&self.conn.location, opts)
            .await
            .map_err(|e| remote_err(url, "reading a byte range", e))?;
        if let Some(change) = self.version.differs(&r.meta) {
            return Err(Error::ObjectChanged {
                url: url.clone(),
                change,
            });
        }
        Ok(r)
    }

    /// `range` of the object, exactly, from the version the store opened.
    pub(crate) async fn get(&self, range: Range<u64>) -> Result<Bytes> {
        let url = &self.conn.url;
        let r = self.request(range.clone()).await?;
        let bytes = r
            .bytes()
            .await
            .map_err(|e| remote_err(url, "reading a response body", e))?;
        self.counters
            .bytes
            .fetch_add(bytes.len() as u64, Ordering::Relaxed);
        if bytes.len() as u64 != range.end - range.start {
            return Err(Error::ObjectChanged {
                url: url.clone(),
                change: ObjectChange::RangeLength {
                    start: range.start,
                    end: range.end,
                    got: bytes.len() as u64,
                },
            });
        }
        Ok(bytes)
    }

    /// `range` of the object, exactly, handed to `sink` as its body arrives: in
    /// pieces of `piece` bytes (the last one shorter) with their offsets in the
    /// object, so that a download writes and flushes its first bytes while the
    /// rest is in transit. `sink` returns false to stop (a failure of its own);
    /// the result is then `Ok(false)`, and `Ok(true)` once every piece was taken.
    pub(crate) async fn get_pieces<Fut>(
        &self,
        range: Range<u64>,
        piece: usize,
        mut sink: impl FnMut(u64, Vec<u8>) -> Fut,
    ) -> Result<bool>
    where
        Fut: std::future::Future<Output = bool>,
    {
        use futures_util::StreamExt;

        let url = &self.conn.url;
        let r = self.request(range.clone()).await?;
        let piece = piece.max(1);
        let want = range.end - range.start;
        let mut at = range.start;
        let mut got = 0u64;
        let mut buf: Vec<u8> = Vec::with_capacity(piece.min(want as usize));
        let mut body = r.into_stream();
        while let Some(bytes) = body.next().await {
            let bytes = bytes.map_err(|e| remote_err(url, "reading a response body", e))?;
            self.counters
                .bytes
                .fetch_add(bytes.len() as u64, Ordering::Relaxed);
            got += bytes.len() as u64;
            if got > want {
                break;
            }
            let mut rest: &[u8] = &bytes;
            while !rest.is_empty() {
                let take = (piece - buf.len()).min(rest.len());
                buf.extend_from_slice(&rest[..take]);
                rest = &rest[take..];
                if buf.len() == piece {
                    let full = std::mem::replace(&mut buf, Vec::with_capacity(piece));
                    let len = full.len() as u64;
                    if !sink(at, full).await {
                        return Ok(false);
                    }
                    at += len;
                }
            }
        }
        if got != want {
            return Err(Error::ObjectChanged {
                url: url.clone(),
                change: ObjectChange::RangeLength {
                    start: range.start,
                    end: range.end,
                    got,
                },
            });
        }
        Ok(buf.is_empty() || sink(at, buf).await)
    }
}

/// A batch's GETs, started: pieces arrive in any order.
pub(crate) struct Inflight {
    rx: Receiver<(usize, Result<Bytes>)>,
    stop: Arc<AtomicBool>,
    pieces: usize,
    received: usize,
}

impl Inflight {
    /// The next piece to arrive, `None` when all have; waits for it.
    pub(crate) fn next(&mut self) -> Option<Result<(usize, Bytes)>> {
        if self.received == self.pieces {
            return None;
        }
        self.received += 1;
        Some(match self.rx.recv() {
            Ok((k, r)) => r.map(|b| (k, b)),
            Err(_) => Err(Error::Internal(InternalError::Remote {
                what: "the fetch stopped before its last piece",
            })),
        })
    }
}

impl Drop for Inflight {
    fn drop(&mut self) {
        // A batch abandoned (an error, a dropped look-ahead) starts no more GETs.
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl RemoteSource {
    pub(crate) fn new(
        conn: Connector,
        version: Version,
        opts: &RemoteOptions,
        cache: Option<Arc<Cache>>,
    ) -> Self {
        let cache = cache.map(|c| {
            let key = c.key_dir(&conn.url.to_string_lossy(), &version.key());
            (c, key)
        });
        Self {
            conn,
            version,
            max_gap: opts.max_gap,
            max_request: opts.max_request.max(1),
            in_flight: opts.in_flight.clamp(1, 1024),
            cache,
            counters: Arc::new(Counters::default()),
        }
    }

    /// GETs one batch keeps in flight.
    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight
    }

    pub(crate) fn counters(&self) -> &Counters {
        &self.counters
    }

    pub(crate) fn stats(&self) -> RemoteStats {
        self.counters.snapshot()
    }

    pub(crate) fn getter(&self) -> Result<Getter> {
        Ok(Getter {
            store: self.conn.store()?,
            conn: self.conn.clone(),
            version: self.version.clone(),
            counters: self.counters.clone(),
        })
    }

    /// The plan of `ranges`: coalesced GETs, or the records' parts of the cache's chunks.
    pub(crate) fn plan(&self, ranges: &[Range<u64>]) -> plan::Plan {
        match &self.cache {
            Some((c, _)) => plan::chunked(ranges, c.chunk_bytes, cache::BLOCK as u64),
            None => plan::coalesced(ranges, self.max_gap, self.max_request),
        }
    }

    /// Starts fetching `pieces` (through the cache when there is one), `in_flight`
    /// at a time, and returns at once. With a cache, the pieces of one chunk (side by
    /// side in a plan) are one job: one look-up of the entry, or one fetch of the
    /// chunk.
    pub(crate) fn start(&self, pieces: Vec<Range<u64>>) -> Result<Inflight> {
        let rt = runtime::get()?;
        let (tx, rx) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let n = pieces.len();
        let getter = self.getter()?;
        let cache = self.cache.clone();
        let groups = match &cache {
            None => (0..n).map(|k| k..k + 1).collect(),
            Some((c, _)) => by_chunk(&pieces, c.chunk_bytes),
        };
        let limit = Arc::new(Semaphore::new(self.in_flight));
        let stopped = stop.clone();
        rt.spawn(async move {
            for group in groups {
                let Ok(permit) = limit.clone().acquire_owned().await else {
                    return;
                };
                if stopped.load(Ordering::Relaxed) {
                    return;
                }
                let tx = tx.clone();
                let getter = getter.clone();
                let cache = cache.clone();
                let ranges = pieces[group.clone()].to_vec();
                tokio::spawn(async move {
                    let r = match cache {
                        None => getter.get(ranges[0].clone()).await.map(|b| vec![b]),
                        Some((cache, dir)) => cached(getter, cache, dir, ranges).await,
                    };
                    drop(permit);
                    // The receiver is gone when the batch was abandoned. An error is
                    // sent once: the batch stops at its first error.
                    match r {
                        Ok(list) => {
                            for (k, b) in group.zip(list) {
                                let _ = tx.send((k, Ok(b)));
                            }
                        }
                        Err(e) => {
                            let _ = tx.send((group.start, Err(e)));
                        }
                    }
                });
            }
        });
        Ok(Inflight {
            rx,
            stop,
            pieces: n,
            received: 0,
        })
    }

    /// Fetches `ranges` of the object and calls `f(k, bytes)` with each range's
    /// exact bytes as soon as they are all there (in arrival order, not `k`'s).
    pub(crate) fn for_each_range(
        &self,
        ranges: &[Range<u64>],
        mut f: impl FnMut(usize, &[u8]) -> Result<()>,
    ) -> Result<()> {
        let plan = self.plan(ranges);
        for (s, span) in plan.spans.iter().enumerate() {
            if span.is_empty() {
                f(plan.order[s], &[])?;
            }
        }
        let by_piece = plan.records_of_pieces();
        let mut missing: Vec<usize> = plan.spans.iter().map(|s| s.len()).collect();
        let mut users: Vec<usize> = by_piece.iter().map(Vec::len).collect();
        let mut held: Vec<Option<Bytes>> = vec![None; plan.pieces.len()];
        let mut joined = Vec::new();
        // Piece `p` is here: hand over every record it completes.
        let mut arrive = |p: usize, bytes: Bytes| -> Result<()> {
            held[p] = Some(bytes);
            for &s in &by_piece[p] {
                missing[s] -= 1;
                if missing[s] > 0 {
                    continue;
                }
                let k = plan.order[s];
                let want = &ranges[k];
                let span = plan.spans[s].clone();
                let piece_bytes = |q: usize| -> Result<(&Range<u64>, &Bytes)> {
                    let b = held[q].as_ref().ok_or_else(|| {
                        Error::Internal(InternalError::Remote {
                            what: "a piece was dropped early",
                        })
                    })?;
                    Ok((&plan.pieces[q], b))
                };
                if span.len() == 1 {
                    let (at, b) = piece_bytes(span.start)?;
                    let from = (want.start - at.start) as usize;
                    f(k, &b[from..from + (want.end - want.start) as usize])?;
                } else {
                    joined.clear();
                    for q in span.clone() {
                        let (at, b) = piece_bytes(q)?;
                        let lo = want.start.max(at.start) - at.start;
                        let hi = want.end.min(at.end) - at.start;
                        joined.extend_from_slice(&b[lo as usize..hi as usize]);
                    }
                    f(k, &joined)?;
                }
                for q in span {
                    users[q] -= 1;
                    if users[q] == 0 {
                        held[q] = None;
                    }
                }
            }
            Ok(())
        };
        // Cache hits are read here, by the calling thread, as a local store's
        // records are (handing them to the runtime's threads and back cost more than
        // the read); only the chunks missing go to the runtime.
        let mut fetch: Vec<usize> = Vec::new();
        match &self.cache {
            None => fetch.extend(0..plan.pieces.len()),
            Some((cache, dir)) => {
                for group in by_chunk(&plan.pieces, cache.chunk_bytes) {
                    let pieces = &plan.pieces[group.clone()];
                    let (chunk, start, len) = chunk_span(cache, self.version.size, pieces)?;
                    let within: Vec<Range<usize>> = pieces
                        .iter()
                        .map(|r| (r.start - start) as usize..(r.end - start) as usize)
                        .collect();
                    match cache.hit(dir, chunk, len, &within)? {
                        Some(list) => {
                            self.counters.cache_hits.fetch_add(1, Ordering::Relaxed);
                            for (p, b) in group.zip(list) {
                                arrive(p, b)?;
                            }
                        }
                        None => fetch.extend(group),
                    }
                }
            }
        }
        if fetch.is_empty() {
            return Ok(());
        }
        let mut inflight = self.start(fetch.iter().map(|&p| plan.pieces[p].clone()).collect())?;
        while let Some(got) = inflight.next() {
            let (k, bytes) = got?;
            arrive(fetch[k], bytes)?;
        }
        Ok(())
    }

    /// `range` of the object (through the cache when there is one).
    pub(crate) fn read_range(&self, range: Range<u64>) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        self.for_each_range(std::slice::from_ref(&range), |_, b| {
            out.extend_from_slice(b);
            Ok(())
        })?;
        Ok(out)
    }
}

/// The runs of `pieces` (sorted, each inside one chunk) that lie in one chunk.
fn by_chunk(pieces: &[Range<u64>], chunk: u64) -> Vec<Range<usize>> {
    let mut out: Vec<Range<usize>> = Vec::new();
    for (k, p) in pieces.iter().enumerate() {
        match out.last_mut() {
            Some(g)
                if plan::chunk_of(pieces[g.start].start, chunk)
                    == plan::chunk_of(p.start, chunk) =>
            {
                g.end = k + 1;
            }
            _ => out.push(k..k + 1),
        }
    }
    out
}

/// The chunk holding `ranges` (of an object of `size` bytes): its index, first byte
/// and length. An error when they do not all lie in it (a planner bug).
fn chunk_span(cache: &Cache, size: u64, ranges: &[Range<u64>]) -> Result<(u64, u64, usize)> {
    let chunk = plan::chunk_of(ranges.first().map_or(0, |r| r.start), cache.chunk_bytes);
    let start = chunk * cache.chunk_bytes;
    let end = start.saturating_add(cache.chunk_bytes).min(size);
    if ranges.iter().any(|r| r.start < start || r.end > end) {
        return Err(Error::Internal(InternalError::Remote {
            what: "a cache job's ranges span chunks",
        }));
    }
    Ok((chunk, start, (end - start) as usize))
}

/// `ranges` (all in one chunk) through the cache: from its entry if valid, else the
/// chunk is fetched once across the node's processes (the cache's lock is blocking,
/// so this runs on the runtime's blocking threads) and kept.
async fn cached(
    getter: Getter,
    cache: Arc<Cache>,
    dir: PathBuf,
    ranges: Vec<Range<u64>>,
) -> Result<Vec<Bytes>> {
    let handle = tokio::runtime::Handle::current();
    let counters = getter.counters.clone();
    let (chunk, start, len) = chunk_span(&cache, getter.version.size, &ranges)?;
    let end = start + len as u64;
    let within: Vec<Range<usize>> = ranges
        .iter()
        .map(|r| (r.start - start) as usize..(r.end - start) as usize)
        .collect();
    let job = tokio::task::spawn_blocking(move || {
        cache.get(&dir, chunk, len, &within, || {
            handle.block_on(getter.get(start..end))
        })
    });
    let (bytes, hit) = job.await.map_err(|_| {
        Error::Internal(InternalError::Panicked {
            task: "a remote cache task",
        })
    })??;
    let counter = if hit {
        &counters.cache_hits
    } else {
        &counters.cache_misses
    };
    counter.fetch_add(1, Ordering::Relaxed);
    Ok(bytes)
}

//! One append: cut the records into chunks, compress (or copy) the chunks on the
//! worker pool, and write each at its place in the file, in record order.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};

use zring_platform::{PendingFile, PoolHandle};

use crate::entry::{Entry, RecordCodec};
use crate::error::{
    AllocFailure, Allocation, ArgumentError, CodecError, Error, InternalError, Result,
};
use crate::format::{self, align_up};
use crate::schema::Codec;

/// Where one record's bytes are in an append's source.
#[derive(Clone, Copy)]
pub(super) enum Source<'a> {
    /// Records of `width` bytes back to back.
    Dense { bytes: &'a [u8], width: usize },
    /// Record i is `values[starts[i] .. starts[i + 1]]` (element offsets x itemsize).
    Ragged {
        values: &'a [u8],
        cu_seqlens: &'a [u64],
        itemsize: usize,
    },
}

impl Source<'_> {
    pub(super) fn len(&self) -> usize {
        match self {
            Source::Dense { bytes, width } => bytes.len() / width,
            Source::Ragged { cu_seqlens, .. } => cu_seqlens.len() - 1,
        }
    }

    /// Byte range of record `i` (validated by the append before use).
    fn range(&self, i: usize) -> Range<usize> {
        match *self {
            Source::Dense { width, .. } => i * width..(i + 1) * width,
            Source::Ragged {
                cu_seqlens,
                itemsize,
                ..
            } => cu_seqlens[i] as usize * itemsize..cu_seqlens[i + 1] as usize * itemsize,
        }
    }

    /// Records `range` of this source (ragged records keep indexing the whole
    /// `values`, so their offsets need no rebasing).
    pub(super) fn slice(&self, range: Range<usize>) -> Self {
        match *self {
            Source::Dense { bytes, width } => Source::Dense {
                bytes: &bytes[range.start * width..range.end * width],
                width,
            },
            Source::Ragged {
                values,
                cu_seqlens,
                itemsize,
            } => Source::Ragged {
                values,
                cu_seqlens: &cu_seqlens[range.start..=range.end],
                itemsize,
            },
        }
    }

    /// The records cut into consecutive runs of about `bytes` bytes each, counting
    /// `extra` more for every record (at least one record each).
    pub(super) fn runs(&self, bytes: usize, extra: usize) -> Vec<Range<usize>> {
        let n = self.len();
        let mut runs = Vec::new();
        let (mut start, mut acc) = (0usize, 0usize);
        for i in 0..n {
            acc += self.range(i).len() + extra;
            if acc >= bytes || i + 1 == n {
                runs.push(start..i + 1);
                start = i + 1;
                acc = 0;
            }
        }
        runs
    }

    fn bytes(&self) -> &[u8] {
        match self {
            Source::Dense { bytes, .. } => bytes,
            Source::Ragged { values, .. } => values,
        }
    }
}

/// A compressor and output buffer for one of an append's parallel tasks, reused
/// across chunks and appends.
#[derive(Default)]
pub(super) struct Slot {
    compressor: Option<zstd::bulk::Compressor<'static>>,
    buf: Vec<u8>,
}

/// What an append needs from its writer.
pub(super) struct Target<'a> {
    pub(super) file: &'a PendingFile,
    pub(super) codec: Codec,
    pub(super) level: i32,
    pub(super) dictionary: Option<&'a [u8]>,
    pub(super) align: u32,
    /// Parallel tasks wanted (0: one per core, or the caller and every worker of an
    /// own pool).
    pub(super) threads: usize,
    pub(super) chunk_bytes: usize,
    /// The pool the tasks run on.
    pub(super) pool: &'a PoolHandle,
    /// Where the data region ends now; the append writes from there.
    pub(super) data_end: u64,
}

/// Compresses (or copies) and writes every record of `src`, using `slots` (grown to
/// the number of tasks); returns the entries of the records in order and the new end
/// of the data region.
pub(super) fn write_records(
    t: &Target<'_>,
    src: Source<'_>,
    slots: &mut Vec<Mutex<Slot>>,
) -> Result<(Vec<Entry>, u64)> {
    let n = src.len();
    // Count the padding too: with a large alignment and small records it dominates
    // the staging buffer.
    let chunks = src.runs(t.chunk_bytes.max(1), t.align as usize);
    let pool = t.pool.get();
    let tasks = match t.threads {
        0 if t.pool.is_global() => zring_platform::available_cores(),
        0 => pool.workers() + 1,
        k => k,
    }
    .min(chunks.len())
    .max(1);
    let tasks = if src.bytes().len() < (256 << 10) {
        1
    } else {
        tasks
    };
    while slots.len() < tasks {
        slots.push(Mutex::default());
    }
    let job = Job {
        src,
        chunks: &chunks,
        target: t,
        next_chunk: AtomicUsize::new(0),
        order: Mutex::new(Order {
            turn: 0,
            data_end: t.data_end,
            failed: false,
        }),
        turn_changed: Condvar::new(),
        written_end: AtomicU64::new(t.data_end),
    };
    let results: Vec<Mutex<Option<Result<ChunkEntries, Stop>>>> =
        (0..tasks).map(|_| Mutex::new(None)).collect();
    // The tasks share a worker pool (the process's, unless the options name another)
    // with gathers instead of starting threads of their own for every append.
    pool.run(tasks, tasks - 1, |k| {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut slot = slots[k].lock().map_err(|_| Stop::Failed(lock_poisoned()))?;
            job.run(&mut slot)
        }))
        .unwrap_or(Err(Stop::Failed(Error::Internal(
            InternalError::Panicked {
                task: "a writer task",
            },
        ))));
        if r.is_err() {
            // Release the tasks waiting for a turn this one will never take.
            job.fail();
        }
        if let Ok(mut out) = results[k].lock() {
            *out = Some(r);
        }
    });
    let mut per_chunk: Vec<Option<Vec<Entry>>> = vec![None; chunks.len()];
    let mut failure: Option<Error> = None;
    for r in results {
        match r.into_inner().map_err(|_| lock_poisoned())? {
            Some(Ok(done)) => {
                for (k, entries) in done {
                    per_chunk[k] = Some(entries);
                }
            }
            // The failure itself (e.g. the disk-full Io error), whatever the task
            // order; tasks that stopped because of it have nothing to say.
            Some(Err(Stop::Failed(e))) => failure = failure.or(Some(e)),
            Some(Err(Stop::OtherFailed)) => {}
            None => {
                failure = failure.or(Some(Error::Internal(InternalError::Missing {
                    what: "a writer task's result",
                })))
            }
        }
    }
    if let Some(e) = failure {
        return Err(e);
    }
    let mut entries = Vec::new();
    entries.try_reserve_exact(n).map_err(|e| {
        Error::out_of_memory(
            Allocation::TableEntries { records: n as u64 },
            (n as u64).saturating_mul(std::mem::size_of::<Entry>() as u64),
            Some(t.file.path()),
            Some(AllocFailure::Reserve(e)),
        )
    })?;
    for c in per_chunk {
        entries.extend(c.ok_or(Error::Internal(InternalError::Missing {
            what: "a written chunk's table entries",
        }))?);
    }
    Ok((entries, job.written_end.load(Ordering::Relaxed)))
}

fn lock_poisoned() -> Error {
    Error::Internal(InternalError::LockPoisoned { lock: "a writer" })
}

/// Why a task stopped.
enum Stop {
    /// It failed with this error.
    Failed(Error),
    /// Another task failed first; this one stopped without writing more.
    OtherFailed,
}

impl From<Error> for Stop {
    fn from(e: Error) -> Self {
        Stop::Failed(e)
    }
}

/// The entries of the chunks one task wrote, by chunk number.
type ChunkEntries = Vec<(usize, Vec<Entry>)>;

struct Order {
    /// The chunk whose turn it is to reserve its place in the file.
    turn: usize,
    data_end: u64,
    failed: bool,
}

/// One append, shared by its tasks.
struct Job<'a> {
    src: Source<'a>,
    chunks: &'a [Range<usize>],
    target: &'a Target<'a>,
    next_chunk: AtomicUsize,
    /// Chunks reserve file space in chunk order so the file is deterministic; the
    /// critical section is a few integer operations, the writes happen outside it.
    /// (Chunks are claimed in order and a claimed chunk's task is running, so the
    /// lowest unfinished chunk can always proceed.)
    order: Mutex<Order>,
    turn_changed: Condvar,
    written_end: AtomicU64,
}

impl Job<'_> {
    fn run(&self, slot: &mut Slot) -> Result<ChunkEntries, Stop> {
        let mut done = Vec::new();
        loop {
            let k = self.next_chunk.fetch_add(1, Ordering::Relaxed);
            if k >= self.chunks.len() {
                return Ok(done);
            }
            done.push((k, self.write_chunk(k, slot)?));
        }
    }

    fn fail(&self) {
        if let Ok(mut order) = self.order.lock() {
            order.failed = true;
        }
        self.turn_changed.notify_all();
    }

    fn write_chunk(&self, k: usize, slot: &mut Slot) -> Result<Vec<Entry>, Stop> {
        let t = self.target;
        let align = u64::from(t.align);
        let records = self.chunks[k].clone();
        let bytes = self.src.bytes();
        let mut entries = Vec::with_capacity(records.len());
        // Raw records that already sit back to back at aligned sizes are written
        // straight from the caller's memory: no copy at all.
        let contiguous_raw = t.codec == Codec::Raw
            && records
                .clone()
                .all(|i| self.src.range(i).len() as u64 % align == 0);
        let payload: &[u8] = if contiguous_raw {
            let span = self.src.range(records.start).start..self.src.range(records.end - 1).end;
            let mut rel = 0u64;
            for i in records.clone() {
                let rec = &bytes[self.src.range(i)];
                entries.push(raw_entry(rel, rec));
                rel += rec.len() as u64;
            }
            &bytes[span]
        } else {
            let cap: usize = records
                .clone()
                .map(|i| self.src.range(i).len() + t.align as usize)
                .sum();
            if slot.buf.len() < cap {
                slot.buf
                    .try_reserve_exact(cap - slot.buf.len())
                    .map_err(|e| {
                        Error::out_of_memory(
                            Allocation::StagingBuffer,
                            cap as u64,
                            Some(t.file.path()),
                            Some(AllocFailure::Reserve(e)),
                        )
                    })?;
                slot.buf.resize(cap, 0);
            }
            if t.codec != Codec::Raw && slot.compressor.is_none() {
                slot.compressor = Some(new_compressor(t)?);
            }
            let mut pos = 0usize;
            for i in records.clone() {
                let rec = &bytes[self.src.range(i)];
                // Padding is zero (the spec says so, and it keeps files identical
                // whatever the thread count): the reused buffer may hold old bytes.
                let next = align_up(pos as u64, align).unwrap_or(u64::MAX) as usize;
                slot.buf[pos..next].fill(0);
                pos = next;
                // Capacity one byte short of the record: zstd fails unless the frame
                // is strictly smaller, and then the record stays raw.
                let compressed = match slot.compressor.as_mut() {
                    Some(c) if rec.len() > 1 => {
                        let out = &mut slot.buf[pos..pos + rec.len() - 1];
                        c.compress_to_buffer(rec, out).ok().map(|stored| Entry {
                            offset: pos as u64,
                            stored_len: stored as u32,
                            logical_len: rec.len() as u32,
                            checksum: format::checksum(&out[..stored]),
                            codec: if t.codec == Codec::ZstdDict {
                                RecordCodec::ZstdDict
                            } else {
                                RecordCodec::Zstd
                            },
                        })
                    }
                    _ => None,
                };
                let entry = compressed.unwrap_or_else(|| {
                    slot.buf[pos..pos + rec.len()].copy_from_slice(rec);
                    raw_entry(pos as u64, rec)
                });
                pos += entry.stored_len as usize;
                entries.push(entry);
            }
            &slot.buf[..pos]
        };
        let base = self.reserve(k, payload.len() as u64)?;
        t.file
            .write_all_at(payload, base)
            .map_err(|e| Error::io(t.file.path(), "writing records", e))?;
        self.start_writeback(base, base + payload.len() as u64)?;
        for e in &mut entries {
            e.offset += base;
        }
        Ok(entries)
    }

    /// Starts the writeback of every whole [`WRITEBACK_WINDOW`] that the chunk just
    /// written at `start .. end` completed, so the device writes while the appends go
    /// on instead of all of it waiting in `close`'s fsync (W7 raw writes: 1.3-1.5x). Only
    /// timing changes: `close` still fsyncs the whole file before publishing it.
    fn start_writeback(&self, start: u64, end: u64) -> Result<()> {
        let (first, last) = (start / WRITEBACK_WINDOW, end / WRITEBACK_WINDOW);
        if last == first {
            return Ok(());
        }
        // A failure here means the file or device is failing: poison the writer like
        // any write error rather than hope the final fsync reports it.
        let file = self.target.file;
        file.start_writeback(first * WRITEBACK_WINDOW, (last - first) * WRITEBACK_WINDOW)
            .map_err(|e| Error::io(file.path(), "starting the writeback of records", e))
    }

    /// Waits for chunk `k`'s turn and takes `len` bytes of file at an aligned offset.
    fn reserve(&self, k: usize, len: u64) -> Result<u64, Stop> {
        let mut order = self.order.lock().map_err(|_| lock_poisoned())?;
        while order.turn != k && !order.failed {
            order = self.turn_changed.wait(order).map_err(|_| lock_poisoned())?;
        }
        if order.failed {
            return Err(Stop::OtherFailed);
        }
        let base = align_up(order.data_end, u64::from(self.target.align))
            .and_then(|b| b.checked_add(len).map(|end| (b, end)));
        let (base, end) = base.ok_or(Error::InvalidArgument(ArgumentError::StoreTooLarge))?;
        order.data_end = end;
        order.turn += 1;
        self.written_end.fetch_max(end, Ordering::Relaxed);
        drop(order);
        self.turn_changed.notify_all();
        Ok(base)
    }
}

fn new_compressor(t: &Target<'_>) -> Result<zstd::bulk::Compressor<'static>> {
    let c = match t.dictionary {
        Some(d) => zstd::bulk::Compressor::with_dictionary(t.level, d),
        None => zstd::bulk::Compressor::new(t.level),
    };
    c.map_err(|source| {
        Error::Codec(CodecError::Compressor {
            level: t.level,
            source,
        })
    })
}

/// Writeback is started in whole windows of this many bytes (page-aligned, so a page
/// shared by two chunks is not written twice). Starting early matters: 1 MiB windows
/// (about one per default chunk) measured 1.48x the old writer, 8 MiB windows 1.34x.
const WRITEBACK_WINDOW: u64 = 1 << 20;

fn raw_entry(offset: u64, rec: &[u8]) -> Entry {
    Entry {
        offset,
        stored_len: rec.len() as u32,
        logical_len: rec.len() as u32,
        checksum: format::checksum(rec),
        codec: RecordCodec::Raw,
    }
}

//! Batch reads: a gather is cut into tasks of contiguous output slots, and the caller
//! and the pool's workers each take a task and fill its part of the destination.
//!
//! The destination is split into the tasks' parts before any task runs, and each
//! task takes the next part from one shared splitter (a lock held only for the split
//! itself, never during the read), so every thread writes a `&mut` part of its own:
//! no raw pointer is shared. Nothing is allocated per gather for this.

use std::ops::Range;
use std::sync::{Mutex, OnceLock, PoisonError};

use zring_platform::AlignedBuf;

use crate::error::{ArgumentError, Error, InternalError, Result, SchemaError};
use crate::schema::{Codec, Layout};

use super::decode::with_ctx;
use super::Reader;

/// Aim for tasks of about this many output bytes (a dataset's gather uses the same
/// task sizing, so it splits work alike): small enough that a caller whose
/// helper wakes late still takes most of a small batch (W2: 64 KiB tasks gave
/// 3.5-4.1 M records/s against 3.0-3.6 M with 256 KiB), large enough to amortise
/// the claim.
pub(crate) const TASK_BYTES: usize = 64 << 10;
/// Below this many output bytes a gather runs on the caller alone: waking a worker
/// costs more than the copy.
pub(crate) const INLINE_BYTES: usize = 64 << 10;
/// Decoding a byte costs roughly this many times copying it, so compressed gathers
/// are cut into tasks (and wake helpers at sizes) this much smaller: a 180 KiB ragged
/// zstd batch is otherwise one task and the second core idles (measured in
/// docs/benchmarks.md: W3 zstd-dict 2-thread scaling 1.03-1.09x -> 1.40-1.71x).
pub(crate) const COMPRESSED_WORK_FACTOR: usize = 8;
/// How many records ahead a ragged layout prefetches table entries and shapes. The
/// layout runs on the caller alone before the parallel part, and each record's entry
/// and shape are cache misses at random places: prefetching them overlaps the misses
/// (`zring bench` on a W3-like zstd-dict store, batch 256, mmap, 4 interleaved rounds,
/// medians: 1 thread 0.69 -> 0.80 M records/s, 2 threads 1.24 -> 1.40 M).
pub(crate) const LAYOUT_AHEAD: usize = 8;
/// Records per `verify` task.
const VERIFY_PER_TASK: usize = 256;

/// A ragged batch's output layout, computed from the table before any I/O.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RaggedLayout {
    /// Element offsets, `n + 1` of them, starting at 0.
    pub cu_seqlens: Vec<u64>,
    /// `n x ndim` dims.
    pub shapes: Vec<u32>,
    /// Total bytes of the values buffer.
    pub values_bytes: usize,
}

impl RaggedLayout {
    /// Empties the layout for `n` records of `ndim` dims, keeping its capacity.
    pub(crate) fn start(&mut self, n: usize, ndim: usize) {
        self.cu_seqlens.clear();
        self.cu_seqlens.reserve(n + 1);
        self.cu_seqlens.push(0);
        self.shapes.clear();
        self.shapes.reserve(n * ndim);
        self.values_bytes = 0;
    }

    /// Appends one record: its dims (little-endian u32 each) and element count.
    pub(crate) fn push(&mut self, dims: &[u8], elems: u64) {
        self.shapes.extend(
            dims.chunks_exact(4)
                .map(|d| u32::from_le_bytes([d[0], d[1], d[2], d[3]])),
        );
        let last = self.cu_seqlens.last().copied().unwrap_or(0);
        self.cu_seqlens.push(last + elems);
    }

    /// Sets `values_bytes` from the element count, once every record is pushed.
    pub(crate) fn finish(&mut self, itemsize: u64) -> Result<()> {
        let elems = self.cu_seqlens.last().copied().unwrap_or(0);
        self.values_bytes = elems
            .checked_mul(itemsize)
            .and_then(|b| usize::try_from(b).ok())
            .ok_or(Error::InvalidArgument(ArgumentError::BatchTooLarge))?;
        Ok(())
    }
}

/// A gathered ragged batch: the values of all records back to back, their element
/// offsets and their shapes.
#[derive(Debug)]
pub struct RaggedBatch {
    /// Values, aligned for any dtype.
    pub values: AlignedBuf,
    pub cu_seqlens: Vec<u64>,
    pub shapes: Vec<u32>,
    pub ndim: usize,
}

impl RaggedBatch {
    /// Number of records.
    pub fn len(&self) -> usize {
        self.cu_seqlens.len().saturating_sub(1)
    }

    /// Whether the batch holds no records.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes of record `k` of the batch.
    pub fn record(&self, k: usize, itemsize: usize) -> Option<&[u8]> {
        let a = *self.cu_seqlens.get(k)? as usize * itemsize;
        let b = *self.cu_seqlens.get(k + 1)? as usize * itemsize;
        self.values.get(a..b)
    }
}

/// One task's share of a batch: its slot positions and its part of the destination.
type Part<'d> = (Range<usize>, &'d mut [u8]);

impl Reader {
    /// Threads per gather, counting the caller (`ReadOptions::threads`, 0 = all).
    fn threads(&self) -> usize {
        match self.threads {
            0 => self.pool.get().workers() + 1,
            t => t,
        }
    }

    /// Pool workers that may help one gather.
    pub(crate) fn helpers(&self) -> usize {
        self.threads() - 1
    }

    /// How much more a byte of this store costs to produce than to copy.
    fn work_factor(&self) -> usize {
        match self.stored.codec {
            Codec::Raw => 1,
            _ => COMPRESSED_WORK_FACTOR,
        }
    }

    /// Splits `n` slots of about `avg_bytes` each into tasks: `(tasks, per_task)`.
    /// With io_uring a task is one stream of reads kept `queue_depth` deep, so each
    /// thread gets one task holding its whole share: large records would otherwise be
    /// read one at a time, and the task's bookkeeping is allocated once per thread, not
    /// once per handful of records.
    fn task_ranges(&self, n: usize, avg_bytes: usize) -> (usize, usize) {
        // A remote batch is one plan (neighbours coalesced across the whole batch,
        // `in_flight` GETs deep), decoded by the caller as its ranges arrive.
        if self.is_remote() {
            return (usize::from(n > 0), n.max(1));
        }
        let mut per_task = TASK_BYTES / self.work_factor() / avg_bytes.max(1);
        if self.source.streams_reads() {
            per_task = per_task.max(n.div_ceil(self.threads()));
        }
        let per_task = per_task.clamp(1, n.max(1));
        (n.div_ceil(per_task), per_task)
    }

    /// Runs `task` on each of `tasks` parts taken from `parts`, on the caller and the
    /// pool; returns the first error any task reported.
    fn run_parts<'d>(
        &self,
        tasks: usize,
        out_bytes: usize,
        parts: impl Iterator<Item = Part<'d>> + Send,
        task: impl Fn(Part<'d>) -> Result<()> + Sync,
    ) -> Result<()> {
        let first_err: OnceLock<Error> = OnceLock::new();
        let helpers = if out_bytes < INLINE_BYTES / self.work_factor() {
            0
        } else {
            self.helpers()
        };
        let parts = Mutex::new(parts);
        self.pool.get().run(tasks, helpers, |_| {
            if first_err.get().is_some() {
                return;
            }
            // Held for the split only; a panicking task never holds it.
            let part = parts.lock().unwrap_or_else(PoisonError::into_inner).next();
            let r = match part {
                Some(part) => task(part),
                None => Err(Error::Internal(InternalError::Missing {
                    what: "a gather task's part",
                })),
            };
            if let Err(e) = r {
                let _ = first_err.set(e);
            }
        });
        match first_err.into_inner() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// The bytes of record `index`.
    pub(crate) fn get(&self, index: u64) -> Result<Vec<u8>> {
        self.check_index(index)?;
        let e = match self.stored.schema.is_ragged() {
            true => self.with_ragged_shape(index, |_, e| e)?,
            false => self.entry(index)?,
        };
        let mut out = self.record_buf(index, e.logical_len)?;
        with_ctx(|ctx| self.read_record(index, &e, &mut out, ctx))?;
        self.served(self.record_source(), 1);
        Ok(out)
    }

    /// `len` zero bytes for record `index` (the length its entry claims), or
    /// [`Error::RecordOutOfMemory`] naming it: a hostile entry must not abort the
    /// process.
    pub(crate) fn record_buf(&self, index: u64, len: u32) -> Result<Vec<u8>> {
        zring_platform::try_zeroed_vec(len as usize).ok_or_else(|| Error::RecordOutOfMemory {
            path: self.path.clone(),
            index,
            bytes: u64::from(len),
        })
    }

    /// See [`Store::gather`](crate::Store::gather).
    pub(crate) fn gather(&self, indices: &[u64], dest: &mut [u8]) -> Result<()> {
        let width = match self.item_bytes {
            Some(w) => w as usize,
            None => {
                return Err(Error::Schema(SchemaError::WrongLayout {
                    operation: "gather",
                    ragged: true,
                    instead: "gather_ragged",
                }))
            }
        };
        let want = indices.len().checked_mul(width);
        if want != Some(dest.len()) {
            return Err(Error::InvalidArgument(ArgumentError::DestinationSize {
                field: None,
                len: dest.len(),
                records: indices.len(),
                width,
            }));
        }
        self.check_indices(indices)?;
        let (tasks, per_task) = self.task_ranges(indices.len(), width);
        let out_bytes = dest.len();
        let parts = dest
            .chunks_mut((per_task * width).max(1))
            .enumerate()
            .map(|(t, part)| {
                let start = t * per_task;
                (start..(start + per_task).min(indices.len()), part)
            });
        self.run_parts(tasks, out_bytes, parts, |(slots, part)| {
            let items = indices[slots].iter().copied().zip(part.chunks_mut(width));
            with_ctx(|ctx| self.read_task(items, ctx))
        })
    }

    /// See [`Store::ragged_layout_into`](crate::Store::ragged_layout_into).
    pub(crate) fn ragged_layout_into(
        &self,
        indices: &[u64],
        layout: &mut RaggedLayout,
    ) -> Result<()> {
        let ndim = match self.stored.schema.layout {
            Layout::Ragged { ndim } => ndim,
            Layout::Dense { .. } => {
                return Err(Error::Schema(SchemaError::WrongLayout {
                    operation: "ragged_layout",
                    ragged: false,
                    instead: "gather",
                }))
            }
        };
        self.check_indices(indices)?;
        let itemsize = self.stored.schema.dtype.itemsize() as u64;
        layout.start(indices.len(), ndim);
        for (k, &i) in indices.iter().enumerate() {
            if let Some(&ahead) = indices.get(k + LAYOUT_AHEAD) {
                self.meta.prefetch(ahead, ndim);
            }
            self.with_ragged_shape(i, |dims, entry| {
                layout.push(dims, u64::from(entry.logical_len) / itemsize);
            })?;
        }
        layout.finish(itemsize)
    }

    /// See [`Store::gather_ragged_into`](crate::Store::gather_ragged_into).
    pub(crate) fn gather_ragged_into(
        &self,
        indices: &[u64],
        layout: &RaggedLayout,
        values: &mut [u8],
    ) -> Result<()> {
        if layout.cu_seqlens.len() != indices.len() + 1 || values.len() != layout.values_bytes {
            return Err(Error::InvalidArgument(
                ArgumentError::RaggedLayoutMismatch {
                    field: None,
                    layout_records: layout.cu_seqlens.len().saturating_sub(1),
                    layout_bytes: Some(layout.values_bytes),
                    indices: indices.len(),
                    values: values.len(),
                },
            ));
        }
        let itemsize = self.stored.schema.dtype.itemsize();
        let monotonic = layout.cu_seqlens.windows(2).all(|w| w[0] <= w[1]);
        // Checked: a wrapped end could pass the comparison and let byte offsets (and
        // so tasks' parts) go backwards. Every offset is at most the last one, so
        // this one check keeps all of them in range.
        let ends = layout
            .cu_seqlens
            .last()
            .and_then(|&c| usize::try_from(c).ok()?.checked_mul(itemsize));
        if layout.cu_seqlens.first() != Some(&0) || !monotonic || ends != Some(values.len()) {
            return Err(Error::InvalidArgument(ArgumentError::RaggedLayoutInvalid));
        }
        self.check_indices(indices)?;
        let avg = layout.values_bytes / indices.len().max(1);
        let (tasks, per_task) = self.task_ranges(indices.len(), avg);
        let out_bytes = values.len();
        // cu_seqlens was checked non-decreasing and to end at the buffer's length, so
        // every split below fits.
        let byte_at = |k: usize| layout.cu_seqlens[k] as usize * itemsize;
        let mut rest = values;
        let parts = (0..tasks).map(move |t| {
            let slots = t * per_task..((t + 1) * per_task).min(indices.len());
            let len = byte_at(slots.end) - byte_at(slots.start);
            let (part, tail) = std::mem::take(&mut rest).split_at_mut(len);
            rest = tail;
            (slots, part)
        });
        self.run_parts(tasks, out_bytes, parts, |(slots, part)| {
            let mut rest = part;
            let items = slots.map(|k| {
                let len = byte_at(k + 1) - byte_at(k);
                let (slot, tail) = std::mem::take(&mut rest).split_at_mut(len);
                rest = tail;
                (indices[k], slot)
            });
            with_ctx(|ctx| self.read_task(items, ctx))
        })
    }

    /// See [`Store::gather_ragged`](crate::Store::gather_ragged).
    pub(crate) fn gather_ragged(&self, indices: &[u64]) -> Result<RaggedBatch> {
        let mut layout = RaggedLayout::default();
        self.ragged_layout_into(indices, &mut layout)?;
        let mut values = AlignedBuf::new(layout.values_bytes, zring_platform::DEFAULT_ALIGN)
            .map_err(|e| Error::io(&self.path, "allocating the values buffer", e))?;
        self.gather_ragged_into(indices, &layout, &mut values)?;
        Ok(RaggedBatch {
            values,
            cu_seqlens: layout.cu_seqlens,
            shapes: layout.shapes,
            ndim: self.stored.schema.ndim(),
        })
    }

    /// Runs `check` on records `start..end` in tasks of [`VERIFY_PER_TASK`] on the
    /// caller and the pool; returns the error of the lowest failing record.
    pub(crate) fn for_each_task(
        &self,
        start: u64,
        end: u64,
        check: impl Fn(Range<u64>) -> Result<()> + Sync,
    ) -> Result<()> {
        let n = (end - start) as usize;
        let tasks = n.div_ceil(VERIFY_PER_TASK);
        let errors: Vec<OnceLock<Error>> = (0..tasks).map(|_| OnceLock::new()).collect();
        self.pool.get().run(tasks, self.helpers(), |t| {
            let first = start + (t * VERIFY_PER_TASK) as u64;
            let last = (first + VERIFY_PER_TASK as u64).min(end);
            if let Err(e) = check(first..last) {
                let _ = errors[t].set(e);
            }
        });
        match errors.into_iter().find_map(OnceLock::into_inner) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

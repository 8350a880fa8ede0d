//! A store's batch reads: a gather is cut into tasks of contiguous output slots by
//! the store's policy and run by the one batch executor (`exec`), which a dataset's
//! gathers share.
//!
//! The destination is split into the tasks' parts lazily, as tasks take them from
//! the executor's shared splitter, so every thread writes a `&mut` part of its own:
//! no raw pointer is shared. Nothing is allocated per gather for this.

use std::ops::Range;
use std::sync::{Mutex, OnceLock, PoisonError};

use zring_platform::AlignedBuf;

use crate::error::{ArgumentError, Error, Result, SchemaError};
use crate::schema::{Codec, Layout};

use super::decode::with_ctx;
use super::exec::{self, Interrupt, Policy, COMPRESSED_WORK_FACTOR};
use super::Reader;

/// How many records ahead a ragged layout prefetches table entries and shapes. Each
/// record's entry and shape are cache misses at random places: prefetching them
/// overlaps the misses (`zring bench` on a W3-like zstd-dict store, batch 256, mmap, 4 interleaved rounds,
/// medians: 1 thread 0.69 -> 0.80 M records/s, 2 threads 1.24 -> 1.40 M).
pub(crate) const LAYOUT_AHEAD: usize = 8;
/// The fewest records a ragged layout's task looks up: a batch of fewer than twice
/// this is laid out on the caller alone (waking a helper costs more than the
/// lookups).
const LAYOUT_PER_TASK: usize = 64;
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
        self.shapes.extend(dims_of(dims));
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

/// A record's dims, stored as little-endian u32s.
fn dims_of(dims: &[u8]) -> impl Iterator<Item = u32> + '_ {
    dims.chunks_exact(4)
        .map(|d| u32::from_le_bytes([d[0], d[1], d[2], d[3]]))
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

impl Reader {
    /// Threads per gather, counting the caller (`ReadOptions::threads`, 0 = all).
    pub(crate) fn threads(&self) -> usize {
        exec::threads(self.opened_with.threads, self.opened_with.pool.get())
    }

    /// Pool workers that may help one gather.
    pub(crate) fn helpers(&self) -> usize {
        self.threads() - 1
    }

    /// How this store's share of a batch is cut into tasks (see `exec`).
    pub(crate) fn policy(&self) -> Policy {
        Policy {
            remote: self.is_remote(),
            streams_reads: self.source.streams_reads(),
            work_factor: match self.stored.codec {
                Codec::Raw => 1,
                _ => COMPRESSED_WORK_FACTOR,
            },
        }
    }

    /// `(tasks, records per task, helpers)` for a batch of this store alone: `n`
    /// slots of about `avg_bytes` each, `out_bytes` in all.
    fn cut(&self, n: usize, avg_bytes: usize, out_bytes: usize) -> (usize, usize, usize) {
        let policy = self.policy();
        let (tasks, per_task) = policy.cut(n, avg_bytes, self.threads());
        let helpers = exec::helpers_for(out_bytes, policy.work_factor, self.threads());
        (tasks, per_task, helpers)
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
    pub(crate) fn gather(
        &self,
        indices: &[u64],
        dest: &mut [u8],
        stop: &dyn Interrupt,
    ) -> Result<()> {
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
        let (tasks, per_task, helpers) = self.cut(indices.len(), width, dest.len());
        let parts = dest
            .chunks_mut((per_task * width).max(1))
            .enumerate()
            .map(|(t, part)| {
                let start = t * per_task;
                (start..(start + per_task).min(indices.len()), part)
            });
        let pool = self.opened_with.pool.get();
        exec::run(pool, tasks, helpers, parts, stop, |(slots, part), watch| {
            let items = indices[slots].iter().copied().zip(part.chunks_mut(width));
            with_ctx(|ctx| self.read_task(watch.items(items), ctx))
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
        // The batch's size first: a small layout never asks for the pool (whose first
        // use starts it, which a process forked meanwhile must not wait for).
        let threads = match ndim == 0 || indices.len() < 2 * LAYOUT_PER_TASK {
            true => 1,
            false => self.threads(),
        };
        if threads < 2 {
            self.look_up(indices, ndim, |_, dims, elems| layout.push(dims, elems))
                .map_err(|(_, e)| e)?;
            return layout.finish(itemsize);
        }
        self.ragged_layout_parallel(indices, layout, ndim, threads)?;
        layout.finish(itemsize)
    }

    /// Looks up the records `part` for a ragged layout, the entries and shapes of
    /// the next [`LAYOUT_AHEAD`] prefetched: `put(k, dims, elements)` for record `k`
    /// of `part`, in order; stops at the first bad record with its place in `part`.
    fn look_up(
        &self,
        part: &[u64],
        ndim: usize,
        mut put: impl FnMut(usize, &[u8], u64),
    ) -> std::result::Result<(), (usize, Error)> {
        let itemsize = self.stored.schema.dtype.itemsize() as u64;
        for (k, &i) in part.iter().enumerate() {
            if let Some(&ahead) = part.get(k + LAYOUT_AHEAD) {
                self.meta.prefetch(ahead, ndim);
            }
            self.with_ragged_shape(i, |dims, entry| {
                put(k, dims, u64::from(entry.logical_len) / itemsize);
            })
            .map_err(|e| (k, e))?;
        }
        Ok(())
    }

    /// The lookups of [`Reader::ragged_layout_into`] on the caller and the pool: each
    /// record's entry and shape are cache misses at random places, a quarter of a
    /// small-record gather's time on one thread, so on the caller alone they capped
    /// two threads at 1.6x one (W3). Each task writes its records' dims and element
    /// counts into its own part of the layout; the offsets are summed after.
    fn ragged_layout_parallel(
        &self,
        indices: &[u64],
        layout: &mut RaggedLayout,
        ndim: usize,
        threads: usize,
    ) -> Result<()> {
        let n = indices.len();
        layout.cu_seqlens.resize(n + 1, 0);
        layout.shapes.resize(n * ndim, 0);
        // Two tasks per thread, so a helper that wakes late still takes a share.
        let per_task = n.div_ceil(2 * threads).max(LAYOUT_PER_TASK);
        let tasks = n.div_ceil(per_task);
        // Each task stops at its first bad record, and the lowest of those is kept:
        // the error a layout on one thread reports. (A mutex, not a slot per task:
        // a layout allocates nothing.)
        let first_bad: Mutex<Option<(usize, Error)>> = Mutex::new(None);
        let parts = indices
            .chunks(per_task)
            .zip(layout.cu_seqlens[1..].chunks_mut(per_task))
            .zip(layout.shapes.chunks_mut(per_task * ndim))
            .enumerate();
        exec::run(
            self.opened_with.pool.get(),
            tasks,
            threads - 1,
            parts,
            &exec::Never,
            |(t, ((part, counts), shapes)), _| {
                let looked_up = self.look_up(part, ndim, |k, dims, elems| {
                    let slot = &mut shapes[k * ndim..(k + 1) * ndim];
                    for (s, d) in slot.iter_mut().zip(dims_of(dims)) {
                        *s = d;
                    }
                    counts[k] = elems;
                });
                if let Err((k, e)) = looked_up {
                    let at = t * per_task + k;
                    let mut bad = first_bad.lock().unwrap_or_else(PoisonError::into_inner);
                    if bad.as_ref().is_none_or(|(b, _)| at < *b) {
                        *bad = Some((at, e));
                    }
                }
                Ok(())
            },
        )?;
        if let Some((_, e)) = first_bad
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
        {
            return Err(e);
        }
        let mut total = 0u64;
        for c in &mut layout.cu_seqlens[1..] {
            total = total
                .checked_add(*c)
                .ok_or(Error::InvalidArgument(ArgumentError::BatchTooLarge))?;
            *c = total;
        }
        Ok(())
    }

    /// See [`Store::gather_ragged_into`](crate::Store::gather_ragged_into).
    pub(crate) fn gather_ragged_into(
        &self,
        indices: &[u64],
        layout: &RaggedLayout,
        values: &mut [u8],
        stop: &dyn Interrupt,
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
        let (tasks, per_task, helpers) = self.cut(indices.len(), avg, values.len());
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
        exec::run(
            self.opened_with.pool.get(),
            tasks,
            helpers,
            parts,
            stop,
            |(slots, part), watch| {
                let mut rest = part;
                let items = slots.map(|k| {
                    let len = byte_at(k + 1) - byte_at(k);
                    let (slot, tail) = std::mem::take(&mut rest).split_at_mut(len);
                    rest = tail;
                    (indices[k], slot)
                });
                with_ctx(|ctx| self.read_task(watch.items(items), ctx))
            },
        )
    }

    /// See [`Store::gather_ragged`](crate::Store::gather_ragged).
    pub(crate) fn gather_ragged(&self, indices: &[u64]) -> Result<RaggedBatch> {
        let mut layout = RaggedLayout::default();
        self.ragged_layout_into(indices, &mut layout)?;
        let mut values = AlignedBuf::new(layout.values_bytes, zring_platform::DEFAULT_ALIGN)
            .map_err(|e| Error::io(&self.path, "allocating the values buffer", e))?;
        self.gather_ragged_into(indices, &layout, &mut values, &exec::Never)?;
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
        stop: &dyn Interrupt,
        check: impl Fn(Range<u64>) -> Result<()> + Sync,
    ) -> Result<()> {
        let n = (end - start) as usize;
        let tasks = n.div_ceil(VERIFY_PER_TASK);
        let errors: Vec<OnceLock<Error>> = (0..tasks).map(|_| OnceLock::new()).collect();
        // Every task runs (to find the lowest failing record), so a task keeps its
        // error instead of stopping the batch with it.
        exec::run(
            self.opened_with.pool.get(),
            tasks,
            self.helpers(),
            0..tasks,
            stop,
            |t, _| {
                let first = start + (t * VERIFY_PER_TASK) as u64;
                let last = (first + VERIFY_PER_TASK as u64).min(end);
                if let Err(e) = check(first..last) {
                    let _ = errors[t].set(e);
                }
                Ok(())
            },
        )?;
        match errors.into_iter().find_map(OnceLock::into_inner) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

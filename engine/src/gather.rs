//! The read path: plan a batch from the table, then fill the destination in parallel.
//!
//! A gather is cut into tasks of contiguous output slots; the caller and the pool's
//! workers claim tasks with one atomic increment each and write disjoint parts of the
//! destination (see `zring_platform::SharedMut`). Raw records are copied (mmap) or
//! read (pread) straight into their slot; compressed records decompress straight into
//! their slot from the mapping or from per-thread scratch. No lock is taken.

use std::ops::Range;
use std::sync::OnceLock;

use zring_platform::{AlignedBuf, Backend, Pool, SharedMut};

use crate::error::{Error, Result};
use crate::format::{self, RecordCodec};
use crate::read::{with_ctx, DecodeCtx};
use crate::schema::Layout;
use crate::store::{Inner, Store};

/// Aim for tasks of about this many output bytes: small enough that a caller whose
/// helper wakes late still takes most of a small batch (W2: 64 KiB tasks gave
/// 3.5-4.1 M records/s against 3.0-3.6 M with 256 KiB), large enough to amortise
/// the claim.
const TASK_BYTES: usize = 64 << 10;
/// Below this many output bytes a gather runs on the caller alone: waking a worker
/// costs more than the copy.
const INLINE_BYTES: usize = 64 << 10;
/// Decoding a byte costs roughly this many times copying it, so compressed gathers
/// are cut into tasks (and wake helpers at sizes) this much smaller: a 180 KiB ragged
/// zstd batch is otherwise one task and the second core idles (measured in
/// docs/benchmarks.md: W3 zstd-dict 2-thread scaling 1.03-1.09x -> 1.40-1.71x).
const COMPRESSED_WORK_FACTOR: usize = 8;
/// How many records ahead a ragged layout prefetches table entries and shapes. The
/// layout runs on the caller alone before the parallel part, and each record's entry
/// and shape are cache misses at random places: prefetching them overlaps the misses
/// (`zring bench` on a W3-like zstd-dict store, batch 256, mmap, 4 interleaved rounds,
/// medians: 1 thread 0.69 -> 0.80 M records/s, 2 threads 1.24 -> 1.40 M).
const LAYOUT_AHEAD: usize = 8;

impl Inner {
    /// Threads per gather, counting the caller (`ReadOptions::threads`, 0 = all).
    fn threads(&self) -> usize {
        match self.threads {
            0 => Pool::global().workers() + 1,
            t => t,
        }
    }

    /// Pool workers that may help one gather.
    fn helpers(&self) -> usize {
        self.threads() - 1
    }

    /// Runs `task` over `tasks` pieces on the caller and the pool; returns the first
    /// error any piece reported.
    fn run_tasks(
        &self,
        tasks: usize,
        out_bytes: usize,
        task: impl Fn(usize) -> Result<()> + Sync,
    ) -> Result<()> {
        let first_err: OnceLock<Error> = OnceLock::new();
        let inline = INLINE_BYTES / self.work_factor();
        let helpers = if out_bytes < inline {
            0
        } else {
            self.helpers()
        };
        Pool::global().run(tasks, helpers, |t| {
            if first_err.get().is_some() {
                return;
            }
            if let Err(e) = task(t) {
                let _ = first_err.set(e);
            }
        });
        match first_err.into_inner() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn check_indices(&self, indices: &[u64]) -> Result<()> {
        let n = self.footer.record_count;
        match indices.iter().find(|&&i| i >= n) {
            Some(&i) => self.check_index(i),
            None => Ok(()),
        }
    }
}

impl Inner {
    /// Starts loading record `i`'s table entry and shape into the cache.
    fn prefetch_layout(&self, i: u64) {
        for r in [self.entry_bytes(i), self.shape_bytes(i)] {
            self.map.prefetch(r.start, r.len());
        }
    }

    /// How much more a byte of this store costs to produce than to copy.
    fn work_factor(&self) -> usize {
        match self.stored.codec {
            crate::schema::Codec::Raw => 1,
            _ => COMPRESSED_WORK_FACTOR,
        }
    }

    /// Splits `n` slots of about `avg_bytes` each into tasks: `(tasks, per_task)`.
    /// With io_uring a task is one stream of reads kept `queue_depth` deep, so each
    /// thread gets one task holding its whole share: large records would otherwise be
    /// read one at a time, and the task's bookkeeping is allocated once per thread, not
    /// once per handful of records.
    fn task_ranges(&self, n: usize, avg_bytes: usize) -> (usize, usize) {
        let mut per_task = TASK_BYTES / self.work_factor() / avg_bytes.max(1);
        if self.backend == Backend::Uring {
            per_task = per_task.max(n.div_ceil(self.threads()));
        }
        let per_task = per_task.clamp(1, n.max(1));
        (n.div_ceil(per_task), per_task)
    }
}

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

impl Store {
    /// Fills `dest` with the dense records `indices` in order (duplicates allowed):
    /// record `indices[k]` lands at `dest[k * item_bytes ..]`. `dest` must be exactly
    /// `indices.len() * item_bytes` bytes.
    pub fn gather(&self, indices: &[u64], dest: &mut [u8]) -> Result<()> {
        let inner = &*self.inner;
        let width = match inner.item_bytes {
            Some(w) => w as usize,
            None => {
                return Err(Error::Schema(
                    "gather on a ragged store; use gather_ragged".into(),
                ))
            }
        };
        let want = indices.len().checked_mul(width);
        if want != Some(dest.len()) {
            return Err(Error::arg(format!(
                "destination is {} bytes, expected {} records x {width} bytes",
                dest.len(),
                indices.len()
            )));
        }
        inner.check_indices(indices)?;
        let (tasks, per_task) = inner.task_ranges(indices.len(), width);
        let out = SharedMut::new(dest);
        inner.run_tasks(tasks, out.len(), |t| {
            let slots = t * per_task..((t + 1) * per_task).min(indices.len());
            // SAFETY: task t owns output slots [t*per_task, (t+1)*per_task), which are
            // disjoint from every other task's; each task index runs once.
            let part = unsafe { out.slice(slots.start * width..slots.end * width) }
                .ok_or_else(|| Error::arg("task outside the destination"))?;
            let items = indices[slots].iter().copied().zip(part.chunks_mut(width));
            with_ctx(|ctx| inner.read_many(items, ctx))
        })
    }

    /// Gathers dense records into a new vector.
    pub fn gather_vec(&self, indices: &[u64]) -> Result<Vec<u8>> {
        let width = self.item_bytes().unwrap_or(0) as usize;
        let mut out = vec![0u8; indices.len().saturating_mul(width)];
        self.gather(indices, &mut out)?;
        Ok(out)
    }

    /// The output layout of a ragged gather of `indices`, from the table alone.
    pub fn ragged_layout(&self, indices: &[u64]) -> Result<RaggedLayout> {
        let mut layout = RaggedLayout::default();
        self.ragged_layout_into(indices, &mut layout)?;
        Ok(layout)
    }

    /// [`Store::ragged_layout`] into an existing layout, reusing its vectors'
    /// capacity (a loader that recycles layouts allocates nothing per batch).
    pub fn ragged_layout_into(&self, indices: &[u64], layout: &mut RaggedLayout) -> Result<()> {
        let inner = &*self.inner;
        let ndim = match inner.stored.schema.layout {
            Layout::Ragged { ndim } => ndim,
            Layout::Dense { .. } => {
                return Err(Error::Schema(
                    "ragged_layout on a dense store; use gather".into(),
                ))
            }
        };
        inner.check_indices(indices)?;
        let itemsize = inner.stored.schema.dtype.itemsize() as u64;
        layout.cu_seqlens.clear();
        layout.cu_seqlens.reserve(indices.len() + 1);
        layout.shapes.clear();
        layout.shapes.reserve(indices.len() * ndim);
        layout.values_bytes = 0;
        let mut elems = 0u64;
        layout.cu_seqlens.push(0);
        for (k, &i) in indices.iter().enumerate() {
            if let Some(&ahead) = indices.get(k + LAYOUT_AHEAD) {
                inner.prefetch_layout(ahead);
            }
            let (dims, entry) = inner.ragged_shape_entry(i)?;
            layout.shapes.extend(
                dims.chunks_exact(4)
                    .map(|d| u32::from_le_bytes([d[0], d[1], d[2], d[3]])),
            );
            elems += u64::from(entry.logical_len) / itemsize;
            layout.cu_seqlens.push(elems);
        }
        layout.values_bytes = elems
            .checked_mul(itemsize)
            .and_then(|b| usize::try_from(b).ok())
            .ok_or_else(|| Error::arg("ragged batch larger than the address space"))?;
        Ok(())
    }

    /// Fills `values` (exactly `layout.values_bytes`) with the ragged records
    /// `indices`, whose layout was computed by [`Store::ragged_layout`].
    pub fn gather_ragged_into(
        &self,
        indices: &[u64],
        layout: &RaggedLayout,
        values: &mut [u8],
    ) -> Result<()> {
        let inner = &*self.inner;
        if layout.cu_seqlens.len() != indices.len() + 1 || values.len() != layout.values_bytes {
            return Err(Error::arg(format!(
                "ragged layout for {} records / {} bytes does not match {} indices / {} bytes",
                layout.cu_seqlens.len().saturating_sub(1),
                layout.values_bytes,
                indices.len(),
                values.len()
            )));
        }
        let itemsize = inner.stored.schema.dtype.itemsize();
        let monotonic = layout.cu_seqlens.windows(2).all(|w| w[0] <= w[1]);
        // Checked: a wrapped end could pass the comparison and let byte offsets (and
        // so tasks' slices) go backwards. Every offset is at most the last one, so
        // this one check keeps all of them in range.
        let ends = layout
            .cu_seqlens
            .last()
            .and_then(|&c| usize::try_from(c).ok()?.checked_mul(itemsize));
        if layout.cu_seqlens.first() != Some(&0) || !monotonic || ends != Some(values.len()) {
            return Err(Error::arg(
                "ragged layout is not a valid cu_seqlens for this values buffer",
            ));
        }
        inner.check_indices(indices)?;
        let avg = layout.values_bytes / indices.len().max(1);
        let (tasks, per_task) = inner.task_ranges(indices.len(), avg);
        let out = SharedMut::new(values);
        let byte_at = |k: usize| layout.cu_seqlens[k] as usize * itemsize;
        inner.run_tasks(tasks, out.len(), |t| {
            let slots: Range<usize> = t * per_task..((t + 1) * per_task).min(indices.len());
            let base = byte_at(slots.start);
            // SAFETY: task t owns the byte range of its records' slots, disjoint from
            // other tasks' because cu_seqlens is non-decreasing; each task runs once.
            let part = unsafe { out.slice(base..byte_at(slots.end)) }
                .ok_or_else(|| Error::arg("ragged layout outside the values buffer"))?;
            let mut rest = part;
            let items = slots.map(|k| {
                // cu_seqlens was checked non-decreasing and to end at the buffer's
                // length, so the split always fits.
                let len = byte_at(k + 1) - byte_at(k);
                let (slot, tail) = std::mem::take(&mut rest).split_at_mut(len);
                rest = tail;
                (indices[k], slot)
            });
            with_ctx(|ctx| inner.read_many(items, ctx))
        })
    }

    /// Gathers ragged records into a new batch (values in an aligned buffer).
    pub fn gather_ragged(&self, indices: &[u64]) -> Result<RaggedBatch> {
        let layout = self.ragged_layout(indices)?;
        let mut values =
            AlignedBuf::new(layout.values_bytes, zring_platform::buffer::DEFAULT_ALIGN)
                .map_err(|e| Error::io(self.path(), "allocating the values buffer", e))?;
        self.gather_ragged_into(indices, &layout, &mut values)?;
        Ok(RaggedBatch {
            values,
            cu_seqlens: layout.cu_seqlens,
            shapes: layout.shapes,
            ndim: self.schema().ndim(),
        })
    }

    /// Checks records `range`: every table entry, every checksum, and that every
    /// compressed record decodes to its logical length. Returns the first bad record's
    /// error (the lowest index).
    pub fn verify_range(&self, range: Range<u64>) -> Result<()> {
        let inner = &*self.inner;
        if range.start > range.end || range.end > self.len() {
            return Err(Error::arg(format!(
                "verify range {}..{} is not inside 0..{}",
                range.start,
                range.end,
                self.len()
            )));
        }
        let (start, end) = (range.start, range.end);
        let n = (end - start) as usize;
        const PER_TASK: usize = 256;
        let tasks = n.div_ceil(PER_TASK);
        let errors: Vec<OnceLock<Error>> = (0..tasks).map(|_| OnceLock::new()).collect();
        Pool::global().run(tasks, inner.helpers(), |t| {
            let first = start + (t * PER_TASK) as u64;
            let last = (first + PER_TASK as u64).min(end);
            let r = with_ctx(|ctx| {
                let mut buf = Vec::new();
                for i in first..last {
                    inner.verify_one(i, &mut buf, ctx)?;
                }
                Ok(())
            });
            if let Err(e) = r {
                let _ = errors[t].set(e);
            }
        });
        match errors.into_iter().find_map(OnceLock::into_inner) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Checks every record (see [`Store::verify_range`]).
    pub fn verify(&self) -> Result<()> {
        self.verify_range(0..self.len())
    }
}

impl Inner {
    fn verify_one(&self, i: u64, buf: &mut Vec<u8>, ctx: &mut DecodeCtx) -> Result<()> {
        let e = self.entry(i)?;
        if self.stored.schema.is_ragged() {
            self.ragged_shape(i)?;
        }
        let src =
            &self.map.bytes()[e.offset as usize..(e.offset + u64::from(e.stored_len)) as usize];
        if format::checksum(src) != e.checksum {
            return Err(Error::record(&self.path, i, "checksum mismatch"));
        }
        if e.codec != RecordCodec::Raw {
            // Check the frame's declared size before sizing the buffer: a hostile
            // entry must not make verify fill gigabytes.
            let declared = zstd::zstd_safe::get_frame_content_size(src).ok().flatten();
            if declared != Some(u64::from(e.logical_len)) {
                return Err(Error::record(
                    &self.path,
                    i,
                    format!(
                        "decompressed to {} bytes per its zstd frame header, the table says {}",
                        declared.map_or("an unknown number of".to_string(), |d| d.to_string()),
                        e.logical_len
                    ),
                ));
            }
            buf.resize(e.logical_len as usize, 0);
            // The checksum was just checked above, whatever `verify_checksums` says.
            self.decode_checked(i, &e, src, buf, ctx.decoders())?;
        }
        Ok(())
    }
}

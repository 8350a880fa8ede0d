//! A dataset gather: every field of every shard in one run of the batch executor.
//!
//! Each requested field's destination is cut into one slot per output record (safe
//! splitting, no shared-pointer tricks); slots are bucketed by store (shard and
//! field), and each bucket is cut into tasks by its store's policy, exactly as a
//! gather of that store alone would be (one request plan for a remote store, one
//! stream per thread for io_uring, tasks of about the same bytes otherwise). The
//! executor runs them on the caller and the pool's workers. A task reads its records
//! through its store's own read path, so backends, checksums and decompression are
//! exactly a store's.

use zring_platform::AlignedBuf;

use super::Dataset;
use crate::error::{ArgumentError, Error, Result, SchemaError};
use crate::read::exec::{self, Interrupt, Never};
use crate::read::{with_ctx, RaggedBatch, RaggedLayout, LAYOUT_AHEAD};
use crate::schema::Layout;
use crate::store::Store;

/// Where one field of a dataset gather goes.
pub enum FieldDest<'a> {
    /// `indices.len() * item_bytes` bytes; record `k` lands at `k * item_bytes`.
    Dense(&'a mut [u8]),
    /// The values of a ragged field, laid out by [`Dataset::ragged_layout`].
    Ragged {
        layout: &'a RaggedLayout,
        values: &'a mut [u8],
    },
}

/// One field of a gathered batch.
#[derive(Debug)]
pub enum FieldBatch {
    /// Records back to back, `item_bytes` each.
    Dense(AlignedBuf),
    Ragged(RaggedBatch),
}

/// While a batch is cut into tasks, the stop signal is asked every this many records.
const PREPARE_CHECK: usize = 1 << 16;

/// One unit of parallel work: some records of one store into their slots.
type Task<'a> = (&'a Store, Vec<(u64, &'a mut [u8])>);

impl Dataset {
    /// The output layout of ragged field `field` for `indices`, from the tables alone.
    pub fn ragged_layout(&self, field: usize, indices: &[u64]) -> Result<RaggedLayout> {
        let mut layout = RaggedLayout::default();
        self.ragged_layout_into(field, indices, &mut layout)?;
        Ok(layout)
    }

    /// [`Dataset::ragged_layout`] into an existing layout, reusing its capacity.
    pub fn ragged_layout_into(
        &self,
        field: usize,
        indices: &[u64],
        layout: &mut RaggedLayout,
    ) -> Result<()> {
        let schema = &self.field_at(field)?.schema;
        let Layout::Ragged { ndim } = schema.layout else {
            return Err(Error::Schema(SchemaError::FieldLayout {
                field: self.fields()[field].name.clone(),
                ragged: false,
            }));
        };
        let itemsize = schema.dtype.itemsize() as u64;
        layout.start(indices.len(), ndim);
        for (k, &i) in indices.iter().enumerate() {
            if let Some(&ahead) = indices.get(k + LAYOUT_AHEAD) {
                self.prefetch_layout(field, ahead);
            }
            let (s, local) = self.locate(i)?;
            let store = &self.inner.stores[s][field];
            store.inner.with_ragged_shape(local, |dims, entry| {
                layout.push(dims, u64::from(entry.logical_len) / itemsize);
            })?;
        }
        layout.finish(itemsize)
    }

    /// Gathers records `indices` (global, duplicates allowed) of fields `fields`
    /// (positions in [`Dataset::fields`]) into `dests`, one per field, every field
    /// and shard in parallel.
    pub fn gather(
        &self,
        indices: &[u64],
        fields: &[usize],
        dests: &mut [FieldDest<'_>],
    ) -> Result<()> {
        self.gather_until(indices, fields, dests, &Never)
    }

    /// [`Dataset::gather`] that stops early, with [`Error::Interrupted`], once `stop`
    /// says so (it is asked between records on every thread of the gather).
    pub fn gather_until(
        &self,
        indices: &[u64],
        fields: &[usize],
        dests: &mut [FieldDest<'_>],
        stop: &dyn Interrupt,
    ) -> Result<()> {
        if fields.len() != dests.len() {
            return Err(Error::InvalidArgument(ArgumentError::FieldCount {
                fields: fields.len(),
                destinations: dests.len(),
            }));
        }
        // Cutting a batch of millions of records takes a while: the stop signal is
        // asked during it too.
        let asked = |k: usize| k % PREPARE_CHECK == PREPARE_CHECK - 1 && stop.interrupted();
        let mut locs = Vec::with_capacity(indices.len());
        for (k, &i) in indices.iter().enumerate() {
            if asked(k) {
                return Err(Error::Interrupted);
            }
            locs.push(self.locate(i)?);
        }
        let shards = self.shards();
        let threads = self.threads();
        let mut tasks: Vec<Task<'_>> = Vec::new();
        let mut total_bytes = 0usize;
        let mut factor = 1;
        for (&f, dest) in fields.iter().zip(dests.iter_mut()) {
            let slots = self.slots(f, indices.len(), dest)?;
            let mut buckets: Vec<Vec<(u64, &mut [u8])>> = (0..shards).map(|_| Vec::new()).collect();
            for (k, (&(s, local), slot)) in locs.iter().zip(slots).enumerate() {
                if asked(k) {
                    return Err(Error::Interrupted);
                }
                buckets[s].push((local, slot));
            }
            for (s, bucket) in buckets.into_iter().enumerate() {
                if bucket.is_empty() {
                    continue;
                }
                let store = &self.inner.stores[s][f];
                let policy = store.inner.policy();
                factor = factor.max(policy.work_factor);
                let bytes: usize = bucket.iter().map(|(_, slot)| slot.len()).sum();
                total_bytes += bytes;
                let (_, per_task) = policy.cut(bucket.len(), bytes / bucket.len(), threads);
                let mut items = bucket.into_iter();
                loop {
                    let task: Vec<_> = items.by_ref().take(per_task).collect();
                    if task.is_empty() {
                        break;
                    }
                    tasks.push((store, task));
                }
            }
        }
        let helpers = exec::helpers_for(total_bytes, factor, threads);
        let pool = self.inner.opts.pool.get();
        let n = tasks.len();
        exec::run(
            pool,
            n,
            helpers,
            tasks.into_iter(),
            stop,
            |(store, items), watch| {
                with_ctx(|ctx| store.inner.read_task(watch.items(items.into_iter()), ctx))
            },
        )
    }

    /// Gathers fields `fields` of `indices` into new buffers.
    pub fn gather_vec(&self, indices: &[u64], fields: &[usize]) -> Result<Vec<FieldBatch>> {
        let align = zring_platform::DEFAULT_ALIGN;
        let alloc = |n: usize| {
            AlignedBuf::new(n, align)
                .map_err(|e| Error::io(self.path(), "allocating a batch buffer", e))
        };
        let mut layouts = Vec::with_capacity(fields.len());
        let mut bufs = Vec::with_capacity(fields.len());
        for &f in fields {
            let schema = &self.field_at(f)?.schema;
            match schema.item_bytes() {
                Some(w) => {
                    let n = indices
                        .len()
                        .checked_mul(w as usize)
                        .ok_or(Error::InvalidArgument(ArgumentError::BatchTooLarge))?;
                    layouts.push(None);
                    bufs.push(alloc(n)?);
                }
                None => {
                    let layout = self.ragged_layout(f, indices)?;
                    bufs.push(alloc(layout.values_bytes)?);
                    layouts.push(Some(layout));
                }
            }
        }
        {
            let mut dests: Vec<FieldDest<'_>> = bufs
                .iter_mut()
                .zip(&layouts)
                .map(|(buf, layout)| match layout {
                    None => FieldDest::Dense(&mut buf[..]),
                    Some(layout) => FieldDest::Ragged {
                        layout,
                        values: &mut buf[..],
                    },
                })
                .collect();
            self.gather(indices, fields, &mut dests)?;
        }
        Ok(bufs
            .into_iter()
            .zip(layouts)
            .zip(fields)
            .map(|((values, layout), &f)| match layout {
                None => FieldBatch::Dense(values),
                Some(l) => FieldBatch::Ragged(RaggedBatch {
                    values,
                    cu_seqlens: l.cu_seqlens,
                    shapes: l.shapes,
                    ndim: self.fields()[f].schema.ndim(),
                }),
            })
            .collect())
    }

    /// Starts loading global record `i`'s table entry and shape of `field` into the
    /// cache (an index out of range is left to the read that follows to report).
    fn prefetch_layout(&self, field: usize, i: u64) {
        if let Ok((s, local)) = self.locate(i) {
            let store = &self.inner.stores[s][field];
            if local < store.len() {
                store.inner.prefetch_layout(local);
            }
        }
    }

    pub(crate) fn field_at(&self, field: usize) -> Result<&super::Field> {
        self.fields().get(field).ok_or_else(|| {
            Error::InvalidArgument(ArgumentError::FieldPosition {
                field,
                fields: self.fields().len(),
            })
        })
    }

    /// Cuts field `field`'s destination into one slot per record, checking its size.
    fn slots<'d>(
        &self,
        field: usize,
        n: usize,
        dest: &'d mut FieldDest<'_>,
    ) -> Result<Vec<&'d mut [u8]>> {
        let schema = &self.field_at(field)?.schema;
        let name = &self.fields()[field].name;
        match (dest, schema.item_bytes()) {
            (FieldDest::Dense(d), Some(w)) => {
                let w = w as usize;
                if n.checked_mul(w) != Some(d.len()) {
                    return Err(Error::InvalidArgument(ArgumentError::DestinationSize {
                        field: Some(name.clone()),
                        len: d.len(),
                        records: n,
                        width: w,
                    }));
                }
                // A zero-size record still needs one (empty) slot per index.
                Ok(match w {
                    0 => (0..n).map(|_| &mut [][..]).collect(),
                    _ => d.chunks_mut(w).collect(),
                })
            }
            (FieldDest::Ragged { layout, values }, None) => {
                let itemsize = schema.dtype.itemsize();
                let cu = &layout.cu_seqlens;
                let monotonic = cu.windows(2).all(|w| w[0] <= w[1]);
                let end = cu
                    .last()
                    .and_then(|&c| usize::try_from(c).ok()?.checked_mul(itemsize));
                if cu.len() != n + 1
                    || cu.first() != Some(&0)
                    || !monotonic
                    || end != Some(values.len())
                {
                    return Err(Error::InvalidArgument(
                        ArgumentError::RaggedLayoutMismatch {
                            field: Some(name.clone()),
                            layout_records: cu.len().saturating_sub(1),
                            layout_bytes: end,
                            indices: n,
                            values: values.len(),
                        },
                    ));
                }
                let mut rest: &'d mut [u8] = values;
                let mut out = Vec::with_capacity(n);
                for w in cu.windows(2) {
                    // Checked above: non-decreasing and ending at the buffer's length.
                    let len = (w[1] - w[0]) as usize * itemsize;
                    let (slot, tail) = std::mem::take(&mut rest).split_at_mut(len);
                    out.push(slot);
                    rest = tail;
                }
                Ok(out)
            }
            (FieldDest::Dense(_), None) => Err(Error::Schema(SchemaError::FieldLayout {
                field: name.clone(),
                ragged: true,
            })),
            (FieldDest::Ragged { .. }, Some(_)) => Err(Error::Schema(SchemaError::FieldLayout {
                field: name.clone(),
                ragged: false,
            })),
        }
    }

    /// Threads per gather, counting the caller (`ReadOptions::threads`, 0 = the
    /// caller and every pool worker).
    fn threads(&self) -> usize {
        exec::threads(self.inner.opts.threads, self.inner.opts.pool.get())
    }
}

//! Making one step: draw the step's records from the schedule, gather every stream of every shard into
//! pooled buffers, run the transform. Shared by the worker threads and by the
//! `workers = 0` mode; holds no lock while it works.

use std::collections::HashMap;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::batch::{Batch, Step, Tensor};
use crate::decode::{decode_images, DecodeError, ImageDecode, ImageField};
use crate::error::{LoaderError, OptionsError, Result, TransformError};
use crate::options::LoaderOptions;
use crate::recycle::VecPool;
use crate::schedule::Schedule;
use crate::view::{Kind, Plan, StreamPlan};
use zring_engine::{Never, RaggedLayout};
use zring_platform::{BufPool, BufPoolOptions, Pool, PooledBuf};

/// The transform from a gathered step to what the consumer receives.
pub(crate) type TransformFn<T> = dyn Fn(Step<Batch>) -> Result<T, TransformError> + Send + Sync;

/// Everything needed to make any step; shared read-only by all workers.
pub(crate) struct Factory<T> {
    pub(crate) plan: Plan,
    pub(crate) schedule: Schedule,
    pub(crate) pageable: BufPool,
    pub(crate) pinned: Option<BufPool>,
    tensors: VecPool<Tensor>,
    cu_seqlens: VecPool<u64>,
    shapes: VecPool<u32>,
    transform: Arc<TransformFn<T>>,
    /// Per stream, the capacity every ragged buffer is asked for
    /// (`BufPool::get_with_capacity`): half again the largest of the first batches,
    /// and raised only by a batch that does not fit it. Random batches of one stream
    /// differ by a few percent, so the first steps fix it for the run and the pool
    /// keeps one size class. Asked for by their own size, or by the largest so far,
    /// buffers drifted from class to class as rarer, larger batches came along, and
    /// a process's resident memory with them (a 30-minute soak saw both).
    ragged_capacity: Vec<AtomicUsize>,
    /// Bad images left out and replaced, counted as their steps are delivered.
    pub(crate) bad_images: BadImages,
}

/// The bad images (left out, replaced) of the steps delivered so far. The workers
/// make steps ahead of the caller, so a step's counts wait here until the loader
/// hands the step over ([`BadImages::delivered`]): a count then means records the
/// caller received without, not records a prefetched step may never deliver.
#[derive(Default)]
pub(crate) struct BadImages {
    /// Steps made but not yet delivered that had a bad image: (left out, replaced).
    made: Mutex<HashMap<u64, (u64, u64)>>,
    skipped: AtomicU64,
    substituted: AtomicU64,
}

impl BadImages {
    fn made(&self, step: u64, skipped: usize, substituted: usize) {
        if skipped + substituted > 0 {
            lock(&self.made).insert(step, (skipped as u64, substituted as u64));
        }
    }

    /// Counts the bad images of `step`, which the loader is handing to its caller.
    pub(crate) fn delivered(&self, step: u64) {
        let Some((skipped, substituted)) = lock(&self.made).remove(&step) else {
            return;
        };
        self.skipped.fetch_add(skipped, Ordering::Relaxed);
        self.substituted.fetch_add(substituted, Ordering::Relaxed);
    }

    /// Bad images (left out, replaced) in the steps delivered so far.
    pub(crate) fn totals(&self) -> (u64, u64) {
        (
            self.skipped.load(Ordering::Relaxed),
            self.substituted.load(Ordering::Relaxed),
        )
    }
}

/// The map's lock, whatever a panicking holder left (every update is one insert
/// or remove).
fn lock<V>(m: &Mutex<V>) -> std::sync::MutexGuard<'_, V> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A worker's reusable memory.
pub(crate) struct Scratch {
    indices: Vec<u64>,
}

impl<T> Factory<T> {
    pub(crate) fn new(
        plan: Plan,
        schedule: Schedule,
        opts: &LoaderOptions,
        transform: Arc<TransformFn<T>>,
    ) -> Result<Self> {
        // Keep what the loader can have alive at once (plus one spare step, for a
        // consumer that holds two), so a steady run recycles everything.
        let steps = opts.max_live_steps() + 1;
        let pool = |pinned: bool| {
            BufPool::new(BufPoolOptions {
                pinned,
                max_free: steps * plan.buffers_per_step(),
                max_free_bytes: usize::MAX,
                ..BufPoolOptions::default()
            })
            .map_err(|source| {
                LoaderError::InvalidOptions(OptionsError::BufferPool { pinned, source })
            })
        };
        let pinned = if plan.any_pinned() {
            Some(pool(true)?)
        } else {
            None
        };
        Ok(Self {
            pageable: pool(false)?,
            pinned,
            tensors: VecPool::new(steps),
            cu_seqlens: VecPool::new(steps * plan.ragged_per_step()),
            shapes: VecPool::new(steps * plan.ragged_per_step()),
            ragged_capacity: plan.streams.iter().map(|_| AtomicUsize::new(0)).collect(),
            plan,
            schedule,
            transform,
            bad_images: BadImages::default(),
        })
    }

    pub(crate) fn scratch(&self) -> Scratch {
        Scratch {
            indices: Vec::with_capacity(self.schedule.batch_size()),
        }
    }

    /// Vectors the loader had to create (a steady run stops increasing it).
    pub(crate) fn vecs_created(&self) -> u64 {
        self.tensors.created() + self.cu_seqlens.created() + self.shapes.created()
    }

    /// Makes step `step`; a panic in the transform becomes an error of the step.
    pub(crate) fn make(&self, step: u64, scratch: &mut Scratch) -> Result<Step<T>> {
        match panic::catch_unwind(AssertUnwindSafe(|| self.make_inner(step, scratch))) {
            Ok(r) => r,
            Err(payload) => {
                let message = payload
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a non-string panic payload".to_string());
                Err(LoaderError::Panicked { step, message })
            }
        }
    }

    fn make_inner(&self, step: u64, scratch: &mut Scratch) -> Result<Step<T>> {
        let indices = &mut scratch.indices;
        self.schedule
            .fill(step, indices)
            .map_err(|source| LoaderError::Sampler { step, source })?;
        let plan = &self.plan;
        // Every step size splits equally into the shards (checked by the plan); an
        // epoch's last step may be shorter than the batch, even empty.
        let shard_len = indices.len() / plan.shards;
        // Image streams are decoded first, shard by shard: a bad record skipped or
        // substituted there changes the records every other stream reads.
        let mut images: Vec<Option<Tensor>> = Vec::new();
        let mut kept: Vec<Vec<u64>> = Vec::new();
        let (mut skipped, mut substituted) = (Vec::new(), Vec::new());
        if plan.any_images() {
            images.resize_with(plan.buffers_per_step(), || None);
            for k in 0..plan.shards {
                let shard = &indices[k * shard_len..(k + 1) * shard_len];
                let decoded = self.decode_shard(step, k, shard, &mut images)?;
                skipped.extend_from_slice(&decoded.skipped);
                substituted.extend_from_slice(&decoded.substituted);
                kept.push(decoded.indices);
            }
            self.bad_images.made(step, skipped.len(), substituted.len());
        }
        let mut tensors = self.tensors.take();
        tensors.vec.reserve(plan.buffers_per_step());
        for (s, stream) in plan.streams.iter().enumerate() {
            for k in 0..plan.shards {
                if let Some(tensor) = images.get_mut(s * plan.shards + k).and_then(Option::take) {
                    tensors.vec.push(tensor);
                    continue;
                }
                let shard = match kept.get(k) {
                    Some(kept) => kept.as_slice(),
                    None => &indices[k * shard_len..(k + 1) * shard_len],
                };
                let tensor = self.gather(s, stream, k, shard, step)?;
                tensors.vec.push(tensor);
            }
        }
        let batch = Batch {
            names: Arc::clone(&plan.names),
            shards: plan.shards,
            tensors,
            skipped,
            substituted,
        };
        let data = (self.transform)(Step { step, data: batch })
            .map_err(|source| LoaderError::Transform { step, source })?;
        Ok(Step { step, data })
    }

    /// Decodes shard `k` (records `indices`) of every image stream into its place of
    /// `images` (stream-major), with the step's epoch, on the engine's pool.
    fn decode_shard(
        &self,
        step: u64,
        k: usize,
        indices: &[u64],
        images: &mut [Option<Tensor>],
    ) -> Result<crate::decode::Decoded> {
        let plan = &self.plan;
        let mut bufs: Vec<(usize, Arc<ImageDecode>, PooledBuf)> = Vec::new();
        for (s, stream) in plan.streams.iter().enumerate() {
            let Kind::Image { decode, .. } = &stream.kind else {
                continue;
            };
            let pool = match (&self.pinned, stream.views[k].is_pinned()) {
                (Some(p), true) => p,
                _ => &self.pageable,
            };
            let bytes = decode.out_bytes() * indices.len();
            let buf = pool
                .get_exact(bytes)
                .map_err(|source| LoaderError::Buffer {
                    step,
                    stream: stream.name.to_string(),
                    shard: k,
                    source,
                })?;
            bufs.push((s, Arc::clone(decode), buf));
        }
        let epoch = self.schedule.epoch(step);
        let streams: Vec<usize> = bufs.iter().map(|(s, _, _)| *s).collect();
        let mut fields: Vec<ImageField<'_>> = bufs
            .iter_mut()
            .map(|(s, decode, buf)| ImageField {
                records: plan.streams[*s].views[k].source(),
                decode,
                out: &mut buf[..],
            })
            .collect();
        let decoded = decode_images(&mut fields, indices, epoch, Pool::global(), &Never).map_err(
            |source| {
                let field = match &source {
                    DecodeError::Image { field, .. } | DecodeError::NoSubstitute { field, .. } => {
                        *field
                    }
                    _ => 0,
                };
                let s = streams.get(field).copied().unwrap_or(0);
                LoaderError::Decode {
                    step,
                    stream: plan.streams[s].name.to_string(),
                    shard: k,
                    source: Box::new(source),
                }
            },
        )?;
        drop(fields);
        let records = decoded.indices.len();
        for (s, _, mut buf) in bufs {
            let stream = &plan.streams[s];
            let Kind::Image { decode, shape } = &stream.kind else {
                continue;
            };
            let shape = if shape.first() == Some(&records) {
                Arc::clone(shape)
            } else {
                buf.truncate(records * decode.out_bytes());
                std::iter::once(records)
                    .chain(decode.item_shape())
                    .collect()
            };
            images[s * plan.shards + k] = Some(Tensor::Dense {
                data: buf,
                shape,
                dtype: stream.dtype,
            });
        }
        Ok(decoded)
    }

    /// Gathers shard `k` (records `indices`) of `stream` (stream `s`) through its
    /// view `k`.
    fn gather(
        &self,
        s: usize,
        stream: &StreamPlan,
        k: usize,
        indices: &[u64],
        step: u64,
    ) -> Result<Tensor> {
        let view = &stream.views[k];
        let pool = match (&self.pinned, view.is_pinned()) {
            (Some(p), true) => p,
            _ => &self.pageable,
        };
        let buffer_err = |source| LoaderError::Buffer {
            step,
            stream: stream.name.to_string(),
            shard: k,
            source,
        };
        let gather_err = |source| LoaderError::Gather {
            step,
            stream: stream.name.to_string(),
            shard: k,
            source,
        };
        let store = view.source();
        match &stream.kind {
            Kind::Dense {
                shard_bytes,
                shape,
                item_bytes,
            } => {
                let full = shape.first() == Some(&indices.len());
                // A short shard (an epoch's last step) has its own size and shape;
                // it is no larger than a full one, so the product cannot overflow.
                let bytes = if full {
                    *shard_bytes
                } else {
                    item_bytes * indices.len()
                };
                let mut data = pool.get_exact(bytes).map_err(buffer_err)?;
                store
                    .gather_until(indices, &mut data, &Never)
                    .map_err(gather_err)?;
                let shape = if full {
                    Arc::clone(shape)
                } else {
                    std::iter::once(indices.len())
                        .chain(shape.iter().skip(1).copied())
                        .collect()
                };
                Ok(Tensor::Dense {
                    data,
                    shape,
                    dtype: stream.dtype,
                })
            }
            // Decoded before the other streams (`decode_shard`); never gathered here.
            Kind::Image { .. } => Err(LoaderError::Panicked {
                step,
                message: format!("image stream {:?} was not decoded", stream.name),
            }),
            Kind::Ragged { ndim } => {
                let mut cu_seqlens = self.cu_seqlens.take();
                let mut shapes = self.shapes.take();
                let mut layout = RaggedLayout {
                    cu_seqlens: std::mem::take(&mut cu_seqlens.vec),
                    shapes: std::mem::take(&mut shapes.vec),
                    values_bytes: 0,
                };
                // The vectors live in `layout` during the gather and go back to their
                // guards afterwards, so they are recycled whether or not it worked.
                let filled = (|| {
                    store
                        .ragged_layout_into(indices, &mut layout)
                        .map_err(gather_err)?;
                    let bytes = layout.values_bytes;
                    let capacity = &self.ragged_capacity[s];
                    let mut want = capacity.load(Ordering::Relaxed);
                    if bytes > want {
                        let grown = bytes.saturating_add(bytes / 2);
                        want = capacity.fetch_max(grown, Ordering::Relaxed).max(grown);
                    }
                    let mut values = pool.get_with_capacity(bytes, want).map_err(buffer_err)?;
                    store
                        .gather_ragged_until(indices, &layout, &mut values, &Never)
                        .map_err(gather_err)?;
                    Ok(values)
                })();
                cu_seqlens.vec = layout.cu_seqlens;
                shapes.vec = layout.shapes;
                let values = filled?;
                Ok(Tensor::Ragged {
                    values,
                    cu_seqlens,
                    shapes,
                    ndim: *ndim,
                    dtype: stream.dtype,
                })
            }
        }
    }
}

//! Making one step: draw the step's records from the schedule, gather every stream of every shard into
//! pooled buffers, run the transform. Shared by the worker threads and by the
//! `workers = 0` mode; holds no lock while it works.

use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;

use crate::batch::{Batch, Step, Tensor};
use crate::error::{LoaderError, OptionsError, Result, TransformError};
use crate::options::LoaderOptions;
use crate::recycle::VecPool;
use crate::schedule::Schedule;
use crate::view::{Kind, Plan, StreamPlan};
use zring_engine::{Never, RaggedLayout};
use zring_platform::{BufPool, BufPoolOptions};

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
            plan,
            schedule,
            transform,
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
        let mut tensors = self.tensors.take();
        tensors.vec.reserve(plan.buffers_per_step());
        for stream in &plan.streams {
            for k in 0..plan.shards {
                let shard = &indices[k * shard_len..(k + 1) * shard_len];
                let tensor = self.gather(stream, k, shard, step)?;
                tensors.vec.push(tensor);
            }
        }
        let batch = Batch {
            names: Arc::clone(&plan.names),
            shards: plan.shards,
            tensors,
        };
        let data = (self.transform)(Step { step, data: batch })
            .map_err(|source| LoaderError::Transform { step, source })?;
        Ok(Step { step, data })
    }

    /// Gathers shard `k` (records `indices`) of `stream` through its view `k`.
    fn gather(&self, stream: &StreamPlan, k: usize, indices: &[u64], step: u64) -> Result<Tensor> {
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
                    let mut values = pool.get(layout.values_bytes).map_err(buffer_err)?;
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

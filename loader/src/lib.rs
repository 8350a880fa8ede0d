//! zring-loader: a step-based, multi-stream prefetching loader over zring stores and
//! the counter-based sampler.
//!
//! Every step `t` draws one global batch from the [`Schedule`]: a [`Sampler`]
//! (`sampler.fill(t)`, endless) or an [`EpochPlan`] (epochs whose last step may be
//! shorter; with `epochs` set a *finite* schedule, after whose last step the loader's
//! `next()` returns `None`); cuts it into one equal
//! contiguous shard per view (placement); gathers every stream of a shard with the
//! same indices, so record `i` of every stream stays together; runs an optional
//! transform; and delivers the step. Because the sampler is a pure function of the
//! step number, workers make steps independently and in parallel, and a run can be
//! resumed exactly with [`Loader::seek`].
//!
//! # Contents
//!
//! - [`Loader`] (`loader`): build with [`Loader::new`] or
//!   [`Loader::with_transform`], iterate (`Iterator<Item = Result<Step<T>>>`), ask
//!   [`Loader::step`], [`Loader::seek`], [`Loader::close`], [`Loader::stats`].
//! - [`Schedule`] (`schedule`): a [`Sampler`] or an [`EpochPlan`]. A short step of
//!   an epoch plan is a smaller batch (dense shape `(n / shards, ...)`); with several
//!   views every step size must split into equal shards, or construction fails with
//!   [`LoaderError::StepNotDivisible`].
//! - [`View`] (`view`): one store at one placement (pageable or pinned buffers).
//! - [`LoaderOptions`], [`Delivery`], [`Lookahead`] (`options`): workers,
//!   prefetch, step or completion order, and how far ahead to read.
//! - `lookahead` (private): the look-ahead depth, from a memory budget, the reads
//!   one step plans into and the device's queue depth.
//! - [`Step`], [`Batch`], [`Tensor`] (`batch`): what a step carries; dense
//!   streams give `(B / shards, *item_shape)` buffers, ragged streams give values,
//!   `cu_seqlens` and shapes. [`PooledVec`] (`recycle`) holds the small vectors.
//! - [`Packer`], [`assemble`] (`pack`): variable-length sequences packed into fixed
//!   `[rows, seq_len]` batches with `cu_seqlens` and `position_ids`, planned from
//!   lengths alone and resumable mid-row from a [`PackState`].
//! - [`ImageDecode`], [`decode_images`] (`decode`): encoded images (JPEG, PNG)
//!   decoded on the read path, on the engine's pool, straight into a dense `u8`
//!   batch; a stream decodes through [`View::decoded`], with the step's epoch.
//! - [`LoaderError`] (`error`): construction errors and per-step failures.
//! - `pipeline` (private): the worker threads and the reorder buffer.
//!
//! # Threads, order and memory
//!
//! `workers` threads claim step numbers with one atomic increment and gather with no
//! lock held (each gather also runs on the engine's pool, the worker working too).
//! Finished steps wait in a buffer of `prefetch` places: in step order (the default)
//! place `i` holds step `next + i`, so delivery follows the step numbers whatever the
//! timing; in completion order it is a queue. A worker holds at most one step, so at
//! most `workers + prefetch` steps are alive besides those the consumer holds.
//! By default ([`Lookahead::Budget`]) `workers` and `prefetch` are sized at
//! construction: enough steps made at once that their reads keep the device's
//! queue (its hardware queue's depth) full across step boundaries, within a memory budget
//! (512 MiB unless set); [`Loader::options`] shows the result.
//! A consumer that finds no step ready makes the next one itself when it has a
//! place in that buffer, instead of sleeping ([`LoaderOptions::consumer_helps`]).
//! With `workers = 0` each step is made in the consumer's thread on demand.
//!
//! Batch buffers come from a [`zring_platform::BufPool`] (64-byte aligned, or
//! page-locked for [`View::pinned`]), and `cu_seqlens`, ragged shapes and each step's
//! list of tensors from small vector pools; all go back when the consumer drops the
//! step, so a steady run allocates nothing per step.
//!
//! # Failures and shutdown
//!
//! A gather, allocation or transform failure (or a transform panic) is delivered at
//! its step, after every earlier step (in completion order: when it completes);
//! iteration then ends, and no later step is started. [`Loader::close`] (or
//! drop) stops and joins every thread promptly, even while workers wait for room or
//! the consumer stopped iterating mid-way: a worker finishes at most its current
//! gather.
//!
//! # Example
//!
//! ```
//! use zring_engine::{DType, ReadOptions, Schema, Store, WriteOptions, Writer};
//! use zring_loader::{Loader, LoaderOptions, Tensor};
//! use zring_sampler::{Mode, Sampler};
//! # let dir = tempfile::tempdir().unwrap();
//!
//! // Two aligned stores of 100 records: u32 labels and ragged int32 token lists.
//! let labels_path = dir.path().join("labels.zr");
//! let mut w = Writer::create(&labels_path, Schema::dense(DType::U32, &[]), WriteOptions::default())?;
//! w.append_dense(&(0..100u32).flat_map(u32::to_le_bytes).collect::<Vec<u8>>())?;
//! w.close()?;
//! let tokens_path = dir.path().join("tokens.zr");
//! let mut w = Writer::create(&tokens_path, Schema::ragged(DType::I32, 1), WriteOptions::default())?;
//! let lens: Vec<u32> = (0..100).map(|i| 1 + i % 5).collect();
//! let mut cu = vec![0u64];
//! for &n in &lens { cu.push(cu[cu.len() - 1] + u64::from(n)); }
//! let values: Vec<u8> = (0..100i32)
//!     .flat_map(|i| std::iter::repeat(i).take(1 + i as usize % 5))
//!     .flat_map(i32::to_le_bytes)
//!     .collect();
//! w.append_ragged(&values, &cu, &lens)?;
//! w.close()?;
//!
//! let labels = Store::open(&labels_path, ReadOptions::default())?;
//! let tokens = Store::open(&tokens_path, ReadOptions::default())?;
//! // Global batch 8, IID; two placements (shards of 4), each with its own views.
//! let sampler = Sampler::new(100, 8, Mode::Iid, 42)?;
//! let streams = [
//!     ("label", vec![labels.clone(), labels]),
//!     ("tokens", vec![tokens.clone(), tokens]),
//! ];
//! let mut loader = Loader::new(streams, sampler, LoaderOptions::new(2, 2))?;
//! for _ in 0..3 {
//!     let step = loader.next().expect("endless")?;
//!     for shard in 0..2 {
//!         let Some(Tensor::Dense { data, shape, .. }) = step.get("label", shard) else { panic!() };
//!         assert_eq!(&shape[..], &[4]);
//!         let tokens = step.get("tokens", shard).expect("stream");
//!         for k in 0..4 {
//!             // The label of record i is i, and record i's tokens are all i.
//!             let label = u32::from_le_bytes(data[4 * k..4 * k + 4].try_into()?);
//!             let first = i32::from_le_bytes(tokens.record(k).expect("record")[..4].try_into()?);
//!             assert_eq!(label as i32, first);
//!         }
//!     }
//! }
//! assert_eq!(loader.step(), 3);
//! loader.close();
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![deny(unsafe_code)]

#[cfg(doc)]
use zring_sampler::{EpochPlan, Sampler};

mod batch;
mod decode;
mod error;
mod loader;
mod lookahead;
mod options;
mod pack;
mod pipeline;
mod produce;
mod recycle;
mod schedule;
mod view;

pub use batch::{Batch, Step, Tensor};
pub use decode::{decode_images, DecodeError, Decoded, ImageDecode, ImageField, OnError};
pub use error::{LoaderError, OptionsError, Result, TransformError};
pub use loader::{Loader, LoaderStats, Pending};
pub use lookahead::DEFAULT_DEVICE_DEPTH;
pub use options::{Delivery, LoaderOptions, Lookahead};
pub use pack::{
    assemble, PackError, PackPlan, PackState, PackStrategy, PackedBatch, PackedLoader,
    PackedReader, Packer, Piece, Token,
};
pub use recycle::PooledVec;
pub use schedule::Schedule;
pub use view::{Source, View};
pub use zring_platform::{BufPool, BufPoolStats, PooledBuf};

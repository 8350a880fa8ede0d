//! zring-platform: the operating-system seams every other zring crate stands on.
//!
//! Nothing here knows about records or stores. It holds:
//!
//! - [`file`](mod@file): positional reads and writes (`pread`/`pwrite` on unix, `seek_read` on
//!   Windows), durable publish helpers (`fsync` of files and directories), and the
//!   read-only [`file::Mapping`] used by the `mmap` backend and for mapped metadata.
//! - [`backend`]: the [`backend::Backend`] choice that the engine's gather path
//!   dispatches on (`pread`, `mmap`; `uring` comes with the io_uring engine).
//! - [`buffer`]: [`buffer::AlignedBuf`], heap buffers with a chosen alignment,
//!   optionally page-locked ("pinned") for DMA.
//! - [`bufpool`]: [`bufpool::BufPool`], a bounded pool that recycles those buffers
//!   by size class (a loader's steady state allocates nothing).
//! - [`shared`]: [`shared::SharedMut`], the one place that lets several worker threads
//!   fill disjoint parts of one caller-owned destination slice.
//! - [`pool`]: [`pool::Pool`], worker threads that help a caller run a batch of tasks
//!   (lock-free claiming and completion; idle workers park).
//! - [`uring`]: batched reads through a per-thread io_uring, with the availability
//!   probe and the one-line fallback notice.
//! - [`oneshot`]: a lock-free one-shot channel whose receiver is a `Future`, for the
//!   engine's runtime-agnostic async API.
//! - [`cpu`]: how many cores to use and how to pin a thread to one.
//! - [`topology`]: [`topology::Placement`], which cores the pool pins its workers to
//!   (NUMA- and SMT-aware with the `hwloc` feature; `ZRING_CORES` overrides).
//!
//! `unsafe` code in zring lives here, each block with a `SAFETY:` comment.

pub mod backend;
pub mod buffer;
pub mod bufpool;
pub mod cpu;
pub mod file;
pub mod oneshot;
pub mod pool;
pub mod process;
pub mod shared;
pub mod topology;
pub mod uring;

pub use backend::Backend;
pub use buffer::AlignedBuf;
pub use bufpool::{BufPool, BufPoolOptions, PooledBuf};
pub use file::Mapping;
pub use pool::Pool;
pub use shared::SharedMut;

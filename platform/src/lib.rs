//! zring-platform: the operating-system seams every other zring crate stands on.
//!
//! Nothing here knows about records or stores. It holds:
//!
//! - [`file`](mod@file): positional reads and writes (`pread`/`pwrite` on unix, `seek_read` on
//!   Windows), durable publish helpers (`fsync` of files and directories), and the
//!   read-only [`file::Mapping`] used by the `mmap` backend and for mapped metadata.
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
//! - [`system`]: the machine's memory and a file's block-device queue depth (what
//!   `auto` and the loader's look-ahead size themselves from).
//! - [`scratch`]: the one keep policy for per-thread read scratch (the io_uring slab
//!   here, the engine's pread/O_DIRECT scratch).
//! - [`cpu`]: how many cores to use and how to pin a thread to one.
//! - [`topology`]: [`topology::Placement`], which cores the pool pins its workers to
//!   (NUMA- and SMT-aware with the `hwloc` feature; `ZRING_CORES` overrides).
//!
//! `unsafe` code in zring lives here, each block with a `SAFETY:` comment.

pub mod buffer;
pub mod bufpool;
pub mod cleanup;
pub mod config;
pub mod cpu;
pub mod faults;
pub mod file;
pub mod hash;
pub mod once;
pub mod oneshot;
pub mod pool;
pub mod process;
pub mod publish;
pub mod scratch;
pub mod shared;
mod sync;
pub mod system;
pub mod topology;
pub mod uring;

pub use buffer::AlignedBuf;
pub use bufpool::{BufPool, BufPoolOptions, PooledBuf};
pub use config::{Config, UringMode};
pub use file::Mapping;
pub use pool::{Pool, PoolHandle};
pub use shared::SharedMut;

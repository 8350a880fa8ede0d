//! zring-platform: the operating-system seams every other zring crate stands on.
//!
//! Nothing here knows about records or stores. The modules are private; this file is
//! the crate's table of contents, and every public item has exactly one path: the
//! crate root. Where a module's short name would be vague at the root (`available`,
//! `Op`, `channel`), the root gives it its full name (`uring_available`, `FsOp`,
//! `oneshot_channel`).
//!
//! `unsafe` code in zring lives here, each block with a `SAFETY:` comment.

mod buffer;
mod bufpool;
mod cleanup;
mod config;
mod cpu;
mod faults;
mod file;
mod hash;
#[cfg(feature = "jpeg")]
mod jpeg;
mod once;
mod oneshot;
mod pool;
mod process;
mod publish;
mod scratch;
mod simd;
mod sync;
mod system;
mod topology;
mod uring;

// Settings: the `ZRING_*` environment read once (threads, pinning, io_uring).
pub use config::{Config, UringMode};

// Files: positional reads and writes (`pread`/`pwrite` on unix, `seek_read` on
// Windows), opening, locking and hints, and the read-only mapping used by the `mmap`
// backend and for mapped metadata.
pub use file::{
    advise_random, lock_exclusive, open_direct, open_regular, read_exact_at, start_writeback,
    write_all_at, FileKind, Mapping, NotRegularFile, DIRECT_ALIGN,
};
// Publishing a file crash-safely (write under a temporary name, fsync, link).
pub use publish::{parent_dir, PendingFile, PublishError};
// Removing temporary files when the process is interrupted or has died.
pub use cleanup::{is_alive as process_is_alive, remove_on_signal, Registered as RemoveOnSignal};

// Buffers: heap buffers with a chosen alignment, optionally page-locked ("pinned")
// for DMA, and a bounded pool recycling them by size class (a loader's steady state
// allocates nothing).
pub use buffer::{try_zeroed_vec, AlignedBuf, DEFAULT_ALIGN};
pub use bufpool::{BufPool, BufPoolOptions, BufPoolStats, PooledBuf};

// Batched reads through a per-thread io_uring, with the availability probe and the
// one-line fallback notice.
pub use uring::{
    available as uring_available, read_batch as uring_read_batch,
    registered_files as uring_registered_files, scratch_registered as uring_scratch_registered,
    thread_ring_ready as uring_thread_ring_ready, unavailable_reason as uring_unavailable_reason,
    with_scratch as with_uring_scratch, ReadBy as UringReadBy, ReadReq,
    RequestFailed as UringRequestFailed, RingFile, MAX_DEPTH as URING_MAX_DEPTH,
};
// The one keep policy for per-thread read scratch (the io_uring slab above, the
// engine's pread/O_DIRECT scratch), and its larger bound for a loader thread's whole
// gathered batch.
pub use scratch::{
    batch_oversized as batch_scratch_oversized, oversized as scratch_oversized,
    KEEP_BYTES as SCRATCH_KEEP_BYTES,
};

// Threads: the worker pool that helps a caller run a batch of tasks (lock-free
// claiming and completion; idle workers park), how many cores to use, and which cores
// the pool pins its workers to (NUMA- and SMT-aware with the `hwloc` feature).
pub use cpu::{available_cores, machine_busy_ticks, process_cpu_time};
pub use pool::{Pool, PoolHandle};
pub use topology::{Basis, CoreListError, Placement};

// The machine: its memory and a file's block-device queue depth (what `auto` and the
// loader's look-ahead size themselves from), and the page cache.
pub use system::{device_queue_depth, evict_from_page_cache, memory_bytes, sync_all};

// Hashing: XXH3-64 of records, fused with the copy where a read copies anyway.
pub use hash::{copy_and_hash, uses_avx2 as xxh3_uses_avx2, xxh3_64, xxh3_64_portable};
pub use simd::{has_avx2, with_avx2};

// JPEG decoding through libjpeg-turbo: the header, then only the region a crop
// needs, optionally downscaled in the DCT domain (feature `jpeg`).
#[cfg(feature = "jpeg")]
pub use jpeg::{JpegDecoder, JpegError, JpegHeader, JpegRegion, JpegScale};

// Fork safety: state that a forked child must not inherit (rings, pool threads), and a
// one-shot channel whose receiver is a `Future` (the engine's runtime-agnostic async
// API).
pub use once::{ForkOnce, InChild};
pub use oneshot::{
    channel as oneshot_channel, Receiver as OneshotReceiver, Sender as OneshotSender,
};
pub use process::generation as fork_generation;

// Test seams: fault injection into the write path's file-system operations and into
// reads. Not for production use.
pub use faults::{
    install as install_fs_hook, install_read as install_read_hook, Hook as FsHook,
    Installed as FsHookGuard, Op as FsOp, ReadFault, ReadHook, ReadInstalled as ReadHookGuard,
    ReadSite,
};

//! Batched positional reads through io_uring, one ring per thread.
//!
//! Each thread that reads owns its ring (single issuer, no sharing, no locks). A batch
//! of reads is kept `depth` deep in the kernel: as each completes, the next is
//! submitted and the caller's `done` callback runs (for example to decompress the
//! record just read) while the other reads are still in flight. Short reads are
//! continued; every read in flight is reaped before `read_batch` returns, so the
//! borrowed buffers are never written after it returns.
//!
//! Rings register what they read ("fixed" files and buffers): each [`RingFile`] the
//! first time a ring reads it, and one scratch slab per thread ([`with_scratch`]) that
//! compressed and O_DIRECT reads land in, so the kernel does not look up the file and
//! pin the pages of every read. `ZRING_URING_REGISTER=0` turns registration off.
//!
//! **The pread fallback is decided here, once, and nowhere above.** Callers that chose
//! io_uring always call [`read_batch`]; it always reads the whole batch. Where io_uring
//! cannot be used it reads the batch with `pread` itself and says so in its
//! [`ReadBy`]:
//!
//! - the process cannot use io_uring (ENOSYS on old kernels, EPERM from seccomp or
//!   `kernel.io_uring_disabled`, a ring whose `io_uring_enter` is refused, or
//!   `ZRING_URING=0`): [`available`] is false for the rest of the process and one
//!   line on stderr says why, once;
//! - the ring fails in the middle of a batch (`io_uring_enter` refused with EPERM,
//!   EACCES, ENOSYS or EINVAL, as when a seccomp profile arrives): the reads the
//!   kernel already took are reaped, the ring is discarded (what is still queued is
//!   never submitted), the rest of that batch is read with `pread`, and the process
//!   is marked as above, so later batches go straight to `pread`;
//! - only this thread cannot make a ring (out of file descriptors, RLIMIT_MEMLOCK):
//!   this batch is read with `pread` and the next one tries again.
//!
//! The engine picks its backend once, at open, and never asks whether io_uring works.

use crate::once::{ForkOnce, InChild};
use crate::AlignedBuf;
use std::cell::RefCell;
use std::io;
use std::sync::atomic::{AtomicU8, Ordering};

#[cfg(target_os = "linux")]
mod drive;
#[cfg(all(test, target_os = "linux"))]
mod fallback_tests;
// The kernel side, chosen once: io_uring on Linux; elsewhere `unsupported.rs`, where
// io_uring is never available and batches are read with pread. Only Linux has rings.
#[cfg_attr(target_os = "linux", path = "linux.rs")]
#[cfg_attr(not(target_os = "linux"), path = "unsupported.rs")]
mod imp;
#[cfg(target_os = "linux")]
mod ring;
mod ring_file;
#[cfg(all(test, target_os = "linux"))]
mod tests;

use imp::{forget_slab, probe, register_slab};
pub use imp::{
    read_batch, registered_files, release_closed, scratch_registered, thread_ring_ready,
};
pub use ring_file::RingFile;

/// The most reads a ring holds in flight (its submission queue size).
pub const MAX_DEPTH: usize = 256;

const UNKNOWN: u8 = 0;
const USABLE: u8 = 1;
const BLOCKED: u8 = 2;
static STATE: AtomicU8 = AtomicU8::new(UNKNOWN);
/// Why io_uring is blocked (set once; a child forked while it was being set sets it
/// anew rather than waiting for a thread it does not have).
static REASON: ForkOnce<String> = ForkOnce::new(InChild::Inherit);

/// A read of a batch failed: which request, and the OS error. Carried inside the
/// `io::Error` that [`read_batch`] returns (same kind), so the
/// caller can name the record the failed read was for.
#[derive(Debug)]
pub struct RequestFailed {
    /// The index of the failed request in the batch.
    pub request: usize,
    /// The error the kernel returned for it.
    pub source: io::Error,
}

impl std::fmt::Display for RequestFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.source)
    }
}

impl std::error::Error for RequestFailed {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// How [`read_batch`] read a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadBy {
    /// Every request through this thread's ring.
    Uring,
    /// Some or all requests with `pread`: io_uring is unavailable to this thread or
    /// failed during the batch (see the module documentation).
    Pread,
}

fn request_failed(request: usize, source: io::Error) -> io::Error {
    io::Error::new(source.kind(), RequestFailed { request, source })
}

/// One read: fill `buf` from `offset`.
pub struct ReadReq<'a> {
    pub buf: &'a mut [u8],
    pub offset: u64,
}

/// Whether io_uring works in this process (probed once; false on non-Linux).
pub fn available() -> bool {
    match STATE.load(Ordering::Acquire) {
        USABLE => true,
        BLOCKED => false,
        _ => probe(),
    }
}

/// Why io_uring is not used, if it is not.
pub fn unavailable_reason() -> Option<&'static str> {
    if available() {
        None
    } else {
        REASON.get().map(String::as_str)
    }
}

/// Stops io_uring use in this process; the first reason given is said once on stderr.
fn block(reason: String) -> bool {
    let mut first = false;
    let r = REASON.get_or_init(|| {
        first = true;
        reason
    });
    if first {
        eprintln!("zring: io_uring unavailable ({r}); reading with pread instead");
    }
    STATE.store(BLOCKED, Ordering::Release);
    false
}

thread_local! {
    /// This thread's scratch slab, registered with its ring as fixed buffer 0.
    static SLAB: RefCell<Option<AlignedBuf>> = const { RefCell::new(None) };
}

/// Whether rings may register files and buffers (`ZRING_URING_REGISTER=0` says no,
/// to measure the difference or to force the unregistered fallback).
fn registration_allowed() -> bool {
    let allowed = crate::Config::global().uring_register;
    if !allowed {
        refuse_buffers("disabled by ZRING_URING_REGISTER=0 or the configuration");
    }
    allowed
}

/// Says once per process that reads go to unregistered buffers, and why.
fn refuse_buffers(reason: &str) {
    static SAID: ForkOnce<()> = ForkOnce::new(InChild::Inherit);
    SAID.get_or_init(|| {
        eprintln!("zring: io_uring buffer registration unavailable ({reason}); reading into unregistered buffers");
    });
}

/// Runs `f` with `len` bytes of this thread's scratch, aligned to 4096 bytes (fit for
/// O_DIRECT) and registered with this thread's ring, so that reads into it skip the
/// kernel's per-read pinning of pages. Where registration is refused
/// (RLIMIT_MEMLOCK), the scratch is used unregistered, after one line on stderr.
///
/// Scratch grown past [`crate::scratch::KEEP_BYTES`] is released after `f` (the keep
/// policy every per-thread read scratch follows), so one huge batch does not hold
/// memory for the life of the thread.
pub fn with_scratch<T>(len: usize, f: impl FnOnce(&mut [u8]) -> T) -> io::Result<T> {
    const ALIGN: usize = crate::file::DIRECT_ALIGN;
    SLAB.with(|cell| {
        let Ok(mut slab) = cell.try_borrow_mut() else {
            // Re-entrant use: a private buffer is correct, only slower.
            let mut own = AlignedBuf::new(len.max(1), ALIGN)?;
            return Ok(f(&mut own[..len]));
        };
        if slab.as_ref().is_none_or(|b| b.len() < len) {
            // Unregister before the memory goes: a read aimed at a stale registration
            // would land in the old pages.
            forget_slab();
            *slab = None;
            let cap = len.checked_next_power_of_two().unwrap_or(len);
            *slab = Some(AlignedBuf::new(cap.max(64 << 10), ALIGN)?);
        }
        let Some(buf) = slab.as_mut() else {
            return Err(io::Error::other("scratch slab missing"));
        };
        register_slab(buf);
        let out = f(&mut buf[..len]);
        if crate::scratch::oversized(buf.len()) {
            forget_slab();
            *slab = None;
        }
        Ok(out)
    })
}

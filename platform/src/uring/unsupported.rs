//! [`crate::uring`] where io_uring does not exist (every OS but Linux): it is never
//! available, there is no ring to register anything with, and a batch is read one
//! `pread` at a time. The same surface as `linux.rs`; `mod.rs` picks one of the two.

use std::fs::File;
use std::io;

use super::{block, request_failed, ReadBy, ReadReq, RingFile};

pub(super) fn probe() -> bool {
    block("io_uring exists only on Linux".into())
}

pub(super) fn register_slab(_buf: &mut [u8]) {}

pub(super) fn forget_slab() {}

pub(super) fn is_direct(_file: &File) -> bool {
    false
}

/// Releases this thread's ring registrations of dropped files: there are none.
pub fn release_closed() {}

/// How many files this thread's ring holds registered: no ring, none.
#[doc(hidden)]
pub fn registered_files() -> usize {
    0
}

/// Whether this thread's ring has its scratch slab registered: no ring, no.
#[doc(hidden)]
pub fn scratch_registered() -> bool {
    false
}

/// Whether this thread has its ring: without io_uring, never.
pub fn thread_ring_ready() -> bool {
    false
}

/// Reads every request of `reqs` completely from `file` with one `pread` each, and
/// calls `done(i, buf)` as request `i` completes (on this thread).
pub fn read_batch(
    file: &RingFile,
    reqs: &mut [ReadReq<'_>],
    _depth: usize,
    mut done: impl FnMut(usize, &mut [u8]) -> io::Result<()>,
) -> io::Result<ReadBy> {
    for (i, r) in reqs.iter_mut().enumerate() {
        crate::file::read_exact_at(file.file(), r.buf, r.offset)
            .map_err(|e| request_failed(i, e))?;
        done(i, r.buf)?;
    }
    Ok(ReadBy::Pread)
}

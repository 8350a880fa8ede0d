//! The kernel side of [`crate::uring`] on Linux: the probe, the thread's ring and its
//! registrations, and batches kept in flight. (`unsupported.rs` is the same surface
//! where io_uring does not exist; `mod.rs` picks one of the two.)

use std::cell::RefCell;
use std::fs::File;
use std::io;
use std::sync::atomic::Ordering;

use super::drive::{drive, Issue, Ramp, Target};
use super::{
    available, block, refuse_buffers, request_failed, ring, ReadBy, ReadReq, RingFile, MAX_DEPTH,
    STATE, USABLE,
};

pub(super) fn probe() -> bool {
    if crate::Config::global().uring == crate::UringMode::Off {
        return block("disabled by ZRING_URING=0 or the configuration".into());
    }
    match io_uring::IoUring::new(8) {
        Ok(mut ring) => match ring::check_enter(&mut ring) {
            Ok(()) => {
                STATE.store(USABLE, Ordering::Release);
                true
            }
            Err(e) => block(format!("io_uring_enter failed: {e}")),
        },
        Err(e) => block(format!("io_uring_setup failed: {e}")),
    }
}

thread_local! {
    /// The current batch's bookkeeping, reused: no allocation per batch once grown.
    static BOOKS: RefCell<Books> = const {
        RefCell::new(Books {
            progress: Vec::new(),
            ready: Vec::new(),
        })
    };
}

/// What [`drive`] keeps per batch.
struct Books {
    /// Bytes done so far per request.
    progress: Vec<u32>,
    /// Completed device reads whose callbacks are still to run.
    ready: Vec<usize>,
}

pub(super) fn register_slab(buf: &mut [u8]) {
    if !available() {
        return;
    }
    if let Ok(Some(e)) = ring::with_ring(|r| Ok(r.register_slab(buf))) {
        refuse_buffers(&format!("io_uring_register: {e}"));
    }
}

pub(super) fn forget_slab() {
    ring::with_existing_ring(ring::ThreadRing::unregister_slab);
}

/// Releases this thread's registrations of files dropped since it last looked (the
/// pool's workers call it whenever they wake).
pub fn release_closed() {
    ring::with_existing_ring(ring::ThreadRing::release_closed);
}

/// How many files this thread's ring holds registered (0 without a ring).
#[doc(hidden)]
pub fn registered_files() -> usize {
    let mut n = 0;
    ring::with_existing_ring(|r| n = r.registered_files());
    n
}

/// Whether this thread's ring has its scratch slab registered.
#[doc(hidden)]
pub fn scratch_registered() -> bool {
    let mut yes = false;
    ring::with_existing_ring(|r| yes = r.slab().is_some());
    yes
}

/// Whether this thread has (or can now create) its ring. A process may be able to
/// create one ring but not one per thread (RLIMIT_MEMLOCK on kernels before 5.12,
/// or out of file descriptors); callers then read with pread on this thread.
pub fn thread_ring_ready() -> bool {
    available() && ring::with_ring(|_| Ok(())).is_ok()
}

/// Reads every request of `reqs` completely from `file`, keeping up to `depth` reads
/// in flight, and calls `done(i, buf)` as request `i` completes (on this thread).
///
/// Where this thread has no ring, or the ring is refused during the batch, the batch
/// is finished with pread and the result says so (the one fallback rule: see the
/// module documentation). A read that hits end of file fails with `UnexpectedEof`;
/// the first error (of a read or of `done`) is returned after every read in flight
/// has been reaped. A panic in `done` is re-raised after the reads in flight have
/// been reaped too, so the kernel never writes into a buffer that has been released.
pub fn read_batch(
    file: &RingFile,
    reqs: &mut [ReadReq<'_>],
    depth: usize,
    mut done: impl FnMut(usize, &mut [u8]) -> io::Result<()>,
) -> io::Result<ReadBy> {
    use std::os::fd::AsRawFd;

    if reqs.iter().any(|r| r.buf.len() > u32::MAX as usize) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a single read is limited to 4 GiB - 1",
        ));
    }
    if !thread_ring_ready() {
        return finish_with_pread(file, reqs, &[], 0, &mut done).map(|()| ReadBy::Pread);
    }
    let depth = depth.clamp(1, MAX_DEPTH);
    let hooks = crate::faults::read_hooks(file.file());
    let mut panicked = None;
    let result = ring::with_ring(|ring| {
        let fd = match ring.file_slot(file) {
            Some(k) => Target::Fixed(k),
            None => Target::Fd(file.file().as_raw_fd()),
        };
        BOOKS.with(|books| {
            let Books { progress, ready } = &mut *books.borrow_mut();
            progress.clear();
            progress.resize(reqs.len(), 0);
            let issue = Issue {
                fd,
                depth,
                ramp: if file.is_direct() {
                    Ramp::Always
                } else {
                    Ramp::Probe
                },
                direct: file.is_direct(),
                hooks: hooks.as_deref(),
            };
            match drive(ring, issue, reqs, progress, ready, &mut done, &mut panicked)? {
                None => Ok(ReadBy::Uring),
                // The ring was refused: the rest of the batch with pread (the ring is
                // discarded and the process marked, see `with_ring`).
                Some(next) => {
                    finish_with_pread(file, reqs, progress, next, &mut done).map(|()| ReadBy::Pread)
                }
            }
        })
    });
    if let Some(payload) = panicked {
        std::panic::resume_unwind(payload);
    }
    result
}

/// Completes with pread the requests of a batch that io_uring did not: those from
/// `next` on, and those before it still short of their length (`progress`; empty
/// when nothing was read through the ring). A failed read names its request, as a
/// failed io_uring read does.
fn finish_with_pread(
    file: &RingFile,
    reqs: &mut [ReadReq<'_>],
    progress: &[u32],
    next: usize,
    done: &mut impl FnMut(usize, &mut [u8]) -> io::Result<()>,
) -> io::Result<()> {
    for (i, r) in reqs.iter_mut().enumerate() {
        let at = progress.get(i).map_or(0, |&p| p as usize);
        if i < next && at == r.buf.len() {
            continue;
        }
        crate::file::read_exact_at(file.file(), &mut r.buf[at..], r.offset + at as u64)
            .map_err(|e| request_failed(i, e))?;
        done(i, r.buf)?;
    }
    Ok(())
}

/// Whether `file` was opened with O_DIRECT.
pub(super) fn is_direct(file: &File) -> bool {
    use std::os::fd::AsRawFd;
    // SAFETY: F_GETFL only reads the status flags of a descriptor we own.
    let flags = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETFL) };
    flags != -1 && flags & libc::O_DIRECT != 0
}

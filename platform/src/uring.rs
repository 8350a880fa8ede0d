//! Batched positional reads through io_uring, one ring per thread.
//!
//! Each thread that reads owns its ring (single issuer, no sharing, no locks). A batch
//! of reads is kept `depth` deep in the kernel: as each completes, the next is
//! submitted and the caller's `done` callback runs (for example to decompress the
//! record just read) while the other reads are still in flight. Short reads are
//! continued; every read in flight is reaped before `read_batch` returns, so the
//! borrowed buffers are never written after it returns.
//!
//! Where io_uring cannot be used (ENOSYS on old kernels, EPERM from seccomp or
//! `kernel.io_uring_disabled`, ENOMEM from RLIMIT_MEMLOCK on older kernels), or when
//! `ZRING_URING=0` is set, [`available`] is false and callers fall back to `pread`;
//! one line on stderr says why, once per process.

use std::cell::RefCell;
use std::fs::File;
use std::io;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::OnceLock;

/// The most reads a ring holds in flight (its submission queue size).
pub const MAX_DEPTH: usize = 256;

const UNKNOWN: u8 = 0;
const USABLE: u8 = 1;
const BLOCKED: u8 = 2;
static STATE: AtomicU8 = AtomicU8::new(UNKNOWN);
static REASON: OnceLock<String> = OnceLock::new();

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

fn block(reason: String) -> bool {
    if REASON.set(reason).is_ok() {
        if let Some(r) = REASON.get() {
            eprintln!("zring: io_uring unavailable ({r}); reading with pread instead");
        }
    }
    STATE.store(BLOCKED, Ordering::Release);
    false
}

#[cfg(target_os = "linux")]
fn probe() -> bool {
    if std::env::var("ZRING_URING").is_ok_and(|v| v == "0" || v.eq_ignore_ascii_case("off")) {
        return block("disabled by ZRING_URING=0".into());
    }
    match io_uring::IoUring::new(8) {
        Ok(_) => {
            STATE.store(USABLE, Ordering::Release);
            true
        }
        Err(e) => block(format!("io_uring_setup failed: {e}")),
    }
}

#[cfg(not(target_os = "linux"))]
fn probe() -> bool {
    block("io_uring exists only on Linux".into())
}

#[cfg(target_os = "linux")]
thread_local! {
    /// This thread's ring and the fork generation that created it: a ring inherited across
    /// `fork` is shared with the parent (completions would cross), so a child makes
    /// its own.
    static RING: RefCell<Option<(u64, io_uring::IoUring)>> = const { RefCell::new(None) };
    /// Bytes done so far per request of the current batch (reused, no allocation
    /// per batch once grown).
    static PROGRESS: RefCell<Vec<u32>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` with this thread's ring, creating it on first use (and anew in a forked
/// child).
#[cfg(target_os = "linux")]
fn with_ring<T>(f: impl FnOnce(&mut io_uring::IoUring) -> io::Result<T>) -> io::Result<T> {
    RING.with(|cell| {
        let mut slot = cell.try_borrow_mut().map_err(|_| {
            io::Error::new(
                io::ErrorKind::WouldBlock,
                "re-entrant io_uring use on one thread",
            )
        })?;
        let generation = crate::process::generation();
        if slot.as_ref().is_none_or(|(owner, _)| *owner != generation) {
            // Dropping an inherited ring only unmaps and closes this process's copy.
            *slot = None;
            *slot = Some((generation, new_ring()?));
        }
        match slot.as_mut() {
            Some((_, ring)) => f(ring),
            None => Err(io::Error::other("io_uring ring missing")),
        }
    })
}

/// A ring for one thread. Only its thread submits and waits, so the kernel may defer
/// completion work to that thread's next wait (`SINGLE_ISSUER | DEFER_TASKRUN`, Linux
/// 6.1) instead of interrupting it; older kernels get a plain ring.
#[cfg(target_os = "linux")]
fn new_ring() -> io::Result<io_uring::IoUring> {
    if std::env::var_os("ZRING_URING_PLAIN").is_none() {
        let tuned = io_uring::IoUring::builder()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .build(MAX_DEPTH as u32);
        if let Ok(ring) = tuned {
            return Ok(ring);
        }
    }
    io_uring::IoUring::new(MAX_DEPTH as u32)
}

/// Whether this thread has (or can now create) its ring. A process may be able to
/// create one ring but not one per thread (RLIMIT_MEMLOCK on kernels before 5.12,
/// or out of file descriptors); callers then read with pread on this thread.
#[cfg(target_os = "linux")]
pub fn thread_ring_ready() -> bool {
    available() && with_ring(|_| Ok(())).is_ok()
}

/// Without io_uring there is no ring to be ready.
#[cfg(not(target_os = "linux"))]
pub fn thread_ring_ready() -> bool {
    false
}

/// Reads every request of `reqs` completely from `file`, keeping up to `depth` reads
/// in flight, and calls `done(i, buf)` as request `i` completes (on this thread).
///
/// A read that hits end of file fails with `UnexpectedEof`; the first error (of a
/// read or of `done`) is returned after every read in flight has been reaped. A panic
/// in `done` is re-raised after the reads in flight have been reaped too, so the
/// kernel never writes into a buffer that has been released.
#[cfg(target_os = "linux")]
pub fn read_batch(
    file: &File,
    reqs: &mut [ReadReq<'_>],
    depth: usize,
    mut done: impl FnMut(usize, &mut [u8]) -> io::Result<()>,
) -> io::Result<()> {
    use std::os::fd::AsRawFd;

    if !available() {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "io_uring is unavailable in this process",
        ));
    }
    if reqs.iter().any(|r| r.buf.len() > u32::MAX as usize) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a single read is limited to 4 GiB - 1",
        ));
    }
    let depth = depth.clamp(1, MAX_DEPTH);
    let fd = io_uring::types::Fd(file.as_raw_fd());
    let mut panicked = None;
    let result = with_ring(|ring| {
        PROGRESS.with(|p| {
            let mut progress = p.borrow_mut();
            progress.clear();
            progress.resize(reqs.len(), 0);
            drive(
                ring,
                fd,
                reqs,
                &mut progress,
                depth,
                &mut done,
                &mut panicked,
            )
        })
    });
    if let Some(payload) = panicked {
        std::panic::resume_unwind(payload);
    }
    result
}

/// Counts reads the kernel still owns. Unwinding while any are in flight would let
/// the caller free buffers the kernel is about to write, so that aborts instead.
#[cfg(target_os = "linux")]
struct InFlight(usize);

#[cfg(target_os = "linux")]
impl Drop for InFlight {
    fn drop(&mut self) {
        if self.0 > 0 {
            eprintln!(
                "zring: unwinding with {} io_uring reads in flight; aborting",
                self.0
            );
            std::process::abort();
        }
    }
}

/// A panic payload carried out of the completion loop.
type Panic = Box<dyn std::any::Any + Send>;

#[cfg(target_os = "linux")]
fn drive(
    ring: &mut io_uring::IoUring,
    fd: io_uring::types::Fd,
    reqs: &mut [ReadReq<'_>],
    progress: &mut [u32],
    depth: usize,
    done: &mut impl FnMut(usize, &mut [u8]) -> io::Result<()>,
    panicked: &mut Option<Panic>,
) -> io::Result<()> {
    use std::panic::{catch_unwind, AssertUnwindSafe};

    let n = reqs.len();
    let mut next = 0usize; // next request never submitted
    let mut retry: Vec<usize> = Vec::new(); // short reads to continue
    let mut inflight = InFlight(0);
    let mut completed = 0usize;
    let mut first_err: Option<io::Error> = None;
    // Runs the callback; a panic stops the batch like an error and is re-raised by
    // the caller once nothing is in flight.
    let mut finish =
        |i: usize, buf: &mut [u8], first_err: &mut Option<io::Error>| match catch_unwind(
            AssertUnwindSafe(|| done(i, buf)),
        ) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => *first_err = Some(e),
            Err(payload) => {
                *panicked = Some(payload);
                *first_err = Some(io::Error::other("a completion callback panicked"));
            }
        };
    while completed < n || inflight.0 > 0 {
        if first_err.is_none() {
            let mut sq = ring.submission();
            while inflight.0 < depth && first_err.is_none() {
                let i = match retry.pop() {
                    Some(i) => i,
                    None if next < n => {
                        next += 1;
                        next - 1
                    }
                    None => break,
                };
                let req = &mut reqs[i];
                let at = progress[i] as usize;
                if at == req.buf.len() {
                    // Zero-length requests need no I/O.
                    completed += 1;
                    finish(i, req.buf, &mut first_err);
                    continue;
                }
                let entry = io_uring::opcode::Read::new(
                    fd,
                    req.buf[at..].as_mut_ptr(),
                    (req.buf.len() - at) as u32,
                )
                .offset(req.offset + at as u64)
                .build()
                .user_data(i as u64);
                // SAFETY: the buffer stays borrowed (through `reqs`) until this
                // function returns, and it does not return (or unwind: see InFlight)
                // before every submitted read has completed.
                if unsafe { sq.push(&entry) }.is_err() {
                    retry.push(i);
                    break;
                }
                inflight.0 += 1;
            }
        }
        if inflight.0 == 0 {
            if completed >= n || first_err.is_some() {
                break;
            }
            continue;
        }
        if let Err(e) = ring.submit_and_wait(1) {
            match e.raw_os_error() {
                // Interrupted, or the kernel is short of resources for a moment:
                // reap what has completed and try again.
                Some(libc::EINTR | libc::EAGAIN | libc::EBUSY) => std::thread::yield_now(),
                // The ring itself failed with reads in flight that can no longer be
                // reaped: their buffers must never be released. Does not happen with
                // a valid ring.
                _ => {
                    eprintln!("zring: io_uring_enter failed with reads in flight: {e}");
                    std::process::abort();
                }
            }
        }
        for cqe in ring.completion() {
            let (user, res) = (cqe.user_data(), cqe.result());
            let i = user as usize;
            if i >= n {
                // Not ours: the ring is shared with someone else. Our reads may be
                // reaped elsewhere, so we can never know when they finish.
                eprintln!("zring: foreign io_uring completion {user}; aborting");
                std::process::abort();
            }
            inflight.0 -= 1;
            if res < 0 {
                let err = io::Error::from_raw_os_error(-res);
                if matches!(
                    err.kind(),
                    io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock
                ) {
                    retry.push(i);
                } else if first_err.is_none() {
                    first_err = Some(err);
                }
                continue;
            }
            if res == 0 {
                if first_err.is_none() {
                    first_err = Some(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!(
                            "file ended before byte {} of a read at offset {}",
                            progress[i], reqs[i].offset
                        ),
                    ));
                }
                continue;
            }
            progress[i] += res as u32;
            if (progress[i] as usize) < reqs[i].buf.len() {
                retry.push(i);
                continue;
            }
            completed += 1;
            if first_err.is_none() {
                finish(i, reqs[i].buf, &mut first_err);
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Without io_uring (non-Linux), batches are read one `pread` at a time.
#[cfg(not(target_os = "linux"))]
pub fn read_batch(
    file: &File,
    reqs: &mut [ReadReq<'_>],
    _depth: usize,
    mut done: impl FnMut(usize, &mut [u8]) -> io::Result<()>,
) -> io::Result<()> {
    for (i, r) in reqs.iter_mut().enumerate() {
        crate::file::read_exact_at(file, r.buf, r.offset)?;
        done(i, r.buf)?;
    }
    Ok(())
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::io::Write;

    /// Reads one buffer at `offset` through this thread's ring.
    fn read_one(f: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
        read_batch(f, &mut [ReadReq { buf, offset }], 4, |_, _| Ok(()))
    }

    fn sample_file(len: usize) -> (File, Vec<u8>) {
        let data: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
        let mut f = tempfile::tempfile().expect("tempfile");
        f.write_all(&data).expect("write");
        (f, data)
    }

    #[test]
    fn batches_of_every_depth_read_exact_bytes() {
        if !available() {
            eprintln!("skipped: {:?}", unavailable_reason());
            return;
        }
        let (f, data) = sample_file(1 << 20);
        for depth in [1usize, 2, 7, 32, 256] {
            let mut bufs: Vec<Vec<u8>> = (0..300).map(|i| vec![0u8; 1 + (i * 97) % 5000]).collect();
            let offsets: Vec<u64> = (0..300).map(|i| ((i * 7919) % 1_000_000) as u64).collect();
            let mut reqs: Vec<ReadReq<'_>> = bufs
                .iter_mut()
                .zip(&offsets)
                .map(|(b, &offset)| ReadReq { buf: b, offset })
                .collect();
            let mut seen = vec![false; 300];
            read_batch(&f, &mut reqs, depth, |i, buf| {
                let o = offsets[i] as usize;
                assert_eq!(buf, &data[o..o + buf.len()]);
                seen[i] = true;
                Ok(())
            })
            .expect("batch");
            assert!(seen.iter().all(|&s| s));
        }
    }

    #[test]
    fn reading_past_the_end_is_an_eof_error_and_drains() {
        if !available() {
            return;
        }
        let (f, _) = sample_file(4096);
        let mut a = vec![0u8; 100];
        let mut b = vec![0u8; 100];
        let mut reqs = vec![
            ReadReq {
                buf: &mut a,
                offset: 0,
            },
            ReadReq {
                buf: &mut b,
                offset: 4050,
            },
        ];
        let err = read_batch(&f, &mut reqs, 8, |_, _| Ok(())).expect_err("eof");
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
    }

    #[test]
    fn a_failing_callback_stops_the_batch_with_its_error() {
        if !available() {
            return;
        }
        let (f, _) = sample_file(1 << 16);
        let mut bufs: Vec<Vec<u8>> = (0..64).map(|_| vec![0u8; 512]).collect();
        let mut reqs: Vec<ReadReq<'_>> = bufs
            .iter_mut()
            .enumerate()
            .map(|(i, b)| ReadReq {
                buf: b,
                offset: i as u64 * 512,
            })
            .collect();
        let err = read_batch(&f, &mut reqs, 16, |i, _| {
            if i == 10 {
                Err(io::Error::other("stop"))
            } else {
                Ok(())
            }
        })
        .expect_err("callback error");
        assert_eq!(err.to_string(), "stop");
    }

    #[test]
    fn a_panicking_callback_is_reraised_after_the_reads_drain() {
        if !available() {
            return;
        }
        let (f, _) = sample_file(1 << 16);
        for _ in 0..3 {
            let result = std::panic::catch_unwind(|| {
                let mut bufs: Vec<Vec<u8>> = (0..64).map(|_| vec![0u8; 1024]).collect();
                let mut reqs: Vec<ReadReq<'_>> = bufs
                    .iter_mut()
                    .enumerate()
                    .map(|(i, b)| ReadReq {
                        buf: b,
                        offset: i as u64 * 1024,
                    })
                    .collect();
                let _ = read_batch(&f, &mut reqs, 32, |i, _| {
                    assert!(i != 5, "callback boom");
                    Ok(())
                });
            });
            assert!(result.is_err());
        }
        // The thread's ring is still sound for the next batch.
        let mut buf = vec![0u8; 16];
        read_one(&f, &mut buf, 0).expect("after a panic");
    }

    #[test]
    fn a_forked_child_gets_its_own_ring() {
        if !available() {
            return;
        }
        let (f, data) = sample_file(8192);
        let mut buf = vec![0u8; 100];
        read_one(&f, &mut buf, 0).expect("parent");
        // SAFETY: the child only reads into a local buffer and exits with _exit; no
        // locks are taken between fork and exit.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let mut b = vec![0u8; 100];
            let ok = read_one(&f, &mut b, 100).is_ok() && b[..] == data[100..200];
            // SAFETY: terminate the child without running the parent's destructors.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        assert!(pid > 0, "fork failed");
        let mut status = 0;
        // SAFETY: waiting for our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "child read failed"
        );
        read_one(&f, &mut buf, 0).expect("parent after fork");
    }

    #[test]
    fn empty_and_zero_length_requests_complete() {
        if !available() {
            return;
        }
        let (f, _) = sample_file(10);
        read_batch(&f, &mut [], 4, |_, _| Ok(())).expect("empty");
        let mut z = Vec::new();
        let mut calls = 0;
        read_batch(
            &f,
            &mut [ReadReq {
                buf: &mut z,
                offset: 3,
            }],
            4,
            |_, _| {
                calls += 1;
                Ok(())
            },
        )
        .expect("zero length");
        assert_eq!(calls, 1);
    }
}

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
    static RING: RefCell<Option<io_uring::IoUring>> = const { RefCell::new(None) };
    /// Bytes done so far per request of the current batch (reused, no allocation
    /// per batch once grown).
    static PROGRESS: RefCell<Vec<u32>> = const { RefCell::new(Vec::new()) };
}

/// Reads every request of `reqs` completely from `file`, keeping up to `depth` reads
/// in flight, and calls `done(i, buf)` as request `i` completes (on this thread).
///
/// A read that hits end of file fails with `UnexpectedEof`; the first error (of a
/// read or of `done`) is returned after every read in flight has been reaped.
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
    RING.with(|cell| {
        let mut slot = cell.try_borrow_mut().map_err(|_| {
            io::Error::new(
                io::ErrorKind::WouldBlock,
                "re-entrant io_uring use on one thread",
            )
        })?;
        if slot.is_none() {
            *slot = Some(io_uring::IoUring::new(MAX_DEPTH as u32)?);
        }
        let ring = slot
            .as_mut()
            .ok_or_else(|| io::Error::other("io_uring ring missing"))?;
        PROGRESS.with(|p| {
            let mut progress = p.borrow_mut();
            progress.clear();
            progress.resize(reqs.len(), 0);
            drive(ring, fd, reqs, &mut progress, depth, &mut done)
        })
    })
}

#[cfg(target_os = "linux")]
fn drive(
    ring: &mut io_uring::IoUring,
    fd: io_uring::types::Fd,
    reqs: &mut [ReadReq<'_>],
    progress: &mut [u32],
    depth: usize,
    done: &mut impl FnMut(usize, &mut [u8]) -> io::Result<()>,
) -> io::Result<()> {
    let n = reqs.len();
    let mut next = 0usize; // next request never submitted
    let mut retry: Vec<usize> = Vec::new(); // short reads to continue
    let mut inflight = 0usize;
    let mut completed = 0usize;
    let mut first_err: Option<io::Error> = None;
    // Zero-length requests need no I/O.
    while completed < n || inflight > 0 {
        if first_err.is_none() {
            let mut sq = ring.submission();
            while inflight < depth {
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
                    completed += 1;
                    if let Err(e) = done(i, req.buf) {
                        first_err = Some(e);
                        break;
                    }
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
                // function returns, and it does not return before every submitted
                // read has completed (the loop runs while inflight > 0).
                if unsafe { sq.push(&entry) }.is_err() {
                    retry.push(i);
                    break;
                }
                inflight += 1;
            }
        } else if inflight == 0 {
            break;
        }
        if inflight == 0 {
            if completed >= n {
                break;
            }
            continue;
        }
        if let Err(e) = ring.submit_and_wait(1) {
            if e.kind() != io::ErrorKind::Interrupted {
                // The ring itself failed: reads may still be in flight and we cannot
                // reap them, so the buffers must not be released. This does not
                // happen with a valid ring; abort rather than risk a use-after-free.
                if inflight > 0 {
                    eprintln!("zring: io_uring_enter failed with reads in flight: {e}");
                    std::process::abort();
                }
                return Err(e);
            }
        }
        for cqe in ring.completion() {
            let (user, res) = (cqe.user_data(), cqe.result());
            inflight -= 1;
            let i = user as usize;
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
                if let Err(e) = done(i, reqs[i].buf) {
                    first_err = Some(e);
                }
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

//! The completion loop of one batch: keep `depth` reads in flight, continue short
//! reads, run the caller's callback for each completed read (for device reads, once
//! the reads that replace it are submitted), and reap everything before returning.

use std::io;

use io_uring::{opcode, squeue, types};

use super::ring::{buffer_index, ThreadRing};
use super::{request_failed, ReadReq};
use crate::faults::{read_fault, ReadFault, ReadHook, ReadSite};

/// Counts reads the kernel still owns. Unwinding while any are in flight would let
/// the caller free buffers the kernel is about to write, so that aborts instead.
struct InFlight(usize);

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
pub(super) type Panic = Box<dyn std::any::Any + Send>;

/// How reads name the file: a fixed-file slot of the ring, or a plain descriptor.
#[derive(Clone, Copy)]
pub(super) enum Target {
    Fixed(u32),
    Fd(std::os::fd::RawFd),
}

/// One read of `len` bytes at `offset` into `ptr`, from registered buffer `buf_index`
/// when the destination lies in the ring's registered slab.
fn read_sqe(
    fd: Target,
    ptr: *mut u8,
    len: u32,
    offset: u64,
    buf_index: Option<u16>,
) -> squeue::Entry {
    match (fd, buf_index) {
        (Target::Fixed(k), Some(b)) => opcode::ReadFixed::new(types::Fixed(k), ptr, len, b)
            .offset(offset)
            .build(),
        (Target::Fd(f), Some(b)) => opcode::ReadFixed::new(types::Fd(f), ptr, len, b)
            .offset(offset)
            .build(),
        (Target::Fixed(k), None) => opcode::Read::new(types::Fixed(k), ptr, len)
            .offset(offset)
            .build(),
        (Target::Fd(f), None) => opcode::Read::new(types::Fd(f), ptr, len)
            .offset(offset)
            .build(),
    }
}

/// The most bytes in flight at once for reads served from the page cache: they
/// complete inside the enter that submits them, and their callbacks (checksums,
/// decompression) run after it; a group larger than the CPU's cache would have its
/// first reads evicted before their callbacks read them again. Device reads
/// (`Ramp::Always`) keep their full queue depth.
const CACHED_BYTES_IN_FLIGHT: usize = 512 << 10;

/// How one batch is issued.
pub(super) struct Issue<'h> {
    pub(super) fd: Target,
    /// The most reads in flight.
    pub(super) depth: usize,
    /// Whether refills are submitted in growing groups (see `drive`).
    pub(super) ramp: Ramp,
    /// The file was opened with O_DIRECT (for the fault seam's report).
    pub(super) direct: bool,
    /// Read-fault hooks a test installed for the file (see `crate::faults`).
    pub(super) hooks: Option<&'h [ReadHook]>,
}

/// How a refill of the queue goes to the kernel.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Ramp {
    /// In groups of 1, 2, 4, ... reads: reads that go to the device.
    Always,
    /// In one enter: reads that complete inside it (page cache hits).
    Never,
    /// The batch's first read goes alone; whether it completed inside its enter
    /// decides between the two for the rest of the batch.
    Probe,
}

/// Runs one batch. `Ok(None)`: every request completed. `Ok(Some(next))`: the kernel
/// refused `io_uring_enter` (see below) and nothing is in flight any more; requests
/// from `next` on were never submitted and those before it that are short of their
/// length were not completed: the caller finishes them with pread.
pub(super) fn drive(
    tr: &mut ThreadRing,
    Issue {
        fd,
        depth,
        mut ramp,
        direct,
        hooks,
    }: Issue<'_>,
    reqs: &mut [ReadReq<'_>],
    progress: &mut [u32],
    ready: &mut Vec<usize>,
    done: &mut impl FnMut(usize, &mut [u8]) -> io::Result<()>,
    panicked: &mut Option<Panic>,
) -> io::Result<Option<usize>> {
    use std::panic::{catch_unwind, AssertUnwindSafe};

    let n = reqs.len();
    let slab = tr.slab();
    let mut next = 0usize; // next request never submitted
    let mut retry: Vec<usize> = Vec::new(); // short reads to continue
    let mut inflight = InFlight(0);
    let mut inflight_bytes = 0usize;
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
    // Device reads whose callbacks have not run yet (see below); the caller's
    // buffer, so a batch allocates nothing once it has grown.
    ready.clear();
    let (submitter, mut sq, mut cq) = tr.ring.split();
    while completed < n || inflight.0 > 0 || !ready.is_empty() {
        if first_err.is_none() {
            sq.sync();
            // Reads that go to the device are submitted in groups of 1, 2, 4, ...
            // rather than in one io_uring_enter: the kernel plugs a multi-read
            // submission, so the device gets none of it until the last read is
            // prepared; the reads then complete together and the queue runs in
            // convoys, full or empty (W4 at QD 32: 0.79x fio in one enter, 0.96-1.00x
            // in groups; cold buffered reads 1.2-1.9x; see docs/benchmarks.md). Reads
            // served from the page cache complete inside the enter, where extra
            // enters only cost (~5%), hence the probe for buffered files.
            let mut group = 1usize;
            let mut unsent = 0usize;
            while inflight.0 < depth
                && first_err.is_none()
                && !(ramp == Ramp::Never && inflight_bytes >= CACHED_BYTES_IN_FLIGHT)
            {
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
                let rest = &mut req.buf[at..];
                let entry = read_sqe(
                    fd,
                    rest.as_mut_ptr(),
                    rest.len() as u32,
                    req.offset + at as u64,
                    buffer_index(slab, rest),
                )
                .user_data(i as u64);
                // SAFETY: the buffer stays borrowed (through `reqs`) until this
                // function returns, and it does not return (or unwind: see InFlight)
                // before every submitted read has completed.
                if unsafe { sq.push(&entry) }.is_err() {
                    retry.push(i);
                    break;
                }
                inflight.0 += 1;
                inflight_bytes += rest.len();
                unsent += 1;
                if ramp != Ramp::Never
                    && unsent == group
                    && inflight.0 < depth
                    && (next < n || !retry.is_empty())
                {
                    sq.sync();
                    // Best effort: whatever stays queued is submitted (and its error
                    // handled) by submit_and_wait below.
                    let _ = submitter.submit();
                    unsent = 0;
                    group *= 2;
                    if ramp == Ramp::Probe {
                        // A completion already there means the read never waited
                        // for the device. (It stays queued for the reaping below.)
                        cq.sync();
                        ramp = if cq.is_empty() {
                            Ramp::Always
                        } else {
                            Ramp::Never
                        };
                    }
                }
            }
            sq.sync();
        }
        if !ready.is_empty() {
            // Device reads completed: the queue was refilled above, so hand the new
            // reads to the kernel first and run the callbacks (checksums,
            // decompression) while the device works on them. Run inside the
            // completion loop, each 128 KiB record's hash left the queue short for
            // its duration: W4 at 128 KiB, checksums on, went from 0.62-0.64x to
            // 0.74-0.78x of fio (docs/benchmarks.md).
            if !sq.is_empty() {
                // Best effort, as for the groups above.
                let _ = submitter.submit();
            }
            for i in ready.drain(..) {
                if first_err.is_none() {
                    finish(i, reqs[i].buf, &mut first_err);
                }
            }
            continue;
        }
        if inflight.0 == 0 {
            if completed >= n || first_err.is_some() {
                break;
            }
            continue;
        }
        let entered = match read_fault(hooks, &ReadSite::Enter) {
            Some(ReadFault::Fail(e)) => Err(e),
            _ => submitter.submit_and_wait(1),
        };
        if let Err(e) = entered {
            sq.sync();
            match e.raw_os_error() {
                // Interrupted, or the kernel is short of resources for a moment:
                // reap what has completed and try again.
                Some(libc::EINTR | libc::EAGAIN | libc::EBUSY) => std::thread::yield_now(),
                // Refused: a seccomp profile that blocks enter, a ring the kernel no
                // longer accepts. The reads the kernel took before this enter are
                // waited for (their buffers are not ours until they complete); then
                // nothing is in flight, the entries still queued are never submitted
                // (the ring is discarded, see `with_ring`) and the caller finishes
                // the batch with pread, re-reading whatever is short.
                Some(code) if refused(code) && reap_taken(&mut cq, n, inflight.0 - sq.len()) => {
                    inflight.0 = 0;
                    tr.enter_refused = Some(io::Error::from_raw_os_error(code));
                    return match first_err {
                        Some(e) => Err(e),
                        None => Ok(Some(next)),
                    };
                }
                // The ring itself failed with reads in flight that can no longer be
                // reaped (or a refused ring never delivered the completions of the
                // reads it took): their buffers must never be released. Does not
                // happen with a valid ring.
                _ => {
                    eprintln!("zring: io_uring_enter failed with reads in flight: {e}");
                    std::process::abort();
                }
            }
        }
        cq.sync();
        for cqe in &mut cq {
            let (user, mut res) = (cqe.user_data(), cqe.result());
            let i = user as usize;
            if i >= n {
                // Not ours: the ring is shared with someone else. Our reads may be
                // reaped elsewhere, so we can never know when they finish.
                eprintln!("zring: foreign io_uring completion {user}; aborting");
                std::process::abort();
            }
            if res > 0 && hooks.is_some() {
                let site = ReadSite::Uring {
                    offset: reqs[i].offset + u64::from(progress[i]),
                    len: reqs[i].buf.len() - progress[i] as usize,
                    direct,
                };
                match read_fault(hooks, &site) {
                    Some(ReadFault::Fail(e)) => res = -e.raw_os_error().unwrap_or(libc::EIO),
                    // The bytes past `k` were read, but the loop continues from `k`
                    // as after a real short read.
                    Some(ReadFault::Short(k)) => res = res.min(k.max(1) as i32),
                    None => {}
                }
            }
            inflight.0 -= 1;
            // What this read asked for (its progress moves below).
            inflight_bytes -= reqs[i].buf.len() - progress[i] as usize;
            if res < 0 {
                let err = io::Error::from_raw_os_error(-res);
                if matches!(
                    err.kind(),
                    io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock
                ) {
                    retry.push(i);
                } else if first_err.is_none() {
                    first_err = Some(request_failed(i, err));
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
                match ramp {
                    // Page-cache reads: the bytes are hot now, and nothing waits on
                    // the device.
                    Ramp::Never => finish(i, reqs[i].buf, &mut first_err),
                    Ramp::Always | Ramp::Probe => ready.push(i),
                }
            }
        }
        // Hand the consumed entries back now: the kernel counts unconsumed ones when
        // deciding whether the next wait may sleep, and would return at once.
        cq.sync();
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(None),
    }
}

/// Whether an `io_uring_enter` error means the ring cannot be used any more (as
/// opposed to EINTR, EAGAIN or EBUSY, which are retried).
fn refused(code: i32) -> bool {
    matches!(
        code,
        libc::EPERM | libc::EACCES | libc::ENOSYS | libc::EINVAL | libc::EOPNOTSUPP
    )
}

/// How long a refused ring is given to deliver the completions of reads it took
/// before the refusal.
const REAP_TAKEN_FOR: std::time::Duration = std::time::Duration::from_secs(10);

/// Waits, without entering the kernel, for the completions of the `taken` reads the
/// kernel accepted before a refused enter (and whose completions are not reaped yet).
/// A ring that does not defer its completion work posts them on its own; one that
/// does (`DEFER_TASKRUN`) cannot without an enter, and then this gives up: false.
/// The completed reads' progress is not counted: the pread that finishes the batch
/// reads them again.
fn reap_taken(cq: &mut io_uring::CompletionQueue<'_>, n: usize, mut taken: usize) -> bool {
    let start = std::time::Instant::now();
    loop {
        cq.sync();
        for cqe in &mut *cq {
            if cqe.user_data() as usize >= n {
                eprintln!(
                    "zring: foreign io_uring completion {}; aborting",
                    cqe.user_data()
                );
                std::process::abort();
            }
            taken = taken.saturating_sub(1);
        }
        cq.sync();
        if taken == 0 {
            return true;
        }
        if start.elapsed() > REAP_TAKEN_FOR {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

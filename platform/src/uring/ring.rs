//! This thread's ring and what it has registered with the kernel: a small table of
//! fixed files and one scratch slab of fixed buffers.
//!
//! Registration is done by the ring's own thread only (a `SINGLE_ISSUER` ring refuses
//! anyone else) and never while a read is in flight: `read_batch` drains every read
//! before it returns, and this module is only entered between batches.

use std::cell::RefCell;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use io_uring::IoUring;

use super::ring_file::{RingFile, CLOSED};
use super::MAX_DEPTH;

/// How many files one ring keeps registered (least recently read ones are replaced).
const FILE_SLOTS: u32 = 64;

thread_local! {
    /// This thread's ring. A ring inherited across `fork` is shared with the parent
    /// (completions would cross), so a child makes its own.
    static RING: RefCell<Option<ThreadRing>> = const { RefCell::new(None) };
}

pub(super) struct ThreadRing {
    /// The fork generation that created the ring.
    generation: u64,
    pub(super) ring: IoUring,
    files: FileTable,
    /// Address and length of the registered buffer (index 0), if any.
    slab: Option<(usize, usize)>,
    /// Registering buffers failed once on this ring (RLIMIT_MEMLOCK): do not retry.
    slab_refused: bool,
    /// `io_uring_enter` was refused with reads still queued (a seccomp profile that
    /// allows setup but not enter): the ring must never be entered again, since the
    /// queued entries point at buffers that are gone. Set by `drive`.
    pub(super) enter_refused: Option<io::Error>,
}

struct FileTable {
    /// Whether new files may be registered: the kernel gave this ring a sparse file
    /// table (Linux 5.19) and has not refused an update.
    enabled: bool,
    slots: Vec<Option<Registered>>,
    /// The value of `CLOSED` when the table was last swept.
    swept: u64,
    /// Counts lookups, to find the least recently used slot.
    clock: u64,
}

struct Registered {
    id: u64,
    open: Arc<AtomicBool>,
    last_used: u64,
}

/// The fixed-buffer index for a read into `buf`, if it lies inside the registered
/// `slab` (`(address, length)`, see [`ThreadRing::slab`]).
pub(super) fn buffer_index(slab: Option<(usize, usize)>, buf: &[u8]) -> Option<u16> {
    let (start, len) = slab?;
    let at = buf.as_ptr() as usize;
    (at >= start && at + buf.len() <= start + len).then_some(0)
}

/// Runs `f` with this thread's ring, creating it on first use (and anew in a forked
/// child).
pub(super) fn with_ring<T>(f: impl FnOnce(&mut ThreadRing) -> io::Result<T>) -> io::Result<T> {
    RING.with(|cell| {
        let mut slot = cell.try_borrow_mut().map_err(|_| {
            io::Error::new(
                io::ErrorKind::WouldBlock,
                "re-entrant io_uring use on one thread",
            )
        })?;
        let generation = crate::process::generation();
        if slot.as_ref().is_none_or(|r| r.generation != generation) {
            // Dropping an inherited ring only unmaps and closes this process's copy.
            *slot = None;
            *slot = Some(ThreadRing::new(generation)?);
        }
        let Some(ring) = slot.as_mut() else {
            return Err(io::Error::other("io_uring ring missing"));
        };
        let out = f(ring);
        if let Some(e) = ring.enter_refused.take() {
            // Dropping the ring unmaps it: what is still queued is never submitted.
            *slot = None;
            super::block(format!("io_uring_enter refused: {e}"));
        }
        out
    })
}

/// Submits one no-op and waits for it: a ring whose setup works may still be refused
/// every `io_uring_enter` (a seccomp profile that blocks only enter), and reads must
/// not be queued on such a ring.
pub(super) fn check_enter(ring: &mut IoUring) -> io::Result<()> {
    let nop = io_uring::opcode::Nop::new().build().user_data(u64::MAX);
    // SAFETY: a no-op references no memory.
    unsafe { ring.submission().push(&nop) }
        .map_err(|_| io::Error::other("a new ring's submission queue is full"))?;
    ring.submit_and_wait(1)?;
    // Reap the no-op, so the first batch sees only its own completions.
    ring.completion().for_each(drop);
    Ok(())
}

/// Runs `f` with this thread's ring if it has a usable one; never creates one.
pub(super) fn with_existing_ring(f: impl FnOnce(&mut ThreadRing)) {
    let _ = RING.try_with(|cell| {
        if let Ok(mut slot) = cell.try_borrow_mut() {
            if let Some(ring) = slot.as_mut() {
                if ring.generation == crate::process::generation() {
                    f(ring);
                }
            }
        }
    });
}

/// A ring for one thread. Only its thread submits and waits, so the kernel may defer
/// completion work to that thread's next wait (`SINGLE_ISSUER | DEFER_TASKRUN`, Linux
/// 6.1) instead of interrupting it; older kernels get a plain ring.
fn new_ring() -> io::Result<IoUring> {
    if crate::Config::global().uring != crate::UringMode::Plain {
        let tuned = IoUring::builder()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .build(MAX_DEPTH as u32);
        if let Ok(ring) = tuned {
            return Ok(ring);
        }
    }
    IoUring::new(MAX_DEPTH as u32)
}

impl ThreadRing {
    fn new(generation: u64) -> io::Result<Self> {
        let mut ring = new_ring().inspect_err(|e| {
            // Refused, not short of resources: no thread of this process will have
            // a ring. (EMFILE, ENOMEM: only this thread, for now.)
            if matches!(
                e.raw_os_error(),
                Some(libc::EPERM | libc::EACCES | libc::ENOSYS | libc::EINVAL)
            ) {
                super::block(format!("io_uring_setup failed: {e}"));
            }
        })?;
        if let Err(e) = check_enter(&mut ring) {
            super::block(format!("io_uring_enter failed: {e}"));
            return Err(e);
        }
        // Pool workers that read let go of closed files' registrations when idle.
        crate::pool::on_idle(super::release_closed);
        let register = super::registration_allowed();
        // A sparse table costs nothing until used; kernels before 5.19 refuse it and
        // the ring reads through plain descriptors.
        let enabled = register && ring.submitter().register_files_sparse(FILE_SLOTS).is_ok();
        let slots = if enabled {
            (0..FILE_SLOTS).map(|_| None).collect()
        } else {
            Vec::new()
        };
        Ok(ThreadRing {
            generation,
            ring,
            files: FileTable {
                enabled,
                slots,
                swept: CLOSED.load(Ordering::Acquire),
                clock: 0,
            },
            slab: None,
            slab_refused: !register,
            enter_refused: None,
        })
    }

    /// The fixed-file slot of `file` in this ring, registering it if needed; `None`
    /// means read through its plain descriptor.
    pub(super) fn file_slot(&mut self, file: &RingFile) -> Option<u32> {
        use std::os::fd::AsRawFd;

        if !self.files.enabled {
            return None;
        }
        self.release_closed();
        let table = &mut self.files;
        table.clock += 1;
        let now = table.clock;
        if let Some(k) = table
            .slots
            .iter()
            .position(|s| s.as_ref().is_some_and(|r| r.id == file.id()))
        {
            if let Some(r) = table.slots[k].as_mut() {
                r.last_used = now;
            }
            return Some(k as u32);
        }
        let k = table.slots.iter().position(Option::is_none).or_else(|| {
            (0..table.slots.len())
                .min_by_key(|&k| table.slots[k].as_ref().map_or(0, |r| r.last_used))
        })?;
        match self
            .ring
            .submitter()
            .register_files_update(k as u32, &[file.file().as_raw_fd()])
        {
            Ok(1) => {
                table.slots[k] = Some(Registered {
                    id: file.id(),
                    open: file.open_flag(),
                    last_used: now,
                });
                Some(k as u32)
            }
            // Out of resources or refused: plain descriptors work as well, a little
            // slower; stop trying on this ring.
            _ => {
                table.enabled = false;
                None
            }
        }
    }

    /// Drops the registrations of files that have been closed since the last sweep.
    pub(super) fn release_closed(&mut self) {
        let closed = CLOSED.load(Ordering::Acquire);
        // Not gated on `enabled`: a table that stopped registering still holds files.
        if closed == self.files.swept {
            return;
        }
        self.files.swept = closed;
        for k in 0..self.files.slots.len() {
            let gone = self.files.slots[k]
                .as_ref()
                .is_some_and(|r| !r.open.load(Ordering::Acquire));
            if gone {
                // -1 empties the slot; the kernel drops its reference to the file.
                let _ = self.ring.submitter().register_files_update(k as u32, &[-1]);
                self.files.slots[k] = None;
            }
        }
    }

    /// How many files this ring holds registered, closed ones included.
    pub(super) fn registered_files(&self) -> usize {
        self.files.slots.iter().filter(|s| s.is_some()).count()
    }

    /// Where the registered slab is: `(address, length)`.
    pub(super) fn slab(&self) -> Option<(usize, usize)> {
        self.slab
    }

    /// Registers `slab` as fixed buffer 0 unless it already is (or this ring cannot).
    /// Returns the error of a refused registration, the first time only.
    pub(super) fn register_slab(&mut self, slab: &mut [u8]) -> Option<io::Error> {
        let region = (slab.as_ptr() as usize, slab.len());
        if self.slab == Some(region) || self.slab_refused {
            return None;
        }
        self.unregister_slab();
        let iov = libc::iovec {
            iov_base: slab.as_mut_ptr().cast(),
            iov_len: slab.len(),
        };
        // SAFETY: the slab stays allocated while registered: `unregister_slab` runs
        // before the scratch is freed or replaced (see `with_scratch`), and reads are
        // only aimed at it while it is borrowed by the caller of `read_batch`.
        match unsafe { self.ring.submitter().register_buffers(&[iov]) } {
            Ok(()) => {
                self.slab = Some(region);
                None
            }
            Err(e) => {
                self.slab_refused = true;
                Some(e)
            }
        }
    }

    /// Forgets the registered slab (before its memory is released).
    pub(super) fn unregister_slab(&mut self) {
        if self.slab.take().is_some() {
            let _ = self.ring.submitter().unregister_buffers();
        }
    }
}

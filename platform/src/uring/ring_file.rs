//! Files that rings may register, and how a ring learns that one was closed.

use std::fs::File;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Bumped each time a [`RingFile`] is dropped: a ring whose last look at it is older
/// has registrations to release.
pub(super) static CLOSED: AtomicU64 = AtomicU64::new(0);
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// An open file that io_uring rings may register ("fixed files": the kernel then skips
/// the per-read lookup and reference count of the file).
///
/// Each thread's ring registers the file the first time it reads it. A registration
/// holds the file open inside the kernel, so dropping a `RingFile` releases it: at
/// once on the dropping thread, within about 100 ms on idle pool workers, and at the
/// next read (or exit) of any other thread that read the file. Until then the space of
/// a deleted file is not freed.
#[derive(Debug)]
pub struct RingFile {
    file: File,
    /// Never reused, unlike the descriptor number: a ring's table is keyed by it, so
    /// a new file that gets an old descriptor number can never hit a stale slot.
    id: u64,
    open: Arc<AtomicBool>,
    /// Opened with O_DIRECT: reads go to the device, never the page cache.
    direct: bool,
}

impl RingFile {
    pub fn new(file: File) -> Self {
        RingFile {
            direct: super::imp::is_direct(&file),
            file,
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            open: Arc::new(AtomicBool::new(true)),
        }
    }

    /// Whether the file was opened with O_DIRECT.
    pub fn is_direct(&self) -> bool {
        self.direct
    }

    /// The file, for reads that do not go through a ring.
    pub fn file(&self) -> &File {
        &self.file
    }

    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(super) fn id(&self) -> u64 {
        self.id
    }

    /// A flag that turns false when this file is dropped.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(super) fn open_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.open)
    }
}

impl Drop for RingFile {
    fn drop(&mut self) {
        self.open.store(false, Ordering::Release);
        CLOSED.fetch_add(1, Ordering::AcqRel);
        super::release_closed();
    }
}

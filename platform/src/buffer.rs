//! Heap buffers with a chosen alignment, optionally page-locked.
//!
//! Engine-owned output (ragged values, Python batches) lives in [`AlignedBuf`] so that
//! consumers may reinterpret it as any dtype (alignment >= 64 covers every element
//! type and a cache line) and so that O_DIRECT and DMA see the alignment they need.

use std::alloc::{self, Layout};
use std::io;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

/// The default alignment: a cache line, and at least every dtype's alignment.
pub const DEFAULT_ALIGN: usize = 64;

/// Buffers at least this large are mapped directly from the OS: the kernel hands out
/// zeroed pages lazily (no memset of the whole buffer up front, as the allocator
/// does for aligned zeroed memory), and on Linux they are marked for transparent
/// huge pages, which makes large gathers into them measurably cheaper (fewer page
/// faults and TLB misses: see docs/engine.md).
const MAPPED_MIN: usize = 2 << 20;

/// A vector of `len` zero bytes, or `None` when the memory cannot be had (instead of
/// aborting the process, as `vec![0; len]` does). Zeroed by the allocator (`calloc`:
/// fresh pages cost nothing until written), so it is as cheap as `vec![0; len]`.
pub fn try_zeroed_vec(len: usize) -> Option<Vec<u8>> {
    if len == 0 {
        return Some(Vec::new());
    }
    let layout = Layout::array::<u8>(len).ok()?;
    // SAFETY: `layout` has a non-zero size (len > 0).
    let ptr = unsafe { alloc::alloc_zeroed(layout) };
    if ptr.is_null() {
        return None;
    }
    // SAFETY: `ptr` was allocated by the global allocator with the layout of `len`
    // u8 (alignment 1, which is what Vec<u8> uses), all `len` bytes are initialised
    // (zeroed), and the capacity is the allocation's size.
    Some(unsafe { Vec::from_raw_parts(ptr, len, len) })
}

/// A zero-initialised, fixed-size byte buffer whose start is aligned to `align`.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
    align: usize,
    pinned: bool,
    /// Mapped with `mmap` (freed with `munmap`) rather than the global allocator.
    mapped: bool,
}

// SAFETY: AlignedBuf owns its allocation exclusively (like Vec<u8>); moving it to another
// thread moves that ownership, and shared references only allow reads.
unsafe impl Send for AlignedBuf {}
// SAFETY: &AlignedBuf only hands out &[u8]; there is no interior mutability.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// A zeroed buffer of `len` bytes aligned to `align` (a power of two).
    pub fn new(len: usize, align: usize) -> io::Result<Self> {
        let layout = layout(len, align)?;
        if let Some(ptr) = map_anonymous(len, align) {
            return Ok(Self {
                ptr,
                len,
                align,
                pinned: false,
                mapped: true,
            });
        }
        let ptr = if len == 0 {
            // A dangling but aligned pointer: a zero-length slice may use it.
            NonNull::new(align as *mut u8).ok_or_else(|| bad("alignment of zero"))?
        } else {
            // SAFETY: the layout has a non-zero size (len > 0).
            let raw = unsafe { alloc::alloc_zeroed(layout) };
            NonNull::new(raw).ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::OutOfMemory,
                    format!("cannot allocate {len} bytes aligned to {align}"),
                )
            })?
        };
        Ok(Self {
            ptr,
            len,
            align,
            pinned: false,
            mapped: false,
        })
    }

    /// A zeroed buffer that is also page-locked (`mlock`), so the kernel never pages it
    /// out and an accelerator can DMA from it. Fails with the OS error (typically
    /// `RLIMIT_MEMLOCK` exceeded) instead of silently returning pageable memory.
    pub fn pinned(len: usize, align: usize) -> io::Result<Self> {
        let mut buf = Self::new(len, align.max(page_size()))?;
        if len > 0 {
            lock(buf.ptr.as_ptr(), len)?;
            buf.pinned = true;
        }
        Ok(buf)
    }

    /// The alignment of the buffer's start.
    pub fn align(&self) -> usize {
        self.align
    }

    /// Whether the buffer is page-locked.
    pub fn is_pinned(&self) -> bool {
        self.pinned
    }
}

impl Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: ptr is valid for len initialised (zeroed) bytes for as long as self
        // lives, or dangling-aligned with len 0.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in deref, and &mut self guarantees exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if self.len == 0 {
            return;
        }
        if self.pinned {
            unlock(self.ptr.as_ptr(), self.len);
        }
        if self.mapped {
            unmap(self.ptr.as_ptr(), self.len);
            return;
        }
        if let Ok(layout) = layout(self.len, self.align) {
            // SAFETY: allocated in `new` with exactly this layout, freed once.
            unsafe { alloc::dealloc(self.ptr.as_ptr(), layout) };
        }
    }
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AlignedBuf")
            .field("len", &self.len)
            .field("align", &self.align)
            .field("pinned", &self.pinned)
            .finish()
    }
}

/// Maps `len` zeroed bytes when the buffer is large and the page alignment covers
/// `align`; `None` means "use the allocator" (small buffer, huge alignment, or the
/// mapping failed).
fn map_anonymous(len: usize, align: usize) -> Option<NonNull<u8>> {
    #[cfg(unix)]
    {
        if len < MAPPED_MIN || align > page_size() {
            return None;
        }
        // SAFETY: an anonymous private mapping at an address of the kernel's choosing;
        // no existing memory is affected. The result is checked against MAP_FAILED.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return None;
        }
        #[cfg(target_os = "linux")]
        // SAFETY: advice on the mapping just created; failure only loses the hint.
        unsafe {
            libc::madvise(ptr, len, libc::MADV_HUGEPAGE);
        }
        NonNull::new(ptr.cast())
    }
    #[cfg(not(unix))]
    {
        let _ = (len, align);
        None
    }
}

fn unmap(ptr: *mut u8, len: usize) {
    #[cfg(unix)]
    // SAFETY: [ptr, ptr + len) is exactly a mapping made by map_anonymous, unmapped once.
    unsafe {
        libc::munmap(ptr.cast(), len);
    }
    #[cfg(not(unix))]
    let _ = (ptr, len);
}

fn bad(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg.to_string())
}

fn layout(len: usize, align: usize) -> io::Result<Layout> {
    if !align.is_power_of_two() {
        return Err(bad("alignment must be a power of two"));
    }
    Layout::from_size_align(len, align).map_err(|_| bad("buffer too large for its alignment"))
}

/// The system page size (4096 where it cannot be asked).
pub fn page_size() -> usize {
    #[cfg(unix)]
    {
        // SAFETY: sysconf only reads a configuration value.
        let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if size > 0 {
            return size as usize;
        }
    }
    4096
}

fn lock(ptr: *mut u8, len: usize) -> io::Result<()> {
    #[cfg(unix)]
    {
        // SAFETY: [ptr, ptr+len) is a live allocation owned by the caller.
        if unsafe { libc::mlock(ptr.cast(), len) } != 0 {
            let err = io::Error::last_os_error();
            return Err(io::Error::new(
                err.kind(),
                format!("cannot pin {len} bytes with mlock ({err}); raise RLIMIT_MEMLOCK (ulimit -l) or use unpinned buffers"),
            ));
        }
        Ok(())
    }
    #[cfg(not(unix))]
    {
        let _ = (ptr, len);
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "pinned buffers are not supported on this platform",
        ))
    }
}

fn unlock(ptr: *mut u8, len: usize) {
    #[cfg(unix)]
    // SAFETY: the range was locked by `lock` and is still allocated.
    unsafe {
        libc::munlock(ptr.cast(), len);
    }
    #[cfg(not(unix))]
    let _ = (ptr, len);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn try_zeroed_vec_is_zeroed_and_refuses_the_impossible() {
        assert_eq!(try_zeroed_vec(0), Some(Vec::new()));
        let v = try_zeroed_vec(100_000).expect("small");
        assert!(v.len() == 100_000 && v.iter().all(|&b| b == 0));
        // black_box: in release builds the optimiser may drop an allocation whose
        // memory is never used, and report success.
        assert!(std::hint::black_box(try_zeroed_vec(usize::MAX / 2)).is_none());
    }

    #[test]
    fn buffers_are_aligned_zeroed_and_writable() {
        for align in [8usize, 64, 4096, 1 << 16] {
            for len in [0usize, 1, 100, 1 << 20, 3 << 20] {
                let mut buf = AlignedBuf::new(len, align).expect("alloc");
                assert_eq!(buf.as_ptr() as usize % align, 0);
                assert_eq!(buf.len(), len);
                assert!(buf.iter().all(|&b| b == 0));
                buf.fill(7);
                assert!(buf.iter().all(|&b| b == 7));
            }
        }
    }

    #[test]
    fn bad_alignment_is_an_error() {
        assert!(AlignedBuf::new(10, 3).is_err());
    }

    #[test]
    fn pinned_buffers_are_locked_by_the_os_or_fail_cleanly() {
        let must_work = zring_testkit::os::pinning_must_work();
        for len in [1usize << 16, 4 << 20] {
            match AlignedBuf::pinned(len, 64) {
                Ok(buf) => {
                    assert!(buf.is_pinned());
                    assert_eq!(buf.as_ptr() as usize % page_size(), 0);
                    // The kernel agrees: the pages are locked.
                    if let Some(locked) = zring_testkit::os::locked_bytes_at(buf.as_ptr() as usize)
                    {
                        assert!(locked >= len as u64, "{locked} bytes locked of {len}");
                    }
                }
                Err(e) => {
                    assert!(
                        !must_work,
                        "pinning must work here (root or a large RLIMIT_MEMLOCK): {e}"
                    );
                    assert!(e.to_string().contains("mlock"), "{e}");
                }
            }
        }
    }
}

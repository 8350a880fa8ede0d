//! Positional file I/O and durable publish, the same on every platform.
//!
//! The engine never seeks: every read and write names its offset, so many threads can
//! share one `File` without a lock.

use std::fs::File;
use std::io;
use std::path::Path;

/// Reads exactly `buf.len()` bytes at `offset`; a file that ends first is an
/// `UnexpectedEof` error (a short read is continued, never returned as success).
pub fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
    }
    #[cfg(windows)]
    {
        let mut done = 0usize;
        while done < buf.len() {
            let n = std::os::windows::fs::FileExt::seek_read(
                file,
                &mut buf[done..],
                offset + done as u64,
            )?;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "file ended before the requested bytes",
                ));
            }
            done += n;
        }
        Ok(())
    }
}

/// Writes all of `buf` at `offset` (a short write is continued).
pub fn write_all_at(file: &File, buf: &[u8], offset: u64) -> io::Result<()> {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::write_all_at(file, buf, offset)
    }
    #[cfg(windows)]
    {
        let mut done = 0usize;
        while done < buf.len() {
            let n = std::os::windows::fs::FileExt::seek_write(
                file,
                &buf[done..],
                offset + done as u64,
            )?;
            if n == 0 {
                return Err(io::Error::new(io::ErrorKind::WriteZero, "write returned 0"));
            }
            done += n;
        }
        Ok(())
    }
}

/// Makes a rename or create inside `dir` durable (`fsync` of the directory). On
/// platforms without directory handles this is a no-op.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        File::open(dir)?.sync_all()
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(())
    }
}

/// Asks the kernel to start writing back the dirty pages of `file` in
/// `offset .. offset + len` now, without waiting for the I/O (Linux
/// `sync_file_range(SYNC_FILE_RANGE_WRITE)`), so the device works while the caller
/// keeps writing instead of all at the final `fsync`. It is only a hint about timing:
/// it makes nothing durable (no metadata, no device cache flush), so it never replaces
/// `sync_all`. A no-op on other platforms and where the file cannot take the hint;
/// other errors (EIO) are returned.
pub fn start_writeback(file: &File, offset: u64, len: u64) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let (Ok(offset), Ok(len)) = (
            libc::off64_t::try_from(offset),
            libc::off64_t::try_from(len),
        ) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "range beyond off64_t",
            ));
        };
        // SAFETY: sync_file_range only reads its integer arguments; the fd is valid for
        // the duration of the call because `file` is borrowed.
        let rc = unsafe {
            libc::sync_file_range(file.as_raw_fd(), offset, len, libc::SYNC_FILE_RANGE_WRITE)
        };
        if rc != 0 {
            let err = io::Error::last_os_error();
            // A file that cannot take the hint (not a regular file, a file system
            // without it) is written back by the final fsync as before.
            return match err.raw_os_error() {
                Some(libc::ESPIPE | libc::ENOSYS | libc::EOPNOTSUPP) => Ok(()),
                _ => Err(err),
            };
        }
        Ok(())
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (file, offset, len);
        Ok(())
    }
}

/// Tells the kernel that reads of `file` will be random, so it does not waste page
/// cache and bandwidth on readahead. Advisory: errors are ignored.
pub fn advise_random(file: &File) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: posix_fadvise only reads its integer arguments; the fd is valid
        // for the duration of the call because `file` is borrowed.
        unsafe {
            libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = file;
}

/// Opens `path` read-only with O_DIRECT (Linux): reads bypass the page cache and must
/// use offsets, lengths and buffer addresses aligned to [`DIRECT_ALIGN`]. Fails with
/// the OS error where the file system does not support it (tmpfs, for example).
pub fn open_direct(path: &Path) -> io::Result<File> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(path)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = path;
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "O_DIRECT reads are only implemented on Linux",
        ))
    }
}

/// The alignment O_DIRECT reads use: offsets, lengths and buffers are multiples of it.
/// 4096 covers every common logical block size (512 and 4096).
pub const DIRECT_ALIGN: usize = 4096;

/// A read-only mapping of a whole file. An empty file maps to an empty slice.
///
/// Stores are immutable once published (they are built under a temporary name and
/// renamed), so the mapped bytes never change under a reader. A file truncated by
/// someone else while mapped raises SIGBUS on access, as with every mmap-based store;
/// the `pread` backend does not touch the data region through the mapping.
pub struct Mapping {
    map: Option<memmap2::Mmap>,
}

impl Mapping {
    /// Maps `file` read-only.
    pub fn new(file: &File) -> io::Result<Self> {
        let len = file.metadata()?.len();
        if len == 0 {
            return Ok(Self { map: None });
        }
        // SAFETY: the mapping is read-only and zring never writes to a published store;
        // the caller opened a file that is only ever replaced by rename, never modified
        // in place (see the type's docs for the truncation caveat).
        let map = unsafe { memmap2::MmapOptions::new().map(file)? };
        Ok(Self { map: Some(map) })
    }

    /// Whether the page holding byte `offset` is resident in the page cache
    /// (`mincore`); `None` where that cannot be asked.
    pub fn is_resident(&self, offset: usize) -> Option<bool> {
        let map = self.map.as_ref()?;
        if offset >= map.len() {
            return None;
        }
        #[cfg(unix)]
        {
            let page = crate::buffer::page_size();
            let start = offset / page * page;
            let mut vec = [0u8; 1];
            // SAFETY: [start, start + 1) lies inside the live mapping (offset < len and
            // the mapping starts page-aligned); `vec` has room for the one page asked.
            let rc = unsafe {
                libc::mincore(
                    map.as_ptr().add(start) as *mut libc::c_void,
                    1,
                    vec.as_mut_ptr().cast(),
                )
            };
            (rc == 0).then_some(vec[0] & 1 == 1)
        }
        #[cfg(not(unix))]
        None
    }

    /// Advises that `range` will be read at random (no readahead on faults).
    /// Advisory: out-of-range parts and errors are ignored.
    pub fn advise_random(&self, range: std::ops::Range<usize>) {
        self.advise(range, true);
    }

    /// Advises that `range` is needed soon and read in order (readahead it now).
    pub fn advise_sequential(&self, range: std::ops::Range<usize>) {
        self.advise(range, false);
    }

    fn advise(&self, range: std::ops::Range<usize>, random: bool) {
        #[cfg(unix)]
        if let Some(map) = &self.map {
            let end = range.end.min(map.len());
            if range.start >= end {
                return;
            }
            let page = crate::buffer::page_size();
            let start = range.start / page * page;
            let len = end - start;
            let advice = if random {
                memmap2::Advice::Random
            } else {
                memmap2::Advice::WillNeed
            };
            let _ = map.advise_range(advice, start, len);
        }
        #[cfg(not(unix))]
        let _ = (range, random);
    }

    /// Hints the CPU to start loading the first `len` bytes (up to 1 KiB) at `offset`
    /// into cache, so a copy that follows does not wait on memory for its first lines.
    /// Out-of-range requests are ignored; it never faults.
    pub fn prefetch(&self, offset: usize, len: usize) {
        let bytes = self.bytes();
        let end = offset.saturating_add(len.min(1024)).min(bytes.len());
        #[cfg(target_arch = "x86_64")]
        for at in (offset..end).step_by(64) {
            // SAFETY: `at` is inside the mapping; a prefetch never faults or writes and
            // only changes what is in the cache.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                    bytes.as_ptr().add(at).cast(),
                )
            };
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = end;
    }

    /// The mapped bytes.
    pub fn bytes(&self) -> &[u8] {
        match &self.map {
            Some(map) => map,
            None => &[],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn positional_round_trip_and_short_file_is_an_error() {
        let mut f = tempfile::tempfile().expect("tempfile");
        f.write_all(b"hello world").expect("write");
        write_all_at(&f, b"W", 6).expect("pwrite");
        let mut buf = [0u8; 5];
        read_exact_at(&f, &mut buf, 6).expect("pread");
        assert_eq!(&buf, b"World");
        let err = read_exact_at(&f, &mut buf, 8).expect_err("past the end");
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
    }

    #[test]
    fn mapping_sees_the_file_and_empty_files_map_empty() {
        let mut f = tempfile::tempfile().expect("tempfile");
        assert!(Mapping::new(&f).expect("map").bytes().is_empty());
        f.write_all(b"abc").expect("write");
        assert_eq!(Mapping::new(&f).expect("map").bytes(), b"abc");
    }

    #[test]
    fn pages_just_written_are_resident() {
        let mut f = tempfile::tempfile().expect("tempfile");
        f.write_all(&vec![1u8; 3 * 4096]).expect("write");
        let map = Mapping::new(&f).expect("map");
        assert_eq!(map.bytes()[5000], 1);
        assert_eq!(map.is_resident(5000), Some(true));
        assert_eq!(map.is_resident(1 << 30), None);
    }

    #[test]
    fn start_writeback_accepts_written_and_unwritten_ranges_and_changes_no_bytes() {
        let mut f = tempfile::tempfile().expect("tempfile");
        f.write_all(&vec![7u8; 3 * 4096]).expect("write");
        start_writeback(&f, 0, 2 * 4096).expect("range just written");
        start_writeback(&f, 1 << 30, 4096).expect("range past the end");
        let mut buf = vec![0u8; 3 * 4096];
        read_exact_at(&f, &mut buf, 0).expect("pread");
        assert!(buf.iter().all(|&b| b == 7));
        #[cfg(target_os = "linux")]
        {
            let err = start_writeback(&f, u64::MAX, 1).expect_err("offset beyond off64_t");
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        }
    }

    #[test]
    fn sync_dir_accepts_a_directory() {
        let dir = tempfile::tempdir().expect("tempdir");
        sync_dir(dir.path()).expect("fsync dir");
    }
}

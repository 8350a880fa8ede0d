//! Positional file I/O and durable publish, the same on every platform.
//!
//! The engine never seeks: every read and write names its offset, so many threads can
//! share one `File` without a lock.

use std::fs::File;
use std::io;
use std::path::Path;

/// Reads exactly `buf.len()` bytes at `offset`; a file that ends first is an
/// `UnexpectedEof` error (a short read is continued, never returned as success).
///
/// EINTR is retried. Reads of a file a test installed a read hook for
/// ([`crate::faults::install_read`]) may be failed or shortened by it.
pub fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    #[cfg(unix)]
    {
        use crate::faults::{read_fault, read_hooks, ReadFault, ReadSite};
        use std::os::unix::fs::FileExt;
        let hooks = read_hooks(file);
        let mut done = 0usize;
        while done < buf.len() {
            let at = offset + done as u64;
            let rest = &mut buf[done..];
            let site = ReadSite::Pread {
                offset: at,
                len: rest.len(),
            };
            let got = match read_fault(hooks.as_deref(), &site) {
                None => file.read_at(rest, at),
                Some(ReadFault::Fail(e)) => Err(e),
                Some(ReadFault::Short(n)) => {
                    let n = n.clamp(1, rest.len());
                    file.read_at(&mut rest[..n], at)
                }
            };
            match got {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "file ended before the requested bytes",
                    ))
                }
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
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

/// What a path that is not a regular file is instead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FileKind {
    Directory,
    /// A named pipe: reading it would block until a writer appears.
    Fifo,
    CharDevice,
    BlockDevice,
    Socket,
    Other,
}

impl FileKind {
    fn of(meta: &std::fs::Metadata) -> Self {
        let t = meta.file_type();
        if t.is_dir() {
            return FileKind::Directory;
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::FileTypeExt;
            if t.is_fifo() {
                return FileKind::Fifo;
            }
            if t.is_char_device() {
                return FileKind::CharDevice;
            }
            if t.is_block_device() {
                return FileKind::BlockDevice;
            }
            if t.is_socket() {
                return FileKind::Socket;
            }
        }
        FileKind::Other
    }
}

impl std::fmt::Display for FileKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FileKind::Directory => "a directory",
            FileKind::Fifo => "a FIFO (named pipe)",
            FileKind::CharDevice => "a character device",
            FileKind::BlockDevice => "a block device",
            FileKind::Socket => "a socket",
            FileKind::Other => "not a regular file",
        })
    }
}

/// The error [`open_regular`] gives for a path that is not a regular file, carried
/// inside an `io::Error` (kind `IsADirectory` for directories, `InvalidInput`
/// otherwise; `get_ref()` downcasts to this).
#[derive(Debug)]
pub struct NotRegularFile {
    pub kind: FileKind,
}

impl std::fmt::Display for NotRegularFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.kind {
            FileKind::Other => write!(f, "not a regular file"),
            kind => write!(f, "it is {kind}, not a regular file"),
        }
    }
}

impl std::error::Error for NotRegularFile {}

/// Opens `path` read-only if it is a regular file (symbolic links followed), and
/// refuses anything else with a [`NotRegularFile`] error, without blocking: a FIFO is
/// opened non-blocking (opening one for reading otherwise waits for a writer, and
/// Ctrl-C does not interrupt that), checked, and closed.
pub fn open_regular(path: &Path) -> io::Result<File> {
    let mut opts = std::fs::OpenOptions::new();
    opts.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.custom_flags(libc::O_NONBLOCK);
    }
    let file = opts.open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        let kind = FileKind::of(&meta);
        let io_kind = match kind {
            FileKind::Directory => io::ErrorKind::IsADirectory,
            _ => io::ErrorKind::InvalidInput,
        };
        return Err(io::Error::new(io_kind, NotRegularFile { kind }));
    }
    #[cfg(unix)]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: F_GETFL/F_SETFL only read and set the status flags of a descriptor
        // we own; clearing O_NONBLOCK makes later reads behave as for File::open.
        let rc = unsafe {
            let fd = file.as_raw_fd();
            let flags = libc::fcntl(fd, libc::F_GETFL);
            if flags == -1 {
                -1
            } else {
                libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK)
            }
        };
        if rc == -1 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(file)
}

/// Takes an exclusive advisory lock on the whole of `file` (`flock(LOCK_EX)`),
/// waiting for another holder to release it. The lock belongs to this open file
/// description and is released when `file` is closed (or its process dies), so two
/// threads that open the same path separately exclude each other too. A no-op
/// elsewhere than unix.
pub fn lock_exclusive(file: &File) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::fd::AsRawFd;
        loop {
            // SAFETY: flock only takes a lock on a descriptor we own (borrowed for
            // the call); it reads and writes no memory of ours.
            let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
            if rc == 0 {
                return Ok(());
            }
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(err);
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = file;
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

/// Renames `from` to `to` only if `to` does not exist, atomically (Linux
/// `renameat2(RENAME_NOREPLACE)`): an existing `to` is `AlreadyExists`. Where the
/// kernel or the file system cannot do it, `Unsupported`.
pub fn rename_noreplace(from: &Path, to: &Path) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        use std::ffi::CString;
        use std::os::unix::ffi::OsStrExt;
        let c = |p: &Path| {
            CString::new(p.as_os_str().as_bytes())
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in a path"))
        };
        let (from_c, to_c) = (c(from)?, c(to)?);
        // SAFETY: renameat2 only reads the two NUL-terminated paths, which live until
        // the call returns; AT_FDCWD makes them relative to the working directory like
        // rename(2).
        let rc = unsafe {
            libc::renameat2(
                libc::AT_FDCWD,
                from_c.as_ptr(),
                libc::AT_FDCWD,
                to_c.as_ptr(),
                libc::RENAME_NOREPLACE,
            )
        };
        if rc == 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP) => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "renaming without replacing is not supported here",
            )),
            _ => Err(err),
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (from, to);
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "renaming without replacing is not supported here",
        ))
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

/// A read-only, shared (`MAP_SHARED`) mapping of a whole file: its pages are the
/// page cache's pages of the file, not copies. An empty file maps to an empty slice.
///
/// The mapped bytes must not change while mapped, and zring maps only files that
/// nobody modifies in place: stores are immutable once published (they are built
/// under a temporary name and renamed), and a `.npy` file being packed is the user's
/// input, which packing without a copy documents as not to be rewritten meanwhile. A
/// file truncated by someone else while mapped raises SIGBUS on access, as with
/// every mmap-based reader (`np.load(mmap_mode='r')` too); the `pread` backend does
/// not touch a store's data region through the mapping.
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

    /// Advises that the whole mapping will be read once, front to back
    /// (`MADV_SEQUENTIAL`: aggressive readahead, pages dropped soon after use).
    /// Advisory: errors are ignored.
    pub fn advise_streaming(&self) {
        #[cfg(unix)]
        if let Some(map) = &self.map {
            let _ = map.advise(memmap2::Advice::Sequential);
        }
    }

    /// Drops the pages wholly inside `range` (rounded inward to pages; out-of-range
    /// parts are ignored) from this process's resident set (`MADV_DONTNEED`), so that
    /// streaming through a file larger than memory keeps a flat RSS. The pages stay in
    /// the page cache, and a later access to the range (through a slice still borrowed
    /// from [`Mapping::bytes`], say) faults the same bytes back in. Best effort: errors
    /// are ignored.
    pub fn release(&self, range: std::ops::Range<usize>) {
        #[cfg(unix)]
        if let Some(map) = &self.map {
            let page = crate::buffer::page_size();
            let start = range.start.next_multiple_of(page);
            let end = range.end.min(map.len()) / page * page;
            if start >= end {
                return;
            }
            // SAFETY: the mapping is read-only and MAP_SHARED, so MADV_DONTNEED only
            // unmaps pages of the page cache from this process: nothing of ours is
            // discarded (a private mapping would lose copy-on-write copies, and this
            // one has none: it is never written), and any later access faults the
            // file's bytes in again, the same bytes as before. Slices borrowed from
            // `bytes()` stay valid. `start..end` is page-aligned and inside the map.
            let _ = unsafe {
                map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, end - start)
            };
        }
        #[cfg(not(unix))]
        let _ = range;
    }

    /// Hints the CPU to start loading the first `len` bytes (up to 4 KiB: a small
    /// record whole, a large one's start) at `offset` into cache, so a copy that
    /// follows does not wait on memory for its lines. Out-of-range requests are
    /// ignored; it never faults.
    pub fn prefetch(&self, offset: usize, len: usize) {
        let bytes = self.bytes();
        let end = offset.saturating_add(len.min(4096)).min(bytes.len());
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
    fn released_pages_read_back_the_same_bytes() {
        let page = crate::buffer::page_size();
        let mut f = tempfile::tempfile().expect("tempfile");
        let data: Vec<u8> = (0..8 * page).map(|k| (k % 251) as u8).collect();
        f.write_all(&data).expect("write");
        let map = Mapping::new(&f).expect("map");
        map.advise_streaming();
        let bytes = map.bytes();
        assert_eq!(bytes, &data[..]);
        // Unaligned and partly out-of-range ranges are rounded inward and clipped; one
        // inside a single page releases nothing.
        map.release(page / 2..3 * page + 1);
        map.release(5 * page..usize::MAX);
        map.release(page + 1..2 * page - 1);
        assert_eq!(bytes, &data[..], "a slice borrowed before the release");
        assert_eq!(map.bytes(), &data[..]);
        Mapping::new(&tempfile::tempfile().expect("tempfile"))
            .expect("map an empty file")
            .release(0..page);
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
    fn rename_noreplace_moves_a_file_and_never_replaces_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (a, b, c) = (
            dir.path().join("a"),
            dir.path().join("b"),
            dir.path().join("c"),
        );
        std::fs::write(&a, b"first").expect("write");
        std::fs::write(&b, b"second").expect("write");
        match rename_noreplace(&a, &b) {
            Err(e) if e.kind() == io::ErrorKind::Unsupported => return,
            Err(e) => assert_eq!(e.kind(), io::ErrorKind::AlreadyExists, "{e}"),
            Ok(()) => panic!("replaced an existing file"),
        }
        assert_eq!(std::fs::read(&b).expect("read"), b"second");
        rename_noreplace(&a, &c).expect("a free name");
        assert!(!a.exists());
        assert_eq!(std::fs::read(&c).expect("read"), b"first");
    }

    #[test]
    fn sync_dir_accepts_a_directory() {
        let dir = tempfile::tempdir().expect("tempdir");
        sync_dir(dir.path()).expect("fsync dir");
    }
    #[test]
    fn open_regular_refuses_what_is_not_a_regular_file_without_blocking() {
        let dir = tempfile::tempdir().expect("tempdir");
        let err = open_regular(dir.path()).expect_err("a directory");
        assert_eq!(err.kind(), io::ErrorKind::IsADirectory);
        let kind = |e: &io::Error| {
            e.get_ref()
                .and_then(|e| e.downcast_ref::<NotRegularFile>())
                .map(|n| n.kind)
        };
        assert_eq!(kind(&err), Some(FileKind::Directory));
        assert!(err.to_string().contains("a directory"), "{err}");
        #[cfg(unix)]
        {
            let fifo = dir.path().join("pipe");
            let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).expect("path");
            // SAFETY: mkfifo reads a NUL-terminated path that lives for the call.
            assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
            // With no writer, a blocking open would never return (the test would hang).
            let err = open_regular(&fifo).expect_err("a FIFO");
            assert_eq!(kind(&err), Some(FileKind::Fifo));
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
            let err = open_regular(Path::new("/dev/null")).expect_err("a device");
            assert_eq!(kind(&err), Some(FileKind::CharDevice));
            assert!(err.to_string().contains("character device"), "{err}");
        }
        let f = dir.path().join("f");
        std::fs::write(&f, b"abc").expect("write");
        let file = open_regular(&f).expect("a regular file");
        let mut buf = [0u8; 3];
        read_exact_at(&file, &mut buf, 0).expect("read");
        assert_eq!(&buf, b"abc");
    }
}

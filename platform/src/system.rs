//! What the machine offers a reader: how much memory it has, and how many requests
//! the block device under a file queues at once. Both are read from Linux's
//! `/proc` and `/sys` files; elsewhere (or where they cannot be read) the answer is
//! `None` and callers use their defaults.

use std::fs::File;
use std::path::PathBuf;

/// Total physical memory in bytes (`MemTotal` of `/proc/meminfo`), or the limit of
/// this process's memory cgroup when that is lower.
pub fn memory_bytes() -> Option<u64> {
    let total = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| meminfo_field(&s, "MemTotal"));
    let cgroup = std::fs::read_to_string("/sys/fs/cgroup/memory.max")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok());
    match (total, cgroup) {
        (Some(t), Some(c)) => Some(t.min(c)),
        (t, c) => t.or(c),
    }
}

/// A `/proc/meminfo` field (given in kB) in bytes.
fn meminfo_field(text: &str, name: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let rest = line.strip_prefix(name)?.strip_prefix(':')?;
        let kb: u64 = rest.trim().trim_end_matches("kB").trim().parse().ok()?;
        Some(kb.saturating_mul(1024))
    })
}

/// How many requests the block device holding `file` queues at once
/// (`queue/nr_requests` of the device, or of the whole disk for a partition):
/// the most reads it is worth keeping in flight. `None` for files not on a block
/// device (tmpfs, network file systems) or off Linux.
pub fn device_queue_depth(file: &File) -> Option<usize> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::MetadataExt;
        let dev = file.metadata().ok()?.dev();
        // The kernel's dev_t encoding (glibc's gnu_dev_major / gnu_dev_minor).
        let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
        let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
        let base = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
        // A partition has no queue of its own: its parent directory is the disk.
        [
            base.join("queue/nr_requests"),
            base.join("../queue/nr_requests"),
        ]
        .iter()
        .find_map(|p| std::fs::read_to_string(p).ok())
        .and_then(|s| s.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = file;
        None
    }
}

/// Writes `file`'s dirty pages and drops all its pages from the page cache
/// (`posix_fadvise(POSIX_FADV_DONTNEED)`), so the next reads come from the device:
/// how tests and benchmarks make one file cold without dropping every cache on the
/// machine. A no-op off Linux.
pub fn evict_from_page_cache(file: &File) -> std::io::Result<()> {
    file.sync_data()?;
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::io::AsRawFd;
        // SAFETY: posix_fadvise only reads its integer arguments; the descriptor is
        // open for the whole call because `file` is borrowed.
        let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        if rc != 0 {
            return Err(std::io::Error::from_raw_os_error(rc));
        }
    }
    Ok(())
}

/// Writes every dirty page of every file system to its device (`sync(2)`), as a
/// benchmark does before it drops the page cache. A no-op off unix.
pub fn sync_all() {
    #[cfg(unix)]
    // SAFETY: sync(2) takes no arguments, touches no memory of this process and
    // cannot fail.
    unsafe {
        libc::sync()
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sync_all_returns_and_leaves_files_readable() {
        let mut f = tempfile::NamedTempFile::new().expect("temp file");
        std::io::Write::write_all(&mut f, b"synced").expect("write");
        sync_all();
        assert_eq!(std::fs::read(f.path()).expect("read back"), b"synced");
    }

    #[test]
    fn meminfo_fields_parse_in_bytes() {
        let text = "MemTotal:       16318412 kB\nCached:          1024 kB\n";
        assert_eq!(meminfo_field(text, "MemTotal"), Some(16318412 * 1024));
        assert_eq!(meminfo_field(text, "Cached"), Some(1024 * 1024));
        assert_eq!(meminfo_field(text, "SwapCached"), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_machine_reports_memory_and_a_file_on_tmpfs_or_disk_does_not_crash() {
        assert!(memory_bytes().is_some_and(|m| m > 0));
        let f = tempfile::tempfile().expect("temp file");
        // On a block device a positive depth, elsewhere none: both are fine.
        if let Some(d) = device_queue_depth(&f) {
            assert!(d > 0);
        }
    }
}

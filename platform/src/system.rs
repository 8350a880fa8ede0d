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

/// How many reads the block device holding `file` works on at once: the most reads
/// it is worth keeping in flight. That is the hardware queue's depth (`nr_tags` of a
/// blk-mq hardware queue), capped by what the I/O scheduler queues per hardware
/// queue (`queue/nr_requests`); reads beyond the hardware's tags wait in the
/// scheduler, adding latency and buffers and no throughput (a virtio disk with 128
/// tags and `nr_requests` 256 reads no faster with 256 in flight than with 128).
/// A partition's queue is its disk's. `None` for files not on a block device (tmpfs,
/// network file systems) or off Linux.
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
        [base.clone(), base.join("..")]
            .iter()
            .find_map(|disk| disk_queue_depth(disk))
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = file;
        None
    }
}

/// The depth of the disk whose sysfs directory is `disk`: the deepest hardware
/// queue's `mq/*/nr_tags`, no more than `queue/nr_requests`; either alone where the
/// other is missing (a device without blk-mq hardware queues, or a scheduler-less
/// view), `None` where neither is readable.
fn disk_queue_depth(disk: &std::path::Path) -> Option<usize> {
    let read = |p: PathBuf| {
        std::fs::read_to_string(p)
            .ok()
            .and_then(|s| s.trim().parse::<usize>().ok())
            .filter(|&n| n > 0)
    };
    let requests = read(disk.join("queue/nr_requests"));
    let tags = std::fs::read_dir(disk.join("mq"))
        .ok()
        .into_iter()
        .flatten()
        .filter_map(|e| read(e.ok()?.path().join("nr_tags")))
        .max();
    match (requests, tags) {
        (Some(r), Some(t)) => Some(r.min(t)),
        (r, t) => r.or(t),
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

    /// Writes `files` (path relative to the disk directory, contents) under a
    /// fresh directory standing for `/sys/dev/block/M:N`.
    fn fake_disk(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("temp dir");
        for (path, text) in files {
            let p = dir.path().join(path);
            std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            std::fs::write(p, text).expect("write");
        }
        dir
    }

    #[test]
    fn the_depth_is_the_hardware_queue_capped_by_the_scheduler() {
        // A virtio disk: 128 tags, mq-deadline queueing 256.
        let virtio = fake_disk(&[("queue/nr_requests", "256\n"), ("mq/0/nr_tags", "128\n")]);
        assert_eq!(disk_queue_depth(virtio.path()), Some(128));
        // An NVMe drive with a queue per core: one queue's depth, not their sum.
        let nvme = fake_disk(&[
            ("queue/nr_requests", "1023\n"),
            ("mq/0/nr_tags", "1023\n"),
            ("mq/1/nr_tags", "1023\n"),
        ]);
        assert_eq!(disk_queue_depth(nvme.path()), Some(1023));
        // A scheduler queueing less than the hardware takes.
        let capped = fake_disk(&[("queue/nr_requests", "64\n"), ("mq/0/nr_tags", "256\n")]);
        assert_eq!(disk_queue_depth(capped.path()), Some(64));
    }

    #[test]
    fn a_missing_or_unreadable_figure_falls_back_to_the_other_or_none() {
        let no_mq = fake_disk(&[("queue/nr_requests", "256\n")]);
        assert_eq!(disk_queue_depth(no_mq.path()), Some(256));
        let no_requests = fake_disk(&[("mq/0/nr_tags", "32\n")]);
        assert_eq!(disk_queue_depth(no_requests.path()), Some(32));
        let garbage = fake_disk(&[("queue/nr_requests", "many\n"), ("mq/0/nr_tags", "0\n")]);
        assert_eq!(disk_queue_depth(garbage.path()), None);
        let empty = fake_disk(&[]);
        assert_eq!(disk_queue_depth(empty.path()), None);
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

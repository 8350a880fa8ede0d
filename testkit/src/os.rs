//! What the OS says about this process, for tests that check behaviour rather than a
//! library's own account of it.

/// The number on the line of a `/proc` "Key:   value kB" text (status, smaps,
/// smaps_rollup) that starts with `key` (with its colon): the first such line.
pub fn kib_field(text: &str, key: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(key))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Bytes of the mapping that contains `addr` that are locked in memory (`mlock`), from
/// `/proc/self/smaps` (Linux); `None` where that file does not exist.
pub fn locked_bytes_at(addr: usize) -> Option<u64> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
    let mut inside = false;
    for line in smaps.lines() {
        if let Some((range, _)) = line.split_once(' ') {
            if let Some((lo, hi)) = range.split_once('-') {
                if let (Ok(lo), Ok(hi)) =
                    (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
                {
                    inside = (lo..hi).contains(&addr);
                    continue;
                }
            }
        }
        if inside && line.starts_with("Locked:") {
            return kib_field(line, "Locked:").map(|k| k * 1024);
        }
    }
    Some(0)
}

/// Whether `mlock` of a few MiB must succeed here: the process may lock memory
/// without limit (root has CAP_IPC_LOCK) or its RLIMIT_MEMLOCK allows 16 MiB.
/// Where it need not, a test accepts the clear error instead.
#[cfg(unix)]
pub fn pinning_must_work() -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid out-pointer for getrlimit.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut lim) } == 0;
    ok && (lim.rlim_cur == libc::RLIM_INFINITY || lim.rlim_cur >= 16 << 20)
}

/// The process's anonymous resident memory (`Anonymous:` of
/// `/proc/self/smaps_rollup`, Linux); `None` where that file does not exist.
pub fn anonymous_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/smaps_rollup").ok()?;
    kib_field(&text, "Anonymous:").map(|k| k * 1024)
}

/// Limits this process's address space to `bytes` more than it uses now
/// (`RLIMIT_AS`), so that a test can make large allocations fail. Returns the limit.
#[cfg(target_os = "linux")]
pub fn limit_address_space_to_current_plus(bytes: u64) -> std::io::Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let kib = kib_field(&status, "VmSize:")
        .ok_or_else(|| std::io::Error::other("no VmSize in /proc/self/status"))?;
    let limit = kib * 1024 + bytes;
    let rl = libc::rlimit {
        rlim_cur: limit,
        rlim_max: limit,
    };
    // SAFETY: setrlimit reads the struct, which lives on this stack for the call.
    if unsafe { libc::setrlimit(libc::RLIMIT_AS, &rl) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(limit)
}

#[cfg(test)]
mod tests {
    use super::kib_field;

    #[test]
    fn proc_fields_are_parsed() {
        let status = "Name:\tsoak\nVmRSS:\t  123456 kB\nThreads:\t21\nLocked:  0 kB\n";
        assert_eq!(kib_field(status, "VmRSS:"), Some(123_456));
        assert_eq!(kib_field(status, "Threads:"), Some(21));
        assert_eq!(kib_field(status, "Locked:"), Some(0));
        assert_eq!(kib_field(status, "VmSwap:"), None);
        assert_eq!(kib_field("VmRSS: lots kB\n", "VmRSS:"), None);
    }
}

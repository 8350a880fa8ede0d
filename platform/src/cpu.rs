//! How many cores to use, pinning a thread to one, and how busy the machine is.

/// The number of cores this process may run on (at least 1).
pub fn available_cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// Pins the current thread to core `id` (an OS CPU number, as in
/// [`crate::topology::Placement::cores`]). Returns whether the OS accepted it; pinning
/// is an optimisation, never a requirement, so failure is not an error.
pub fn pin_current_thread_to_core(id: usize) -> bool {
    core_affinity::set_for_current(core_affinity::CoreId { id })
}

/// Busy time of every core of the machine so far, in `/proc/stat` ticks (USER_HZ,
/// which Linux fixes at 100 per second): everything but idle and iowait. Two
/// readings around a benchmark, minus the process's own CPU time, tell how much
/// other processes ran meanwhile. `None` where `/proc/stat` is unavailable.
pub fn machine_busy_ticks() -> Option<u64> {
    busy_ticks(&std::fs::read_to_string("/proc/stat").ok()?)
}

/// Busy ticks from the `cpu` line of `/proc/stat` text (guest time is already
/// inside user).
pub fn busy_ticks(stat: &str) -> Option<u64> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal [guest guest_nice]
    let total: u64 = v.iter().take(8).sum();
    Some(total.saturating_sub(*v.get(3)? + *v.get(4)?))
}

/// User + system CPU time of the whole process so far (all threads), from
/// `getrusage(RUSAGE_SELF)`; `None` where that is unavailable.
pub fn process_cpu_time() -> Option<std::time::Duration> {
    #[cfg(unix)]
    {
        use std::time::Duration;
        let mut usage = std::mem::MaybeUninit::<libc::rusage>::uninit();
        // SAFETY: getrusage writes one whole rusage into the pointer it is given, which
        // points at writable memory of that type for the duration of the call.
        let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
        if rc != 0 {
            return None;
        }
        // SAFETY: getrusage returned 0, so it initialised `usage`.
        let usage = unsafe { usage.assume_init() };
        let tv = |t: libc::timeval| {
            Duration::from_secs(t.tv_sec.max(0) as u64)
                + Duration::from_micros(t.tv_usec.max(0) as u64)
        };
        Some(tv(usage.ru_utime) + tv(usage.ru_stime))
    }
    #[cfg(not(unix))]
    {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn process_cpu_time_counts_work_done_and_never_goes_back() {
        let before = process_cpu_time().expect("getrusage works on unix");
        // Spin until the clock has visibly moved (its resolution is a few ms at worst).
        let mut x = 0u64;
        let started = std::time::Instant::now();
        while process_cpu_time().expect("getrusage") <= before {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(1));
            assert!(started.elapsed().as_secs() < 30, "CPU time did not advance");
        }
        assert!(process_cpu_time().expect("getrusage") >= before);
    }

    #[test]
    fn busy_ticks_exclude_idle_and_iowait() {
        let stat = "cpu  100 5 50 1000 20 3 2 1 0 0\ncpu0 1 1 1 1 1 1 1 1 0 0\n";
        assert_eq!(busy_ticks(stat), Some(100 + 5 + 50 + 3 + 2 + 1));
        assert_eq!(busy_ticks("intr 1 2"), None);
        if cfg!(target_os = "linux") {
            assert!(machine_busy_ticks().is_some());
        }
    }

    /// The CPUs this thread may run on, as the kernel reports them.
    #[cfg(target_os = "linux")]
    fn allowed_cpus() -> Vec<usize> {
        // SAFETY: an all-zero cpu_set_t is a valid empty set; sched_getaffinity writes
        // at most size_of::<cpu_set_t>() bytes into it.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            let rc = libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set);
            assert_eq!(
                rc,
                0,
                "sched_getaffinity: {}",
                std::io::Error::last_os_error()
            );
            (0..libc::CPU_SETSIZE as usize)
                .filter(|&c| libc::CPU_ISSET(c, &set))
                .collect()
        }
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn available_cores_is_at_most_the_affinity_mask() {
        // available_parallelism also honours cgroup quotas, so it may be smaller.
        let cores = available_cores();
        assert!(cores >= 1 && cores <= allowed_cpus().len(), "{cores}");
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn pinning_confines_the_thread_to_that_core() {
        let cpus = allowed_cpus();
        for k in [0usize, 1, cpus.len() + 1] {
            let want = cpus[k % cpus.len()];
            let got = std::thread::spawn(move || {
                assert!(pin_current_thread_to_core(want));
                allowed_cpus()
            })
            .join()
            .expect("thread");
            assert_eq!(got, vec![want], "pin_current_thread_to_core({want})");
        }
    }
}

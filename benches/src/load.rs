//! How busy the rest of the machine was while a benchmark ran: on a shared 2-core box
//! a 2-thread figure means little if another process held the second core.

use std::time::Instant;

/// `/proc/stat` and `/proc/self/stat` count in USER_HZ, which Linux fixes at 100.
const TICKS_PER_SECOND: f64 = 100.0;

/// CPU time used by the whole machine and by this process, at one instant.
#[derive(Clone, Copy, Debug)]
pub struct CpuSnapshot {
    at: Instant,
    machine_busy_ticks: u64,
    process_ticks: u64,
}

impl CpuSnapshot {
    /// Reads the counters; `None` where `/proc` is not available.
    pub fn now() -> Option<Self> {
        let me = std::fs::read_to_string("/proc/self/stat").ok()?;
        Some(Self {
            at: Instant::now(),
            machine_busy_ticks: zring_platform::machine_busy_ticks()?,
            process_ticks: process_cpu(&me)?,
        })
    }

    /// Average number of cores that other processes kept busy between `self` and
    /// `later`; `None` for an interval too short to say.
    pub fn other_cores(&self, later: &Self) -> Option<f64> {
        let secs = later.at.duration_since(self.at).as_secs_f64();
        if secs < 0.5 {
            return None;
        }
        let busy = later
            .machine_busy_ticks
            .saturating_sub(self.machine_busy_ticks);
        let ours = later.process_ticks.saturating_sub(self.process_ticks);
        Some(busy.saturating_sub(ours) as f64 / TICKS_PER_SECOND / secs)
    }
}

/// utime + stime (fields 14 and 15) of `/proc/self/stat`; the command name in
/// parentheses may hold spaces, so fields are counted after its closing parenthesis.
fn process_cpu(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state): utime is field 14, stime field 15.
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_ticks_survive_spaces_in_the_command_name() {
        let stat = "42 (my bench (x)) R 1 42 42 0 -1 0 0 0 0 0 70 30 0 0 20 0 1 0";
        assert_eq!(process_cpu(stat), Some(100));
    }

    #[test]
    fn snapshots_of_this_machine_read_when_proc_exists() {
        if std::path::Path::new("/proc/stat").exists() {
            let a = CpuSnapshot::now().expect("snapshot");
            assert!(a.other_cores(&a).is_none(), "a zero interval says nothing");
        }
    }
}

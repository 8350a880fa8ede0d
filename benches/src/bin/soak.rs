//! `soak`: the loader plus random gets from many threads over an O_DIRECT store
//! several times the process's memory limit, for half an hour, every byte checked;
//! resident memory, file descriptors and threads must stay flat. A benchmark tool,
//! not a CI test: docs/testing.md ("Soak") has the command and the recorded figures.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use zring_benches::soak::records::Params;
use zring_benches::soak::run::{soak, Config};
use zring_benches::SEED;

const LONG_ABOUT: &str = "\
Runs one loader iterating shuffled batches and --getters threads each doing
Store::get of random records, over a store read with O_DIRECT, for --minutes.
Every record read is compared with the bytes its index generates. Each period
(a minute) it prints get latency p50/p99/p99.9/max, gets/s and loader records/s;
every --sample-secs it samples VmRSS, open file descriptors and threads.

At the end it checks that after the first period (warm-up) RSS stays within 5%
(max over min), the fd and thread counts do not change, every period made
progress, no byte read was wrong and no read failed, and exits 1 if any check
fails (2 on a usage error or when the soak cannot run). It writes
summary.txt, periods.csv, resources.csv and soak.svg (latency per period above
RSS over time) to --out.

The store (--store, by default OUT/store.zr) is written on first use and reused
when it holds the same records (a few spot-checked); a file there that this tool
did not write is never replaced.

Memory limit: before it holds any data, the process creates the memory cgroup
--cgroup-name, sets its limit to --memory-limit and moves itself (every thread)
into it, so the store is several times the memory it may use, page cache
included. With cgroup v2 the cgroup is /sys/fs/cgroup/NAME (memory.max; the root's
cgroup.subtree_control gets +memory); with the v1 memory controller (hybrid
hierarchies) it is a child of the process's current memory cgroup
(memory.limit_in_bytes). This needs root. At the end the process moves back and
removes the cgroup. If the limit cannot be applied the soak says so and runs
without one. To use a limit set from outside instead, e.g.
  systemd-run --scope -p MemoryMax=1G soak --memory-limit none ...
the summary reports the limit of the cgroup the soak runs in.";

/// The soak: loader plus concurrent gets over a larger-than-memory O_DIRECT store.
#[derive(Debug, Parser)]
#[command(name = "soak", long_about = LONG_ABOUT)]
struct Args {
    /// Directory for summary.txt, periods.csv, resources.csv and soak.svg.
    #[arg(long, default_value = "soak-out")]
    out: PathBuf,
    /// The store (written if absent). Default: OUT/store.zr.
    #[arg(long)]
    store: Option<PathBuf>,
    /// How long to run, minutes.
    #[arg(long, default_value_t = 30)]
    minutes: u64,
    /// How long to run, seconds, instead of --minutes (a quick check).
    #[arg(long, conflicts_with = "minutes")]
    seconds: Option<u64>,
    /// Length of a reporting period, seconds; the first is the warm-up.
    #[arg(long, default_value_t = 60)]
    period_secs: u64,
    /// Resources are sampled this often, seconds.
    #[arg(long, default_value_t = 10)]
    sample_secs: u64,
    /// Approximate size of the store's records in all (4G, 6GiB, ...).
    #[arg(long, default_value = "6G", value_parser = size)]
    store_size: u64,
    /// Shortest record.
    #[arg(long, default_value = "2k", value_parser = size)]
    min_record: u64,
    /// Longest record.
    #[arg(long, default_value = "48k", value_parser = size)]
    max_record: u64,
    /// Threads doing Store::get of random records.
    #[arg(long, default_value_t = 16)]
    getters: usize,
    /// Records per loader batch.
    #[arg(long, default_value_t = 64)]
    batch: usize,
    /// The loader's look-ahead memory budget.
    #[arg(long, default_value = "64M", value_parser = size)]
    loader_budget: u64,
    /// Memory limit of the soak's cgroup, or "none" to apply none.
    #[arg(long, default_value = "1G")]
    memory_limit: String,
    /// Name of the memory cgroup the soak creates.
    #[arg(long, default_value = "zring-soak")]
    cgroup_name: String,
    /// Seed of the records, the shuffle and the gets.
    #[arg(long, default_value_t = SEED)]
    seed: u64,
}

fn size(text: &str) -> Result<u64, String> {
    zring_engine::parse_size(text).map_err(|e| e.to_string())
}

fn config(a: Args) -> Result<Config, String> {
    let memory_limit = match a.memory_limit.trim() {
        "none" => None,
        text => Some(size(text)?),
    };
    let min_len = usize::try_from(a.min_record).map_err(|e| e.to_string())?;
    let max_len = usize::try_from(a.max_record).map_err(|e| e.to_string())?;
    if min_len < 8 || max_len < min_len || max_len > u32::MAX as usize {
        return Err(format!(
            "records need 8 <= --min-record <= --max-record < 4 GiB, not {min_len}..{max_len}"
        ));
    }
    let secs = a.seconds.unwrap_or(a.minutes.saturating_mul(60));
    if secs == 0 || a.period_secs == 0 || a.sample_secs == 0 || a.getters == 0 || a.batch == 0 {
        return Err(
            "--minutes/--seconds, --period-secs, --sample-secs, --getters and --batch must be positive"
                .into(),
        );
    }
    if secs < 2 * a.period_secs {
        return Err(format!(
            "run at least two periods ({} s): the first is the warm-up",
            2 * a.period_secs
        ));
    }
    let store = a.store.unwrap_or_else(|| a.out.join("store.zr"));
    Ok(Config {
        store,
        params: Params::for_size(a.seed, a.store_size, min_len, max_len),
        out: a.out,
        duration: Duration::from_secs(secs),
        period: Duration::from_secs(a.period_secs),
        sample: Duration::from_secs(a.sample_secs),
        getters: a.getters,
        batch: a.batch,
        loader_budget: a.loader_budget,
        memory_limit,
        cgroup_name: a.cgroup_name,
    })
}

fn main() -> ExitCode {
    let cfg = match config(Args::parse()) {
        Ok(cfg) => cfg,
        Err(e) => {
            eprintln!("soak: {e}");
            return ExitCode::from(2);
        }
    };
    match soak(&cfg) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("soak: {e}");
            ExitCode::from(2)
        }
    }
}

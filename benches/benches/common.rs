//! Helpers shared by the criterion benches (included with `mod common;`).

// Each bench binary uses a subset of these.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{Bencher, BenchmarkGroup, SamplingMode};
use tempfile::TempDir;
use zring_benches::{records_from_env, IidBatches};
use zring_engine::Store;

/// A scratch directory for stores, under `$ZRING_BENCH_DIR` or the system temp dir;
/// removed when dropped.
pub fn scratch_dir() -> TempDir {
    let base = std::env::var_os("ZRING_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    tempfile::Builder::new()
        .prefix("zring-bench-")
        .tempdir_in(base)
        .expect("creating the scratch directory")
}

/// Runs `f` on `iters` fresh IID batches and returns the time spent inside `f` only:
/// drawing the indices is not timed.
pub fn time_batches(iters: u64, batches: &mut IidBatches, mut f: impl FnMut(&[u64])) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        let idx = batches.next_batch();
        let t = Instant::now();
        f(idx);
        total += t.elapsed();
    }
    total
}

/// Short runs (the machine has two shared cores): 1 s warm-up, `secs` of
/// measurement, `samples` samples; flat sampling for iterations of many
/// milliseconds, where criterion's linear ramp would overshoot the time budget.
pub fn configure(group: &mut BenchmarkGroup<'_, WallTime>, samples: usize, secs: u64, flat: bool) {
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(secs))
        .sample_size(samples)
        .sampling_mode(if flat {
            SamplingMode::Flat
        } else {
            SamplingMode::Linear
        });
}

/// One machine-readable line about a store, collected by `benches/summary.py`.
pub fn print_store_meta(key: &str, store: &Store, build: Duration) {
    let s = store.stats().expect("store stats");
    println!(
        "ZRING_META {{\"store\": \"{key}\", \"records\": {}, \"logical_bytes\": {}, \"stored_bytes\": {}, \"raw_records\": {}, \"file_bytes\": {}, \"build_s\": {:.3}}}",
        s.records,
        s.logical_bytes,
        s.stored_bytes,
        s.raw_records,
        s.file_bytes,
        build.as_secs_f64()
    );
}

/// The file of `path`, opened for the pread baseline.
pub fn open_file(path: &Path) -> std::fs::File {
    std::fs::File::open(path).expect("opening the store file")
}

/// The read backends to time: `$ZRING_BENCH_BACKENDS` (comma-separated, e.g.
/// `pread,mmap,uring`) or pread and mmap.
pub fn backends() -> Vec<zring_engine::Backend> {
    let list = std::env::var("ZRING_BENCH_BACKENDS").unwrap_or_else(|_| "pread,mmap".into());
    list.split(',')
        .map(|s| {
            s.trim()
                .parse()
                .expect("ZRING_BENCH_BACKENDS: unknown backend")
        })
        .collect()
}

/// Whether zring's gathers check each record's checksum: `$ZRING_BENCH_VERIFY` (`0`
/// turns it off; on by default, as in the engine), for same-run A/B of its cost.
pub fn verify_checksums() -> bool {
    std::env::var("ZRING_BENCH_VERIFY").map_or(true, |v| v != "0")
}

/// Whether criterion will time anything: `cargo bench` passes `--bench`; `cargo test
/// --benches` (and `--test`) only runs each benchmark once as a check.
pub fn timing() -> bool {
    let args: Vec<String> = std::env::args().collect();
    args.iter().any(|a| a == "--bench") && !args.iter().any(|a| a == "--test")
}

/// Records of a workload: `$var` if set, else `full` when timing, else `check` (small,
/// so `cargo test --all-targets` stays quick while still checking every path).
pub fn records(var: &str, full: usize, check: usize) -> usize {
    records_from_env(var, if timing() { full } else { check })
}

/// Whether workload `tag` ("w1", ...) can match the criterion filter: a filter that
/// names workloads (e.g. `gather_w2_raw|baseline_w2`) skips building the others' data
/// and stores; a filter naming none (e.g. `memcpy`) builds them all.
pub fn wanted(tag: &str) -> bool {
    let filter = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .unwrap_or_default();
    let named: Vec<&str> = ["w1", "w2", "w3"]
        .into_iter()
        .filter(|w| filter.contains(w))
        .collect();
    named.is_empty() || named.contains(&tag)
}

/// `group.bench_function(name, f)`, followed by a `ZRING_LOAD` line saying how many
/// cores other processes kept busy meanwhile (`benches/summary.py` flags thread
/// ratios measured while the machine was shared).
pub fn bench(
    group: &mut BenchmarkGroup<'_, WallTime>,
    group_name: &str,
    name: &str,
    f: impl FnMut(&mut Bencher<'_, WallTime>),
) {
    let before = zring_benches::load::CpuSnapshot::now();
    group.bench_function(name, f);
    let after = zring_benches::load::CpuSnapshot::now();
    if let Some(other) = before.zip(after).and_then(|(a, b)| a.other_cores(&b)) {
        println!("ZRING_LOAD {{\"bench\": \"{group_name}/{name}\", \"other_cores\": {other:.2}}}");
    }
}

//! The soak itself: `getters` threads doing `Store::get` of random records and one
//! loader iterating shuffled batches, every byte checked, while the main thread
//! samples resources and closes each period's latency histogram.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use zring_engine::{ReadOptions, Store};
use zring_loader::{Loader, LoaderOptions, Lookahead, Tensor};
use zring_platform::BufPool;
use zring_sampler::{Mode, Sampler};
use zring_workloads::rng::Rng;

use super::cgroup::Cgroup;
use super::procfs::Resources;
use super::records::{prepare, Params};
use super::stats::{checks, write_csv, write_file, Period, Sample, Totals};
use super::{plot, SoakError};
use crate::load::CpuSnapshot;

/// What to run.
#[derive(Clone, Debug)]
pub struct Config {
    pub store: PathBuf,
    pub out: PathBuf,
    pub params: Params,
    pub duration: Duration,
    /// Latency percentiles and throughput are reported per period (a minute).
    pub period: Duration,
    /// Resources are sampled this often.
    pub sample: Duration,
    pub getters: usize,
    pub batch: usize,
    /// The loader's look-ahead memory budget, bytes.
    pub loader_budget: u64,
    /// The memory limit to apply, bytes; `None`: apply none.
    pub memory_limit: Option<u64>,
    pub cgroup_name: String,
}

/// Wrong bytes and failed reads are printed as they happen, up to this many.
const PRINTED_PROBLEMS: u64 = 10;
/// Latencies from 1 ns to a minute, to 3 significant digits.
const LATENCY_MAX_NS: u64 = 60_000_000_000;

/// State the reading threads share with the sampling loop.
struct Shared {
    stop: AtomicBool,
    /// Problems printed so far (of both kinds).
    printed: AtomicU64,
    wrong: AtomicU64,
    errors: AtomicU64,
    /// Loader records and batches since the last period closed.
    loader_records: AtomicU64,
    loader_batches: AtomicU64,
    /// The largest batch (record bytes) since the last period closed: a batch
    /// larger than any before needs a buffer of a larger size class.
    loader_max_batch: AtomicU64,
    /// Each getter's latencies (ns) since the last period closed; one lock per
    /// thread, so the getters never contend with each other.
    latency: Vec<Mutex<Histogram<u64>>>,
    /// The loader's batch buffer pool, whose counters are sampled with the
    /// resources: a pool that keeps more idle buffers shows as RSS growth.
    loader_pool: Mutex<Option<BufPool>>,
}

impl Shared {
    /// Counts a problem in `counter`, and prints the first few.
    fn problem(&self, counter: &AtomicU64, what: std::fmt::Arguments<'_>) {
        counter.fetch_add(1, Ordering::Relaxed);
        if self.printed.fetch_add(1, Ordering::Relaxed) < PRINTED_PROBLEMS {
            eprintln!("soak: {what}");
        }
    }
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, LATENCY_MAX_NS, 3).expect("constant histogram bounds are valid")
}

/// Runs the soak; `Ok(true)` when every check passed. Everything printed is also in
/// `summary.txt` under `cfg.out`.
pub fn soak(cfg: &Config) -> Result<bool, SoakError> {
    std::fs::create_dir_all(&cfg.out).map_err(|source| SoakError::Io {
        path: cfg.out.clone(),
        what: "creating the output directory",
        source,
    })?;
    let mut head = String::new();
    let mut say = |line: String| {
        println!("{line}");
        head.push_str(&line);
        head.push('\n');
    };
    // First, before the process holds much memory: v1 charges what a process
    // allocated before it moved to the cgroup it was in then.
    let (limit_line, joined) = limit(cfg);
    say(limit_line);
    let cgroup = joined.as_ref().map(|(cg, _)| cg);

    let started = Instant::now();
    let prepared = prepare(&cfg.store, &cfg.params)?;
    // O_DIRECT: every get and batch reads the device, never the page cache.
    let store = Store::open(&cfg.store, ReadOptions::default().direct(true))?;
    say(format!(
        "store {}: {:?} in {:.0} s, {} records of {}..={} bytes, {:.2} GiB, O_DIRECT {}, \
         checksums verified on every read",
        cfg.store.display(),
        prepared,
        started.elapsed().as_secs_f64(),
        store.len(),
        cfg.params.min_len,
        cfg.params.max_len,
        store.file_bytes() as f64 / (1u64 << 30) as f64,
        store.is_direct(),
    ));

    let shared = Shared {
        stop: AtomicBool::new(false),
        printed: AtomicU64::new(0),
        wrong: AtomicU64::new(0),
        errors: AtomicU64::new(0),
        loader_records: AtomicU64::new(0),
        loader_batches: AtomicU64::new(0),
        loader_max_batch: AtomicU64::new(0),
        latency: (0..cfg.getters).map(|_| Mutex::new(histogram())).collect(),
        loader_pool: Mutex::new(None),
    };
    let mut periods = Vec::new();
    let mut samples = Vec::new();
    let mut totals = Totals::default();
    let loader_line = std::thread::scope(|s| {
        for k in 0..cfg.getters {
            let (store, shared, params) = (&store, &shared, &cfg.params);
            std::thread::Builder::new()
                .name(format!("soak-get-{k}"))
                .spawn_scoped(s, move || getter(k, store, params, shared))
                .map_err(|source| SoakError::Io {
                    path: PathBuf::from("/proc/self"),
                    what: "starting a reader thread",
                    source,
                })?;
        }
        let loader = std::thread::Builder::new()
            .name("soak-loader".into())
            .spawn_scoped(s, || {
                let r = loader(cfg, &store, &shared);
                // A loader that cannot run ends the soak (not a silent half-soak).
                shared.stop.store(true, Ordering::Relaxed);
                r
            })
            .map_err(|source| SoakError::Io {
                path: PathBuf::from("/proc/self"),
                what: "starting the loader thread",
                source,
            })?;
        let sampled = sample_loop(cfg, &shared, cgroup, &mut periods, &mut samples);
        shared.stop.store(true, Ordering::Relaxed);
        let loader_line = loader
            .join()
            .map_err(|_| SoakError::Wrong("the loader thread panicked".into()))??;
        sampled?;
        Ok::<_, SoakError>(loader_line)
    })?;
    // Printed by the loader thread when it started; the summary keeps it too.
    head.push_str(&loader_line);
    head.push('\n');

    for p in &periods {
        totals.gets += p.gets;
        totals.loader_records += p.loader_records;
        totals.loader_batches += p.loader_batches;
    }
    totals.wrong_records = shared.wrong.load(Ordering::Relaxed);
    totals.errors = shared.errors.load(Ordering::Relaxed);
    let warmup_s = cfg.period.as_secs();
    let results = checks(&periods, &samples, warmup_s, &totals);
    let mut text = head;
    for p in &periods {
        let _ = writeln!(text, "{}", p.line());
    }
    let _ = writeln!(
        text,
        "totals: {} gets, {} loader batches ({} records), {} wrong records, {} failed reads",
        totals.gets,
        totals.loader_batches,
        totals.loader_records,
        totals.wrong_records,
        totals.errors
    );
    let mut steady = samples.iter().filter(|s| s.t_s >= warmup_s);
    if let (Some(first), Some(last)) = (steady.clone().next(), steady.next_back()) {
        let huge = |s: &Sample| s.res.anon_huge_kib.map_or("?".into(), |k| k.to_string());
        let _ = writeln!(
            text,
            "rss after warm-up: {} KiB at {} s ({} KiB in huge pages), {} KiB at {} s ({} KiB)",
            first.res.rss_kib,
            first.t_s,
            huge(first),
            last.res.rss_kib,
            last.t_s,
            huge(last)
        );
    }
    if let Some(b) = samples.last().and_then(|s| s.loader_buffers) {
        let _ = writeln!(
            text,
            "loader batch buffers at the last sample: {} allocated, {} reused, {} released, \
             {} live (high water {}), {} free ({})",
            b.allocations,
            b.reuses,
            b.released,
            b.live,
            b.live_high_water,
            b.free,
            mib(b.free_bytes as u64)
        );
    }
    if let Some(cg) = cgroup {
        let _ = writeln!(
            text,
            "cgroup {}: peak charge {}, OOM kills {}",
            cg.dir.display(),
            cg.peak().map_or("unknown".into(), mib),
            cg.oom_kills().map_or("unknown".into(), |n| n.to_string())
        );
    }
    for c in &results {
        let verdict = if c.pass { "PASS" } else { "FAIL" };
        let _ = writeln!(text, "{verdict} {}: {}", c.name, c.detail);
    }
    let passed = results.iter().all(|c| c.pass);
    let _ = writeln!(text, "soak {}", if passed { "passed" } else { "FAILED" });
    // The periods' lines were printed as they closed; the rest is new here.
    for line in text.lines().skip_while(|l| !l.starts_with("totals:")) {
        println!("{line}");
    }
    write_file(&cfg.out.join("summary.txt"), &text)?;
    write_csv(&cfg.out, &periods, &samples)?;
    let title = format!(
        "soak: {} getter threads + loader, O_DIRECT, {:.1} GiB store, {}",
        cfg.getters,
        store.file_bytes() as f64 / (1u64 << 30) as f64,
        cgroup
            .and_then(Cgroup::limit)
            .map_or("no memory limit".into(), |b| format!(
                "memory limit {}",
                mib(b)
            ))
    );
    plot::draw(
        &cfg.out.join("soak.svg"),
        &title,
        cfg.period.as_secs_f64(),
        &periods,
        &samples,
    )?;
    println!(
        "wrote summary.txt, periods.csv, resources.csv and soak.svg to {}",
        cfg.out.display()
    );
    drop(store);
    if let Some((cg, home)) = &joined {
        if let Err(e) = cg.leave_into(home) {
            eprintln!("soak: leaving the cgroup: {e} (remove it by hand)");
        }
    }
    Ok(passed)
}

fn mib(bytes: u64) -> String {
    format!("{:.0} MiB", bytes as f64 / (1u64 << 20) as f64)
}

/// Applies the memory limit; the line to report, the cgroup joined and the one the
/// process came from (to return to at the end).
fn limit(cfg: &Config) -> (String, Option<(Cgroup, Cgroup)>) {
    let current = Cgroup::current();
    let Some(bytes) = cfg.memory_limit else {
        let inherited = current.ok().and_then(|c| c.limit());
        return (
            format!(
                "memory limit: none applied (--memory-limit none); the cgroup the soak runs in allows {}",
                inherited.map_or("unlimited".into(), mib)
            ),
            None,
        );
    };
    let joined = current.and_then(|home| Ok((home.join_new(&cfg.cgroup_name, bytes)?, home)));
    match joined {
        Ok((cg, home)) => (
            format!(
                "memory limit: {} via cgroup {:?} at {} (effective limit {})",
                mib(bytes),
                cg.version,
                cg.dir.display(),
                cg.limit().map_or("unknown".into(), mib)
            ),
            Some((cg, home)),
        ),
        Err(e) => (
            format!("memory limit: NOT applied ({e}); the soak runs without a limit"),
            None,
        ),
    }
}

/// One reader: random records, timed and checked, until told to stop.
fn getter(k: usize, store: &Store, params: &Params, shared: &Shared) {
    let mut rng = Rng::new(params.seed ^ 0x6765_7474_6572, k as u64);
    while !shared.stop.load(Ordering::Relaxed) {
        let i = rng.below(params.records);
        let t0 = Instant::now();
        let got = store.get(i);
        let ns = u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX);
        match got {
            Ok(bytes) => {
                shared.latency[k]
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .saturating_record(ns);
                if let Err(m) = params.check(i, &bytes) {
                    shared.problem(&shared.wrong, format_args!("get: wrong bytes: {m}"));
                }
            }
            Err(e) => shared.problem(&shared.errors, format_args!("get {i}: {e}")),
        }
    }
}

/// The loader: shuffled batches (a fresh permutation of the records per epoch),
/// each record checked against the index the sampler drew for its place. A failed
/// step ends a loader's iteration, so the loader is rebuilt after the step.
/// Returns the line that says how the loader was sized.
fn loader(cfg: &Config, store: &Store, shared: &Shared) -> Result<String, SoakError> {
    let sampler = Sampler::new(cfg.params.records, cfg.batch, Mode::Cyclic, cfg.params.seed)?;
    let options = LoaderOptions::default().with_lookahead(Lookahead::Budget {
        bytes: cfg.loader_budget,
    });
    let build = |from: u64| {
        let mut s = sampler.clone();
        s.seek(from);
        Loader::new([("records", vec![store.clone()])], s, options.clone())
    };
    let share_pool = |l: &Loader| {
        *shared
            .loader_pool
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(l.buffer_pool().clone());
    };
    let mut loader = build(0)?;
    share_pool(&loader);
    let o = loader.options();
    let line = format!(
        "loader: batches of {} (cyclic shuffle), {} workers, prefetch {}, budget {}",
        cfg.batch,
        o.workers,
        o.prefetch,
        mib(cfg.loader_budget)
    );
    println!("{line}");
    let mut next = 0u64;
    while !shared.stop.load(Ordering::Relaxed) {
        match loader.next() {
            Some(Ok(step)) => {
                next = step.step + 1;
                let want = sampler.batch(step.step);
                match step.get("records", 0) {
                    Some(t @ Tensor::Ragged { .. }) if t.records() == want.len() => {
                        shared
                            .loader_max_batch
                            .fetch_max(t.bytes().len() as u64, Ordering::Relaxed);
                        for (k, &i) in want.iter().enumerate() {
                            let got = t.record(k).unwrap_or(&[]);
                            if let Err(m) = cfg.params.check(i, got) {
                                let step = step.step;
                                shared.problem(
                                    &shared.wrong,
                                    format_args!("loader step {step} place {k}: wrong bytes: {m}"),
                                );
                            }
                        }
                    }
                    _ => shared.problem(
                        &shared.wrong,
                        format_args!(
                            "loader step {}: not a ragged batch of {}",
                            step.step,
                            want.len()
                        ),
                    ),
                }
                shared
                    .loader_records
                    .fetch_add(want.len() as u64, Ordering::Relaxed);
                shared.loader_batches.fetch_add(1, Ordering::Relaxed);
            }
            Some(Err(e)) => {
                shared.problem(&shared.errors, format_args!("loader step {next}: {e}"));
                loader.close();
                next += 1;
                loader = build(next)?;
                share_pool(&loader);
            }
            None => return Err(SoakError::Wrong("the endless loader ended".into())),
        }
    }
    loader.close();
    Ok(line)
}

/// Samples resources every `cfg.sample` and closes a period every `cfg.period`,
/// until `cfg.duration` has passed or a thread stopped the soak.
fn sample_loop(
    cfg: &Config,
    shared: &Shared,
    cgroup: Option<&Cgroup>,
    periods: &mut Vec<Period>,
    samples: &mut Vec<Sample>,
) -> Result<(), SoakError> {
    let start = Instant::now();
    let end = start + cfg.duration;
    let mut next_sample = start;
    let mut period_start = start;
    let mut cpu = CpuSnapshot::now();
    let mut merged = histogram();
    loop {
        let next_period = (period_start + cfg.period).min(end);
        let due = next_sample.min(next_period);
        while Instant::now() < due && !shared.stop.load(Ordering::Relaxed) {
            std::thread::sleep((due - Instant::now()).min(Duration::from_millis(200)));
        }
        if shared.stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        let now = Instant::now();
        if now >= next_period {
            merged.reset();
            for h in &shared.latency {
                let mut h = h.lock().unwrap_or_else(PoisonError::into_inner);
                merged
                    .add(&*h)
                    .map_err(|e| SoakError::Wrong(format!("merging latencies: {e:?}")))?;
                h.reset();
            }
            let loader = (
                shared.loader_records.swap(0, Ordering::Relaxed),
                shared.loader_batches.swap(0, Ordering::Relaxed),
            );
            let secs = now.duration_since(period_start).as_secs_f64();
            let end_s = now.duration_since(start).as_secs_f64();
            let mut p = Period::new(periods.len() + 1, end_s, secs, &merged, loader);
            p.loader_max_batch_bytes = shared.loader_max_batch.swap(0, Ordering::Relaxed);
            let cpu_now = CpuSnapshot::now();
            p.other_cores = cpu.zip(cpu_now).and_then(|(a, b)| a.other_cores(&b));
            cpu = cpu_now;
            println!("{}", p.line());
            periods.push(p);
            period_start = next_period;
        }
        if now >= next_sample {
            samples.push(Sample {
                t_s: now.duration_since(start).as_secs_f64().round() as u64,
                res: Resources::now()?,
                cgroup_bytes: cgroup.and_then(Cgroup::usage),
                loader_buffers: shared
                    .loader_pool
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .as_ref()
                    .map(BufPool::stats),
            });
            next_sample += cfg.sample;
        }
        if now >= end {
            return Ok(());
        }
    }
}

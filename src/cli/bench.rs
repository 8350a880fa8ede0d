//! `zring bench`: fio-like timing of random IID gathers (or single-record gets from
//! several threads) on a synthetic store it builds, or on a given store.
//!
//! Method (docs: /work/shared/BENCHMARKS.md): indices come from the IID sampler and
//! are drawn outside the timed region; warm-up batches run first; then each gather
//! call is timed until `--duration` seconds of gathers have accumulated. Before any
//! timing, one gathered batch is compared with the source records. A single-thread
//! memcpy of the same bytes per batch runs in the same process as the baseline.

use std::path::{Path, PathBuf};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use serde_json::{json, Value};
use zring_engine::{Backend, Codec, ReadOptions, Store, WriteOptions};
use zring_sampler::{Mode, Sampler};

use super::bench_report::{render, Report};
use super::histogram::Histogram;
use super::measure;
use super::pack::DEFAULT_DICT_BYTES;
use super::progress::{self, Unit};
use super::synth::{self, SynthSpec, WriteReport, IMAGE_BYTES};
use super::{parse_codec, CliError, CliResult};

/// Default synthetic record count: 1000 W1 images (147 MiB) builds and runs in a
/// few seconds on a 2-core machine and keeps the temp file modest.
pub const DEFAULT_COUNT: u64 = 1000;
/// Indices drawn per refill in `--mode get`.
const GET_INDEX_BATCH: usize = 1024;

/// What is timed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BenchMode {
    /// Batched gathers of `--batch` random records.
    Gather,
    /// Single-record gets from `--concurrency` threads (serving latency).
    Get,
}

impl BenchMode {
    pub fn name(self) -> &'static str {
        match self {
            BenchMode::Gather => "gather",
            BenchMode::Get => "get",
        }
    }
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Benchmark this existing store instead of a synthetic one.
    #[arg(long, value_name = "PATH",
          conflicts_with_all = ["count", "record_bytes", "codec", "level", "dict_size", "ragged", "dir"])]
    pub store: Option<PathBuf>,
    /// Synthetic store: number of records.
    #[arg(long, default_value_t = DEFAULT_COUNT)]
    pub count: u64,
    /// Synthetic store: bytes per record (the mean with --ragged). The default is one
    /// uint8[3, 224, 224] image.
    #[arg(long, value_name = "BYTES", default_value_t = IMAGE_BYTES)]
    pub record_bytes: usize,
    /// Synthetic store: raw, zstd or zstd-dict.
    #[arg(long, default_value = "zstd", value_parser = parse_codec)]
    pub codec: Codec,
    /// Synthetic store: zstd level.
    #[arg(long, default_value_t = 3, allow_negative_numbers = true)]
    pub level: i32,
    /// Synthetic store: dictionary bytes for zstd-dict.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_DICT_BYTES)]
    pub dict_size: usize,
    /// Synthetic store: variable-length 1-D records instead of fixed-size ones.
    #[arg(long)]
    pub ragged: bool,
    /// Synthetic store: directory to build it in (default: the system temp
    /// directory). It is removed afterwards.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Seed of the data generator and of the index sampler.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// gather: batched random gathers; get: single-record gets.
    #[arg(long, value_enum, default_value_t = BenchMode::Gather)]
    pub mode: BenchMode,
    /// Records per gather.
    #[arg(long, default_value_t = 256)]
    pub batch: usize,
    /// Threads per gather, counting the caller (0: all cores).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// Read backend, by the engine's name for it (auto, pread, mmap, uring).
    #[arg(long, default_value = "auto", value_parser = parse_backend)]
    pub backend: Backend,
    /// Reads each thread keeps in flight with the uring backend (1..=256).
    #[arg(long = "qd", value_name = "DEPTH", default_value_t = 64)]
    pub queue_depth: usize,
    /// Read with O_DIRECT, bypassing the page cache (device benchmarking). The
    /// synthetic store is then written with 4096-byte alignment.
    #[arg(long)]
    pub direct: bool,
    /// Synthetic store: record alignment in the file (default 8, or 4096 with
    /// --direct).
    #[arg(long, value_name = "BYTES")]
    pub align: Option<u32>,
    /// Drop the page cache before timing (needs root; cold reads without O_DIRECT).
    #[arg(long)]
    pub cold: bool,
    /// Seconds of timed gathers (or of gets, per thread).
    #[arg(long, value_name = "SECONDS", default_value_t = 2.0)]
    pub duration: f64,
    /// Untimed warm-up batches (get mode: warm-up gets = this x --batch per thread).
    #[arg(long, value_name = "BATCHES", default_value_t = 5)]
    pub warmup: u64,
    /// Get mode: threads issuing gets at once.
    #[arg(long, default_value_t = 1)]
    pub concurrency: usize,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

fn parse_backend(s: &str) -> Result<Backend, String> {
    s.parse()
}

/// Figures of one timed run.
#[derive(Debug)]
pub struct RunResult {
    /// Gathers or gets timed.
    pub ops: u64,
    pub records: u64,
    pub logical_bytes: u64,
    pub physical_bytes: u64,
    /// Gather mode: sum of the timed gather calls. Get mode: wall time of the run.
    pub timed_seconds: f64,
    /// Wall time of the timed phase (index draws included).
    pub wall_seconds: f64,
    /// Process CPU seconds (user + system) over the timed phase.
    pub cpu_seconds: Option<f64>,
    /// Nanoseconds per gather or get.
    pub latency_ns: Histogram,
}

/// Runs `zring bench`.
pub fn run(args: &BenchArgs) -> CliResult {
    check_args(args)?;
    let mut _tempdir = None;
    let (path, synthetic, write) = match &args.store {
        Some(p) => (p.clone(), None, None),
        None => {
            let dir = args.dir.clone().unwrap_or_else(std::env::temp_dir);
            let tmp = tempfile::Builder::new()
                .prefix("zring-bench-")
                .tempdir_in(&dir)
                .map_err(|e| CliError::io(&dir, "creating a temporary directory", e))?;
            let path = tmp.path().join("bench.zr");
            _tempdir = Some(tmp);
            let spec = SynthSpec {
                count: args.count,
                record_bytes: args.record_bytes,
                ragged: args.ragged,
                seed: args.seed,
            };
            let opts = WriteOptions {
                codec: args.codec,
                level: args.level,
                align: args.align.unwrap_or(if args.direct { 4096 } else { 8 }),
                ..WriteOptions::default()
            };
            let report = synth::create_store(&path, &spec, opts, args.dict_size)?;
            (path, Some(spec), Some(report))
        }
    };
    let opts = ReadOptions {
        backend: args.backend,
        verify_checksums: false,
        threads: args.threads,
        queue_depth: args.queue_depth,
        direct: args.direct,
    };
    // Warm first: the auto backend chooses by page-cache residency at open.
    if !args.direct && !args.cold {
        measure::warm_page_cache(&path).map_err(|e| CliError::io(&path, "reading the store", e))?;
    }
    if args.cold {
        measure::drop_page_cache()?;
    }
    let store = Store::open(&path, opts)?;
    if store.is_empty() {
        return Err(CliError::new(format!(
            "{}: the store has no records to read",
            path.display()
        )));
    }
    let table = Table::load(&store)?;
    let checked = check_correctness(&store, &path, synthetic.as_ref(), args)?;
    let result = match args.mode {
        BenchMode::Gather => run_gathers(&store, &table, args)?,
        BenchMode::Get => run_gets(&store, &table, args)?,
    };
    let min_time = Duration::from_secs_f64((args.duration / 2.0).min(0.25));
    let memcpy = (args.mode == BenchMode::Gather).then(|| {
        let per_batch = result.logical_bytes / result.ops.max(1);
        measure::memcpy_bytes_per_s(per_batch as usize, min_time)
    });
    let memcpy_all = (args.mode == BenchMode::Gather).then(|| {
        let per_batch = result.logical_bytes / result.ops.max(1);
        measure::memcpy_all_threads_bytes_per_s(per_batch as usize, min_time)
    });
    let decode = match store.codec() {
        zring_engine::Codec::Raw => None,
        _ => measure::decode_bytes_per_s(&store, min_time)?,
    };
    let report = Report {
        args,
        store: super::info::describe(&store)?,
        synthetic: synthetic.is_some(),
        backend: store.backend(),
        write,
        checked,
        result,
        memcpy_bytes_per_s: memcpy,
        memcpy_all_bytes_per_s: memcpy_all,
        decode_bytes_per_s: decode,
        load_average: measure::load_average(),
    };
    let text = if args.json {
        format!("{:#}\n", report.to_json())
    } else {
        render(&report)
    };
    super::output::print(&text).map_err(|e| CliError::new(format!("writing to stdout: {e}")))
}

fn check_args(args: &BenchArgs) -> CliResult {
    let bad = |m: &str| Err(CliError::new(m.to_string()));
    if !(args.duration.is_finite() && args.duration > 0.0 && args.duration <= 86_400.0) {
        return bad("--duration must be a positive number of seconds (at most a day)");
    }
    if args.batch == 0 {
        return bad("--batch must be at least 1");
    }
    if args.count == 0 {
        return bad("--count must be at least 1");
    }
    if args.record_bytes == 0 || args.record_bytes as u64 > u64::from(u32::MAX) / 2 {
        return bad("--record-bytes must be between 1 and 2 GiB");
    }
    if !(1..=256).contains(&args.queue_depth) {
        return bad("--qd must be between 1 and 256");
    }
    if let Some(a) = args.align {
        if !a.is_power_of_two() || a > 1 << 20 {
            return bad("--align must be a power of two up to 1 MiB");
        }
    }
    if !(1..=4096).contains(&args.concurrency) {
        return bad("--concurrency must be between 1 and 4096");
    }
    Ok(())
}

/// Per-record figures from the table, loaded before timing.
struct Table {
    stored_len: Vec<u32>,
    max_logical: usize,
}

impl Table {
    fn load(store: &Store) -> CliResult<Self> {
        let mut stored_len = Vec::with_capacity(store.len() as usize);
        let mut max_logical = 0;
        for i in 0..store.len() {
            let e = store.entry(i)?;
            stored_len.push(e.stored_len);
            max_logical = max_logical.max(e.logical_len as usize);
        }
        Ok(Self {
            stored_len,
            max_logical,
        })
    }

    fn physical(&self, indices: &[u64]) -> u64 {
        indices
            .iter()
            .map(|&i| u64::from(self.stored_len[i as usize]))
            .sum()
    }
}

/// Gathers one random batch and compares every record with the source: the
/// generator for a synthetic store, checksum-verified pread gets otherwise.
/// Returns how many records were compared.
fn check_correctness(
    store: &Store,
    path: &Path,
    synthetic: Option<&SynthSpec>,
    args: &BenchArgs,
) -> CliResult<u64> {
    let sampler = Sampler::new(store.len(), args.batch, Mode::Iid, args.seed ^ 0xC4EC)?;
    let indices = sampler.batch(0);
    let reference = Store::open(
        path,
        ReadOptions {
            backend: Backend::Pread,
            verify_checksums: true,
            threads: 1,
            ..ReadOptions::default()
        },
    )?;
    let expected = |i: u64| -> CliResult<Vec<u8>> {
        match synthetic {
            Some(spec) => Ok(spec.record(i)),
            None => Ok(reference.get(i)?),
        }
    };
    let differs = |k: usize, i: u64| {
        CliError::new(format!(
            "correctness check failed: record {i} (position {k} of a gathered batch) differs from the source; the timing would be meaningless"
        ))
    };
    if store.schema().is_ragged() {
        let batch = store.gather_ragged(&indices)?;
        let itemsize = store.schema().dtype.itemsize();
        for (k, &i) in indices.iter().enumerate() {
            if batch.record(k, itemsize) != Some(expected(i)?.as_slice()) {
                return Err(differs(k, i));
            }
        }
    } else {
        let out = store.gather_vec(&indices)?;
        let width = out.len() / indices.len();
        for (k, &i) in indices.iter().enumerate() {
            if out[k * width..(k + 1) * width] != expected(i)? {
                return Err(differs(k, i));
            }
        }
    }
    Ok(indices.len() as u64)
}

fn run_gathers(store: &Store, table: &Table, args: &BenchArgs) -> CliResult<RunResult> {
    let sampler = Sampler::new(store.len(), args.batch, Mode::Iid, args.seed)?;
    let mut indices = vec![0u64; args.batch];
    // Page-aligned, so O_DIRECT reads of aligned raw records land in place.
    let mut dest = zring_platform::AlignedBuf::new(args.batch * table.max_logical, 4096)
        .map_err(|e| CliError::new(format!("allocating the batch buffer: {e}")))?;
    let ragged = store.schema().is_ragged();
    // One gather of `indices`; returns the logical bytes it produced.
    let mut gather = |indices: &[u64]| -> CliResult<u64> {
        if ragged {
            let layout = store.ragged_layout(indices)?;
            store.gather_ragged_into(indices, &layout, &mut dest[..layout.values_bytes])?;
            Ok(layout.values_bytes as u64)
        } else {
            let n = indices.len() * table.max_logical;
            store.gather(indices, &mut dest[..n])?;
            Ok(n as u64)
        }
    };
    for step in 0..args.warmup {
        sampler.fill(step, &mut indices)?;
        gather(&indices)?;
    }
    let budget = Duration::from_secs_f64(args.duration);
    let bar = progress::bar(budget.as_millis() as u64, "gather", Unit::Millis);
    let mut r = RunResult::empty();
    let cpu_before = measure::cpu_time();
    let wall = Instant::now();
    let mut timed = Duration::ZERO;
    let mut step = args.warmup;
    while timed < budget {
        sampler.fill(step, &mut indices)?;
        r.physical_bytes += table.physical(&indices);
        let started = Instant::now();
        let logical = gather(&indices)?;
        let took = started.elapsed();
        timed += took;
        r.latency_ns.record(took.as_nanos() as u64);
        r.logical_bytes += logical;
        r.records += indices.len() as u64;
        r.ops += 1;
        step += 1;
        bar.set_position(timed.as_millis() as u64);
    }
    r.wall_seconds = wall.elapsed().as_secs_f64();
    r.cpu_seconds = cpu_seconds_since(cpu_before);
    r.timed_seconds = timed.as_secs_f64();
    bar.finish_and_clear();
    Ok(r)
}

/// What one get thread measured.
struct GetThread {
    ops: u64,
    logical: u64,
    physical: u64,
    latency_ns: Histogram,
}

fn run_gets(store: &Store, table: &Table, args: &BenchArgs) -> CliResult<RunResult> {
    let budget = Duration::from_secs_f64(args.duration);
    let start_line = Barrier::new(args.concurrency + 1);
    let bar = progress::bar(budget.as_millis() as u64, "get", Unit::Millis);
    let (threads, wall, cpu) = std::thread::scope(|s| {
        let handles: Vec<_> = (0..args.concurrency)
            .map(|t| {
                let start_line = &start_line;
                s.spawn(move || get_thread(store, table, args, t as u64, start_line))
            })
            .collect();
        start_line.wait();
        let cpu_before = measure::cpu_time();
        let wall = Instant::now();
        while wall.elapsed() < budget {
            bar.set_position(wall.elapsed().as_millis() as u64);
            std::thread::sleep(Duration::from_millis(50).min(budget));
        }
        let results: Vec<CliResult<GetThread>> = handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(CliError::new("a get thread panicked")))
            })
            .collect();
        (results, wall.elapsed(), cpu_seconds_since(cpu_before))
    });
    bar.finish_and_clear();
    let mut r = RunResult::empty();
    for t in threads {
        let t = t?;
        r.ops += t.ops;
        r.logical_bytes += t.logical;
        r.physical_bytes += t.physical;
        r.latency_ns.merge(&t.latency_ns);
    }
    r.records = r.ops;
    r.wall_seconds = wall.as_secs_f64();
    r.timed_seconds = r.wall_seconds;
    r.cpu_seconds = cpu;
    Ok(r)
}

fn get_thread(
    store: &Store,
    table: &Table,
    args: &BenchArgs,
    t: u64,
    start_line: &Barrier,
) -> CliResult<GetThread> {
    let seed = args
        .seed
        .wrapping_add((t + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let sampler = Sampler::new(store.len(), GET_INDEX_BATCH, Mode::Iid, seed)?;
    let mut indices = vec![0u64; GET_INDEX_BATCH];
    let mut buf = zring_platform::AlignedBuf::new(table.max_logical, 4096)
        .map_err(|e| CliError::new(format!("allocating the record buffer: {e}")))?;
    let ragged = store.schema().is_ragged();
    let mut get = |i: u64| -> CliResult<u64> {
        if ragged {
            Ok(store.get(i)?.len() as u64)
        } else {
            store.gather(&[i], &mut buf)?;
            Ok(buf.len() as u64)
        }
    };
    let warmup = (|| -> CliResult {
        sampler.fill(0, &mut indices)?;
        for k in 0..args.warmup.saturating_mul(args.batch as u64) {
            get(indices[k as usize % GET_INDEX_BATCH])?;
        }
        Ok(())
    })();
    // Every thread reaches the start line, even after a failed warm-up, so the
    // others and the timer are never left waiting.
    start_line.wait();
    warmup?;
    let budget = Duration::from_secs_f64(args.duration);
    let mut out = GetThread {
        ops: 0,
        logical: 0,
        physical: 0,
        latency_ns: Histogram::new(),
    };
    let deadline = Instant::now() + budget;
    let mut step = 1u64;
    loop {
        sampler.fill(step, &mut indices)?;
        step += 1;
        for &i in &indices {
            let started = Instant::now();
            out.logical += get(i)?;
            let done = Instant::now();
            out.latency_ns.record((done - started).as_nanos() as u64);
            out.physical += u64::from(table.stored_len[i as usize]);
            out.ops += 1;
            if done >= deadline {
                return Ok(out);
            }
        }
    }
}

fn cpu_seconds_since(before: Option<Duration>) -> Option<f64> {
    let after = measure::cpu_time()?;
    Some(after.checked_sub(before?)?.as_secs_f64())
}

impl RunResult {
    fn empty() -> Self {
        Self {
            ops: 0,
            records: 0,
            logical_bytes: 0,
            physical_bytes: 0,
            timed_seconds: 0.0,
            wall_seconds: 0.0,
            cpu_seconds: None,
            latency_ns: Histogram::new(),
        }
    }
}

/// The `write` section of the report.
pub fn write_json(w: &WriteReport) -> Value {
    json!({
        "logical_bytes": w.logical_bytes,
        "seconds": w.seconds,
        "logical_mib_per_s": w.logical_bytes as f64 / super::output::MIB / w.seconds.max(1e-9),
        "dict_train_seconds": w.dict_seconds,
    })
}

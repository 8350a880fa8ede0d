//! `zring bench`: fio-like timing of random IID gathers (or single-record gets from
//! several threads, or batches through the end-to-end loader) on a synthetic store it
//! builds, on a given store, or on a synthetic store with another store's record sizes.
//!
//! Method: indices come from the IID sampler and are drawn outside the timed region;
//! warm-up batches run first; then each gather call is timed until `--duration`
//! seconds of gathers have accumulated (per job). Before any timing, one gathered
//! batch is compared with the source records. In the same process, the baseline: for
//! raw stores a plain copy of the same records out of a mapping of the file, for
//! compressed ones the zstd decode limit; with `--compare fio`, fio on the same file.
//!
//! Pieces: the runs are in `bench_run` (gathers, gets) and `bench_loader`; fio in
//! `bench_fio`; time series in `bench_series`; the report in `bench_report`; plots in
//! `bench_plot`; replaying a store's sizes in `bench_replay`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, ValueEnum};
use serde_json::{json, Value};
use zring_engine::{Backend, Codec, ReadOptions, Store, WriteOptions};
use zring_sampler::{Mode, Sampler};

use super::bench_fio::{self, FioJob, FioOutcome};
use super::bench_report::{render, Report};
use super::bench_series::Series;
use super::histogram::Histogram;
use super::measure;
use super::pack::DEFAULT_DICT_BYTES;
use super::synth::{self, SynthSpec, WriteReport, IMAGE_BYTES};
use super::{parse_codec, CliError, CliResult};

/// Default synthetic record count: 1000 W1 images (147 MiB) builds and runs in a
/// few seconds on a 2-core machine and keeps the temp file modest.
pub const DEFAULT_COUNT: u64 = 1000;

/// What is timed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BenchMode {
    /// Batched gathers of `--batch` random records.
    Gather,
    /// Single-record gets from `--concurrency` threads (serving latency).
    Get,
    /// Steps of `--batch` records through the end-to-end loader (sampler, workers,
    /// read-ahead, pooled buffers), as a training loop sees them.
    Loader,
}

impl BenchMode {
    pub fn name(self) -> &'static str {
        match self {
            BenchMode::Gather => "gather",
            BenchMode::Get => "get",
            BenchMode::Loader => "loader",
        }
    }
}

/// Reference tools `--compare` can run on the same file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CompareWith {
    /// fio with the equivalent random-read job, in the same invocation.
    Fio,
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Benchmark this existing store instead of a synthetic one.
    #[arg(long, value_name = "PATH",
          conflicts_with_all = ["count", "record_bytes", "codec", "level", "dict_size", "ragged", "dir", "replay"])]
    pub store: Option<PathBuf>,
    /// Build the synthetic store with the record count and the record sizes of this
    /// store (and its codec, unless --codec is given), filled with generated data:
    /// its size distribution without its contents.
    #[arg(long, value_name = "STORE", conflicts_with_all = ["count", "record_bytes", "ragged"])]
    pub replay: Option<PathBuf>,
    /// Synthetic store: number of records.
    #[arg(long, default_value_t = DEFAULT_COUNT)]
    pub count: u64,
    /// Synthetic store: bytes per record (the mean with --ragged). The default is one
    /// uint8[3, 224, 224] image.
    #[arg(long, value_name = "BYTES", default_value_t = IMAGE_BYTES)]
    pub record_bytes: usize,
    /// Synthetic store: raw, zstd or zstd-dict [default: zstd, or the replayed
    /// store's codec].
    #[arg(long, value_parser = parse_codec)]
    pub codec: Option<Codec>,
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
    /// gather: batched random gathers; get: single-record gets; loader: the
    /// end-to-end loader.
    #[arg(long, value_enum, default_value_t = BenchMode::Gather)]
    pub mode: BenchMode,
    /// Records per gather (per loader step).
    #[arg(long, default_value_t = 256)]
    pub batch: usize,
    /// Threads per gather, counting the caller (0: all cores).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// Gather mode: independent jobs side by side, each a thread with its own store
    /// handle, io_uring rings, indices and buffers (like fio's numjobs); reported per
    /// job and summed.
    #[arg(long, default_value_t = 1)]
    pub jobs: usize,
    /// Loader mode: loader worker threads (0: each step made in the consumer).
    #[arg(long, default_value_t = 2)]
    pub workers: usize,
    /// Loader mode: finished steps kept ready ahead of the consumer.
    #[arg(long, default_value_t = 4)]
    pub prefetch: usize,
    /// Loader mode: size the look-ahead from this many MiB of step memory and the
    /// device's queue depth (the library's default), with --workers and --prefetch
    /// as floors; 0 uses them exactly.
    #[arg(long = "lookahead-mib", value_name = "MIB", default_value_t = 0)]
    pub lookahead_mib: u64,
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
    /// Seconds of timed gathers (or of gets, per thread; or of loader steps).
    #[arg(long, value_name = "SECONDS", default_value_t = 2.0)]
    pub duration: f64,
    /// Untimed warm-up batches (get mode: warm-up gets = this x --batch per thread).
    #[arg(long, value_name = "BATCHES", default_value_t = 5)]
    pub warmup: u64,
    /// Get mode: threads issuing gets at once.
    #[arg(long, default_value_t = 1)]
    pub concurrency: usize,
    /// After zring's run, run this tool on the same file with the equivalent job
    /// (block size, queue depth, O_DIRECT, engine, readers) for --duration seconds,
    /// and print both with the ratio. Skipped, saying so, when it is not installed.
    #[arg(long, value_enum, value_name = "TOOL")]
    pub compare: Option<CompareWith>,
    /// fio's buffers for --compare fio: malloc or shmhuge [default: shmhuge when
    /// enough huge pages are free, like zring's huge-page buffers, else malloc].
    #[arg(long, value_name = "KIND")]
    pub fio_iomem: Option<String>,
    /// Draw throughput over time and the latency histogram into FILE (.svg or .png).
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// Skip the per-record checksum check on reads (on by default, as in every
    /// reader).
    #[arg(long)]
    pub no_verify_checksums: bool,
}

fn parse_backend(s: &str) -> Result<Backend, String> {
    s.parse()
        .map_err(|e: zring_engine::ParseBackendError| e.to_string())
}

/// Figures of one timed run (of one job, or all jobs summed).
#[derive(Debug)]
pub struct RunResult {
    /// Gathers, gets or loader steps timed.
    pub ops: u64,
    pub records: u64,
    pub logical_bytes: u64,
    pub physical_bytes: u64,
    /// Gather mode: sum of the timed gather calls (the longest job's, for several
    /// jobs). Get and loader mode: wall time of the run.
    pub timed_seconds: f64,
    /// Wall time of the timed phase (index draws included).
    pub wall_seconds: f64,
    /// Process CPU seconds (user + system) over the timed phase.
    pub cpu_seconds: Option<f64>,
    /// Cores that other processes kept busy during the timed phase.
    pub others_cores: Option<f64>,
    /// Nanoseconds per gather, get or loader step (as the consumer waited for it).
    pub latency_ns: Histogram,
    /// Throughput over time.
    pub series: Series,
    /// Per-job figures when `--jobs` > 1.
    pub jobs: Vec<RunResult>,
    /// Loader mode: the process's peak resident memory during the run, bytes.
    pub peak_rss_bytes: Option<u64>,
}

impl RunResult {
    pub(crate) fn empty(duration_s: f64) -> Self {
        Self {
            ops: 0,
            records: 0,
            logical_bytes: 0,
            physical_bytes: 0,
            timed_seconds: 0.0,
            wall_seconds: 0.0,
            cpu_seconds: None,
            others_cores: None,
            latency_ns: Histogram::new(),
            series: Series::for_duration(duration_s),
            jobs: Vec::new(),
            peak_rss_bytes: None,
        }
    }

    /// Adds a job's counts (rates of the sum are taken over the longest job).
    pub(crate) fn add(&mut self, job: &RunResult) {
        self.ops += job.ops;
        self.records += job.records;
        self.logical_bytes += job.logical_bytes;
        self.physical_bytes += job.physical_bytes;
        self.timed_seconds = self.timed_seconds.max(job.timed_seconds);
        self.wall_seconds = self.wall_seconds.max(job.wall_seconds);
        self.latency_ns.merge(&job.latency_ns);
        self.series.merge(&job.series);
    }
}

/// The store being measured, and where it came from.
struct Target {
    path: PathBuf,
    /// The generator of a synthetic store's records.
    synthetic: Option<SynthSpec>,
    write: Option<WriteReport>,
    /// `--replay`: the store whose record sizes were replayed.
    replayed: Option<PathBuf>,
    /// Keeps the synthetic store's directory until the run ends.
    _dir: Option<tempfile::TempDir>,
}

/// Builds the synthetic store (plain or replayed), or takes `--store`.
fn target(args: &BenchArgs) -> CliResult<Target> {
    if let Some(p) = &args.store {
        return Ok(Target {
            path: p.clone(),
            synthetic: None,
            write: None,
            replayed: None,
            _dir: None,
        });
    }
    let (spec, source_codec) = match &args.replay {
        Some(source) => {
            let (spec, codec) = super::bench_replay::spec(source, args.seed)?;
            (spec, Some(codec))
        }
        None => (
            SynthSpec {
                count: args.count,
                record_bytes: args.record_bytes,
                ragged: args.ragged,
                seed: args.seed,
                lengths: None,
            },
            None,
        ),
    };
    let dir = args.dir.clone().unwrap_or_else(std::env::temp_dir);
    let tmp = tempfile::Builder::new()
        .prefix("zring-bench-")
        .tempdir_in(&dir)
        .map_err(|e| CliError::io(&dir, "creating a temporary directory", e))?;
    let path = tmp.path().join("bench.zr");
    let opts = WriteOptions {
        codec: args.codec.or(source_codec).unwrap_or(Codec::Zstd),
        level: args.level,
        align: args.align.unwrap_or(if args.direct { 4096 } else { 8 }),
        ..WriteOptions::default()
    };
    let write = synth::create_store(&path, &spec, opts, args.dict_size)?;
    Ok(Target {
        path,
        synthetic: Some(spec),
        write: Some(write),
        replayed: args.replay.clone(),
        _dir: Some(tmp),
    })
}

/// The engine options every job opens the store with.
pub(crate) fn read_options(args: &BenchArgs) -> ReadOptions {
    ReadOptions {
        backend: args.backend,
        verify_checksums: !args.no_verify_checksums,
        threads: args.threads,
        queue_depth: args.queue_depth,
        direct: args.direct,
        ..ReadOptions::default()
    }
}

/// Runs `zring bench`.
pub fn run(args: &BenchArgs) -> CliResult {
    check_args(args)?;
    let t = target(args)?;
    let path = &t.path;
    // A store at a URL is read through object storage: no page cache, no file to
    // map, so no warming and no copy or decode baselines of the file.
    let remote = zring_engine::remote::url_of(path).is_some();
    // Warm first: the auto backend chooses by page-cache residency at open.
    if !args.direct && !args.cold && !remote {
        measure::warm_page_cache(path).map_err(|e| CliError::io(path, "reading the store", e))?;
    }
    if args.cold && !remote {
        measure::drop_page_cache()?;
    }
    let store = Store::open(path, read_options(args))?;
    if store.is_empty() {
        return Err(CliError::new(format!(
            "{}: the store has no records to read",
            path.display()
        )));
    }
    let table = Table::load(&store)?;
    let source = Source::new(path, t.synthetic.as_ref())?;
    let checked = match args.mode {
        BenchMode::Loader => super::bench_loader::check(&store, &source, args)?,
        _ => check_correctness(&store, &source, args)?,
    };
    let result = match args.mode {
        BenchMode::Gather => super::bench_run::gathers(&store, &table, args)?,
        BenchMode::Get => super::bench_run::gets(&store, &table, args)?,
        BenchMode::Loader => super::bench_loader::run(&store, &table, args)?,
    };
    let min_time = Duration::from_secs_f64((args.duration / 2.0).min(0.25));
    let readers = readers(args);
    // A copy out of the page cache is a baseline only for warm raw reads; cold or
    // O_DIRECT runs are measured against the device (--compare fio).
    let copy = (args.mode != BenchMode::Get
        && store.codec() == Codec::Raw
        && !args.direct
        && !args.cold
        && !remote)
        .then(|| copy_baseline(&store, &table, args, readers.min(cores()), min_time))
        .transpose()?;
    let decode = match store.codec() {
        Codec::Raw => None,
        _ if remote => None,
        _ => measure::decode_bytes_per_s(&store, min_time)?,
    };
    // zring's figures stand without fio's: a failed fio run is reported, not fatal.
    let fio = args.compare.map(|CompareWith::Fio| {
        bench_fio::run(fio_job(&store, &table, args, readers))
            .unwrap_or_else(|e| FioOutcome::Skipped(format!("fio did not run: {e}")))
    });
    // A synthetic store was just written: compare that with the disk's own
    // sequential write, in the same directory.
    let fio_write = match (&fio, &t.write, path.parent()) {
        // The read comparison stands without it (a file system may refuse
        // O_DIRECT writes): say why on stderr and go on.
        (Some(FioOutcome::Ran(_)), Some(_), Some(dir)) => {
            bench_fio::run_write(dir, store.file_bytes()).unwrap_or_else(|e| {
                eprintln!("zring: note: no write comparison: {e}");
                None
            })
        }
        _ => None,
    };
    let report = Report {
        args,
        store: super::info::describe(&store)?,
        synthetic: t.synthetic.is_some(),
        replayed: t.replayed.clone(),
        backend: store.backend(),
        write: t.write,
        checked,
        result,
        copy,
        decode_bytes_per_s: decode,
        fio,
        fio_write,
    };
    if let Some(plot) = &args.plot {
        super::bench_plot::draw(plot, &report)?;
    }
    let text = if args.json {
        format!("{:#}\n", report.to_json())
    } else {
        render(&report)
    };
    super::output::print(&text).map_err(|e| CliError::new(format!("writing to stdout: {e}")))
}

fn cores() -> usize {
    zring_platform::available_cores()
}

/// Threads reading at once in this configuration: jobs x threads per gather (get
/// mode: the concurrent getters; loader mode: (workers + 1) x threads per gather,
/// as the consumer makes a step itself whenever none is ready, which is always when
/// the device is the limit).
pub(crate) fn readers(args: &BenchArgs) -> usize {
    let per_gather = match args.threads {
        0 => cores(),
        t => t,
    };
    match args.mode {
        BenchMode::Gather => args.jobs * per_gather,
        BenchMode::Get => args.concurrency,
        BenchMode::Loader => (args.workers + 1) * per_gather,
    }
}

/// The fio job that issues the reads zring just issued.
fn fio_job(store: &Store, table: &Table, args: &BenchArgs, readers: usize) -> FioJob {
    let backend = store.backend();
    let iodepth = match (backend, args.mode) {
        (Backend::Uring, BenchMode::Gather | BenchMode::Loader) => args.queue_depth,
        _ => 1,
    };
    // `auto` reads a cold store with O_DIRECT: fio then must too.
    let direct = args.direct || store.is_direct();
    let block = bench_fio::block_bytes(table.mean_stored(), direct);
    let (iomem, _) = match &args.fio_iomem {
        Some(kind) => (kind.clone(), None),
        None => bench_fio::choose_iomem(block, iodepth, readers),
    };
    let (start, end) = table.span();
    // fio needs at least one whole block; a store smaller than one reads its span.
    let size = ((end - start) / block * block).max(block);
    FioJob {
        filename: store.path().to_path_buf(),
        block_bytes: block,
        offset: start,
        size,
        ioengine: bench_fio::ioengine(backend),
        iodepth,
        numjobs: readers,
        direct,
        invalidate: bench_fio::invalidate(args.cold, direct),
        iomem,
        runtime_ms: (args.duration * 1e3).ceil() as u64,
    }
}

/// The copy baseline: the same kind of batches' records copied out of a mapping of
/// the store file at their offsets, into a batch-sized aligned buffer per thread.
fn copy_baseline(
    store: &Store,
    table: &Table,
    args: &BenchArgs,
    threads: usize,
    min_time: Duration,
) -> CliResult<measure::CopyBaseline> {
    let file = std::fs::File::open(store.path())
        .map_err(|e| CliError::io(store.path(), "opening the store", e))?;
    let map = zring_platform::Mapping::new(&file)
        .map_err(|e| CliError::io(store.path(), "mapping the store", e))?;
    // The indices of the first timed batches of job 0, a few dozen of them: random
    // records all over the store, as the gathers read them.
    let sampler = Sampler::new(store.len(), args.batch, Mode::Iid, args.seed)?;
    let mut batches = Vec::new();
    for step in args.warmup..args.warmup + 64 {
        let indices = sampler.batch(step);
        batches.push(
            indices
                .iter()
                .map(|&i| (table.offset[i as usize], table.stored_len[i as usize]))
                .collect::<Vec<_>>(),
        );
    }
    Ok(measure::copy_records(
        map.bytes(),
        &batches,
        threads,
        min_time,
    ))
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
    if !(1..=1024).contains(&args.jobs) {
        return bad("--jobs must be between 1 and 1024");
    }
    if args.jobs > 1 && args.mode != BenchMode::Gather {
        return bad(
            "--jobs is for --mode gather (get mode: --concurrency; loader mode: --workers)",
        );
    }
    if args.workers > 1024 || args.prefetch > 1 << 16 {
        return bad("--workers must be at most 1024 and --prefetch at most 65536");
    }
    if args.mode == BenchMode::Loader && args.workers > 0 && args.prefetch == 0 {
        return bad("--prefetch must be at least 1 when the loader has workers");
    }
    if let Some(kind) = &args.fio_iomem {
        if args.compare.is_none() {
            return bad("--fio-iomem is for --compare fio");
        }
        if kind.is_empty() || kind.contains(char::is_whitespace) {
            return bad("--fio-iomem takes one fio iomem kind, such as malloc or shmhuge");
        }
    }
    if let Some(p) = &args.plot {
        super::bench_plot::check_path(p)?;
    }
    Ok(())
}

/// Per-record figures from the table, loaded before timing.
pub(crate) struct Table {
    pub(crate) offset: Vec<u64>,
    pub(crate) stored_len: Vec<u32>,
    pub(crate) max_logical: usize,
}

impl Table {
    fn load(store: &Store) -> CliResult<Self> {
        let n = store.len() as usize;
        let mut t = Self {
            offset: Vec::with_capacity(n),
            stored_len: Vec::with_capacity(n),
            max_logical: 0,
        };
        for i in 0..store.len() {
            let e = store.entry(i)?;
            t.offset.push(e.offset);
            t.stored_len.push(e.stored_len);
            t.max_logical = t.max_logical.max(e.logical_len as usize);
        }
        Ok(t)
    }

    /// Stored bytes of the records at `indices`: what a read path moves from the file.
    pub(crate) fn physical(&self, indices: &[u64]) -> u64 {
        indices
            .iter()
            .map(|&i| u64::from(self.stored_len[i as usize]))
            .sum()
    }

    /// The mean stored record size.
    fn mean_stored(&self) -> f64 {
        let total: u64 = self.stored_len.iter().map(|&l| u64::from(l)).sum();
        total as f64 / self.stored_len.len().max(1) as f64
    }

    /// The file range the records occupy: from the first record's offset (rounded
    /// down to 4 KiB, where O_DIRECT reads may start) to the end of the last.
    fn span(&self) -> (u64, u64) {
        let start = self.offset.iter().copied().min().unwrap_or(0) / 4096 * 4096;
        let end = self
            .offset
            .iter()
            .zip(&self.stored_len)
            .map(|(&o, &l)| o + u64::from(l))
            .max()
            .unwrap_or(start);
        (start, end.max(start))
    }
}

/// Where the expected bytes of a record come from: the generator for a synthetic
/// store, checksum-verified pread gets otherwise.
pub(crate) enum Source<'a> {
    Synthetic(&'a SynthSpec),
    Store(Store),
}

impl<'a> Source<'a> {
    fn new(path: &Path, synthetic: Option<&'a SynthSpec>) -> CliResult<Self> {
        Ok(match synthetic {
            Some(spec) => Source::Synthetic(spec),
            None => Source::Store(Store::open(
                path,
                ReadOptions {
                    backend: Backend::Pread,
                    verify_checksums: true,
                    threads: 1,
                    ..ReadOptions::default()
                },
            )?),
        })
    }

    /// Record `i` as it must read.
    pub(crate) fn record(&self, i: u64) -> CliResult<Vec<u8>> {
        match self {
            Source::Synthetic(spec) => Ok(spec.record(i)),
            Source::Store(s) => Ok(s.get(i)?),
        }
    }
}

/// The error of a record that read wrong.
pub(crate) fn differs(k: usize, i: u64) -> CliError {
    CliError::new(format!(
        "correctness check failed: record {i} (position {k} of a gathered batch) differs from the source; the timing would be meaningless"
    ))
}

/// Gathers one random batch and compares every record with the source. Returns how
/// many records were compared.
fn check_correctness(store: &Store, source: &Source<'_>, args: &BenchArgs) -> CliResult<u64> {
    let sampler = Sampler::new(store.len(), args.batch, Mode::Iid, args.seed ^ 0xC4EC)?;
    let indices = sampler.batch(0);
    if store.schema().is_ragged() {
        let batch = store.gather_ragged(&indices)?;
        let itemsize = store.schema().dtype.itemsize();
        for (k, &i) in indices.iter().enumerate() {
            if batch.record(k, itemsize) != Some(source.record(i)?.as_slice()) {
                return Err(differs(k, i));
            }
        }
    } else {
        let out = store.gather_vec(&indices)?;
        let width = out.len() / indices.len();
        for (k, &i) in indices.iter().enumerate() {
            if out[k * width..(k + 1) * width] != source.record(i)? {
                return Err(differs(k, i));
            }
        }
    }
    Ok(indices.len() as u64)
}

/// The `write` section of the report.
pub fn write_json(w: &WriteReport) -> Value {
    json!({
        "logical_bytes": w.logical_bytes,
        "seconds": w.seconds,
        "logical_mib_per_s": w.logical_bytes as f64 / super::output::MIB / w.seconds.max(1e-9),
        "dict_train_seconds": w.dict_seconds,
        "from_memory": w.from_memory,
        "cpu_seconds": w.cpu_seconds,
        "others_cores_busy": w.others_cores,
    })
}

/// Whether an fio comparison ran, for the report.
pub(crate) fn fio_ran(f: &Option<FioOutcome>) -> Option<&bench_fio::FioResult> {
    match f {
        Some(FioOutcome::Ran(r)) => Some(r),
        _ => None,
    }
}

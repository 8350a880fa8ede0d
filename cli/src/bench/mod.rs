//! `zring bench`: fio-like timing of random IID gathers (or single-record gets from
//! several threads, or batches through the end-to-end loader) on a synthetic store it
//! builds, on a given store, or on a synthetic store with another store's record sizes.
//!
//! Method: indices come from the IID sampler and are drawn outside the timed region;
//! warm-up batches run first; then each gather call is timed until `--duration`
//! seconds of gathers have accumulated (per job). Before any timing, one gathered
//! batch is compared with the source records. In the same process, the baseline: the
//! same records copied (raw) or decoded (compressed) out of a mapping of the file on
//! the gathers' threads; with `--compare fio`, fio on the same file.
//!
//! Pieces, the submodules here: the arguments are in [`args`]; what the pieces share
//! (the records' table, the source of expected bytes, a run's figures) in [`types`];
//! the runs in [`run`] (gathers, gets) and [`loader`]; the synthetic store in
//! [`synth`]; the baselines, CPU and load in [`measure`]; the latency [`histogram`];
//! fio in [`fio`]; time series in [`series`]; the report in [`report`]; plots in
//! [`plot`]; replaying a store's sizes in [`replay`].

pub mod args;
pub mod fio;
pub mod histogram;
pub mod loader;
pub mod measure;
pub mod plot;
pub mod replay;
pub mod report;
pub mod run;
pub mod series;
pub mod synth;
pub mod types;

use std::path::PathBuf;
use std::time::Duration;

use zring_engine::{Backend, Codec, Store, WriteOptions};
use zring_sampler::Sampler;

use self::args::{BenchArgs, BenchMode, CompareWith};
use self::fio::{FioJob, FioOutcome};
use self::report::{render, Report};
use self::synth::{SynthSpec, WriteReport};
use self::types::{differs, Source, Table};
use crate::{CliError, CliResult};

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
            let (spec, codec) = self::replay::spec(source, args.seed)?;
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
    let opts = WriteOptions::with_codec(args.codec.or(source_codec).unwrap_or(Codec::Zstd))
        .level(args.level)
        .align(
            args.align
                .unwrap_or(if args.opts.direct { 4096 } else { 8 }),
        );
    let write = synth::create_store(&path, &spec, opts, args.dict_size)?;
    Ok(Target {
        path,
        synthetic: Some(spec),
        write: Some(write),
        replayed: args.replay.clone(),
        _dir: Some(tmp),
    })
}

/// Runs `zring bench`.
pub fn run(args: &BenchArgs) -> CliResult {
    let args = &args.resolved()?;
    check_args(args)?;
    let t = target(args)?;
    let path = &t.path;
    // A store at a URL is read through object storage: no page cache, no file to
    // map, so no warming and no copy or decode baselines of the file.
    let remote = zring_engine::remote::url_of(path).is_some();
    // Warm first: the auto backend chooses by page-cache residency at open.
    if !args.opts.direct && !args.cold && !remote {
        measure::warm_page_cache(path).map_err(|e| CliError::io(path, "reading the store", e))?;
    }
    let cold_by = match args.cold && !remote {
        true => Some(measure::drop_page_cache(&[path.as_path()])?),
        false => None,
    };
    let store = Store::open(path, args.opts.clone())?;
    if store.is_empty() {
        return Err(CliError::new(format!(
            "{}: the store has no records to read",
            path.display()
        )));
    }
    let table = Table::load(&store)?;
    let source = Source::new(path, t.synthetic.as_ref())?;
    let checked = match args.mode {
        BenchMode::Loader => self::loader::check(&store, &source, args)?,
        _ => check_correctness(&store, &source, args)?,
    };
    let result = match args.mode {
        BenchMode::Gather => self::run::gathers(&store, &table, args)?,
        BenchMode::Get => self::run::gets(&store, &table, args)?,
        BenchMode::Loader => self::loader::run(&store, &table, args)?,
    };
    let min_time = Duration::from_secs_f64((args.duration / 2.0).min(0.25));
    let readers = readers(args, result.loader_depth);
    // The same records copied (raw) or decoded (compressed) out of a mapping of the
    // file: a limit for warm reads of any store and for the decoding of a compressed
    // one read cold; a cold or O_DIRECT raw run is measured against the device
    // (--compare fio). Single-record gets have no batches to take.
    let baseline = (args.mode != BenchMode::Get
        && !remote
        && (store.codec() != Codec::Raw || (!args.opts.direct && !args.cold)))
        .then(|| records_baseline(&store, &table, args, readers.min(cores()), min_time))
        .transpose()?;
    // zring's figures stand without fio's: a failed fio run is reported, not fatal.
    let fio = args.compare.map(|CompareWith::Fio| {
        fio::run(fio_job(&store, &table, args, readers))
            .unwrap_or_else(|e| FioOutcome::Skipped(format!("fio did not run: {e}")))
    });
    // A synthetic store was just written: compare that with the disk's own
    // sequential write, in the same directory.
    let fio_write = match (&fio, &t.write, path.parent()) {
        // The read comparison stands without it (a file system may refuse fio's
        // writes): say why on stderr and go on.
        (Some(FioOutcome::Ran(_)), Some(_), Some(dir)) => fio::run_write(dir, store.file_bytes())
            .unwrap_or_else(|e| {
                eprintln!("zring: note: no write comparison: {e}");
                Vec::new()
            }),
        _ => Vec::new(),
    };
    let report = Report {
        args,
        store: crate::info::describe(&store)?,
        synthetic: t.synthetic.is_some(),
        replayed: t.replayed.clone(),
        backend: store.backend(),
        write: t.write,
        checked,
        result,
        baseline,
        fio,
        fio_write,
        cold_by,
    };
    if let Some(plot) = &args.plot {
        self::plot::draw(plot, &report)?;
    }
    let text = if args.json {
        format!("{:#}\n", report.to_json())
    } else {
        render(&report)
    };
    crate::output::print(&text).map_err(|e| CliError::new(format!("writing to stdout: {e}")))
}

fn cores() -> usize {
    zring_platform::available_cores()
}

/// Threads reading at once in this configuration: jobs x threads per gather (get
/// mode: the concurrent getters; loader mode: (workers + 1) x threads per gather,
/// with the workers the loader ran with (`loader_depth`), as the consumer makes a
/// step itself whenever none is ready, which is always when the device is the limit).
pub(crate) fn readers(args: &BenchArgs, loader_depth: Option<(usize, usize)>) -> usize {
    let per_gather = match args.opts.threads {
        0 => cores(),
        t => t,
    };
    match args.mode {
        BenchMode::Gather => args.jobs * per_gather,
        BenchMode::Get => args.concurrency,
        BenchMode::Loader => (loader_depth.map_or(args.workers, |d| d.0) + 1) * per_gather,
    }
}

/// The fio job that issues the reads zring just issued.
fn fio_job(store: &Store, table: &Table, args: &BenchArgs, readers: usize) -> FioJob {
    let backend = store.backend();
    let iodepth = match (backend, args.mode) {
        (Backend::Uring, BenchMode::Gather | BenchMode::Loader) => args.opts.queue_depth,
        _ => 1,
    };
    // `auto` reads a cold store with O_DIRECT: fio then must too.
    let direct = args.opts.direct || store.is_direct();
    let block = fio::block_bytes(table.mean_stored(), direct);
    let (iomem, _) = match &args.fio_iomem {
        Some(kind) => (kind.clone(), None),
        None => fio::choose_iomem(block, iodepth, readers),
    };
    let (start, end) = table.span();
    // fio needs at least one whole block; a store smaller than one reads its span.
    let size = ((end - start) / block * block).max(block);
    FioJob {
        filename: store.path().to_path_buf(),
        block_bytes: block,
        offset: start,
        size,
        ioengine: fio::ioengine(backend),
        iodepth,
        numjobs: readers,
        direct,
        invalidate: fio::invalidate(args.cold, direct),
        iomem,
        runtime_ms: (args.duration * 1e3).ceil() as u64,
    }
}

/// Logical bytes of records the warm baseline goes round (see [`records_baseline`]).
const BASELINE_BYTES: u64 = 256 << 20;
/// At most this many records (24 bytes each in memory).
const BASELINE_RECORDS: usize = 1 << 20;

/// The baseline ([`measure::records_baseline`]): the gathers' batches (job 0's
/// sampler from the first timed step) copied or decoded out of a mapping of the
/// store file, on `threads` threads.
fn records_baseline(
    store: &Store,
    table: &Table,
    args: &BenchArgs,
    threads: usize,
    min_time: Duration,
) -> CliResult<measure::Baseline> {
    let file = std::fs::File::open(store.path())
        .map_err(|e| CliError::io(store.path(), "opening the store", e))?;
    let map = zring_platform::Mapping::new(&file)
        .map_err(|e| CliError::io(store.path(), "mapping the store", e))?;
    // The gathers' batches from their first timed step: after a cold or O_DIRECT run
    // a few dozen (brought into the page cache untimed); warm, as many as hold
    // BASELINE_BYTES of records (several times any CPU cache: a few dozen batches of
    // small records would stay in cache and overstate the limit); never more than
    // BASELINE_RECORDS records (huge --batch values).
    let cold = args.opts.direct || args.cold;
    let sampler = Sampler::new(store.len(), args.batch, args.sampler, args.seed)?;
    let (mut batches, mut bytes, mut records) = (Vec::new(), 0u64, 0usize);
    let mut step = args.warmup;
    while batches.is_empty()
        || (records < BASELINE_RECORDS && (batches.len() < 64 || (!cold && bytes < BASELINE_BYTES)))
    {
        let mut batch = Vec::with_capacity(args.batch);
        for i in sampler.batch(step) {
            let r = table.rec(i).ok_or_else(|| {
                CliError::new(format!("the sampler drew record {i}, past the table"))
            })?;
            bytes += u64::from(r.logical);
            batch.push(r);
        }
        records += batch.len();
        batches.push(batch);
        step += 1;
    }
    let walk = measure::Walk {
        batches: &batches,
        warm_all: cold,
        compressed: store.codec() != Codec::Raw,
        dictionary: store.codec() == Codec::ZstdDict,
    };
    measure::records_baseline(
        map.bytes(),
        &|offset, len| map.prefetch(offset, len),
        &walk,
        store.dictionary(),
        threads,
        min_time,
    )
}

fn check_args(args: &BenchArgs) -> CliResult {
    let bad = |m: &str| Err(CliError::usage(m));
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
    let levels = zstd::compression_level_range();
    if !levels.contains(&args.level) {
        return Err(CliError::usage(format!(
            "--level must be between {} and {} (zstd's levels: higher is smaller and slower \
             to write, negative is faster), not {}",
            levels.start(),
            levels.end(),
            args.level
        )));
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
        self::plot::check_path(p)?;
    }
    Ok(())
}

/// Gathers one batch (in the sampler's order) and compares every record with the
/// source. Returns how many records were compared.
fn check_correctness(store: &Store, source: &Source<'_>, args: &BenchArgs) -> CliResult<u64> {
    let sampler = Sampler::new(store.len(), args.batch, args.sampler, args.seed ^ 0xC4EC)?;
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

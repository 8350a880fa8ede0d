//! `zring bench --mode loader`: steps through the end-to-end loader (IID sampler,
//! worker threads, read-ahead, pooled buffers) over the store, as a training loop
//! that does nothing with its batches sees them. Each step's latency is how long the
//! consumer waited for it; throughput counts the records delivered.

use std::time::{Duration, Instant};

use zring_engine::Store;
use zring_loader::{Loader, LoaderOptions, Lookahead, Tensor};
use zring_sampler::Sampler;

use super::args::BenchArgs;
use super::measure;
use super::types::{differs, RunResult, Source, Table};
use crate::progress::{self, Unit};
use crate::{CliError, CliResult};

/// The one stream of the loader.
const STREAM: &str = "records";

fn loader(store: &Store, args: &BenchArgs) -> CliResult<Loader> {
    let sampler = Sampler::new(store.len(), args.batch, args.sampler, args.seed)?;
    let mut options = LoaderOptions::new(args.workers, args.prefetch);
    if args.lookahead > 0 {
        options = options.with_lookahead(Lookahead::Budget {
            bytes: args.lookahead,
        });
    }
    Loader::new([(STREAM, vec![store.clone()])], sampler, options).map_err(loader_error)
}

fn loader_error(e: zring_loader::LoaderError) -> CliError {
    CliError::new(format!("loader: {e}"))
}

/// Takes the next step or says why there is none.
fn next(loader: &mut Loader) -> CliResult<zring_loader::Batch> {
    match loader.next() {
        Some(step) => Ok(step.map_err(loader_error)?.data),
        None => Err(CliError::new("loader: the loader ended unexpectedly")),
    }
}

fn shard(batch: &zring_loader::Batch) -> CliResult<&Tensor> {
    batch
        .get(STREAM, 0)
        .ok_or_else(|| CliError::new("loader: the step has no records stream"))
}

/// Compares every record of the loader's first step with the source; returns how
/// many were compared.
pub(crate) fn check(store: &Store, source: &Source<'_>, args: &BenchArgs) -> CliResult<u64> {
    let mut l = loader(store, args)?;
    let batch = next(&mut l)?;
    let tensor = shard(&batch)?;
    let indices = l.schedule().indices(0);
    for (k, &i) in indices.iter().enumerate() {
        if tensor.record(k) != Some(source.record(i)?.as_slice()) {
            return Err(differs(k, i));
        }
    }
    Ok(indices.len() as u64)
}

/// Warm-up steps, then steps for `--duration` seconds of wall time.
pub(crate) fn run(store: &Store, table: &Table, args: &BenchArgs) -> CliResult<RunResult> {
    let reset = measure::reset_peak_rss();
    let mut l = loader(store, args)?;
    for _ in 0..args.warmup {
        next(&mut l)?;
    }
    let first = l.step();
    let budget = Duration::from_secs_f64(args.duration);
    let bar = progress::bar(budget.as_millis() as u64, "loader", Unit::Millis);
    let mut r = RunResult::empty(args.duration);
    r.loader_depth = Some((l.options().workers, l.options().prefetch));
    let load = measure::LoadWindow::start();
    let cpu_before = zring_platform::process_cpu_time();
    let wall = Instant::now();
    // Physical bytes follow from the step numbers afterwards (the sampler is a pure
    // function of the step), so the loop does nothing but take steps.
    let mut sizes = Vec::new();
    while wall.elapsed() < budget {
        let started = Instant::now();
        let batch = next(&mut l)?;
        let done = Instant::now();
        let tensor = shard(&batch)?;
        let logical = tensor.bytes().len() as u64;
        let records = tensor.records() as u64;
        drop(batch);
        r.latency_ns.record((done - started).as_nanos() as u64);
        sizes.push((done - wall, records, logical));
        r.logical_bytes += logical;
        r.records += records;
        r.ops += 1;
        bar.set_position(wall.elapsed().as_millis() as u64);
    }
    let elapsed = wall.elapsed();
    let cpu = measure::cpu_seconds_since(cpu_before);
    r.others_cores = load.other_cores(cpu);
    r.cpu_seconds = cpu;
    r.peak_rss_bytes = if reset {
        measure::peak_rss_bytes()
    } else {
        None
    };
    l.close();
    bar.finish_and_clear();
    let schedule = l.schedule().clone();
    let mut indices = vec![0u64; args.batch];
    for (k, &(at, records, logical)) in sizes.iter().enumerate() {
        schedule.fill(first + k as u64, &mut indices)?;
        let physical = table.physical(&indices);
        r.physical_bytes += physical;
        r.series.record(at, records, logical, physical);
    }
    r.wall_seconds = elapsed.as_secs_f64();
    r.timed_seconds = r.wall_seconds;
    Ok(r)
}

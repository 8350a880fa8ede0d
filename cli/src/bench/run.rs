//! The timed phases of `zring bench --mode gather` (one or several jobs) and
//! `--mode get`.

use std::sync::Barrier;
use std::time::{Duration, Instant};

use zring_engine::Store;
use zring_sampler::Sampler;

use super::args::BenchArgs;
use super::measure;
use super::types::{RunResult, Table};
use crate::progress::{self, Unit};
use crate::{CliError, CliResult};

/// Indices drawn per refill in `--mode get`.
const GET_INDEX_BATCH: usize = 1024;

/// The sampler seed of job or thread `k`: job 0 keeps `--seed`, so one job draws the
/// same batches as before jobs existed; the others get well-mixed distinct seeds.
fn seed_of(seed: u64, k: u64) -> u64 {
    seed.wrapping_add(k.wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// Runs `--jobs` gather jobs side by side and sums them (one job: just that job).
pub(crate) fn gathers(store: &Store, table: &Table, args: &BenchArgs) -> CliResult<RunResult> {
    // Job 0 reads through the store already open; each other job opens its own
    // handle (its own descriptors, and its own rings, as those belong to threads).
    let mut stores = vec![store.clone()];
    for _ in 1..args.jobs {
        stores.push(Store::open(store.path(), args.opts.clone())?);
    }
    let start_line = Barrier::new(args.jobs + 1);
    let (results, wall, cpu, others) = std::thread::scope(|s| {
        let handles: Vec<_> = stores
            .iter()
            .enumerate()
            .map(|(k, store)| {
                let start_line = &start_line;
                s.spawn(move || gather_job(store, table, args, k, start_line))
            })
            .collect();
        start_line.wait();
        let load = measure::LoadWindow::start();
        let cpu_before = zring_platform::process_cpu_time();
        let wall = Instant::now();
        let results = join_all(handles, "a gather job");
        let cpu = measure::cpu_seconds_since(cpu_before);
        (results, wall.elapsed(), cpu, load.other_cores(cpu))
    });
    let mut total = RunResult::empty(args.duration);
    for r in results {
        let r = r?;
        total.add(&r);
        total.jobs.push(r);
    }
    if args.jobs == 1 {
        total.jobs.clear();
    } else {
        // Side by side, the jobs' rates add up over the same stretch of time.
        total.timed_seconds = wall.as_secs_f64();
    }
    total.wall_seconds = wall.as_secs_f64();
    total.cpu_seconds = cpu;
    total.others_cores = others;
    Ok(total)
}

/// One gather job: warm-up, the start line, then gathers until `--duration` seconds
/// of gather calls have accumulated.
fn gather_job(
    store: &Store,
    table: &Table,
    args: &BenchArgs,
    job: usize,
    start_line: &Barrier,
) -> CliResult<RunResult> {
    let prepared = prepare_gathers(store, table, args, job);
    // Every job reaches the start line, even after a failed warm-up, so the others
    // and the timer are never left waiting.
    start_line.wait();
    let (sampler, mut indices, mut gather) = prepared?;
    let budget = Duration::from_secs_f64(args.duration);
    let bar = if job == 0 {
        progress::bar(budget.as_millis() as u64, "gather", Unit::Millis)
    } else {
        indicatif::ProgressBar::hidden()
    };
    let mut r = RunResult::empty(args.duration);
    let wall = Instant::now();
    let mut timed = Duration::ZERO;
    let mut step = args.warmup;
    while timed < budget {
        sampler.fill(step, &mut indices)?;
        let physical = table.physical(&indices);
        let started = Instant::now();
        let logical = gather(&indices)?;
        let done = Instant::now();
        let took = done - started;
        timed += took;
        r.latency_ns.record(took.as_nanos() as u64);
        r.series.record_span(
            started - wall,
            done - wall,
            indices.len() as u64,
            logical,
            physical,
        );
        r.physical_bytes += physical;
        r.logical_bytes += logical;
        r.records += indices.len() as u64;
        r.ops += 1;
        step += 1;
        bar.set_position(timed.as_millis() as u64);
    }
    r.wall_seconds = wall.elapsed().as_secs_f64();
    r.timed_seconds = timed.as_secs_f64();
    bar.finish_and_clear();
    Ok(r)
}

type GatherFn<'a> = Box<dyn FnMut(&[u64]) -> CliResult<u64> + 'a>;

/// A job's sampler, index buffer and gather closure, warmed up.
fn prepare_gathers<'a>(
    store: &'a Store,
    table: &'a Table,
    args: &BenchArgs,
    job: usize,
) -> CliResult<(Sampler, Vec<u64>, GatherFn<'a>)> {
    let sampler = Sampler::new(
        store.len(),
        args.batch,
        args.sampler,
        seed_of(args.seed, job as u64),
    )?;
    let mut indices = vec![0u64; args.batch];
    // Page-aligned, so O_DIRECT reads of aligned raw records land in place.
    let mut dest = zring_platform::AlignedBuf::new(args.batch * table.max_logical, 4096)
        .map_err(|e| CliError::new(format!("allocating the batch buffer: {e}")))?;
    let ragged = store.schema().is_ragged();
    // One gather of `indices`; returns the logical bytes it produced.
    let mut gather: GatherFn<'a> = Box::new(move |indices: &[u64]| -> CliResult<u64> {
        if ragged {
            let layout = store.ragged_layout(indices)?;
            store.gather_ragged_into(indices, &layout, &mut dest[..layout.values_bytes])?;
            Ok(layout.values_bytes as u64)
        } else {
            let n = indices.len() * table.max_logical;
            store.gather(indices, &mut dest[..n])?;
            Ok(n as u64)
        }
    });
    for step in 0..args.warmup {
        sampler.fill(step, &mut indices)?;
        gather(&indices)?;
    }
    Ok((sampler, indices, gather))
}

/// `--mode get`: `--concurrency` threads of single-record gets for `--duration`.
pub(crate) fn gets(store: &Store, table: &Table, args: &BenchArgs) -> CliResult<RunResult> {
    let budget = Duration::from_secs_f64(args.duration);
    let start_line = Barrier::new(args.concurrency + 1);
    let bar = progress::bar(budget.as_millis() as u64, "get", Unit::Millis);
    let (threads, wall, cpu, others) = std::thread::scope(|s| {
        let handles: Vec<_> = (0..args.concurrency)
            .map(|t| {
                let start_line = &start_line;
                s.spawn(move || get_thread(store, table, args, t as u64, start_line))
            })
            .collect();
        start_line.wait();
        let load = measure::LoadWindow::start();
        let cpu_before = zring_platform::process_cpu_time();
        let wall = Instant::now();
        while wall.elapsed() < budget {
            bar.set_position(wall.elapsed().as_millis() as u64);
            std::thread::sleep(Duration::from_millis(50).min(budget));
        }
        let results = join_all(handles, "a get thread");
        let cpu = measure::cpu_seconds_since(cpu_before);
        (results, wall.elapsed(), cpu, load.other_cores(cpu))
    });
    bar.finish_and_clear();
    let mut r = RunResult::empty(args.duration);
    for t in threads {
        r.add(&t?);
    }
    r.wall_seconds = wall.as_secs_f64();
    r.timed_seconds = r.wall_seconds;
    r.cpu_seconds = cpu;
    r.others_cores = others;
    Ok(r)
}

fn get_thread(
    store: &Store,
    table: &Table,
    args: &BenchArgs,
    t: u64,
    start_line: &Barrier,
) -> CliResult<RunResult> {
    let sampler = Sampler::new(
        store.len(),
        GET_INDEX_BATCH,
        args.sampler,
        seed_of(args.seed, t + 1),
    )?;
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
    let mut out = RunResult::empty(args.duration);
    let begun = Instant::now();
    let deadline = begun + budget;
    let mut step = 1u64;
    loop {
        sampler.fill(step, &mut indices)?;
        step += 1;
        for &i in &indices {
            let started = Instant::now();
            let logical = get(i)?;
            let done = Instant::now();
            let physical = u64::from(table.stored_len[i as usize]);
            out.latency_ns.record((done - started).as_nanos() as u64);
            out.series
                .record_span(started - begun, done - begun, 1, logical, physical);
            out.logical_bytes += logical;
            out.physical_bytes += physical;
            out.ops += 1;
            out.records += 1;
            if done >= deadline {
                return Ok(out);
            }
        }
    }
}

/// Joins every thread; a panic becomes an error naming `what` panicked.
fn join_all(
    handles: Vec<std::thread::ScopedJoinHandle<'_, CliResult<RunResult>>>,
    what: &str,
) -> Vec<CliResult<RunResult>> {
    handles
        .into_iter()
        .map(|h| {
            h.join()
                .unwrap_or_else(|_| Err(CliError::new(format!("{what} panicked"))))
        })
        .collect()
}

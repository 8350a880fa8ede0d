//! W5 (docs/workloads.md): loader throughput against bare gathers of the same batches,
//! and the loader's peak RSS at two dataset sizes.
//!
//! ```text
//! cargo bench -p zring-loader --bench loader -- [--w1 N] [--w3 N] [--secs S] [--rounds R] [--workers a,b] [--prefetch P] [--skip-rss] [--skip-throughput] [--no-consumer-help]
//! ```
//! Defaults: W1 2,000 x uint8[3,224,224] raw, W3 200,000 int32 sequences of 16..512
//! (median ~130) raw, both from `zring-workloads` (the workloads every bench uses), IID batch 256, 0.5 s per measurement, 7 rounds alternating bare
//! and loader (the ratio is the median of the rounds' paired ratios), workers 1,2, prefetch 4. The RSS part re-runs this binary as a child
//! process per configuration (a fresh process, so VmHWM is the loader's alone) over
//! W1 at N and 4N records and W3 at N and 4N sequences.

use std::error::Error;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use zring_engine::{
    Backend, Codec, DType, RaggedLayout, ReadOptions, Schema, Store, WriteOptions, Writer,
};
use zring_loader::{Loader, LoaderOptions};
use zring_platform::AlignedBuf;
use zring_sampler::{Mode, Sampler};
use zring_workloads as synth;

type Res<T> = Result<T, Box<dyn Error>>;

/// Records per batch: 256, or 16 in check mode (see [`check_mode`]).
fn batch() -> usize {
    if check_mode() {
        16
    } else {
        256
    }
}

/// Steps each RSS child runs.
fn rss_steps() -> usize {
    if check_mode() {
        20
    } else {
        200
    }
}

/// `cargo bench` passes --bench; `cargo test --benches` (CI's check mode) does not:
/// every path then runs once on tiny data, checked, with nothing worth timing. The
/// RSS children inherit the mode through ZRING_BENCH_CHECK.
fn check_mode() -> bool {
    std::env::var("ZRING_BENCH_CHECK").is_ok_and(|v| v == "1")
        || !std::env::args().any(|x| x == "--bench" || x == "--rss-child")
}
/// W1: image-like uint8[3,224,224] records (zring's W1 generator), raw codec, written
/// 64 records at a time so the larger RSS store never has to fit in memory.
fn build_w1(path: &Path, n: usize) -> Res<()> {
    let mut w = Writer::create(path, Schema::dense(DType::U8, &synth::W1_SHAPE), raw())?;
    for start in (0..n).step_by(64) {
        w.append_dense(&synth::w1_range(start..(start + 64).min(n), synth::SEED).bytes)?;
    }
    w.close()?;
    Ok(())
}

/// W3: int32 token sequences of 16..=512 (median ~130; zring's W3 generator), raw
/// codec, written 10,000 sequences at a time.
fn build_w3(path: &Path, n: usize) -> Res<()> {
    let mut w = Writer::create(path, Schema::ragged(DType::I32, 1), raw())?;
    for start in (0..n).step_by(10_000) {
        let r = synth::w3_range(start..(start + 10_000).min(n), synth::SEED);
        w.append_ragged(&r.values, &r.cu_seqlens, &r.shapes())?;
    }
    w.close()?;
    Ok(())
}

fn raw() -> WriteOptions {
    WriteOptions::with_codec(Codec::Raw).overwrite(true)
}

fn open(path: &Path, backend: Backend) -> Res<Store> {
    let store = Store::open(path, ReadOptions::with_backend(backend))?;
    // Warm the page cache: W1-W3 are warm-cache workloads.
    std::hint::black_box(std::fs::read(path)?.len());
    Ok(store)
}

/// Bare gathers: the same IID batches, one reused destination, for `secs`.
fn bare(store: &Store, sampler: &Sampler, first: u64, secs: f64) -> Res<Rate> {
    let mut idx = vec![0u64; batch()];
    let mut layout = RaggedLayout::default();
    let mut dense = AlignedBuf::new(store.item_bytes().unwrap_or(0) as usize * batch(), 64)?;
    let mut values = AlignedBuf::new(0, 64)?;
    let mut run = |t: u64| -> Res<()> {
        sampler.fill(t, &mut idx)?;
        if store.schema().is_ragged() {
            store.ragged_layout_into(&idx, &mut layout)?;
            if values.len() < layout.values_bytes {
                values = AlignedBuf::new(layout.values_bytes * 2, 64)?;
            }
            store.gather_ragged_into(&idx, &layout, &mut values[..layout.values_bytes])?;
        } else {
            store.gather(&idx, &mut dense)?;
        }
        Ok(())
    };
    for t in 0..5 {
        run(first + t)?;
    }
    let (start, cpu0) = (Instant::now(), cpu_secs());
    let mut t = first + 5;
    while start.elapsed().as_secs_f64() < secs {
        run(t)?;
        t += 1;
    }
    Ok(Rate::of(t - first - 5, start, cpu0))
}

/// The loader over the same batches, consumer dropping each step, for `secs`.
fn loaded(
    store: &Store,
    sampler: &Sampler,
    first: u64,
    opts: &LoaderOptions,
    secs: f64,
) -> Res<Rate> {
    let mut s = sampler.clone();
    s.seek(first);
    let mut loader = Loader::new([("x", vec![store.clone()])], s, opts.clone())?;
    // Warm-up: the first steps also allocate the pool's buffers.
    for step in loader.by_ref().take(opts.max_live_steps() + 5) {
        step?;
    }
    let (start, cpu0) = (Instant::now(), cpu_secs());
    let mut n = 0u64;
    while start.elapsed().as_secs_f64() < secs {
        std::hint::black_box(loader.next().ok_or("loader ended")??.step);
        n += 1;
    }
    let rate = Rate::of(n, start, cpu0);
    loader.close();
    Ok(rate)
}

/// The bytes of batch `idx`, record by record through `Store::get` (no gather).
fn source(store: &Store, idx: &[u64]) -> Res<Vec<u8>> {
    let mut out = Vec::new();
    for &i in idx {
        out.extend_from_slice(&store.get(i)?);
    }
    Ok(out)
}

/// Before anything is timed: the bare gathers and the loader both deliver exactly the
/// records the sampler names, so a bench that reads wrong data fails instead of
/// reporting a figure.
fn check(store: &Store, sampler: &Sampler, opts: &LoaderOptions) -> Res<()> {
    let mut loader = Loader::new([("x", vec![store.clone()])], sampler.clone(), opts.clone())?;
    for step in loader.by_ref().take(4) {
        let step = step?;
        let want = source(store, &sampler.batch(step.step))?;
        let got = step.get("x", 0).ok_or("no tensor x")?.bytes();
        if got != &want[..] {
            return Err(format!(
                "loader step {}: bytes differ from the store's records",
                step.step
            )
            .into());
        }
        let bare = bare_once(store, &sampler.batch(step.step))?;
        if bare != want {
            return Err(format!(
                "bare gather of step {}: bytes differ from the store's records",
                step.step
            )
            .into());
        }
    }
    loader.close();
    Ok(())
}

/// One bare gather of `idx`, the way [`bare`] makes them.
fn bare_once(store: &Store, idx: &[u64]) -> Res<Vec<u8>> {
    if store.schema().is_ragged() {
        let layout = store.ragged_layout(idx)?;
        let mut values = AlignedBuf::new(layout.values_bytes, 64)?;
        store.gather_ragged_into(idx, &layout, &mut values)?;
        Ok(values.to_vec())
    } else {
        let mut dense = AlignedBuf::new(store.item_bytes().unwrap_or(0) as usize * idx.len(), 64)?;
        store.gather(idx, &mut dense)?;
        Ok(dense.to_vec())
    }
}

/// CPU seconds used by the whole process (all threads) so far.
fn cpu_secs() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// One measurement: batches per wall second and CPU microseconds per batch.
#[derive(Clone, Copy)]
struct Rate {
    per_sec: f64,
    cpu_us: f64,
}

impl Rate {
    fn of(batches: u64, wall: Instant, cpu0: f64) -> Self {
        let n = batches.max(1) as f64;
        Rate {
            per_sec: n / wall.elapsed().as_secs_f64(),
            cpu_us: (cpu_secs() - cpu0) * 1e6 / n,
        }
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

struct Args {
    w1: usize,
    w3: usize,
    secs: f64,
    rounds: usize,
    workers: Vec<usize>,
    prefetch: usize,
    rss: bool,
    throughput: bool,
    helps: bool,
}

fn args() -> Res<Args> {
    let mut a = Args {
        w1: 2000,
        w3: 200_000,
        secs: 0.5,
        rounds: 7,
        workers: vec![1, 2],
        prefetch: 4,
        rss: true,
        throughput: true,
        helps: true,
    };
    if check_mode() {
        a = Args {
            w1: 64,
            w3: 2000,
            secs: 0.0,
            rounds: 1,
            ..a
        };
    }
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut val = || it.next().ok_or(format!("{k} needs a value"));
        match k.as_str() {
            "--w1" => a.w1 = val()?.parse()?,
            "--w3" => a.w3 = val()?.parse()?,
            "--secs" => a.secs = val()?.parse()?,
            "--rounds" => a.rounds = val()?.parse()?,
            "--prefetch" => a.prefetch = val()?.parse()?,
            "--workers" => {
                a.workers = val()?
                    .split(',')
                    .map(str::parse)
                    .collect::<Result<_, _>>()?
            }
            "--skip-rss" => a.rss = false,
            "--skip-throughput" => a.throughput = false,
            "--no-consumer-help" => a.helps = false,
            _ => {} // --bench
        }
    }
    Ok(a)
}

fn throughput(name: &str, path: &Path, records: usize, a: &Args) -> Res<()> {
    let store = open(path, Backend::Mmap)?;
    let sampler = Sampler::new(records as u64, batch(), Mode::Iid, 7)?;
    println!(
        "\n{name}: {records} records, IID batch {}, backend {}",
        batch(),
        store.backend()
    );
    println!(
        "| config | bare batches/s | loader batches/s | loader/bare (median of paired rounds) | min..max | bare CPU us/batch | loader CPU us/batch |"
    );
    println!("|---|---|---|---|---|---|---|");
    for &workers in &a.workers {
        let opts = LoaderOptions::new(workers, a.prefetch).with_consumer_helps(a.helps);
        check(&store, &sampler, &opts)?;
        let (mut b, mut l, mut r, mut bc, mut lc) = (vec![], vec![], vec![], vec![], vec![]);
        for round in 0..a.rounds {
            // Different batches each round, the same batches for both contenders,
            // measured back to back so that both see the same machine load.
            let first = round as u64 * 1_000_000;
            let bare = bare(&store, &sampler, first, a.secs)?;
            let load = loaded(&store, &sampler, first, &opts, a.secs)?;
            b.push(bare.per_sec);
            l.push(load.per_sec);
            r.push(load.per_sec / bare.per_sec);
            bc.push(bare.cpu_us);
            lc.push(load.cpu_us);
        }
        let (lo, hi) = (
            r.iter().copied().fold(f64::INFINITY, f64::min),
            r.iter().copied().fold(0.0, f64::max),
        );
        println!(
            "| workers {workers}, prefetch {} | {:.1} | {:.1} | {:.3}x | {lo:.2}..{hi:.2} | {:.0} | {:.0} |",
            a.prefetch,
            median(b),
            median(l),
            median(r),
            median(bc),
            median(lc)
        );
    }
    Ok(())
}

fn status_kib(key: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    zring_testkit::os::kib_field(&status, key).unwrap_or(0)
}

/// Child process: open one store, run the loader for `steps`, print the memory.
fn rss_child(
    path: &Path,
    backend: Backend,
    workers: usize,
    prefetch: usize,
    steps: usize,
) -> Res<()> {
    let store = Store::open(path, ReadOptions::with_backend(backend))?;
    let before = status_kib("VmHWM:");
    let sampler = Sampler::new(store.len(), batch(), Mode::Iid, 11)?;
    let mut loader = Loader::new(
        [("x", vec![store])],
        sampler,
        LoaderOptions::new(workers, prefetch),
    )?;
    let mut batch_bytes = 0;
    for step in loader.by_ref().take(steps) {
        batch_bytes = batch_bytes.max(step?.get("x", 0).map_or(0, |t| t.bytes().len()));
    }
    let stats = loader.stats();
    println!(
        "{} {} {} {} {} {} {}",
        before,
        status_kib("VmHWM:"),
        status_kib("RssAnon:"),
        status_kib("RssFile:"),
        batch_bytes,
        stats.buffers.live_high_water,
        stats.buffers.allocations
    );
    Ok(())
}

fn rss(dir: &Path, a: &Args) -> Res<()> {
    println!(
        "\nPeak RSS, one child process per row (fresh VmHWM), batch {}, {} steps",
        batch(),
        rss_steps()
    );
    println!("| dataset | records | file MiB | backend | workers+prefetch | max batch MiB | VmHWM after open MiB | VmHWM after run MiB | RssAnon end MiB | RssFile end MiB | bound (W+P+1) x batch MiB | buffers live at most / allocated |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    let sets: Vec<(&str, PathBuf, usize)> = vec![
        ("W1", dir.join("w1-small.zr"), a.w1 / 2),
        ("W1", dir.join("w1-large.zr"), a.w1 * 2),
        ("W3", dir.join("w3-small.zr"), a.w3 / 4),
        ("W3", dir.join("w3-large.zr"), a.w3),
    ];
    let exe = std::env::current_exe()?;
    for (name, path, n) in &sets {
        if *name == "W1" {
            build_w1(path, *n)?;
        } else {
            build_w3(path, *n)?;
        }
        let file_mib = std::fs::metadata(path)?.len() as f64 / (1 << 20) as f64;
        for backend in [Backend::Pread, Backend::Mmap] {
            for (w, p) in [(2usize, 4usize), (1, 1)] {
                let out = Command::new(&exe)
                    .args(["--rss-child", &path.display().to_string(), backend.name()])
                    .args([w.to_string(), p.to_string(), rss_steps().to_string()])
                    .output()?;
                if !out.status.success() {
                    return Err(String::from_utf8_lossy(&out.stderr).into_owned().into());
                }
                let text = String::from_utf8(out.stdout)?;
                let f: Vec<f64> = text
                    .split_whitespace()
                    .map(|x| x.parse().unwrap_or(0.0))
                    .collect();
                let mib = |k: f64| k / 1024.0;
                let batch_mib = f[4] / (1 << 20) as f64;
                if f[5] > (w + p + 1) as f64 {
                    return Err(format!(
                        "{name} {w}+{p}: {} buffers live at once, more than W+P+1",
                        f[5]
                    )
                    .into());
                }
                println!(
                    "| {name} | {n} | {file_mib:.0} | {} | {w}+{p} | {batch_mib:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {} / {} |",
                    backend.name(),
                    mib(f[0]),
                    mib(f[1]),
                    mib(f[2]),
                    mib(f[3]),
                    (w + p + 1) as f64 * batch_mib,
                    f[5],
                    f[6]
                );
            }
        }
        std::fs::remove_file(path)?;
    }
    Ok(())
}

fn main() -> Res<()> {
    let argv: Vec<String> = std::env::args().collect();
    if let Some(k) = argv.iter().position(|a| a == "--rss-child") {
        let get = |i: usize| argv.get(k + i).cloned().unwrap_or_default();
        let backend = match get(2).as_str() {
            "mmap" => Backend::Mmap,
            _ => Backend::Pread,
        };
        return rss_child(
            Path::new(&get(1)),
            backend,
            get(3).parse()?,
            get(4).parse()?,
            get(5).parse()?,
        );
    }
    let a = args()?;
    if check_mode() {
        // Set before any thread starts; the RSS children inherit it.
        std::env::set_var("ZRING_BENCH_CHECK", "1");
    }
    let dir =
        tempfile::tempdir_in(std::env::var("ZRING_BENCH_DIR").unwrap_or_else(|_| "/tmp".into()))?;
    if a.throughput {
        let t0 = Instant::now();
        let w1 = dir.path().join("w1.zr");
        build_w1(&w1, a.w1)?;
        let w3 = dir.path().join("w3.zr");
        build_w3(&w3, a.w3)?;
        println!(
            "built W1 ({} records) and W3 ({} records) in {:.1} s",
            a.w1,
            a.w3,
            t0.elapsed().as_secs_f64()
        );
        throughput("W1 raw", &w1, a.w1, &a)?;
        throughput("W3 raw ragged", &w3, a.w3, &a)?;
        std::fs::remove_file(&w1)?;
        std::fs::remove_file(&w3)?;
    }
    if a.rss {
        rss(dir.path(), &a)?;
    }
    Ok(())
}

//! Crash safety of the publish protocol: a child process writing stores is SIGKILLed
//! at moments spread over its whole run (during appends, during close's metadata
//! write, fsync and rename, after it finished). Afterwards each final path is either
//! absent or a complete store holding exactly the records appended, and nothing but
//! hidden `.zr-tmp` files is left beside it.
//!
//! The child is this test binary run again with `--exact child_writer_entry
//! --ignored` and `CHILD_DIR_ENV` naming its directory. Some kills are placed exactly:
//! the child kills itself at a numbered point of its run (`KILL_AT_ENV`: before each
//! create, after each append, as each close starts, after each publish), so every
//! outcome (nothing published, each prefix of the stores, all of them) is reached
//! whatever the machine's load, and each is checked to be the one its point implies.
//! Others land wherever scheduling puts them: from the parent after a delay, or aimed
//! inside a close by the child itself (`KILL_IN_CLOSE_ENV`, since a close can be
//! shorter than an outside kill's jitter). For those only what holds wherever a kill
//! lands is asserted: each store absent or complete, never torn; where they landed is
//! printed, not asserted, as it depends on timing.

#![cfg(unix)]

mod common;

use std::fs;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::*;
use zring_engine::{Codec, DType, Schema, WriteOptions, Writer};

const CHILD_DIR_ENV: &str = "ZRING_CRASH_CHILD_DIR";
const KILL_IN_CLOSE_ENV: &str = "ZRING_CRASH_KILL_IN_CLOSE";
const KILL_AT_ENV: &str = "ZRING_CRASH_KILL_AT";
/// The stores a child writes, in this order.
const STORES: [&str; 3] = ["raw.zr", "zstd.zr", "ragged.zr"];
const APPENDS: usize = 4;
/// The child's kill points per store: before its create, after each append, as its
/// close starts and after it was published.
const POINTS_PER_STORE: usize = APPENDS + 3;

/// The records of store `s`, as the child appends them (one batch per append).
enum Batches {
    Dense {
        schema: Schema,
        batches: Vec<Vec<u8>>,
    },
    Ragged {
        batches: Vec<Ragged>,
    },
}

fn batches(s: usize) -> Batches {
    match s {
        0 | 1 => {
            let width = if s == 0 { 4096 } else { 1024 };
            let per = if s == 0 { 96 } else { 256 };
            let schema = Schema::dense(DType::U8, &[width as u64]);
            let batches = (0..APPENDS)
                .map(|b| dense_records(per, width, (s * 100 + b) as u64, |i| s == 0 && i % 4 == 0))
                .collect();
            Batches::Dense { schema, batches }
        }
        _ => Batches::Ragged {
            batches: (0..APPENDS)
                .map(|b| ragged_records(150, 1, DType::I32, 300, 200 + b as u64))
                .collect(),
        },
    }
}

fn options(s: usize) -> WriteOptions {
    WriteOptions::with_codec(if s == 0 { Codec::Raw } else { Codec::Zstd })
}

/// Tells the parent (through the child's stdout) which phase the child entered and
/// when (µs since the child started), so it can tell where each kill landed.
fn phase(p: &str) {
    use std::io::Write;
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    let us = START.get_or_init(Instant::now).elapsed().as_micros();
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "phase:{p}:{us}");
    let _ = out.flush();
}

/// In the child: the next kill point of its run; when `KILL_AT_ENV` names it, the
/// process SIGKILLs itself there, before it does anything more.
fn point() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let kill_at = std::env::var(KILL_AT_ENV).ok().map(|v| v.parse::<usize>());
    if kill_at == Some(Ok(n)) {
        // SAFETY: kill(2) on our own pid with a valid signal number.
        unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
        // A signal sent to oneself is delivered before kill(2) returns; should this
        // thread still run, it must not go on writing.
        loop {
            std::thread::park();
        }
    }
}

/// The stores complete after a kill at point `n` of the child's run (see `point`):
/// those before the point's store, and its own once the point is past its publish.
fn published_at_point(n: usize) -> usize {
    let (store, at) = (n / POINTS_PER_STORE, n % POINTS_PER_STORE);
    store + usize::from(at == POINTS_PER_STORE - 1)
}

/// In the child: when `KILL_IN_CLOSE_ENV` is `"<store>:<µs>"` and store `s` is
/// that store, SIGKILL this process that long after its `close` starts — aimed at
/// the metadata write, fsync, link and directory fsync, however short they are.
fn arm_kill_in_close(s: usize) {
    let Some(spec) = std::env::var(KILL_IN_CLOSE_ENV).ok() else {
        return;
    };
    let (store, us) = spec.split_once(':').expect("<store>:<µs>");
    if store.parse::<usize>().expect("store") != s {
        return;
    }
    let delay = Duration::from_micros(us.parse().expect("µs"));
    std::thread::spawn(move || {
        std::thread::sleep(delay);
        // SAFETY: kill(2) on our own pid with a valid signal number.
        unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
    });
}

/// Writes store `s` into `dir` as the child does.
fn write_store(dir: &Path, s: usize) {
    let path = dir.join(STORES[s]);
    phase("append");
    point();
    match batches(s) {
        Batches::Dense { schema, batches } => {
            let mut w = Writer::create(&path, schema, options(s)).expect("create");
            for b in &batches {
                w.append_dense(b).expect("append");
                point();
            }
            arm_kill_in_close(s);
            phase("close");
            point();
            w.close().expect("close");
        }
        Batches::Ragged { batches } => {
            let mut w =
                Writer::create(&path, Schema::ragged(DType::I32, 1), options(s)).expect("create");
            for b in &batches {
                w.append_ragged(&b.values, &b.cu_seqlens, &b.shapes)
                    .expect("append");
                point();
            }
            arm_kill_in_close(s);
            phase("close");
            point();
            w.close().expect("close");
        }
    }
    phase("published");
    point();
}

/// The records store `s` must hold when complete.
fn expected(s: usize) -> Vec<Vec<u8>> {
    match batches(s) {
        Batches::Dense { schema, batches } => {
            let w = schema.item_bytes().expect("dense") as usize;
            batches
                .iter()
                .flat_map(|b| b.chunks(w).map(<[u8]>::to_vec).collect::<Vec<_>>())
                .collect()
        }
        Batches::Ragged { batches } => batches
            .iter()
            .flat_map(|b| {
                (0..b.len())
                    .map(|i| b.record(i).to_vec())
                    .collect::<Vec<_>>()
            })
            .collect(),
    }
}

/// Not a real test: the body of the child process. Run by the parent only.
#[test]
#[ignore = "the child process of the crash tests; the parent runs it"]
fn child_writer_entry() {
    let Some(dir) = std::env::var_os(CHILD_DIR_ENV) else {
        return;
    };
    for s in 0..STORES.len() {
        write_store(Path::new(&dir), s);
    }
}

/// How a child dies (if it is not killed from outside).
#[derive(Clone, Copy)]
enum Death {
    /// It runs to the end.
    None,
    /// At its kill point `n`.
    AtPoint(usize),
    /// That many µs after store `s`'s close starts: `(s, µs)`.
    InClose(usize, u64),
}

/// Starts the child writing into `dir`, armed to kill itself as `death` says.
fn spawn_child(dir: &Path, death: Death) -> Child {
    let mut cmd = zring_testkit::rerun_test("child_writer_entry");
    match death {
        Death::None => {}
        Death::AtPoint(n) => {
            cmd.env(KILL_AT_ENV, n.to_string());
        }
        Death::InClose(s, us) => {
            cmd.env(KILL_IN_CLOSE_ENV, format!("{s}:{us}"));
        }
    }
    cmd.env(CHILD_DIR_ENV, dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the child writer")
}

/// What a killed child left: how many stores were published (a prefix of
/// `STORES`, each checked complete and exact) and how many temporary files.
fn check_dir(dir: &Path, expect: &[Vec<Vec<u8>>]) -> (usize, usize) {
    let mut temps = 0;
    for entry in fs::read_dir(dir).expect("list the child's directory") {
        let name = entry
            .expect("entry")
            .file_name()
            .to_string_lossy()
            .into_owned();
        if STORES.contains(&name.as_str()) {
            continue;
        }
        assert!(
            name.starts_with('.') && name.ends_with(".zr-tmp"),
            "stray file {name:?} could be mistaken for a store"
        );
        temps += 1;
    }
    let mut published = 0;
    for (s, name) in STORES.iter().enumerate() {
        let path = dir.join(name);
        if !path.exists() {
            continue;
        }
        assert_eq!(published, s, "{name} exists but an earlier store does not");
        let store = open(&path).unwrap_or_else(|e| panic!("{name} is half-written: {e}"));
        store
            .verify()
            .unwrap_or_else(|e| panic!("{name} fails verify: {e}"));
        let got = read_all(&store).expect("read back");
        assert!(
            got == expect[s],
            "{name} does not hold exactly the records appended"
        );
        published += 1;
    }
    (published, temps)
}

/// The `(phase, µs)` lines the child printed.
fn phases(out: &[u8]) -> Vec<(String, u64)> {
    String::from_utf8_lossy(out)
        .lines()
        .filter_map(|l| {
            let (name, us) = l.strip_prefix("phase:")?.split_once(':')?;
            Some((name.to_string(), us.parse().ok()?))
        })
        .collect()
}

/// Reaps a killed child, checks what it left (each store absent or complete) and
/// returns how many stores were published and how the child ended.
fn after_kill(
    child: Child,
    dir: &Path,
    expect: &[Vec<Vec<u8>>],
    t: &mut Tally,
) -> (usize, std::process::ExitStatus) {
    let out = child.wait_with_output().expect("reap the child");
    let last = phases(&out.stdout)
        .pop()
        .map_or("start".to_string(), |(p, _)| p);
    *t.by_phase.entry(last).or_default() += 1;
    let (published, temps) = check_dir(dir, expect);
    t.by_published[published] += 1;
    t.with_temps += u32::from(temps > 0);
    fs::remove_dir_all(dir).expect("clean up");
    (published, out.status)
}

#[derive(Default, Debug)]
struct Tally {
    /// How many stores were complete after each kill (0 ..= STORES.len()).
    by_published: [u32; STORES.len() + 1],
    /// The last phase the child reported before it died.
    by_phase: std::collections::BTreeMap<String, u32>,
    with_temps: u32,
}

#[test]
fn sigkilled_writers_leave_each_store_absent_or_complete() {
    let started = Instant::now();
    let root = tempfile::tempdir().expect("tempdir");
    let expect: Vec<Vec<Vec<u8>>> = (0..STORES.len()).map(expected).collect();

    // Uninterrupted runs set the time scale (the slower of two, as other work on
    // the machine makes it vary) and measure how long each close takes.
    let mut typical = Duration::ZERO;
    let mut close_us = [0u64; STORES.len()];
    for run in 0..2 {
        let calib = root.path().join(format!("calibration-{run}"));
        fs::create_dir(&calib).expect("mkdir");
        let t0 = Instant::now();
        let out = spawn_child(&calib, Death::None)
            .wait_with_output()
            .expect("wait");
        typical = typical.max(t0.elapsed());
        assert!(out.status.success(), "the uninterrupted child failed");
        assert_eq!(check_dir(&calib, &expect), (STORES.len(), 0));
        let p = phases(&out.stdout);
        let mut s = 0;
        for w in p.windows(2) {
            if w[0].0 == "close" && w[1].0 == "published" {
                close_us[s] = close_us[s].max(w[1].1 - w[0].1);
                s += 1;
            }
        }
        assert_eq!(s, STORES.len(), "phases: {p:?}");
    }

    let mut tally = Tally::default();
    // Kills at every point of the run, placed by the child itself: each leaves
    // exactly the stores published before it.
    for n in 0..STORES.len() * POINTS_PER_STORE {
        let dir = root.path().join(format!("point-{n}"));
        fs::create_dir(&dir).expect("mkdir");
        let child = spawn_child(&dir, Death::AtPoint(n));
        let (published, status) = after_kill(child, &dir, &expect, &mut tally);
        assert_eq!(
            status.signal(),
            Some(libc::SIGKILL),
            "the child was to kill itself at point {n}: {status}"
        );
        assert_eq!(
            published,
            published_at_point(n),
            "killed at point {n}: {published} stores published"
        );
    }

    let mut rng = Rng::new(0xC4A5);
    // Kills from outside at moments spread evenly from 0 to 1.3x the typical run.
    let kills = 60u32;
    for k in 0..kills {
        let dir = root.path().join(format!("kill-{k}"));
        fs::create_dir(&dir).expect("mkdir");
        let frac = (f64::from(k) + rng.below(1000) as f64 / 1000.0) / f64::from(kills);
        let mut child = spawn_child(&dir, Death::None);
        std::thread::sleep(typical.mul_f64(frac * 1.3));
        // SIGKILL on Unix; an error only means the child already exited.
        let _ = child.kill();
        after_kill(child, &dir, &expect, &mut tally);
    }
    // Kills aimed inside each store's close, which may be far shorter than the
    // scheduling noise of an outside kill.
    let aimed = 24u32;
    for k in 0..aimed {
        let dir = root.path().join(format!("aimed-{k}"));
        fs::create_dir(&dir).expect("mkdir");
        let s = k as usize % STORES.len();
        let child = spawn_child(&dir, Death::InClose(s, rng.below(close_us[s] + 1)));
        after_kill(child, &dir, &expect, &mut tally);
    }
    let took = started.elapsed();
    println!(
        "typical run {typical:?}, closes {close_us:?} µs; {} kills -> {tally:?}; {took:?}",
        kills + aimed
    );
    // Where the timed kills landed depends on the machine's load: printed above, not
    // asserted. Every kill's outcome was checked in `after_kill`.
}

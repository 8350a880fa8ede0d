//! End-to-end tests of `zring bench`'s comparison and reporting features: fio on the
//! same file, several jobs, the loader mode, time series, plots and replayed record
//! sizes. Every run is tiny (a few hundred small records, a fraction of a second).
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;
use zring_engine::{Codec, DType, Schema, WriteOptions, Writer};

fn zring_with_path(args: &[&str], path_var: Option<&Path>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_zring"));
    cmd.args(args);
    if let Some(p) = path_var {
        cmd.env("PATH", p);
    }
    cmd.output().expect("run zring")
}

fn ok_with_path(args: &[&str], path_var: Option<&Path>) -> String {
    let o = zring_with_path(args, path_var);
    assert!(
        o.status.success(),
        "zring {args:?} failed: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn ok(args: &[&str]) -> String {
    ok_with_path(args, None)
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// `zring bench --json` on a synthetic store built in a temporary directory.
fn bench_json(args: &[&str]) -> Value {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut all = vec!["bench", "--json", "--dir", s(dir.path())];
    all.extend_from_slice(args);
    serde_json::from_str(&ok(&all)).expect("bench json")
}

const TINY: [&str; 6] = [
    "--count",
    "200",
    "--record-bytes",
    "4096",
    "--duration",
    "0.2",
];

fn tiny<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = TINY.to_vec();
    v.extend_from_slice(extra);
    v
}

fn fio_installed() -> bool {
    Command::new("fio").arg("--version").output().is_ok()
}

#[test]
fn compare_fio_runs_the_equivalent_job_on_the_same_file() {
    if !fio_installed() {
        // CI installs fio (scripts/test.sh); elsewhere the skip path is tested below.
        assert!(std::env::var_os("CI").is_none(), "CI must have fio");
        return;
    }
    let v = bench_json(&tiny(&[
        "--codec",
        "raw",
        "--backend",
        "uring",
        "--qd",
        "8",
        "--threads",
        "1",
        "--jobs",
        "2",
        "--compare",
        "fio",
    ]));
    let f = &v["fio"];
    assert!(f["skipped"].is_null(), "{f}");
    assert_eq!(f["filename"], v["store"]["path"]);
    assert_eq!(f["block_bytes"], 4096);
    assert_eq!(f["direct"], false);
    assert_eq!(
        f["invalidate"], false,
        "a warm run compares with a warm fio"
    );
    assert_eq!(f["numjobs"], 2, "2 jobs x 1 thread read side by side");
    // Where io_uring is blocked the engine reads with pread, and fio with psync.
    match v["config"]["backend_used"].as_str() {
        Some("uring") => {
            assert_eq!(f["ioengine"], "io_uring");
            assert_eq!(f["iodepth"], 8);
        }
        other => {
            assert_eq!(other, Some("pread"));
            assert_eq!(f["ioengine"], "psync");
            // Fails under ZRING_REQUIRE_URING=1: the io_uring comparison must not vanish.
            zring_testkit::require_uring(
                "io_uring (zring bench --backend uring --compare fio)",
                Some("the bench read with pread"),
            );
        }
    }
    assert!(f["mib_per_s"].as_f64().expect("fio MiB/s") > 0.0);
    assert!(f["reads_per_s"].as_f64().expect("fio IOPS") > 0.0);
    let ratio = f["zring_physical_vs_fio"].as_f64().expect("ratio");
    let zring = v["result"]["physical_mib_per_s"].as_f64().expect("zring");
    let fio = f["mib_per_s"].as_f64().expect("fio");
    assert!((ratio - zring / fio).abs() < 1e-6 * ratio.max(1.0));
    assert!(f["command"]
        .as_str()
        .expect("command")
        .contains("--rw=randread"));
    // The synthetic store's write is compared with fio's sequential write.
    let w = &f["write"];
    assert!(w["mib_per_s"].as_f64().expect("fio write") > 0.0, "{w}");
    assert!(w["bytes"].as_u64().expect("bytes") >= 200 * 4096);
    // Compared in file bytes (what the disk wrote for both), the fastest of fio's
    // writes (buffered, O_DIRECT with a queue) being the disk's.
    let file = v["write"]["file_mib_per_s"].as_f64().expect("file MiB/s");
    let ratio = w["zring_write_vs_fio"].as_f64().expect("ratio");
    assert!((ratio - file / w["mib_per_s"].as_f64().expect("fio")).abs() < 1e-6 * ratio.max(1.0));
    assert!(v["write"]["file_bytes"].as_u64() >= v["write"]["logical_bytes"].as_u64());
    let runs = w["runs"].as_array().expect("runs");
    assert!(
        !runs.is_empty()
            && runs
                .iter()
                .all(|r| r["mib_per_s"].as_f64() <= w["mib_per_s"].as_f64())
    );
    assert_eq!(v["write"]["from_memory"], true);
    // A fio that fails is reported with its error; zring's figures still stand.
    let v = bench_json(&tiny(&[
        "--codec",
        "raw",
        "--compare",
        "fio",
        "--fio-iomem",
        "bogus",
    ]));
    let why = v["fio"]["skipped"].as_str().expect("skipped");
    assert!(
        why.contains("fio did not run") && why.contains("bogus"),
        "{why}"
    );
    assert!(v["result"]["records_per_s"].as_f64().expect("rate") > 0.0);
}

#[test]
fn compare_fio_without_fio_says_it_was_skipped() {
    let empty = tempfile::tempdir().expect("tempdir");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut args = vec!["bench", "--dir", s(dir.path())];
    args.extend(tiny(&["--codec", "raw", "--compare", "fio"]));
    let text = ok_with_path(&args, Some(empty.path()));
    assert!(
        text.contains("fio       comparison skipped: fio is not installed"),
        "{text}"
    );
    args.push("--json");
    let v: Value = serde_json::from_str(&ok_with_path(&args, Some(empty.path()))).expect("json");
    assert!(v["fio"]["skipped"]
        .as_str()
        .expect("reason")
        .contains("not installed"));
}

#[test]
fn jobs_are_reported_each_and_summed() {
    let v = bench_json(&tiny(&["--codec", "raw", "--jobs", "2", "--threads", "1"]));
    let r = &v["result"];
    let jobs = r["jobs"].as_array().expect("per-job results");
    assert_eq!(jobs.len(), 2);
    let sum = |k: &str| jobs.iter().map(|j| j[k].as_u64().expect(k)).sum::<u64>();
    assert_eq!(sum("records"), r["records"].as_u64().expect("records"));
    assert_eq!(sum("ops"), r["batches"].as_u64().expect("batches"));
    for j in jobs {
        assert!(j["ops"].as_u64().expect("ops") >= 1);
        assert!(j["timed_seconds"].as_f64().expect("timed") >= 0.2);
        assert!(j["series"]["t_s"].as_array().is_some());
    }
    assert_eq!(v["config"]["jobs"], 2);
    // Jobs are for gathers; the other modes have their own parallelism.
    let o = zring_with_path(&["bench", "--mode", "get", "--jobs", "2"], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--concurrency"));
}

#[test]
fn loader_mode_delivers_checked_steps_and_reports_peak_memory() {
    let v = bench_json(&[
        "--count",
        "200",
        "--record-bytes",
        "2048",
        "--ragged",
        "--codec",
        "zstd",
        "--mode",
        "loader",
        "--batch",
        "32",
        "--workers",
        "2",
        "--prefetch",
        "2",
        "--duration",
        "0.2",
    ]);
    assert_eq!(v["mode"], "loader");
    assert_eq!(v["check"]["equal"], true);
    assert_eq!(v["check"]["records"], 32);
    assert_eq!(v["config"]["workers"], 2);
    let r = &v["result"];
    let steps = r["batches"].as_u64().expect("steps");
    assert!(steps >= 1);
    assert_eq!(r["records"].as_u64(), Some(steps * 32));
    assert!(r["physical_bytes"].as_u64().expect("physical") > 0);
    assert!(r["wall_seconds"].as_f64().expect("wall") >= 0.2);
    if cfg!(target_os = "linux") {
        assert!(r["peak_rss_bytes"].as_u64().expect("peak RSS") > 0);
    }
    assert!(
        v["baseline"]["decode_limit_mib_per_s"]
            .as_f64()
            .expect("limit")
            > 0.0
    );
}

#[test]
fn json_time_series_has_one_entry_per_interval_in_every_column() {
    let v = bench_json(&tiny(&["--codec", "raw"]));
    let series = &v["result"]["series"];
    let interval = series["interval_s"].as_f64().expect("interval");
    assert!(interval > 0.0 && interval <= 1.0);
    let t: Vec<f64> = series["t_s"]
        .as_array()
        .expect("t_s")
        .iter()
        .map(|x| x.as_f64().expect("t"))
        .collect();
    assert!(!t.is_empty());
    assert!(t.windows(2).all(|w| w[0] < w[1]), "{t:?}");
    for col in [
        "ops_per_s",
        "records_per_s",
        "logical_mib_per_s",
        "physical_mib_per_s",
    ] {
        let xs = series[col].as_array().expect(col);
        assert_eq!(xs.len(), t.len(), "{col}");
        assert!(xs.iter().all(|x| x.as_f64().expect(col) >= 0.0), "{col}");
        assert!(xs.iter().any(|x| x.as_f64().expect(col) > 0.0), "{col}");
    }
    // Each interval's records are its gathers' records: 256 per gather.
    for (ops, recs) in series["ops_per_s"]
        .as_array()
        .unwrap()
        .iter()
        .zip(series["records_per_s"].as_array().unwrap())
    {
        let (o, r) = (ops.as_f64().unwrap(), recs.as_f64().unwrap());
        assert!((r - 256.0 * o).abs() <= 1e-6 * r.max(1.0), "{o} {r}");
    }
    assert!(v["units"]["logical"]
        .as_str()
        .expect("units")
        .contains("decoded"));
}

#[test]
fn plot_writes_a_valid_svg_or_png_and_refuses_other_names() {
    let dir = tempfile::tempdir().expect("tempdir");
    let svg = dir.path().join("run.svg");
    let png = dir.path().join("run.png");
    bench_json(&tiny(&["--codec", "raw", "--plot", s(&svg)]));
    bench_json(&tiny(&[
        "--codec",
        "raw",
        "--mode",
        "loader",
        "--plot",
        s(&png),
    ]));
    let text = std::fs::read_to_string(&svg).expect("svg written");
    assert!(text.starts_with("<svg"), "{}", &text[..text.len().min(80)]);
    assert!(text.trim_end().ends_with("</svg>"));
    assert!(text.contains("throughput over time") && text.contains("latency"));
    let bytes = std::fs::read(&png).expect("png written");
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    assert!(bytes.len() > 1000);
    let o = zring_with_path(&["bench", "--plot", s(&dir.path().join("run.gif"))], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains(".svg or .png"));
}

/// A ragged int32 store of `n` records with lengths 1..=64 elements (4-256 bytes).
fn ragged_source(path: &Path, n: u64, codec: Codec) -> (u64, Vec<u32>) {
    let mut w = Writer::create(
        path,
        Schema::ragged(DType::I32, 1),
        WriteOptions::with_codec(codec),
    )
    .expect("writer");
    let lens: Vec<u32> = (0..n).map(|i| 1 + (i * 37 % 64) as u32).collect();
    let mut cu = vec![0u64];
    for &l in &lens {
        cu.push(cu[cu.len() - 1] + u64::from(l));
    }
    let values: Vec<u8> = (0..cu[cu.len() - 1] as i32)
        .flat_map(i32::to_le_bytes)
        .collect();
    w.append_ragged(&values, &cu, &lens).expect("append");
    w.close().expect("close");
    (values.len() as u64, lens.iter().map(|l| l * 4).collect())
}

#[test]
fn replay_builds_a_store_with_the_sources_record_sizes_and_codec() {
    let dir = tempfile::tempdir().expect("tempdir");
    let source = dir.path().join("source.zr");
    let (logical, _) = ragged_source(&source, 300, Codec::Zstd);
    let v = bench_json(&["--replay", s(&source), "--duration", "0.1", "--batch", "16"]);
    let st = &v["store"];
    assert_eq!(st["records"], 300);
    assert_eq!(st["layout"], "ragged");
    assert_eq!(st["logical_bytes"], logical, "same sizes, record by record");
    assert_eq!(st["codec"], "zstd", "the source's codec by default");
    assert_eq!(st["replayed_from"], s(&source));
    assert_eq!(v["check"]["equal"], true);
    // --codec overrides the source's; a dense source replays as dense.
    let v = bench_json(&[
        "--replay",
        s(&source),
        "--codec",
        "raw",
        "--duration",
        "0.05",
    ]);
    assert_eq!(v["store"]["codec"], "raw");
    let dense = dir.path().join("dense.zr");
    let mut w = Writer::create(
        &dense,
        Schema::dense(DType::U8, &[100]),
        WriteOptions::default(),
    )
    .expect("writer");
    w.append_dense(&vec![7u8; 100 * 50]).expect("append");
    w.close().expect("close");
    let v = bench_json(&["--replay", s(&dense), "--duration", "0.05"]);
    assert_eq!(v["store"]["records"], 50);
    assert_eq!(v["store"]["item_bytes"], 100);
    assert_eq!(v["store"]["layout"], "dense");
}

#[test]
fn the_text_report_explains_its_units_backend_and_baseline() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut args = vec!["bench", "--dir", s(dir.path())];
    args.extend(tiny(&["--codec", "raw"]));
    let text = ok(&args);
    for want in [
        "decoded record bytes delivered",
        "bytes read from the file, as stored",
        "chosen by auto because the store is in the page cache",
        "measures memory, not the device",
        "--direct",
        "copying the same records out of a mapping of the file",
        "x that copy",
    ] {
        assert!(text.contains(want), "{want}:\n{text}");
    }
    assert!(!text.contains("load average"), "{text}");
}

/// Whether a `--json` report's baselines (the in-process one, and fio where it is the
/// device's limit) are exceeded by more than the report's noise margin; the bench
/// flags that itself, and the flag must agree with the ratios it prints.
fn exceeded_baselines(v: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let b = &v["baseline"];
    if let Some(ratio) = b["gather_vs_baseline"].as_f64() {
        let margin = b["noise_margin"].as_f64().expect("noise margin");
        let busier = b["busier_during_baseline"] == true;
        assert_eq!(b["exceeded"], ratio > 1.0 + margin && !busier, "{b}");
        if b["exceeded"] == true {
            out.push(format!("{}: {ratio:.2}x", b["what"]));
        }
    }
    if v["fio"]["exceeded"] == true {
        out.push(format!("fio: {}", v["fio"]["zring_physical_vs_fio"]));
    }
    if v["fio"]["write"]["exceeded"] == true {
        out.push(format!(
            "fio write: {}",
            v["fio"]["write"]["zring_write_vs_fio"]
        ));
    }
    out
}

#[test]
fn no_baseline_is_exceeded_by_more_than_noise() {
    // A baseline is a limit: raw stores against the copy of the same records, zstd and
    // zstd-dict ones against decoding them on as many threads. Timing on a shared
    // machine is noisy, so a case fails only when every one of three runs exceeds.
    let cases: [&[&str]; 3] = [
        &[
            "--codec",
            "raw",
            "--record-bytes",
            "2048",
            "--count",
            "2000",
        ],
        &[
            "--codec",
            "zstd",
            "--record-bytes",
            "16384",
            "--count",
            "300",
        ],
        &[
            "--codec",
            "zstd-dict",
            "--ragged",
            "--record-bytes",
            "615",
            "--count",
            "3000",
        ],
    ];
    for case in cases {
        let mut args = case.to_vec();
        args.extend(["--duration", "0.3"]);
        let runs: Vec<Vec<String>> = (0..3)
            .map(|_| {
                let v = bench_json(&args);
                assert!(v["baseline"]["mib_per_s"].as_f64().expect("baseline") > 0.0);
                exceeded_baselines(&v)
            })
            .take_while(|e| !e.is_empty())
            .collect();
        assert!(runs.len() < 3, "{case:?}: exceeded in every run: {runs:?}");
    }
}

#[test]
fn cold_runs_without_root_and_level_is_range_checked() {
    // Without root, --cold drops the store file's own pages (posix_fadvise); as
    // root, every cache. Either way the run is cold and says how.
    let v = bench_json(&tiny(&["--codec", "raw", "--cold", "--backend", "pread"]));
    let how = v["config"]["cold_by"].as_str().expect("cold_by");
    assert!(how == "fadvise" || how == "drop_caches", "{how}");
    assert_eq!(v["check"]["equal"], true);
    for level in ["23", "-200000"] {
        let o = zring_with_path(&["bench", "--level", level, "--count", "10"], None);
        assert_eq!(o.status.code(), Some(2), "a usage error");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("--level must be between -131072 and 22"),
            "{err}"
        );
    }
}

#[test]
fn loader_mode_with_a_lookahead_budget_says_what_it_chose_and_checks_its_steps() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut args = vec!["bench", "--dir", s(dir.path()), "--mode", "loader"];
    args.extend(tiny(&["--batch", "16", "--lookahead", "64M"]));
    let o = zring_with_path(&args, None);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains(
            "(look-ahead: sized from the device's queue within 64.00 MiB, at least 2 and 4)"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("delivered records equal"), "{stdout}");
    // Fixed depth says so.
    let mut args = vec!["bench", "--dir", s(dir.path()), "--mode", "loader"];
    args.extend(tiny(&[
        "--batch",
        "16",
        "--lookahead",
        "0",
        "--workers",
        "3",
    ]));
    let o = zring_with_path(&args, None);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        stdout.contains(", 3 workers, 4 steps read ahead (as given),"),
        "{stdout}"
    );
}

#[test]
fn the_sampler_option_orders_gathers_and_steps_and_every_order_is_checked() {
    for mode in ["sequential", "cyclic"] {
        // Gathers through pread (where sequential compressed records are read in
        // windows), then loader steps.
        for how in [["--backend", "pread"], ["--mode", "loader"]] {
            let mut args = vec![
                "--count",
                "300",
                "--record-bytes",
                "2048",
                "--codec",
                "zstd",
            ];
            args.extend(how);
            args.extend(["--sampler", mode, "--batch", "32", "--duration", "0.2"]);
            let v = bench_json(&args);
            assert_eq!(v["config"]["sampler"], mode, "{how:?}");
            assert_eq!(v["check"]["equal"], true, "{mode} {how:?}");
        }
    }
    let o = zring_with_path(&["bench", "--sampler", "sorted"], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("sorted"));
}

#[test]
fn sizes_take_units_as_fio_reads_them_and_a_bad_one_is_named() {
    // 4k is 4096 bytes: each record delivered is one 4 KiB record.
    let v = bench_json(&[
        "--count",
        "200",
        "--record-bytes",
        "4k",
        "--duration",
        "0.2",
        "--codec",
        "raw",
    ]);
    let gathers = &v["result"];
    let per_record = gathers["logical_bytes"].as_u64().expect("logical_bytes")
        / gathers["records"].as_u64().expect("records").max(1);
    assert_eq!(per_record, 4096, "{v}");
    for (flag, bad) in [
        ("--record-bytes", "4q"),
        ("--dict-size", "1x"),
        ("--lookahead", "lots"),
    ] {
        let o = zring_with_path(&["bench", flag, bad, "--count", "10"], None);
        assert_eq!(o.status.code(), Some(2), "a usage error");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(flag) && err.contains("is not a size"), "{err}");
    }
}

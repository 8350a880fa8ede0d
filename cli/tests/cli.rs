//! End-to-end tests of the `zring` binary: real `.npy` files written here, packed
//! with every codec, read back through the engine, damaged, and benchmarked.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use zring_engine::{ReadOptions, Store};
use zring_testkit::npy::{npy_bytes, npy_with_header};
use zring_testkit::ramp as data;

fn zring(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_zring"))
        .args(args)
        .output()
        .expect("run zring")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs zring and insists it succeeded.
fn ok(args: &[&str]) -> String {
    let o = zring(args);
    assert!(
        o.status.success(),
        "zring {args:?} failed: {}{}",
        stdout(&o),
        stderr(&o)
    );
    stdout(&o)
}

/// Runs zring and insists it failed with status 1 and a `zring: ` message; returns it.
fn fails(args: &[&str]) -> String {
    let o = zring(args);
    assert_eq!(
        o.status.code(),
        Some(1),
        "zring {args:?}: {}{}",
        stdout(&o),
        stderr(&o)
    );
    let err = stderr(&o);
    assert!(err.starts_with("zring: "), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    err
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

fn write_npy(path: &Path, descr: &str, shape: &[u64], data: &[u8]) {
    std::fs::write(path, npy_bytes(descr, shape, false, data)).expect("write npy");
}

fn info_json(store: &Path) -> Value {
    serde_json::from_str(&ok(&["info", s(store), "--json"])).expect("info json")
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn pack_dense_npy_of_every_dtype_and_codec_returns_the_exact_source_bytes() {
    let dir = tempfile::tempdir().expect("tempdir");
    // (descr, engine dtype name, shape, bytes per element)
    let cases: [(&str, &str, &[u64], usize); 6] = [
        ("|u1", "uint8", &[120, 3, 8, 8], 1),
        ("<f4", "float32", &[150, 16], 4),
        ("<i8", "int64", &[300], 8),
        ("|b1", "bool", &[200, 40], 1),
        ("<f2", "float16", &[160, 24], 2),
        ("<c8", "complex64", &[130, 6], 8),
    ];
    for (k, (descr, name, shape, size)) in cases.into_iter().enumerate() {
        let elems: u64 = shape.iter().product();
        let mut bytes = data(elems as usize * size, k as u64);
        if name == "bool" {
            bytes.iter_mut().for_each(|b| *b &= 1);
        }
        let npy = dir.path().join(format!("{name}.npy"));
        write_npy(&npy, descr, shape, &bytes);
        for codec in ["raw", "zstd", "zstd-dict"] {
            let out = dir.path().join(format!("{name}-{codec}.zr"));
            ok(&[
                "pack",
                s(&out),
                "--npy",
                s(&npy),
                "--codec",
                codec,
                "--level",
                "5",
                "--dict-size",
                "1024",
                "--meta",
                "source=test",
                "--meta",
                "k=a=b",
            ]);
            let info = info_json(&out);
            assert_eq!(info["layout"], "dense");
            assert_eq!(info["dtype"], name);
            assert_eq!(info["item_shape"], serde_json::json!(&shape[1..]));
            assert_eq!(info["records"], shape[0]);
            assert_eq!(info["codec"], codec);
            assert_eq!(info["logical_bytes"], bytes.len() as u64);
            assert_eq!(info["format_version"], "1.2");
            assert_eq!(info["metadata"]["source"], "test");
            assert_eq!(info["metadata"]["k"], "a=b");
            if codec == "raw" {
                assert_eq!(info["level"], Value::Null);
                assert_eq!(info["stored_bytes"], info["logical_bytes"]);
            } else {
                assert_eq!(info["level"], 5);
            }
            assert_eq!(
                info["dict_bytes"].as_u64().expect("dict") > 0,
                codec == "zstd-dict"
            );
            let store = Store::open(&out, ReadOptions::default()).expect("open");
            let all: Vec<u64> = (0..store.len()).collect();
            assert_eq!(
                store.gather_vec(&all).expect("gather"),
                bytes,
                "{name} {codec}"
            );
        }
    }
}

#[test]
fn pack_ragged_from_values_and_offsets_keeps_every_record_and_length() {
    let dir = tempfile::tempdir().expect("tempdir");
    let lens: Vec<u64> = (0..90).map(|i| 1 + (i * 37 % 23)).collect();
    let offsets: Vec<u64> = std::iter::once(0)
        .chain(lens.iter().scan(0, |acc, l| {
            *acc += l;
            Some(*acc)
        }))
        .collect();
    let total = *offsets.last().expect("offsets");
    let values = data(total as usize * 4, 9);
    let values_npy = dir.path().join("values.npy");
    let offsets_npy = dir.path().join("offsets.npy");
    write_npy(&values_npy, "<i4", &[total], &values);
    let off_bytes: Vec<u8> = offsets
        .iter()
        .flat_map(|o| (*o as i64).to_le_bytes())
        .collect();
    write_npy(&offsets_npy, "<i8", &[offsets.len() as u64], &off_bytes);
    for codec in ["raw", "zstd", "zstd-dict"] {
        let out = dir.path().join(format!("ragged-{codec}.zr"));
        ok(&[
            "pack",
            s(&out),
            "--values",
            s(&values_npy),
            "--offsets",
            s(&offsets_npy),
            "--codec",
            codec,
            "--dict-size",
            "1024",
            "--batch-bytes",
            "100",
        ]);
        let info = info_json(&out);
        assert_eq!(info["layout"], "ragged");
        assert_eq!(info["ndim"], 1);
        assert_eq!(info["dtype"], "int32");
        assert_eq!(info["records"], lens.len() as u64);
        let store = Store::open(&out, ReadOptions::default()).expect("open");
        for (i, w) in offsets.windows(2).enumerate() {
            let i = i as u64;
            assert_eq!(store.shape(i).expect("shape"), vec![w[1] - w[0]]);
            let want = &values[w[0] as usize * 4..w[1] as usize * 4];
            assert_eq!(store.get(i).expect("get"), want, "{codec} record {i}");
        }
    }
}

#[test]
fn pack_ragged_takes_multi_dim_records_from_shapes_or_from_value_rows() {
    let dir = tempfile::tempdir().expect("tempdir");
    // --shapes: n x 2 shapes, element offsets into flat float32 values.
    let shapes: Vec<[u32; 2]> = (0..40).map(|i| [1 + i % 5, 2 + i % 3]).collect();
    let mut offsets = vec![0u64];
    for sh in &shapes {
        offsets.push(offsets.last().expect("last") + u64::from(sh[0] * sh[1]));
    }
    let total = *offsets.last().expect("total");
    let values = data(total as usize * 4, 3);
    let (v, o, sh) = (
        dir.path().join("v.npy"),
        dir.path().join("o.npy"),
        dir.path().join("s.npy"),
    );
    write_npy(&v, "<f4", &[total], &values);
    let ob: Vec<u8> = offsets
        .iter()
        .flat_map(|x| (*x as u32).to_le_bytes())
        .collect();
    write_npy(&o, "<u4", &[offsets.len() as u64], &ob);
    let sb: Vec<u8> = shapes
        .iter()
        .flatten()
        .flat_map(|d| d.to_le_bytes())
        .collect();
    write_npy(&sh, "<u4", &[shapes.len() as u64, 2], &sb);
    let out = dir.path().join("shaped.zr");
    ok(&[
        "pack",
        s(&out),
        "--values",
        s(&v),
        "--offsets",
        s(&o),
        "--shapes",
        s(&sh),
    ]);
    let store = Store::open(&out, ReadOptions::default()).expect("open");
    assert_eq!(info_json(&out)["ndim"], 2);
    for (i, shape) in shapes.iter().enumerate() {
        let i64_ = i as u64;
        let want: Vec<u64> = shape.iter().map(|&d| u64::from(d)).collect();
        assert_eq!(store.shape(i64_).expect("shape"), want);
        let bytes = &values[offsets[i] as usize * 4..offsets[i + 1] as usize * 4];
        assert_eq!(store.get(i64_).expect("get"), bytes);
    }

    // No --shapes, 2-D values: offsets count rows, records are (rows, 3).
    let rows_off: Vec<u64> = vec![0, 2, 3, 7, 8];
    let rows = dir.path().join("rows.npy");
    let row_values = data(8 * 3 * 2, 5);
    write_npy(&rows, "<u2", &[8, 3], &row_values);
    let ro = dir.path().join("ro.npy");
    let rb: Vec<u8> = rows_off.iter().flat_map(|x| x.to_le_bytes()).collect();
    write_npy(&ro, "<u8", &[5], &rb);
    let out = dir.path().join("rows.zr");
    ok(&[
        "pack",
        s(&out),
        "--values",
        s(&rows),
        "--offsets",
        s(&ro),
        "--codec",
        "raw",
    ]);
    let store = Store::open(&out, ReadOptions::default()).expect("open");
    for (i, w) in rows_off.windows(2).enumerate() {
        assert_eq!(store.shape(i as u64).expect("shape"), vec![w[1] - w[0], 3]);
        let want = &row_values[w[0] as usize * 6..w[1] as usize * 6];
        assert_eq!(store.get(i as u64).expect("get"), want);
    }
}

#[test]
fn ragged_offsets_that_disagree_with_the_values_are_refused_naming_the_record() {
    let dir = tempfile::tempdir().expect("tempdir");
    let v = dir.path().join("v.npy");
    write_npy(&v, "|u1", &[10], &data(10, 1));
    let cases: [(&[i64], &str); 4] = [
        (&[0, 4, 3, 10], "record 1 spans 4..3"),
        (&[1, 4, 10], "start at 0"),
        (&[0, 4, 9], "the last offset is 9 but the values hold 10"),
        (&[0, -4, 10], "negative value at position 1"),
    ];
    for (k, (offsets, want)) in cases.into_iter().enumerate() {
        let o = dir.path().join(format!("o{k}.npy"));
        let ob: Vec<u8> = offsets.iter().flat_map(|x| x.to_le_bytes()).collect();
        write_npy(&o, "<i8", &[offsets.len() as u64], &ob);
        let out = dir.path().join("bad.zr");
        let err = fails(&["pack", s(&out), "--values", s(&v), "--offsets", s(&o)]);
        assert!(err.contains(want), "{want}: {err}");
        assert!(!out.exists());
    }
}

#[test]
fn pack_and_gc_on_a_dataset() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Equal offsets are empty records (format v1.2).
    let v = dir.path().join("v.npy");
    write_npy(&v, "|u1", &[10], &data(10, 1));
    let o = dir.path().join("o.npy");
    let ob: Vec<u8> = [0i64, 4, 4, 10, 10]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    write_npy(&o, "<i8", &[5], &ob);
    let out = dir.path().join("e.zr");
    ok(&["pack", s(&out), "--values", s(&v), "--offsets", s(&o)]);
    let store = Store::open(&out, ReadOptions::default()).expect("open");
    assert_eq!(store.shape(1).expect("shape"), vec![0]);
    assert!(store.get(3).expect("get").is_empty());
    // gc refuses what is not a dataset, and --keep 0.
    assert!(fails(&["gc", s(&out)]).contains("not a dataset"));
    let ds = dir.path().join("ds");
    let fields = vec![(
        "x".to_string(),
        zring_engine::Schema::ragged(zring_engine::DType::U8, 1),
    )];
    for version in 1..=3u64 {
        let mut b = if version == 1 {
            zring_engine::dataset::DatasetBuilder::create(&ds, fields.clone(), false)
        } else {
            zring_engine::dataset::DatasetBuilder::create(&ds, fields.clone(), true)
        }
        .expect("builder");
        std::fs::copy(&out, &b.shard_paths(0)[0]).expect("copy");
        b.add_shard(4).expect("shard");
        b.publish().expect("publish");
    }
    // Each version's store, named by its builder: `v<version>-<shard>-<writer>.x.zr`.
    let store_of = |version: &str| {
        std::fs::read_dir(ds.join("data"))
            .expect("list")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .find(|n| n.starts_with(&format!("{version}-000000-")) && n.ends_with(".x.zr"))
            .expect("the version's store")
    };
    let (v1_store, v2_store) = (store_of("v000001"), store_of("v000002"));
    let dry = ok(&["gc", s(&ds), "--keep", "2", "--dry-run"]);
    assert!(dry.contains("would remove 1 manifests, 1 stores"), "{dry}");
    assert!(dry.contains(&v1_store), "{dry}");
    let done = ok(&["gc", s(&ds), "--keep", "2"]);
    assert!(
        done.contains("kept versions 2, 3 (current 3); removed 1 manifests, 1 stores"),
        "{done}"
    );
    assert!(!ds.join("data").join(&v1_store).exists());
    assert!(ds.join("data").join(&v2_store).exists());
    // --keep 0 is a usage error (the current version is always kept).
    assert_eq!(zring(&["gc", s(&ds), "--keep", "0"]).status.code(), Some(2));
}

fn packed_raw_store(dir: &Path) -> (PathBuf, Vec<u8>) {
    let npy = dir.join("x.npy");
    let bytes = data(64 * 100, 2);
    write_npy(&npy, "|u1", &[64, 100], &bytes);
    let out = dir.join("x.zr");
    ok(&["pack", s(&out), "--npy", s(&npy), "--codec", "raw"]);
    (out, bytes)
}

#[test]
fn verify_passes_a_sound_store_and_names_the_record_whose_byte_flipped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (out, _) = packed_raw_store(dir.path());
    let text = ok(&["verify", s(&out)]);
    assert!(
        text.starts_with("ok: ") && text.contains("64 records verified"),
        "{text}"
    );
    assert_eq!(text.lines().count(), 1);

    let entry = Store::open(&out, ReadOptions::default())
        .expect("open")
        .entry(37)
        .expect("entry");
    let mut file = std::fs::read(&out).expect("read");
    file[entry.offset as usize + 5] ^= 0x40;
    std::fs::write(&out, &file).expect("write");
    let err = fails(&["verify", s(&out)]);
    assert!(
        err.contains("record 37") && err.contains("checksum"),
        "{err}"
    );
}

#[test]
fn verify_and_info_fail_cleanly_on_truncated_and_foreign_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (out, _) = packed_raw_store(dir.path());
    let len = std::fs::metadata(&out).expect("meta").len();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&out)
        .expect("open");
    f.set_len(len - 100).expect("truncate");
    drop(f);
    for cmd in ["verify", "info"] {
        let err = fails(&[cmd, s(&out)]);
        assert!(err.contains(s(&out)), "{err}");
    }
    let npy = dir.path().join("x.npy");
    let err = fails(&["verify", s(&npy)]);
    assert!(err.contains("not a valid zring store"), "{err}");
    let err = fails(&["info", s(&dir.path().join("missing.zr"))]);
    assert!(err.contains("missing.zr"), "{err}");
}

#[test]
fn pack_refuses_to_replace_an_existing_file_unless_asked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (out, _) = packed_raw_store(dir.path());
    let npy = dir.path().join("x.npy");
    let err = fails(&["pack", s(&out), "--npy", s(&npy)]);
    assert!(
        err.contains("already exists") && err.contains("--overwrite"),
        "{err}"
    );
    assert_eq!(info_json(&out)["codec"], "raw");
    ok(&["pack", s(&out), "--npy", s(&npy), "--overwrite"]);
    assert_eq!(info_json(&out)["codec"], "zstd");
}

#[test]
fn bad_npy_files_fail_with_a_clear_message_and_leave_no_file_behind() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fortran = npy_bytes("<f4", &[4, 3], true, &data(48, 1));
    let big_endian = npy_bytes(">i4", &[4, 3], false, &data(48, 1));
    let mut truncated = npy_bytes("<f4", &[4, 3], false, &data(48, 1));
    truncated.truncate(truncated.len() - 5);
    let mut bad_magic = npy_bytes("<f4", &[4, 3], false, &data(48, 1));
    bad_magic[1] = b'X';
    let structured = npy_with_header(
        "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (4,), }".into(),
        &data(16, 1),
    );
    let cases = [
        ("fortran", fortran, "Fortran"),
        ("big", big_endian, "big-endian"),
        ("trunc", truncated, "truncated"),
        ("magic", bad_magic, "magic"),
        ("structured", structured, "structured dtypes"),
        (
            "huge",
            npy_bytes("<f4", &[1 << 62, 4], false, &[]),
            "too large",
        ),
    ];
    for (name, bytes, want) in cases {
        let npy = dir.path().join(format!("{name}.npy"));
        std::fs::write(&npy, bytes).expect("write");
        let out = dir.path().join(format!("{name}.zr"));
        let err = fails(&["pack", s(&out), "--npy", s(&npy)]);
        assert!(
            err.contains(want) && err.contains(&format!("{name}.npy")),
            "{name}: {err}"
        );
        assert!(!out.exists(), "{name}");
    }
    let left: Vec<String> = files_in(dir.path())
        .into_iter()
        .filter(|f| !f.ends_with(".npy"))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn usage_errors_exit_with_status_2() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("x.zr");
    for args in [
        vec!["pack", s(&out)],
        vec![
            "pack",
            s(&out),
            "--npy",
            "a.npy",
            "--values",
            "v.npy",
            "--offsets",
            "o.npy",
        ],
        vec!["pack", s(&out), "--npy", "a.npy", "--codec", "lz4"],
        vec!["bench", "--backend", "floppy"],
        vec!["frobnicate"],
    ] {
        let o = zring(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn train_dict_from_npy_and_store_feeds_pack_with_dict() {
    let dir = tempfile::tempdir().expect("tempdir");
    let npy = dir.path().join("x.npy");
    let bytes = data(300 * 200, 4);
    write_npy(&npy, "|u1", &[300, 200], &bytes);
    let dict = dir.path().join("d.bin");
    let text = ok(&["train-dict", s(&npy), "--size", "2048", "-o", s(&dict)]);
    assert!(text.contains("dictionary"), "{text}");
    assert!(std::fs::metadata(&dict).expect("dict").len() > 0);
    let out = dir.path().join("x.zr");
    ok(&[
        "pack",
        s(&out),
        "--npy",
        s(&npy),
        "--codec",
        "zstd-dict",
        "--dict",
        s(&dict),
    ]);
    let info = info_json(&out);
    assert_eq!(
        info["dict_bytes"],
        std::fs::metadata(&dict).expect("dict").len()
    );
    let store = Store::open(&out, ReadOptions::default()).expect("open");
    assert_eq!(
        store
            .gather_vec(&(0..300).collect::<Vec<_>>())
            .expect("gather"),
        bytes
    );

    let again = dir.path().join("d2.bin");
    ok(&["train-dict", s(&out), "--size", "2048", "-o", s(&again)]);
    let err = fails(&["train-dict", s(&out), "--size", "2048", "-o", s(&again)]);
    assert!(err.contains("already exists"), "{err}");
    // A usage error: status 2, naming the flag.
    let o = zring(&[
        "pack",
        s(&dir.path().join("y.zr")),
        "--npy",
        s(&npy),
        "--dict",
        s(&dict),
    ]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("--dict") && err.contains("zstd-dict"), "{err}");
}

#[test]
fn info_text_lists_the_figures_by_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (out, _) = packed_raw_store(dir.path());
    let text = ok(&["info", s(&out)]);
    for want in [
        "layout          dense",
        "item shape      [100]",
        "records         64",
        "codec           raw",
        "compression     1.00x",
        "metadata        none",
    ] {
        assert!(text.contains(want), "{want}:\n{text}");
    }
}

fn bench_json(args: &[&str]) -> Value {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut all = vec!["bench", "--json", "--dir", s(dir.path())];
    all.extend_from_slice(args);
    let v: Value = serde_json::from_str(&ok(&all)).expect("bench json");
    assert!(
        files_in(dir.path()).is_empty(),
        "the synthetic store is removed"
    );
    v
}

#[test]
fn bench_with_tiny_settings_reports_throughput_latency_cpu_and_baseline() {
    let v = bench_json(&[
        "--count",
        "200",
        "--record-bytes",
        "4096",
        "--duration",
        "0.2",
    ]);
    assert_eq!(v["mode"], "gather");
    assert_eq!(v["store"]["records"], 200);
    assert_eq!(v["store"]["synthetic"], true);
    assert_eq!(v["store"]["item_shape"], serde_json::json!([4096]));
    assert_eq!(v["check"]["equal"], true);
    assert!(v["write"]["logical_mib_per_s"].as_f64().expect("write") > 0.0);
    let r = &v["result"];
    assert!(r["batches"].as_u64().expect("batches") >= 1);
    assert_eq!(
        r["records"].as_u64(),
        r["batches"].as_u64().map(|b| b * 256)
    );
    assert!(r["timed_seconds"].as_f64().expect("timed") >= 0.2);
    for k in [
        "records_per_s",
        "logical_mib_per_s",
        "physical_mib_per_s",
        "cpu_cores_busy",
    ] {
        assert!(r[k].as_f64().expect(k) > 0.0, "{k}");
    }
    let p: Vec<f64> = [
        "latency_us_p50",
        "latency_us_p90",
        "latency_us_p99",
        "latency_us_p999",
        "latency_us_max",
    ]
    .iter()
    .map(|k| r[*k].as_f64().expect("latency"))
    .collect();
    assert!(p.windows(2).all(|w| w[0] <= w[1]) && p[0] > 0.0, "{p:?}");
    // A compressed store is measured against the decode limit (raw stores against a
    // copy of the same records: tests/bench_cli.rs).
    let b = &v["baseline"];
    assert_eq!(b["copy"], Value::Null);
    assert!(b["gather_vs_decode_limit"].as_f64().expect("ratio") > 0.0);
}

#[test]
fn bench_get_mode_on_a_ragged_store_reports_per_get_latency() {
    let v = bench_json(&[
        "--count",
        "100",
        "--record-bytes",
        "2048",
        "--ragged",
        "--codec",
        "zstd-dict",
        "--dict-size",
        "1024",
        "--duration",
        "0.1",
        "--mode",
        "get",
        "--concurrency",
        "2",
        "--warmup",
        "1",
        "--backend",
        "pread",
    ]);
    assert_eq!(v["mode"], "get");
    assert_eq!(v["store"]["layout"], "ragged");
    assert_eq!(v["config"]["backend_used"], "pread");
    assert_eq!(v["baseline"], Value::Null);
    let r = &v["result"];
    assert!(r["ops"].as_u64().expect("ops") >= 2);
    assert!(r["latency_us_p99"].as_f64().expect("p99") > 0.0);
}

#[test]
fn bench_text_report_on_an_existing_store_names_its_units() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (out, _) = packed_raw_store(dir.path());
    let text = ok(&[
        "bench",
        "--store",
        s(&out),
        "--duration",
        "0.05",
        "--batch",
        "16",
    ]);
    for want in [
        "records/s",
        "logical MiB/s",
        "physical MiB/s",
        "p99.9",
        "copying the same records",
        "checksum-verified",
    ] {
        assert!(text.contains(want), "{want}:\n{text}");
    }
    assert!(
        !text.contains("write "),
        "no write line for an existing store:\n{text}"
    );
    let o = zring(&["bench", "--count", "10", "--duration", "0"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("--duration"), "{err}");
}

#[test]
fn bench_direct_uring_at_a_queue_depth_reports_it_and_its_baselines() {
    let v = bench_json(&[
        "--count",
        "300",
        "--record-bytes",
        "4096",
        "--codec",
        "raw",
        "--direct",
        "--backend",
        "uring",
        "--qd",
        "32",
        "--duration",
        "0.2",
    ]);
    let c = &v["config"];
    assert_eq!(c["direct"], true);
    assert_eq!(c["queue_depth"], 32);
    // Where io_uring is blocked the engine falls back to pread; both are direct. That
    // fallback fails the test under ZRING_REQUIRE_URING=1, so the io_uring run cannot
    // vanish unnoticed.
    let used = c["backend_used"].as_str().expect("backend");
    assert!(used == "uring" || used == "pread", "{used}");
    if used == "pread" {
        zring_testkit::require_uring(
            "io_uring (zring bench --backend uring)",
            Some("the bench read with pread"),
        );
    }
    assert_eq!(v["store"]["align"], 4096);
    assert!(v["result"]["records_per_s"].as_f64().expect("rate") > 0.0);
    // O_DIRECT reads are measured against the device, not a copy out of memory.
    assert_eq!(v["baseline"]["copy"], Value::Null);
}

#[test]
fn bench_of_a_compressed_store_measures_the_decode_limit() {
    let v = bench_json(&[
        "--count",
        "100",
        "--record-bytes",
        "8192",
        "--codec",
        "zstd",
        "--duration",
        "0.2",
    ]);
    let b = &v["baseline"];
    let limit = b["decode_limit_mib_per_s"].as_f64().expect("limit");
    assert!(limit > 0.0 && b["decode_threads"].as_u64().expect("threads") >= 1);
    assert!(b["gather_vs_decode_limit"].as_f64().expect("ratio") > 0.0);
}

#[test]
fn bench_rejects_a_queue_depth_outside_1_to_256() {
    let out = Command::new(env!("CARGO_BIN_EXE_zring"))
        .args(["bench", "--qd", "0"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--qd"));
}

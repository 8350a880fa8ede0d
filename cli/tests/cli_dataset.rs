//! `zring info`, `zring verify` and `zring convert` on dataset directories.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;
use zring_engine::dataset::DatasetBuilder;
use zring_engine::{DType, Schema, WriteOptions, Writer};

fn zring(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_zring"))
        .args(args)
        .output()
        .expect("run zring")
}

/// A dataset of two fields (int64 labels, ragged uint8 text) over three shards.
fn build(dir: &Path) {
    let fields = vec![
        ("label".to_string(), Schema::dense(DType::I64, &[])),
        (
            "text".to_string(),
            Schema::ragged(DType::U8, 1).with_metadata("encoding", "utf-8"),
        ),
    ];
    let mut b = DatasetBuilder::create(dir, fields, false).unwrap();
    for shard in 0..3u64 {
        let paths = b.shard_paths(shard as usize);
        let mut l = Writer::create(
            &paths[0],
            Schema::dense(DType::I64, &[]),
            WriteOptions::default(),
        )
        .unwrap();
        let labels: Vec<u8> = (0..10u64)
            .flat_map(|i| (shard * 10 + i).to_le_bytes())
            .collect();
        l.append_dense(&labels).unwrap();
        l.close().unwrap();
        let mut t = Writer::create(
            &paths[1],
            Schema::ragged(DType::U8, 1),
            WriteOptions::default(),
        )
        .unwrap();
        let values = vec![b'x'; 55];
        let cu: Vec<u64> = (0..=10u64).map(|i| i * (i + 1) / 2).collect();
        let shapes: Vec<u32> = (1..=10).collect();
        t.append_ragged(&values, &cu, &shapes).unwrap();
        t.close().unwrap();
        b.add_shard(10).unwrap();
    }
    b.publish().unwrap();
}

#[test]
fn info_and_verify_describe_and_check_a_dataset() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    build(&ds);
    let p = ds.to_str().unwrap();

    let o = zring(&["info", p]);
    assert!(o.status.success());
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("records") && text.contains("30"), "{text}");
    assert!(
        text.contains("field label") && text.contains("field text"),
        "{text}"
    );
    assert!(text.contains("encoding=utf-8"), "{text}");

    let o = zring(&["info", "--json", p]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["records"], 30);
    assert_eq!(v["shards"], 3);
    assert_eq!(v["version"], 1);
    assert_eq!(v["fields"][1]["layout"], "ragged");

    let o = zring(&["verify", p]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("ok: "));

    // Flip a byte of one shard's text payload: verify names that store.
    let victim_name = std::fs::read_dir(ds.join("data"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .find(|n| n.starts_with("v000001-000001-") && n.ends_with(".text.zr"))
        .unwrap();
    let victim = ds.join("data").join(&victim_name);
    let mut bytes = std::fs::read(&victim).unwrap();
    bytes[4096] ^= 0xff; // record 0 (raw: one byte does not shrink)
    std::fs::write(&victim, bytes).unwrap();
    let o = zring(&["verify", p]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(&victim_name), "{err}");

    // A damaged manifest is refused by both.
    let manifest = ds.join("manifest.json");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        &manifest,
        text.replace("\"records\": 10", "\"records\": 11"),
    )
    .unwrap();
    for cmd in ["info", "verify"] {
        let o = zring(&[cmd, p]);
        assert_eq!(o.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&o.stderr).contains("checksum"));
    }
}

#[test]
fn convert_points_to_the_python_command_with_the_arguments_given() {
    let o = zring(&["convert", "parquet", "in.parquet", "out", "--workers", "2"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("python -m zring convert parquet in.parquet out --workers 2"),
        "{err}"
    );
}

#[cfg(unix)]
#[test]
fn verify_refuses_a_store_linked_in_from_outside_unless_the_read_setting_allows_it() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    build(&ds);
    let store = std::fs::read_dir(ds.join("data"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "zr"))
        .unwrap();
    let outside = dir.path().join("elsewhere.zr");
    std::fs::rename(&store, &outside).unwrap();
    std::os::unix::fs::symlink(&outside, &store).unwrap();
    let ds = ds.to_str().unwrap();
    let refused = zring(&["verify", ds]);
    let err = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{err}");
    // The message names the store in the dataset and the setting that opens it.
    assert!(err.contains(store.to_str().unwrap()), "{err}");
    assert!(err.contains("follow_links_out"), "{err}");
    let opened = zring(&["verify", ds, "--read", "follow_links_out=true"]);
    assert!(opened.status.success(), "{opened:?}");
}

//! zring-engine with serde_json's `preserve_order` feature on, as any crate of a
//! program can turn it on: `serde_json::Map` then keeps keys in the order they were
//! inserted or read instead of sorted, which once changed every manifest checksum.
//!
//! - The golden manifests, written without the feature, verify and read the same
//!   here (`engine/tests/manifest_json.rs`, included below, run again in this build).
//! - What zring writes here is byte for byte what it wrote without the feature (the
//!   golden files, which zring-engine's own tests verify in a build without it).
//! - Store schemas are written the same, and the golden stores open.

#[path = "../../manifest_json.rs"]
mod manifest_json;

use std::path::Path;

use serde_json::Value;
use zring_engine::dataset::{Field, Manifest, Shard};
use zring_engine::{Codec, DType, ReadOptions, Schema, Store, StoreSchema};

#[test]
fn preserve_order_is_on_in_this_build() {
    let v: Value = serde_json::from_str(r#"{"b":1,"a":2}"#).expect("json");
    assert_eq!(
        v.to_string(),
        r#"{"b":1,"a":2}"#,
        "serde_json's preserve_order is off: this crate checks nothing"
    );
}

#[test]
fn the_checksum_is_not_serde_jsons_order() {
    // The old rule, a checksum over serde_json's own compact text of the parsed
    // value, fails here on a manifest whose keys are not sorted in the file...
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../data/manifests");
    let text = std::fs::read(dir.join("v1-reordered.json")).expect("golden");
    let file: Value = serde_json::from_slice(&text).expect("json");
    let stored = file["checksum"].as_str().expect("checksum");
    let old_rule = zring_engine::format::checksum(file["manifest"].to_string().as_bytes());
    assert_ne!(format!("{old_rule:016x}"), stored);
    // ... and the canonical one does not.
    Manifest::from_json(&text).expect("verifies");

    // A manifest written here, read back through a map that keeps the file's order.
    let m = Manifest {
        version: 1,
        fields: vec![Field {
            name: "x".into(),
            schema: Schema::dense(DType::F32, &[2])
                .with_metadata("z", "1")
                .with_metadata("a", "2"),
        }],
        shards: vec![Shard {
            records: 5,
            files: vec!["data/x.zr".into()],
        }],
    };
    let text = m.to_json();
    let keys: Vec<String> = serde_json::from_str::<Value>(&text).expect("json")["manifest"]
        .as_object()
        .expect("object")
        .keys()
        .cloned()
        .collect();
    assert_eq!(
        keys,
        [
            "fields",
            "format",
            "format_major",
            "shards",
            "version",
            "writer"
        ],
        "written sorted"
    );
    assert_eq!(Manifest::from_json(text.as_bytes()).expect("parse"), m);
}

#[test]
fn store_schemas_are_written_sorted_and_golden_stores_open() {
    let s = StoreSchema {
        schema: Schema::ragged(DType::I32, 2)
            .with_metadata("z", "1")
            .with_metadata("a", "2"),
        codec: Codec::Zstd,
        level: 3,
        dict_id: None,
        record_count: 9,
    };
    assert_eq!(
        s.to_json(),
        r#"{"codec":"zstd","dict_id":null,"dtype":"int32","format":"zring","layout":"ragged","level":3,"metadata":{"a":"2","z":"1"},"ndim":2,"record_count":9}"#
    );
    assert_eq!(
        StoreSchema::from_json(s.to_json().as_bytes()).expect("parse"),
        s
    );

    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../tests/fixtures");
    let mut opened = 0;
    for entry in std::fs::read_dir(&fixtures).expect("tests/fixtures") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "zr") {
            let store = Store::open(&path, ReadOptions::default())
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            store
                .verify()
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            opened += 1;
        }
    }
    assert!(opened >= 10, "{opened} golden stores");
}

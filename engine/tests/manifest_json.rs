//! Golden dataset manifests: files written before zring's manifest JSON went
//! through serde derive and the canonical checksum still verify and read the same,
//! and what zring writes now is what it wrote then, byte for byte.
//!
//! The files are in `tests/data/manifests/`, checked in, never regenerated:
//!
//! - `v1-two-fields.json`, `v1-metadata.json`: written by `Manifest::to_json` at
//!   commit ae97b6d (serde_json without `preserve_order`); the second has metadata
//!   added out of order with keys and values that JSON escapes, non-ASCII ones, a
//!   shard of zero records and a record count above 2^53.
//! - `v1-reordered.json`: laid out by hand as another writer might: keys in reverse
//!   or no order, other spacing, `\uXXXX` and `\/` escapes, numbers written as `0.50`
//!   and `125e-2`, and keys zring does not know holding nested values. Its checksum
//!   was computed by that commit's rule, and that commit's reader accepted it.
//!
//! `tests/preserve_order/` runs this same file in a build where serde_json's
//! `preserve_order` feature is on (`cargo test --manifest-path
//! engine/tests/preserve_order/Cargo.toml`).

use std::path::Path;

use zring_engine::dataset::{Field, Manifest, Shard};
use zring_engine::{DType, ManifestProblem, Schema};

fn golden(name: &str) -> String {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    // zring-engine's own tests, or tests/preserve_order's (which include this file).
    let dir = [
        here.join("tests/data/manifests"),
        here.join("../data/manifests"),
    ]
    .into_iter()
    .find(|d| d.is_dir())
    .expect("tests/data/manifests");
    let path = dir.join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn two_fields() -> Manifest {
    let files = |v: u32, w: &str| {
        ["tokens", "label"]
            .iter()
            .map(|f| format!("data/v{v:010}-000000-{w}.{f}.zr"))
            .collect()
    };
    Manifest {
        version: 2,
        fields: vec![
            Field {
                name: "tokens".into(),
                schema: Schema::ragged(DType::I32, 1),
            },
            Field {
                name: "label".into(),
                schema: Schema::dense(DType::I64, &[]),
            },
        ],
        shards: vec![
            Shard {
                records: 2000,
                files: files(1, "5f0c3a9e1b2d4c68"),
            },
            Shard {
                records: 500,
                files: files(2, "a41e07d2c9b3f150"),
            },
        ],
    }
}

fn with_metadata() -> Manifest {
    let metadata: &[(&str, &str)] = &[
        ("zeta", "last by name, first added"),
        ("Alpha", "capital letters sort before small ones"),
        (
            "alpha",
            "quote \" backslash \\ slash / tab \t newline \n cr \r",
        ),
        ("a.b", "control \u{1} \u{1f} del \u{7f}"),
        ("a-b", "non-ASCII: é ß 漢字 😀"),
        ("a_b", "</script>&<>'"),
        ("é", "key beyond ASCII"),
        ("10", "digits sort as text: 10 before 9"),
        ("9", "nine"),
        ("", "the empty key"),
        ("tokenizer", "{\"kind\": \"bpe\", \"vocab\": [1, 2, 3]}"),
    ];
    let mut image = Schema::dense(DType::U8, &[3, 32, 32]);
    for (k, v) in metadata {
        image = image.with_metadata(*k, *v);
    }
    let files = |v: u32, s: u32, w: &str| {
        (0..5)
            .map(|i| format!("data/v{v:010}-{s:06}-{w}.{i}.zr"))
            .collect()
    };
    Manifest {
        version: 7,
        fields: vec![
            Field {
                name: "image".into(),
                schema: image,
            },
            Field {
                name: "text.utf-8".into(),
                schema: Schema::ragged(DType::U8, 1)
                    .with_metadata("encoding", "utf-8")
                    .with_metadata("source", "wiki_2024-05"),
            },
            Field {
                name: "boxes_2d".into(),
                schema: Schema::ragged(DType::F32, 2).with_metadata("units", "pixels"),
            },
            Field {
                name: "emb".into(),
                schema: Schema::dense(DType::BF16, &[2, 3]),
            },
            Field {
                name: "q8".into(),
                schema: Schema::dense(DType::F8E4M3FN, &[16]),
            },
        ],
        shards: vec![
            Shard {
                records: (1 << 53) + 1,
                files: files(5, 0, "0123456789abcdef"),
            },
            Shard {
                records: 0,
                files: files(6, 0, "fedcba9876543210"),
            },
            Shard {
                records: 3,
                files: files(7, 1, "00000000000000ff"),
            },
        ],
    }
}

fn reordered() -> Manifest {
    let files = |v: u32| {
        ["name", "value"]
            .iter()
            .map(|f| format!("data/v{v:010}-000000-{v:016x}.{f}.zr"))
            .collect()
    };
    Manifest {
        version: 4,
        fields: vec![
            Field {
                name: "name".into(),
                schema: Schema::ragged(DType::U8, 1)
                    .with_metadata("zz", "été")
                    .with_metadata("aa", "AA\t")
                    .with_metadata("Mm", "😀")
                    .with_metadata("m", "x"),
            },
            Field {
                name: "value".into(),
                schema: Schema::dense(DType::F64, &[4, 2]),
            },
        ],
        shards: vec![
            Shard {
                records: 10,
                files: files(1),
            },
            Shard {
                records: 0,
                files: files(4),
            },
        ],
    }
}

fn goldens() -> [(&'static str, Manifest); 3] {
    [
        ("v1-two-fields.json", two_fields()),
        ("v1-metadata.json", with_metadata()),
        ("v1-reordered.json", reordered()),
    ]
}

#[test]
fn golden_manifests_verify_and_read_the_same() {
    for (name, want) in goldens() {
        let got =
            Manifest::from_json(golden(name).as_bytes()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(got, want, "{name}");
    }
}

/// The text without its checksum and writer lines (both change with the version of
/// zring that writes it).
fn without_version(text: &str) -> String {
    text.lines()
        .filter(|l| !l.starts_with("  \"checksum\": ") && !l.starts_with("    \"writer\": "))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn manifests_are_written_as_before_byte_for_byte() {
    for (name, m) in [
        ("v1-two-fields.json", two_fields()),
        ("v1-metadata.json", with_metadata()),
    ] {
        let before = golden(name);
        let now = m.to_json();
        assert_eq!(without_version(&now), without_version(&before), "{name}");
        if now.contains("\n    \"writer\": \"zring 0.1.0\",\n") {
            // Written by the same version: the same bytes, checksum included.
            assert_eq!(now, before, "{name}");
        }
        assert_eq!(Manifest::from_json(now.as_bytes()).expect("parse"), m);
    }
    // A manifest laid out otherwise is written back in the one canonical layout.
    let now = reordered().to_json();
    assert_ne!(now, golden("v1-reordered.json"));
    assert_eq!(
        Manifest::from_json(now.as_bytes()).expect("parse"),
        reordered()
    );
}

#[test]
fn damaged_golden_manifests_fail_their_checksum() {
    let cases = [
        ("v1-two-fields.json", "\"records\": 500", "\"records\": 501"),
        ("v1-metadata.json", "\"9\": \"nine\"", "\"9\": \"nine!\""),
        ("v1-metadata.json", "\"10\": ", "\"11\": "),
        ("v1-reordered.json", "\"month\": 5", "\"month\": 6"),
        ("v1-reordered.json", "0.50", "0.51"),
    ];
    for (name, from, to) in cases {
        let text = golden(name);
        assert!(text.contains(from), "{name} lacks {from}");
        let damaged = text.replacen(from, to, 1);
        match Manifest::from_json(damaged.as_bytes()) {
            Err(ManifestProblem::ChecksumMismatch { stored, .. }) => {
                assert!(text.contains(&stored), "{name}: stored {stored}")
            }
            other => panic!("{name} with {to}: {other:?}"),
        }
    }
}

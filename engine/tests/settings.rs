//! Read settings: one rule set. A bad value built into a `ReadOptions` in Rust is
//! refused by every open with the typed error and the message that the same value
//! gets as text (`ReadOptions::set`, which Python's keyword arguments and the CLI's
//! `--read` go through); cli/tests/cli_settings.rs and
//! python/tests/test_settings.py hold the same table.

mod common;

use zring_engine::dataset::Dataset;
use zring_engine::{ArgumentError, Backend, Error, ReadOptions, Store};

/// Bad settings, each as a struct built in Rust and as `(key, text)`, with the
/// expectation in the message.
fn bad() -> Vec<(ReadOptions, &'static str, &'static str, &'static str)> {
    let mut in_flight_0 = ReadOptions::default();
    in_flight_0.remote.in_flight = 0;
    let mut in_flight_big = ReadOptions::default();
    in_flight_big.remote.in_flight = 100_000;
    vec![
        (
            ReadOptions::default().queue_depth(0),
            "queue_depth",
            "0",
            "a whole number from 1 to 256",
        ),
        (
            in_flight_0,
            "remote.in_flight",
            "0",
            "a whole number from 1 to 1024",
        ),
        (
            in_flight_big,
            "remote.in_flight",
            "100000",
            "a whole number from 1 to 1024",
        ),
    ]
}

/// Bad settings that only text can hold (a Rust value of the field's type cannot
/// be wrong this way).
const BAD_TEXT: [(&str, &str, &str); 3] = [
    ("backend", "disk", "auto, pread, mmap or uring"),
    ("remote.cache_bytes", "-5", "a size (e.g. 65536, 64k, 2G)"),
    (
        "threads",
        "-1",
        "a whole number of threads (0: the caller and every pool worker)",
    ),
];

fn message(key: &str, value: &str, expected: &str) -> String {
    format!("invalid argument: read setting {key}={value:?}: expected {expected}")
}

fn assert_setting(e: Error, key: &str, value: &str, expected: &str) {
    assert_eq!(e.to_string(), message(key, value, expected));
    match e {
        Error::InvalidArgument(ArgumentError::Setting {
            key: k, value: v, ..
        }) => assert_eq!((k.as_str(), v.as_str()), (key, value)),
        other => panic!("expected ArgumentError::Setting, got {other:?}"),
    }
}

/// A store `name` in `dir` of `bytes` as 8-byte dense records.
fn small_store(dir: &std::path::Path, name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let path = dir.join(name);
    let schema = zring_engine::Schema::dense(zring_engine::DType::U8, &[8]);
    let mut w = zring_engine::Writer::create(&path, schema, Default::default()).expect("create");
    w.append_dense(bytes).expect("append");
    w.close().expect("close");
    path
}

#[test]
fn bad_settings_built_in_rust_fail_every_open_with_the_typed_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = small_store(dir.path(), "x.zr", &[7u8; 32]);
    for (opts, key, value, expected) in bad() {
        let e = Store::open(&path, opts.clone()).map(|_| ()).expect_err(key);
        assert_setting(e, key, value, expected);
        let e = Dataset::open(dir.path(), opts).map(|_| ()).expect_err(key);
        assert_setting(e, key, value, expected);
        let e = ReadOptions::from_pairs([(key, value)]).expect_err(key);
        assert_setting(e, key, value, expected);
    }
    for (key, value, expected) in BAD_TEXT {
        let e = ReadOptions::from_pairs([(key, value)]).expect_err(key);
        assert_setting(e, key, value, expected);
    }
    // The store opens with the boundary values.
    let mut edge = ReadOptions::with_backend(Backend::Uring);
    edge.queue_depth = 256;
    edge.remote.in_flight = 1024;
    Store::open(&path, edge.clone()).expect("valid at the bounds");
    // Past the bounds is refused, not clamped (a queue depth of 1000 once was).
    edge.queue_depth = 1000;
    assert!(Store::open(&path, edge).is_err());
}

#[test]
fn an_unknown_setting_names_the_known_ones() {
    match ReadOptions::from_pairs([("in_flight", "4")]) {
        Err(Error::InvalidArgument(ArgumentError::UnknownSetting { key, known })) => {
            assert_eq!(key, "in_flight");
            assert!(known.contains("remote.in_flight"), "{known}");
        }
        other => panic!("expected UnknownSetting, got {other:?}"),
    }
}

#[test]
fn a_dataset_made_of_a_store_reads_with_every_setting_the_store_was_opened_with() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = small_store(dir.path(), "x.zr", &[7u8; 32]);
    let opts = ReadOptions::from_pairs([
        ("backend", "pread"),
        ("verify_checksums", "false"),
        ("threads", "1"),
        ("queue_depth", "7"),
        ("remote.in_flight", "3"),
        ("remote.max_retries", "2"),
        ("remote.no_cache", "true"),
    ])
    .expect("settings");
    let store = Store::open(&path, opts.clone()).expect("open");
    let ds = Dataset::from_store("x", store).expect("dataset");
    assert_eq!(
        ds.read_options(),
        &opts,
        "nothing the store was opened with is lost"
    );
}

#[test]
fn a_dataset_made_of_a_store_opened_with_o_direct_keeps_direct_and_the_rest() {
    let dir = tempfile::tempdir().expect("tempdir");
    let records: Vec<u8> = (0..64).collect();
    let path = small_store(dir.path(), "d.zr", &records);
    let opts = ReadOptions::from_pairs([
        ("backend", "pread"),
        ("direct", "true"),
        ("queue_depth", "200"),
        ("remote.in_flight", "9"),
        ("remote.timeout", "7"),
        ("remote.cache_bytes", "1G"),
    ])
    .expect("settings");
    let Some(store) = common::open_direct_or_skip(&path, opts.clone()) else {
        return;
    };
    assert!(store.is_direct());
    let ds = Dataset::from_store("x", store).expect("dataset");
    assert_eq!(ds.read_options(), &opts, "direct and the rest are kept");
    assert!(ds.store(0, 0).expect("the store").is_direct());
    // The dataset's field reads through the store it holds: the records come back.
    let field = ds.field(0).expect("field");
    let mut got = [0u8; 16];
    field.gather(&[5, 0], &mut got).expect("gather");
    assert_eq!(
        got,
        [40, 41, 42, 43, 44, 45, 46, 47, 0, 1, 2, 3, 4, 5, 6, 7]
    );
}

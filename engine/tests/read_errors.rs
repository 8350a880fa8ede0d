//! The reader's contract on caller mistakes and edge cases: out-of-range indices,
//! wrong buffers, dense/ragged mix-ups, bogus ragged layouts, empty, duplicate and
//! reversed index lists — typed errors with the numbers in the message, never a
//! panic, and exact data whenever the call is valid.

mod common;

use common::*;
use zring_engine::{
    ArgumentError as A, Backend, Error, RaggedLayout, ReadOptions, SchemaError, Store,
};

const N: usize = 30;

#[track_caller]
fn expect_out_of_range<T: std::fmt::Debug>(r: zring_engine::Result<T>, index: u64, len: u64) {
    let err = r.expect_err("out of range");
    let msg = err.to_string();
    match err {
        Error::IndexOutOfRange {
            index: i, len: l, ..
        } => assert_eq!((i, l), (index, len), "{msg}"),
        other => panic!("expected IndexOutOfRange, got {other:?}"),
    }
    assert!(
        msg.contains(&format!("index {index}")) && msg.contains(&format!("{len} records")),
        "{msg}"
    );
}

/// Asserts `r` is `Error::InvalidArgument` whose typed detail `want` accepts.
#[track_caller]
fn expect_invalid<T: std::fmt::Debug>(r: zring_engine::Result<T>, want: fn(&A) -> bool) {
    match r {
        Err(Error::InvalidArgument(d)) => assert!(want(&d), "not the wanted detail: {d:?}"),
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
}

#[test]
fn out_of_range_indices_name_the_index_and_the_length() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dense = dense_mixed(dir.path(), N);
    let ragged = ragged_zstd(dir.path(), N);
    let n = N as u64;
    for backend in Backend::CONCRETE {
        let d = open_with(&dense.path, backend, false).expect("open");
        expect_out_of_range(d.gather_vec(&[0, n, 1]), n, n);
        expect_out_of_range(d.gather_vec(&[u64::MAX]), u64::MAX, n);
        expect_out_of_range(d.get(n), n, n);
        expect_out_of_range(d.shape(n + 5), n + 5, n);
        expect_out_of_range(d.entry(n), n, n);
        let r = open_with(&ragged.path, backend, false).expect("open");
        expect_out_of_range(r.gather_ragged(&[3, n]), n, n);
        expect_out_of_range(r.ragged_layout(&[n * 2]), n * 2, n);
        expect_out_of_range(r.get(n), n, n);
    }
}

#[test]
fn a_destination_of_the_wrong_size_is_an_invalid_argument() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fx = dense_mixed(dir.path(), N);
    let store = open(&fx.path).expect("open");
    for len in [0usize, 1, 511, 513, 1024] {
        let mut dest = vec![0u8; len];
        expect_invalid(store.gather(&[1, 2], &mut dest), |a| {
            matches!(a, A::DestinationSize { records: 2, .. })
        });
    }
    let mut dest = vec![0u8; 7];
    expect_invalid(store.gather(&[], &mut dest), |a| {
        matches!(
            a,
            A::DestinationSize {
                len: 7,
                records: 0,
                ..
            }
        )
    });
}

#[test]
fn dense_and_ragged_calls_on_the_wrong_layout_are_schema_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dense = open(&dense_mixed(dir.path(), N).path).expect("open");
    let ragged = open(&ragged_zstd(dir.path(), N).path).expect("open");
    let is_schema = |e: Error, want: &str| match e {
        Error::Schema(SchemaError::WrongLayout { instead, .. }) => assert_eq!(instead, want),
        other => panic!("expected Schema, got {other:?}"),
    };
    let mut dest = vec![0u8; 16];
    is_schema(
        ragged.gather(&[0], &mut dest).expect_err("gather"),
        "gather_ragged",
    );
    is_schema(
        ragged.gather_vec(&[0]).expect_err("gather_vec"),
        "gather_ragged",
    );
    is_schema(dense.ragged_layout(&[0]).expect_err("layout"), "gather");
    is_schema(
        dense.gather_ragged(&[0]).expect_err("gather_ragged"),
        "gather",
    );
    assert_eq!(ragged.item_bytes(), None);
    assert_eq!(dense.item_bytes(), Some(256));
}

#[test]
fn empty_duplicate_and_reversed_index_lists_read_exactly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dense = dense_mixed(dir.path(), N);
    let ragged = ragged_zstd(dir.path(), N);
    let reversed: Vec<u64> = (0..N as u64).rev().collect();
    let dups = [5u64, 5, 5, 0, 29, 0, 5];
    for backend in Backend::CONCRETE {
        let d = open_with(&dense.path, backend, true).expect("open");
        assert!(d.gather_vec(&[]).expect("empty").is_empty());
        d.gather(&[], &mut []).expect("empty into empty");
        for idx in [&reversed[..], &dups[..]] {
            let got = d.gather_vec(idx).expect("gather");
            for (k, &i) in idx.iter().enumerate() {
                assert_eq!(&got[k * 256..(k + 1) * 256], &dense.records[i as usize][..]);
            }
        }
        let r = open_with(&ragged.path, backend, true).expect("open");
        let empty = r.gather_ragged(&[]).expect("empty");
        assert!(empty.is_empty() && empty.values.is_empty());
        assert_eq!(empty.cu_seqlens, vec![0]);
        assert_eq!(r.ragged_layout(&[]).expect("layout").values_bytes, 0);
        for idx in [&reversed[..], &dups[..]] {
            let batch = r.gather_ragged(idx).expect("gather");
            for (k, &i) in idx.iter().enumerate() {
                assert_eq!(batch.record(k, 4), Some(&ragged.records[i as usize][..]));
                assert_eq!(
                    &batch.shapes[k * 2..k * 2 + 2],
                    &ragged.shapes[i as usize][..]
                );
            }
        }
    }
}

#[test]
fn ragged_shape_reports_each_records_dims() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fx = ragged_zstd(dir.path(), N);
    let store = open(&fx.path).expect("open");
    for (i, shape) in fx.shapes.iter().enumerate() {
        let want: Vec<u64> = shape.iter().map(|&d| u64::from(d)).collect();
        assert_eq!(store.shape(i as u64).expect("shape"), want, "record {i}");
    }
    let dense = open(&dense_mixed(dir.path(), 3).path).expect("open");
    assert_eq!(dense.shape(2).expect("shape"), vec![256]);
}

#[test]
fn a_ragged_layout_that_does_not_fit_is_refused_without_panicking() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fx = ragged_zstd(dir.path(), N);
    let store = open(&fx.path).expect("open");
    let idx = [1u64, 2, 3];
    let good = store.ragged_layout(&idx).expect("layout");
    let mut values = vec![0u8; good.values_bytes];
    store
        .gather_ragged_into(&idx, &good, &mut values)
        .expect("the computed layout fits");
    let c = good.cu_seqlens.clone();
    let bytes = good.values_bytes;
    let with = |cu: Vec<u64>, values_bytes: usize| RaggedLayout {
        cu_seqlens: cu,
        shapes: good.shapes.clone(),
        values_bytes,
    };
    let bad = [
        // fewer offsets than indices + 1
        (with(c[..3].to_vec(), bytes), bytes),
        // the buffer is not values_bytes long
        (with(c.clone(), bytes), bytes + 4),
        // offsets that do not start at 0
        (
            with(c.iter().map(|x| x + 1).collect(), bytes + 4),
            bytes + 4,
        ),
        // offsets that go backwards
        (with(vec![0, c[2], c[1], c[3]], bytes), bytes),
        // an end offset whose byte size overflows
        (with(vec![0, 1, 2, u64::MAX / 2], bytes), bytes),
    ];
    for (layout, len) in bad {
        let mut values = vec![0u8; len];
        let r = store.gather_ragged_into(&idx, &layout, &mut values);
        expect_invalid(r, |a| {
            matches!(a, A::RaggedLayoutMismatch { .. } | A::RaggedLayoutInvalid)
        });
    }
    // A valid-looking layout that belongs to other indices: the slots do not match
    // the records' sizes.
    let other = store.ragged_layout(&[3, 2, 1]).expect("layout");
    if other.cu_seqlens != good.cu_seqlens {
        let mut values = vec![0u8; other.values_bytes];
        let r = store.gather_ragged_into(&idx, &other, &mut values);
        assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
    }
}

#[test]
fn verify_range_refuses_ranges_outside_the_store_and_the_mmap_backend_refuses_direct() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fx = dense_mixed(dir.path(), N);
    let store = open(&fx.path).expect("open");
    store.verify_range(10..N as u64).expect("inside");
    store.verify_range(5..5).expect("empty");
    let outside: fn(&A) -> bool = |a| matches!(a, A::VerifyRange { .. });
    expect_invalid(store.verify_range(10..N as u64 + 1), outside);
    #[allow(clippy::reversed_empty_ranges)]
    expect_invalid(store.verify_range(20..3), outside);
    expect_invalid(store.verify_range(u64::MAX - 1..u64::MAX), outside);
    let opts = ReadOptions::default().backend(Backend::Mmap).direct(true);
    expect_invalid(Store::open(&fx.path, opts), |a| {
        matches!(a, A::DirectNeedsFileBackend { .. })
    });
}

#[test]
fn single_threaded_and_pooled_gathers_agree() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fx = dense_mixed(dir.path(), 600);
    let idx: Vec<u64> = (0..2000).map(|k| (k * 7919) % 600).collect();
    let mut results = Vec::new();
    for threads in [1usize, 2, 0] {
        let opts = ReadOptions::default().threads(threads);
        let store = Store::open(&fx.path, opts).expect("open");
        results.push(store.gather_vec(&idx).expect("gather"));
    }
    assert!(results.windows(2).all(|w| w[0] == w[1]));
    for (k, &i) in idx.iter().enumerate() {
        assert_eq!(
            &results[0][k * 256..(k + 1) * 256],
            &fx.records[i as usize][..]
        );
    }
}

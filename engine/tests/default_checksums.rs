//! Checksums are verified on read by default: a store opened with
//! `ReadOptions::default()` (its backend aside) refuses a record with one flipped
//! payload byte, naming the record, on every backend, for raw and zstd records, in
//! gathers, gets and ragged gathers. The opt-out gives the damaged bytes back.

mod common;

use common::*;
use zring_engine::{Backend, RecordCodec, Store};

const N: usize = 24;

/// `fx` with one byte in the middle of record `index`'s stored bytes flipped, written
/// to `name` in `dir`.
fn flipped(dir: &std::path::Path, name: &str, fx: &Fixture, index: u64) -> std::path::PathBuf {
    let e = entry_of(&fx.bytes, index);
    let at = (e.offset + u64::from(e.stored_len) / 2) as usize;
    let mut b = fx.bytes.clone();
    b[at] ^= 0x01;
    let path = dir.join(name);
    put(&path, &b);
    path
}

/// The backends to check: all three, with `uring` only where it works (else the
/// skip is printed, or fails under `ZRING_REQUIRE_URING=1`).
fn backends() -> Vec<Backend> {
    let uring = uring_here();
    Backend::CONCRETE
        .into_iter()
        .filter(|&b| b != Backend::Uring || uring)
        .collect()
}

#[test]
fn the_default_options_verify_checksums() {
    assert!(zring_engine::ReadOptions::default().verify_checksums);
}

#[test]
fn a_flipped_dense_record_fails_by_default_on_every_backend_raw_and_zstd() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fx = dense_mixed(dir.path(), N);
    // Record 7 is noise (stored raw), record 8 compressible (stored zstd).
    for (index, codec) in [(7u64, RecordCodec::Raw), (8u64, RecordCodec::Zstd)] {
        assert_eq!(entry_of(&fx.bytes, index).codec, codec);
        let path = flipped(dir.path(), &format!("flip-{index}.zr"), &fx, index);
        // Auto's choice, with nothing set at all.
        let store = open(&path).expect("a payload flip does not stop open");
        expect_record(store.gather_vec(&[index]), index, checksum_mismatch);
        for backend in backends() {
            let store =
                Store::open(&path, zring_engine::ReadOptions::with_backend(backend)).expect("open");
            // The records around it are intact and read, by the backend asked for.
            let others = store.gather_vec(&[index + 1, 0]).expect("others read");
            assert_eq!(&others[..256], &fx.records[index as usize + 1][..]);
            assert_eq!(&others[256..], &fx.records[0][..]);
            assert_served_by(&store, backend, 2);
            expect_record(store.gather_vec(&[0, index, 1]), index, checksum_mismatch);
            expect_record(store.get(index), index, checksum_mismatch);
        }
        if codec == RecordCodec::Raw {
            // The explicit opt-out returns the damaged bytes: one byte differs.
            let unchecked = open_with(&path, Backend::Pread, false).expect("open");
            let got = unchecked.gather_vec(&[index]).expect("unchecked read");
            let differing = (0..256)
                .filter(|&k| got[k] != fx.records[index as usize][k])
                .count();
            assert_eq!(differing, 1);
        }
    }
}

#[test]
fn a_flipped_ragged_or_dictionary_record_fails_by_default_on_every_backend() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ragged = ragged_zstd(dir.path(), N);
    let dict = dense_dict(dir.path(), N);
    for (fx, name) in [(&ragged, "ragged"), (&dict, "dict")] {
        for index in [0u64, 5] {
            let path = flipped(dir.path(), &format!("{name}-{index}.zr"), fx, index);
            for backend in backends() {
                let store = Store::open(&path, zring_engine::ReadOptions::with_backend(backend))
                    .expect("open");
                if fx.ragged {
                    expect_record(store.gather_ragged(&[index]), index, checksum_mismatch);
                } else {
                    expect_record(store.gather_vec(&[index]), index, checksum_mismatch);
                }
                expect_record(store.get(index), index, checksum_mismatch);
            }
        }
    }
}

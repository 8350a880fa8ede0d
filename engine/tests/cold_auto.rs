//! `Auto` on a cold store: read with O_DIRECT through io_uring (so a pass does not
//! fill the page cache), and with `mmap` once the store is resident.
#![allow(clippy::unwrap_used)]

use std::fs::File;
use std::path::{Path, PathBuf};

use zring_engine::{Backend, DType, ReadOptions, Schema, Store, WriteOptions, Writer};
use zring_platform::evict_from_page_cache;

const WIDTH: usize = 4096;
const RECORDS: usize = 512;

fn store(dir: &Path) -> (PathBuf, Vec<u8>) {
    let path = dir.join("cold.zr");
    let bytes: Vec<u8> = (0..WIDTH * RECORDS).map(|i| (i * 7 / 3) as u8).collect();
    let opts = WriteOptions::default().align(4096);
    let mut w = Writer::create(&path, Schema::dense(DType::U8, &[WIDTH as u64]), opts).unwrap();
    w.append_dense(&bytes).unwrap();
    w.close().unwrap();
    (path, bytes)
}

fn evict(path: &Path) {
    evict_from_page_cache(&File::open(path).unwrap()).unwrap();
}

/// Whether the file system under `path` accepts O_DIRECT (tmpfs does not).
fn direct_supported(path: &Path) -> bool {
    zring_platform::open_direct(path).is_ok()
}

fn gather_all(s: &Store) -> Vec<u8> {
    let idx: Vec<u64> = (0..RECORDS as u64).rev().collect();
    let mut out = vec![0u8; WIDTH * RECORDS];
    s.gather(&idx, &mut out).unwrap();
    let mut fwd = vec![0u8; WIDTH * RECORDS];
    for (k, chunk) in out.chunks_exact(WIDTH).rev().enumerate() {
        fwd[k * WIDTH..(k + 1) * WIDTH].copy_from_slice(chunk);
    }
    fwd
}

#[cfg(target_os = "linux")]
#[test]
fn auto_reads_a_cold_store_through_uring_with_o_direct_and_a_warm_one_through_mmap() {
    // Skipped where io_uring is unavailable, but a failure under ZRING_REQUIRE_URING=1,
    // so this coverage cannot vanish unnoticed.
    if !zring_testkit::require_uring(
        "io_uring (auto on a cold store)",
        zring_platform::uring_unavailable_reason(),
    ) {
        return;
    }
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (path, bytes) = store(dir.path());
    if !direct_supported(&path) {
        // The buffered fallback is still checked below; the O_DIRECT choice is not.
        zring_testkit::require_uring(
            "O_DIRECT (auto on a cold store)",
            Some("the file system under CARGO_TARGET_TMPDIR refuses it"),
        );
    }

    // Just written: its pages are in the page cache.
    let warm = Store::open(&path, ReadOptions::default()).unwrap();
    assert_eq!(warm.backend(), Backend::Mmap);
    assert!(!warm.is_direct());
    assert_eq!(gather_all(&warm), bytes);
    assert_eq!(warm.reads_served().mmap, RECORDS as u64);
    drop(warm);

    evict(&path);
    let cold = Store::open(&path, ReadOptions::default()).unwrap();
    assert_eq!(cold.backend(), Backend::Uring);
    assert_eq!(cold.is_direct(), direct_supported(&path));
    assert_eq!(gather_all(&cold), bytes);
    // Every record was served by io_uring (none by a pread fallback or the mapping).
    let served = cold.reads_served();
    assert_eq!(
        (served.uring, served.pread, served.mmap),
        (RECORDS as u64, 0, 0)
    );
    drop(cold);

    if direct_supported(&path) {
        // The O_DIRECT pass left the store cold: opened again, it is still cold.
        let again = Store::open(&path, ReadOptions::default()).unwrap();
        assert!(again.is_direct());
        drop(again);
    }

    // Read through the page cache, it becomes warm and `auto` maps it again.
    let buffered = Store::open(&path, ReadOptions::with_backend(Backend::Pread)).unwrap();
    assert!(!buffered.is_direct());
    assert_eq!(gather_all(&buffered), bytes);
    drop(buffered);
    let warm_again = Store::open(&path, ReadOptions::default()).unwrap();
    assert_eq!(warm_again.backend(), Backend::Mmap);
}

#[test]
fn explicit_backends_never_switch_to_o_direct_on_their_own() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (path, bytes) = store(dir.path());
    evict(&path);
    for b in Backend::CONCRETE {
        let s = Store::open(&path, ReadOptions::with_backend(b)).unwrap();
        assert!(!s.is_direct(), "{b}");
        assert_eq!(gather_all(&s), bytes, "{b}");
        drop(s);
        evict(&path);
    }
}

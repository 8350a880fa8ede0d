//! Remote stores through object storage, against in-process object stores: an
//! `InMemory` (or `LocalFileSystem`) store behind a counting, failing wrapper, and a
//! small HTTP/1.1 range server on 127.0.0.1 (object_store's real HTTP client, its
//! retries and timeouts) that can answer 503 or drop connections (`remote_support`).
//!
//! Every gather is compared with the same store read locally.

mod common;
mod remote_support;

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use remote_support::*;
use zring_engine::remote::object_store::memory::InMemory;
use zring_engine::remote::object_store::path::Path as ObjectPath;
use zring_engine::remote::object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use zring_engine::remote::{CacheOptions, RemoteOptions, WholeObjects};
use zring_engine::{Codec, Error, ObjectChange, ReadOptions, Store};

// ---------------------------------------------------------------------------------

#[test]
fn gathers_equal_the_local_copy_for_every_layout_and_codec() {
    for codec in [Codec::Raw, Codec::Zstd, Codec::ZstdDict] {
        for opts in [
            ReadOptions::default(),
            // No coalescing at all, and one GET in flight.
            ReadOptions::default().remote(
                RemoteOptions::default()
                    .max_gap(0)
                    .max_request(1)
                    .in_flight(1),
            ),
        ] {
            let d = fixture_dense(codec, 300, 517);
            let r = fixture_ragged(codec, 300);
            let (store, _) = bucket(&[("d.zr", &d.bytes), ("r.zr", &r.bytes)]);
            let dense = open_in(&store, "d.zr", &opts).expect("open dense");
            let ragged = open_in(&store, "r.zr", &opts).expect("open ragged");
            assert!(dense.is_remote());
            for seed in 0..3 {
                let idx = batch(300, 97, seed);
                assert_eq!(
                    dense.gather_vec(&idx).expect("gather"),
                    d.local.gather_vec(&idx).expect("local")
                );
                let got = ragged.gather_ragged(&idx).expect("gather ragged");
                let want = r.local.gather_ragged(&idx).expect("local ragged");
                assert_eq!(got.cu_seqlens, want.cu_seqlens);
                assert_eq!(got.shapes, want.shapes);
                assert_eq!(&got.values[..], &want.values[..]);
            }
            assert_eq!(dense.get(17).expect("get"), d.local.get(17).expect("get"));
            assert_eq!(ragged.get(0).expect("get"), r.local.get(0).expect("get"));
            dense.verify().expect("verify dense");
            ragged.verify().expect("verify ragged");
            assert_eq!(dense.reads_served().remote, 3 * 97);
        }
    }
}

#[test]
fn opening_takes_few_gets_and_neighbours_share_one() {
    let d = fixture_dense(Codec::Raw, 2000, 1000);
    let (store, faults) = bucket(&[("d.zr", &d.bytes)]);
    // A gap too small to bridge anything: only touching records merge.
    let opts = ReadOptions::default().remote(RemoteOptions::default().max_gap(0));
    let s = open_in(&store, "d.zr", &opts).expect("open");
    let opened = faults.gets.load(Ordering::SeqCst);
    // The tail (footer + metadata), then the superblock and the metadata the tail
    // missed (this table is 64 KB: inside the 256 KiB tail).
    assert!(opened <= 3, "open took {opened} GETs");
    assert_eq!(s.remote_stats().expect("stats").requests as usize, opened);
    // 64 consecutive records, asked in a shuffled order: one GET.
    let mut idx: Vec<u64> = (500..564).collect();
    idx.reverse();
    idx.swap(3, 40);
    assert_eq!(
        s.gather_vec(&idx).expect("gather"),
        d.local.gather_vec(&idx).expect("local")
    );
    assert_eq!(faults.gets.load(Ordering::SeqCst) - opened, 1);
    // Two runs far apart: two GETs; with a gap that bridges them, one.
    let before = faults.gets.load(Ordering::SeqCst);
    let idx: Vec<u64> = (10..20).chain(1500..1510).collect();
    s.gather_vec(&idx).expect("gather");
    assert_eq!(faults.gets.load(Ordering::SeqCst) - before, 2);
    let wide = ReadOptions::default().remote(RemoteOptions::default().max_gap(2 << 20));
    let s2 = open_in(&store, "d.zr", &wide).expect("open");
    let before = faults.gets.load(Ordering::SeqCst);
    assert_eq!(
        s2.gather_vec(&idx).expect("gather"),
        d.local.gather_vec(&idx).expect("local")
    );
    assert_eq!(faults.gets.load(Ordering::SeqCst) - before, 1);
    // max_request caps a coalesced GET.
    let capped =
        ReadOptions::default().remote(RemoteOptions::default().max_gap(0).max_request(10_000));
    let s3 = open_in(&store, "d.zr", &capped).expect("open");
    faults.ranges.lock().expect("lock").clear();
    let idx: Vec<u64> = (0..100).collect();
    assert_eq!(
        s3.gather_vec(&idx).expect("gather"),
        d.local.gather_vec(&idx).expect("local")
    );
    let ranges = faults.ranges.lock().expect("lock").clone();
    assert_eq!(ranges.len(), 10, "100 KB of touching records in 10 KB GETs");
    assert!(ranges.iter().all(|r| r.end - r.start <= 10_000));
}

#[test]
fn a_corrupt_object_fails_its_checksum_naming_the_url_and_record() {
    for codec in [Codec::Raw, Codec::Zstd] {
        let d = fixture_dense(codec, 50, 4000);
        let mut bytes = d.bytes.clone();
        let e = common::entry_of(&bytes, 31);
        bytes[(e.offset + u64::from(e.stored_len) / 2) as usize] ^= 0x40;
        let (store, _) = bucket(&[("d.zr", &bytes)]);
        let s = open_in(&store, "d.zr", &ReadOptions::default()).expect("open");
        for r in [
            s.gather_vec(&[3, 31, 4]).map(|_| ()),
            s.get(31).map(|_| ()),
            s.verify(),
        ] {
            match r {
                Err(err @ Error::CorruptRecord { index: 31, .. }) => {
                    assert!(err.to_string().contains("mem://bucket/d.zr"), "{err}");
                    assert!(err.to_string().contains("record 31"), "{err}");
                }
                other => panic!("{codec:?}: expected record 31 corrupt, got {other:?}"),
            }
        }
        // The other records still read.
        assert_eq!(
            s.gather_vec(&[3, 4]).expect("gather"),
            d.local.gather_vec(&[3, 4]).expect("local")
        );
    }
}

#[test]
fn failed_requests_are_typed_errors_naming_the_url() {
    let d = fixture_dense(Codec::Zstd, 50, 400);
    let (store, faults) = bucket(&[("d.zr", &d.bytes)]);
    let s = open_in(&store, "d.zr", &ReadOptions::default()).expect("open");
    faults.fail_next.store(1, Ordering::SeqCst);
    match s.gather_vec(&[1, 2]) {
        Err(err @ Error::Remote { .. }) => {
            assert!(err.to_string().contains("mem://bucket/d.zr"), "{err}");
            assert!(std::error::Error::source(&err).is_some());
        }
        other => panic!("expected a remote error, got {other:?}"),
    }
    // The store still works afterwards.
    assert_eq!(
        s.gather_vec(&[1, 2]).expect("gather"),
        d.local.gather_vec(&[1, 2]).expect("local")
    );
    match open_in(&store, "missing.zr", &ReadOptions::default()) {
        Err(Error::Remote { kind, .. }) => assert_eq!(kind, std::io::ErrorKind::NotFound),
        other => panic!("expected not found, got {other:?}"),
    }
}

#[test]
fn a_replaced_object_is_detected_not_mixed() {
    let a = fixture_dense(Codec::Raw, 50, 400);
    let b = fixture_dense(Codec::Raw, 60, 400);
    let mem = Arc::new(InMemory::new());
    let name = ObjectPath::from("d.zr");
    block(mem.put(&name, PutPayload::from(a.bytes.clone()))).expect("put");
    let store: Arc<dyn ObjectStore> = mem.clone();
    let s = open_in(&store, "d.zr", &ReadOptions::default()).expect("open");
    block(mem.put(&name, PutPayload::from(b.bytes.clone()))).expect("replace");
    match s.gather_vec(&[1]) {
        Err(Error::ObjectChanged {
            change: ObjectChange::Size { expected, found },
            ..
        }) => {
            assert_eq!(expected, a.bytes.len() as u64);
            assert_eq!(found, b.bytes.len() as u64);
        }
        other => panic!("expected ObjectChanged (size), got {other:?}"),
    }
    // Replaced by an object of the same size: the ETag tells.
    let s = open_in(&store, "d.zr", &ReadOptions::default()).expect("open");
    block(mem.put(&name, PutPayload::from(b.bytes.clone()))).expect("replace");
    match s.gather_vec(&[1]) {
        Err(Error::ObjectChanged {
            change: ObjectChange::ETag { expected, found },
            ..
        }) => assert_ne!(expected, found),
        other => panic!("expected ObjectChanged (ETag), got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------
// The cache.

fn cached(dir: &Path, max_bytes: u64, chunk: u64) -> ReadOptions {
    let cache = CacheOptions::new(dir, max_bytes)
        .chunk_bytes(chunk)
        // These tests are about chunks (whole objects: tests/remote_whole.rs).
        .whole(WholeObjects::Never);
    ReadOptions::default().remote(RemoteOptions::default().cache(cache))
}

#[test]
fn cached_reads_hit_without_requests_and_torn_entries_are_refetched() {
    let d = fixture_dense(Codec::Zstd, 400, 2000);
    let (store, faults) = bucket(&[("d.zr", &d.bytes)]);
    let cache = tempfile::tempdir().expect("tempdir");
    let opts = cached(cache.path(), 1 << 30, 64 << 10);
    let idx = batch(400, 120, 9);
    let s = open_in(&store, "d.zr", &opts).expect("open");
    assert_eq!(
        s.gather_vec(&idx).expect("gather"),
        d.local.gather_vec(&idx).expect("local")
    );
    let first = s.remote_stats().expect("stats");
    assert!(first.cache_misses > 0);
    // A second store (as another process would) opens with one GET (the object's
    // version) and reads everything from the cache.
    let before = faults.gets.load(Ordering::SeqCst);
    let s2 = open_in(&store, "d.zr", &opts).expect("open");
    assert_eq!(
        s2.gather_vec(&idx).expect("gather"),
        d.local.gather_vec(&idx).expect("local")
    );
    s2.verify().expect("verify");
    assert_eq!(
        faults.gets.load(Ordering::SeqCst) - before,
        1,
        "only the open's tail GET"
    );
    assert_eq!(s2.remote_stats().expect("stats").cache_misses, 0);
    // Tear every entry (as a crash mid-write would, were entries not renamed into
    // place) but one, and flip a bit among the records of that one: all are detected
    // (a hit reads and checks only the blocks it needs; the gather and the verify
    // read every chunk), dropped and refetched, once each.
    let mut entries = Vec::new();
    for key in std::fs::read_dir(cache.path().join("v2")).expect("ls") {
        for e in std::fs::read_dir(key.expect("key").path()).expect("ls") {
            entries.push(e.expect("entry").path());
        }
    }
    assert!(entries.len() > 2, "{} entries", entries.len());
    let mut flipped = false;
    for e in &entries {
        let mut b = std::fs::read(e).expect("read");
        // Chunk 1: records only.
        if e.file_name() == Some(std::ffi::OsStr::new("0000000000000001")) {
            b[1000] ^= 1;
            flipped = true;
        } else {
            b.truncate(b.len() / 2);
        }
        std::fs::write(e, &b).expect("damage");
    }
    assert!(flipped);
    let before = faults.gets.load(Ordering::SeqCst);
    let s3 = open_in(&store, "d.zr", &opts).expect("open");
    assert_eq!(
        s3.gather_vec(&idx).expect("gather"),
        d.local.gather_vec(&idx).expect("local")
    );
    s3.verify().expect("verify");
    let refetched = faults.gets.load(Ordering::SeqCst) - before - 1;
    assert_eq!(refetched, entries.len());
    assert_eq!(
        refetched as u64,
        s3.remote_stats().expect("stats").cache_misses
    );
}

#[test]
fn the_cache_stays_under_its_bound() {
    let d = fixture_dense(Codec::Raw, 500, 4000);
    let (store, _) = bucket(&[("d.zr", &d.bytes)]);
    let cache = tempfile::tempdir().expect("tempdir");
    let bound = 300 << 10;
    let opts = cached(cache.path(), bound, 32 << 10);
    let s = open_in(&store, "d.zr", &opts).expect("open");
    for seed in 0..20 {
        let idx = batch(500, 20, seed);
        assert_eq!(
            s.gather_vec(&idx).expect("gather"),
            d.local.gather_vec(&idx).expect("local")
        );
        let mut total = 0;
        for key in std::fs::read_dir(cache.path().join("v2")).expect("ls") {
            for e in std::fs::read_dir(key.expect("key").path()).expect("ls") {
                total += e.expect("entry").metadata().expect("stat").len();
            }
        }
        assert!(total <= bound, "cache holds {total} bytes, bound {bound}");
    }
}

#[test]
fn http_urls_open_and_retry_after_503s_and_dropped_connections() {
    let d = fixture_dense(Codec::Zstd, 200, 3000);
    let root = tempfile::tempdir().expect("tempdir");
    std::fs::write(root.path().join("d.zr"), &d.bytes).expect("write");
    let (base, server) = serve(root.path().to_path_buf());
    let url = format!("{base}/d.zr");
    let opts = ReadOptions::default().remote(quick_retries());
    let s = Store::open(&url, opts.clone()).expect("open over http");
    assert_eq!(s.path(), Path::new(&url));
    let idx = batch(200, 50, 1);
    assert_eq!(
        s.gather_vec(&idx).expect("gather"),
        d.local.gather_vec(&idx).expect("local")
    );
    // Three 503s, then two dropped connections: object_store retries them all.
    server.fail_503.store(3, Ordering::SeqCst);
    server.drop_next.store(2, Ordering::SeqCst);
    let seen = server.seen.lock().expect("lock").len();
    assert_eq!(
        s.gather_vec(&idx).expect("gather after faults"),
        d.local.gather_vec(&idx).expect("local")
    );
    assert_eq!(server.fail_503.load(Ordering::SeqCst), 0);
    assert_eq!(server.drop_next.load(Ordering::SeqCst), 0);
    let retried = server.seen.lock().expect("lock").len() - seen;
    assert!(retried >= 6, "{retried} requests for one GET with 5 faults");
    // With retries off, a 503 is an error naming the URL.
    let no_retry = ReadOptions::default().remote(quick_retries().max_retries(0));
    let s2 = Store::open(&url, no_retry).expect("open");
    server.fail_503.store(1, Ordering::SeqCst);
    match s2.gather_vec(&[0]) {
        Err(err @ Error::Remote { .. }) => assert!(err.to_string().contains(&url), "{err}"),
        other => panic!("expected a remote error, got {other:?}"),
    }
    match Store::open(format!("{base}/missing.zr"), opts) {
        Err(Error::Remote { kind, .. }) => assert_eq!(kind, std::io::ErrorKind::NotFound),
        other => panic!("expected not found, got {other:?}"),
    }
    server.stop.store(true, Ordering::SeqCst);
}

/// The child half of the two-process cache test (does nothing unless spawned by it).
#[test]
fn cache_child_reader() {
    let (Ok(url), Ok(cache)) = (
        std::env::var("ZRING_TEST_REMOTE_URL"),
        std::env::var("ZRING_TEST_REMOTE_CACHE"),
    ) else {
        return;
    };
    let s = Store::open(&url, cached(Path::new(&cache), 1 << 30, 16 << 10)).expect("child open");
    let n = s.len();
    let all: Vec<u64> = (0..n).collect();
    let got = s.gather_vec(&all).expect("child gather");
    let sum: u64 = got.iter().map(|&b| u64::from(b)).sum();
    println!("CHILD-SUM {sum}");
}

#[test]
fn two_processes_share_the_cache_and_fetch_each_chunk_once() {
    let d = fixture_dense(Codec::Raw, 300, 1000);
    let root = tempfile::tempdir().expect("tempdir");
    std::fs::write(root.path().join("d.zr"), &d.bytes).expect("write");
    let (base, server) = serve(root.path().to_path_buf());
    let url = format!("{base}/d.zr");
    let cache = tempfile::tempdir().expect("tempdir");
    let exe = std::env::current_exe().expect("test binary");
    let child = std::process::Command::new(exe)
        .args([
            "--exact",
            "cache_child_reader",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("ZRING_TEST_REMOTE_URL", &url)
        .env("ZRING_TEST_REMOTE_CACHE", cache.path())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn child");
    let s = Store::open(&url, cached(cache.path(), 1 << 30, 16 << 10)).expect("open");
    let all: Vec<u64> = (0..300).collect();
    let got = s.gather_vec(&all).expect("gather");
    assert_eq!(got, d.local.gather_vec(&all).expect("local"));
    let out = child.wait_with_output().expect("child");
    assert!(
        out.status.success(),
        "child failed: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let sum: u64 = got.iter().map(|&b| u64::from(b)).sum();
    assert!(String::from_utf8_lossy(&out.stdout).contains(&format!("CHILD-SUM {sum}")));
    // Every chunk GET (bounded ranges) was made once across both processes; the
    // suffix GETs are each process's open.
    let seen = server.seen.lock().expect("lock").clone();
    let mut bounded: Vec<&str> = seen
        .iter()
        .filter(|(m, r)| m == "GET" && !r.starts_with("bytes=-"))
        .map(|(_, r)| r.as_str())
        .collect();
    let suffix = seen
        .iter()
        .filter(|(_, r)| r.starts_with("bytes=-"))
        .count();
    assert_eq!(suffix, 2, "{seen:?}");
    let total = bounded.len();
    bounded.sort_unstable();
    bounded.dedup();
    assert_eq!(total, bounded.len(), "a chunk was fetched twice: {seen:?}");
    let chunks = d.bytes.len().div_ceil(16 << 10);
    assert!(total <= chunks, "{total} chunk GETs for {chunks} chunks");
    server.stop.store(true, Ordering::SeqCst);
}

#[test]
fn datasets_open_at_a_url() {
    use zring_engine::dataset::Dataset;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = label_dataset(dir.path());
    let url = format!("file://{}", path.display());
    assert!(zring_engine::dataset::is_dataset(Path::new(&url)));
    let ds = Dataset::open(&url, ReadOptions::default()).expect("open dataset at a URL");
    assert_eq!(ds.len(), 15);
    assert_eq!(ds.path(), Path::new(&url));
    assert_eq!(common::labels_at(&ds, &[14, 0, 7]), vec![14, 0, 7]);
    let v = Dataset::open_version(&url, ds.version(), ReadOptions::default()).expect("version");
    assert_eq!(v.len(), 15);
    assert!(!zring_engine::dataset::is_dataset(Path::new(&format!(
        "{url}/nothing"
    ))));
}

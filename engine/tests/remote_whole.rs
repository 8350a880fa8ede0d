//! Whole-object cache entries: an object the cache keeps whole is downloaded once at
//! open and read as a local store; the entry is shared by processes, keyed by the
//! object's version, validated and refetched when damaged, never visible torn, and
//! evicted whole.

mod common;
mod remote_support;

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use remote_support::*;
use zring_engine::remote::object_store::memory::InMemory;
use zring_engine::remote::object_store::path::Path as ObjectPath;
use zring_engine::remote::object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use zring_engine::remote::{CacheOptions, RemoteOptions, WholeObjects};
use zring_engine::{Backend, Codec, ReadOptions, Store};

fn cache_opts(dir: &Path, max_bytes: u64, whole: WholeObjects) -> ReadOptions {
    let cache = CacheOptions::new(dir, max_bytes).whole(whole);
    ReadOptions::default().remote(RemoteOptions::default().cache(cache))
}

/// The whole-object entries (`v2/KEY/object`) and temporary files in a cache.
fn listing(cache: &Path) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let (mut entries, mut temps) = (Vec::new(), Vec::new());
    let Ok(keys) = std::fs::read_dir(cache.join("v2")) else {
        return (entries, temps);
    };
    for key in keys {
        for f in std::fs::read_dir(key.expect("key").path()).expect("ls") {
            let p = f.expect("file").path();
            let name = p.file_name().expect("name").to_string_lossy().to_string();
            if name == "object" {
                entries.push(p);
            } else if name.starts_with(".tmp.") {
                temps.push(p);
            }
        }
    }
    (entries, temps)
}

fn assert_reads_equal(s: &Store, d: &Fixture, n: u64) {
    for seed in 0..3 {
        let idx = batch(n, 97, seed);
        assert_eq!(
            s.gather_vec(&idx).expect("gather"),
            d.local.gather_vec(&idx).expect("local")
        );
    }
    assert_eq!(s.get(n - 1).expect("get"), d.local.get(n - 1).expect("get"));
    s.verify().expect("verify");
}

#[test]
fn a_whole_object_is_fetched_once_then_read_as_a_local_store_on_every_backend() {
    let d = fixture_dense(Codec::Zstd, 400, 2000);
    let r = fixture_ragged(Codec::Raw, 300);
    let (store, faults) = bucket(&[("d.zr", &d.bytes), ("r.zr", &r.bytes)]);
    let cache = tempfile::tempdir().expect("tempdir");
    let opts = cache_opts(cache.path(), 1 << 30, WholeObjects::Auto);
    let s = open_in(&store, "d.zr", &opts).expect("open");
    let st = s.remote_stats().expect("stats");
    assert_eq!((st.whole_fetches, st.whole_hits), (1, 0));
    // One GET of the whole object (under one part), its exact bytes.
    assert_eq!(faults.gets.load(Ordering::SeqCst), 1);
    assert_eq!(
        faults.ranges.lock().expect("lock").clone(),
        vec![0..d.bytes.len() as u64]
    );
    assert_eq!((st.requests, st.bytes), (1, d.bytes.len() as u64));
    assert!(s.is_remote());
    assert_eq!(s.path(), Path::new("mem://bucket/d.zr"));
    assert_eq!(s.remote_version().expect("version").0, d.bytes.len() as u64);
    assert_eq!(s.reads_served().remote, 0);
    assert_reads_equal(&s, &d, 400);
    assert_eq!(s.reads_served().remote, 0, "read locally, not by GETs");
    assert_eq!(listing(cache.path()).0.len(), 1);
    // Every later open, on every backend: no GET (one HEAD each), a local store.
    let heads = faults.heads.load(Ordering::SeqCst);
    for backend in [Backend::Pread, Backend::Mmap, Backend::Uring, Backend::Auto] {
        let o = opts.clone().backend(backend);
        let s = open_in(&store, "d.zr", &o).expect("open");
        let st = s.remote_stats().expect("stats");
        assert_eq!((st.whole_fetches, st.whole_hits, st.requests), (0, 1, 0));
        if backend != Backend::Auto && backend != Backend::Uring {
            assert_eq!(s.backend(), backend);
        }
        assert_reads_equal(&s, &d, 400);
        let ragged = open_in(&store, "r.zr", &o).expect("open ragged");
        let idx = batch(300, 50, 3);
        let got = ragged.gather_ragged(&idx).expect("gather ragged");
        let want = r.local.gather_ragged(&idx).expect("local ragged");
        assert_eq!(got.cu_seqlens, want.cu_seqlens);
        assert_eq!(&got.values[..], &want.values[..]);
    }
    assert_eq!(
        faults.gets.load(Ordering::SeqCst),
        2,
        "d.zr and r.zr once each"
    );
    assert_eq!(faults.heads.load(Ordering::SeqCst) - heads, 8);
}

#[test]
fn large_objects_are_fetched_in_parts_and_never_whole_keeps_chunks() {
    // 20 MB: three 8 MiB parts.
    let d = fixture_dense(Codec::Raw, 5000, 4000);
    let (store, faults) = bucket(&[("d.zr", &d.bytes)]);
    let cache = tempfile::tempdir().expect("tempdir");
    let mut opts = cache_opts(cache.path(), 1 << 30, WholeObjects::Always);
    opts.remote.in_flight = 2;
    let s = open_in(&store, "d.zr", &opts).expect("open");
    let mut ranges = faults.ranges.lock().expect("lock").clone();
    ranges.sort_by_key(|r| r.start);
    let size = d.bytes.len() as u64;
    assert_eq!(ranges, vec![0..8 << 20, 8 << 20..16 << 20, 16 << 20..size]);
    assert_eq!(s.remote_stats().expect("stats").requests, 3);
    assert_reads_equal(&s, &d, 5000);
    // `Never`, and `Auto` for an object over half the bound: chunks, not whole.
    for (whole, bound) in [(WholeObjects::Never, 1 << 30), (WholeObjects::Auto, size)] {
        let other = tempfile::tempdir().expect("tempdir");
        let s = open_in(&store, "d.zr", &cache_opts(other.path(), bound, whole)).expect("open");
        let idx = batch(5000, 50, 1);
        assert_eq!(
            s.gather_vec(&idx).expect("gather"),
            d.local.gather_vec(&idx).expect("local")
        );
        let st = s.remote_stats().expect("stats");
        assert_eq!((st.whole_fetches, st.whole_hits), (0, 0));
        assert!(st.cache_misses > 0);
        assert!(s.reads_served().remote > 0);
        assert!(listing(other.path()).0.is_empty());
    }
}

#[test]
fn a_changed_object_is_refetched_and_a_damaged_entry_is_replaced() {
    let a = fixture_dense(Codec::Raw, 50, 400);
    let b = fixture_dense(Codec::Zstd, 80, 400);
    let mem = Arc::new(InMemory::new());
    let name = ObjectPath::from("d.zr");
    block(mem.put(&name, PutPayload::from(a.bytes.clone()))).expect("put");
    let store: Arc<dyn ObjectStore> = mem.clone();
    let cache = tempfile::tempdir().expect("tempdir");
    let opts = cache_opts(cache.path(), 1 << 30, WholeObjects::Auto);
    let fetched = |s: &Store| s.remote_stats().expect("stats").whole_fetches;
    assert_eq!(fetched(&open_in(&store, "d.zr", &opts).expect("open")), 1);
    assert_eq!(fetched(&open_in(&store, "d.zr", &opts).expect("open")), 0);
    // The same bytes put again: a new ETag, a new entry.
    block(mem.put(&name, PutPayload::from(a.bytes.clone()))).expect("put");
    let s = open_in(&store, "d.zr", &opts).expect("open");
    assert_eq!(fetched(&s), 1);
    assert_eq!(listing(cache.path()).0.len(), 2);
    // Other bytes: the new store's, never the stale entry's.
    block(mem.put(&name, PutPayload::from(b.bytes.clone()))).expect("put");
    let s2 = open_in(&store, "d.zr", &opts).expect("open");
    assert_eq!(fetched(&s2), 1);
    assert_eq!(s2.len(), 80);
    assert_reads_equal(&s2, &b, 80);
    // The store opened before the change still reads its own copy.
    assert_reads_equal(&s, &a, 50);
    // Damage to the current entry: a bit of its table or footer flipped, or the file
    // cut short. Each is found by the open's validation, deleted and fetched again.
    let entry = {
        let want = b.bytes.len() as u64;
        let (entries, _) = listing(cache.path());
        entries
            .into_iter()
            .find(|e| std::fs::metadata(e).expect("stat").len() == want)
            .expect("b's entry")
    };
    let n = b.bytes.len();
    for damage in [n - 100, 10] {
        let mut bad = std::fs::read(&entry).expect("read");
        bad[damage] ^= 1;
        std::fs::write(&entry, &bad).expect("damage");
        let s = open_in(&store, "d.zr", &opts).expect("open");
        assert_eq!(fetched(&s), 1, "damage at {damage} refetched");
        assert_reads_equal(&s, &b, 80);
        assert_eq!(std::fs::read(&entry).expect("read"), b.bytes);
    }
    std::fs::write(&entry, &b.bytes[..n / 2]).expect("cut");
    let s = open_in(&store, "d.zr", &opts).expect("open");
    assert_eq!(fetched(&s), 1);
    assert_reads_equal(&s, &b, 80);
}

#[test]
fn eviction_unlinks_the_least_recently_opened_entries() {
    let fixtures: Vec<Fixture> = (0..3)
        .map(|k| fixture_dense(Codec::Raw, 100 + k, 4000))
        .collect();
    let objects: Vec<(String, &[u8])> = fixtures
        .iter()
        .enumerate()
        .map(|(k, f)| (format!("{k}.zr"), &f.bytes[..]))
        .collect();
    let named: Vec<(&str, &[u8])> = objects.iter().map(|(n, b)| (n.as_str(), *b)).collect();
    let (store, _) = bucket(&named);
    let cache = tempfile::tempdir().expect("tempdir");
    // Room for two objects (each over a third of the bound), not three.
    let bound = fixtures[2].bytes.len() as u64 * 5 / 2;
    let opts = cache_opts(cache.path(), bound, WholeObjects::Auto);
    let mut open = Vec::new();
    for k in 0..3 {
        let s = open_in(&store, &format!("{k}.zr"), &opts).expect("open");
        assert_eq!(s.remote_stats().expect("stats").whole_fetches, 1);
        open.push(s);
        std::thread::sleep(Duration::from_millis(20));
        let total: u64 = listing(cache.path())
            .0
            .iter()
            .map(|e| std::fs::metadata(e).expect("stat").len())
            .sum();
        assert!(total <= bound, "{total} bytes cached, bound {bound}");
    }
    assert_eq!(listing(cache.path()).0.len(), 2, "the oldest entry went");
    // The store whose file was unlinked still reads it.
    assert_reads_equal(&open[0], &fixtures[0], 100);
    // 2 is the most recent, 1 is kept: neither is fetched again; 0 is.
    let fetched = |k: usize| {
        open_in(&store, &format!("{k}.zr"), &opts)
            .expect("open")
            .remote_stats()
            .expect("stats")
            .whole_fetches
    };
    assert_eq!(fetched(2), 0);
    assert_eq!(fetched(1), 0);
    assert_eq!(fetched(0), 1);
}

#[test]
fn datasets_at_a_url_cache_each_shard_whole() {
    use zring_engine::dataset::Dataset;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = label_dataset(dir.path());
    let url = format!("file://{}", path.display());
    let cache = tempfile::tempdir().expect("tempdir");
    let opts = cache_opts(cache.path(), 1 << 30, WholeObjects::Auto);
    for round in 0..2 {
        let ds = Dataset::open(&url, opts.clone()).expect("open dataset at a URL");
        assert_eq!(common::labels_at(&ds, &[14, 0, 7]), vec![14, 0, 7]);
        for shard in 0..3 {
            let st = ds
                .store(shard, 0)
                .expect("shard store")
                .remote_stats()
                .expect("stats");
            assert_eq!((st.whole_fetches, st.whole_hits), (1 - round, round));
        }
    }
    assert_eq!(listing(cache.path()).0.len(), 3);
}

// ---------------------------------------------------------------------------------
// Processes: a shared download, a killed one.

/// The child half of the process tests (does nothing unless spawned by them): opens
/// the store whole and prints what it read and what opening it cost.
#[test]
fn whole_child_reader() {
    let (Ok(url), Ok(cache)) = (
        std::env::var("ZRING_TEST_WHOLE_URL"),
        std::env::var("ZRING_TEST_WHOLE_CACHE"),
    ) else {
        return;
    };
    let opts = cache_opts(Path::new(&cache), 1 << 30, WholeObjects::Always);
    let s = Store::open(&url, opts).expect("child open");
    let all: Vec<u64> = (0..s.len()).collect();
    let got = s.gather_vec(&all).expect("child gather");
    let sum: u64 = got.iter().map(|&b| u64::from(b)).sum();
    let st = s.remote_stats().expect("stats");
    println!(
        "CHILD-SUM {sum} FETCHES {} HITS {}",
        st.whole_fetches, st.whole_hits
    );
}

fn child(url: &str, cache: &Path) -> std::process::Child {
    std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "whole_child_reader",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("ZRING_TEST_WHOLE_URL", url)
        .env("ZRING_TEST_WHOLE_CACHE", cache)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn child")
}

/// The bounded-range GETs the server saw.
fn data_gets(server: &Server) -> Vec<String> {
    server
        .seen
        .lock()
        .expect("lock")
        .iter()
        .filter(|(m, r)| m == "GET" && !r.is_empty())
        .map(|(_, r)| r.clone())
        .collect()
}

#[test]
fn processes_opening_one_object_at_once_download_it_once() {
    let d = fixture_dense(Codec::Raw, 300, 1000);
    let root = tempfile::tempdir().expect("tempdir");
    std::fs::write(root.path().join("d.zr"), &d.bytes).expect("write");
    let (base, server) = serve(root.path().to_path_buf());
    // Slow answers: the processes' opens overlap.
    server.delay_ms.store(300, Ordering::SeqCst);
    let url = format!("{base}/d.zr");
    let cache = tempfile::tempdir().expect("tempdir");
    let kids: Vec<_> = (0..2).map(|_| child(&url, cache.path())).collect();
    let opts = cache_opts(cache.path(), 1 << 30, WholeObjects::Always);
    let s = Store::open(&url, opts).expect("open");
    let all: Vec<u64> = (0..300).collect();
    let got = s.gather_vec(&all).expect("gather");
    assert_eq!(got, d.local.gather_vec(&all).expect("local"));
    let sum: u64 = got.iter().map(|&b| u64::from(b)).sum();
    let mut fetches = s.remote_stats().expect("stats").whole_fetches;
    for kid in kids {
        let out = kid.wait_with_output().expect("child");
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(out.status.success(), "child failed: {text}");
        assert!(text.contains(&format!("CHILD-SUM {sum} ")), "{text}");
        fetches += u64::from(text.contains("FETCHES 1"));
    }
    assert_eq!(fetches, 1, "one process of three downloaded it");
    assert_eq!(data_gets(&server).len(), 1, "{:?}", data_gets(&server));
    server.stop.store(true, Ordering::SeqCst);
}

#[test]
fn a_killed_download_publishes_nothing_and_is_cleaned_up() {
    let d = fixture_dense(Codec::Raw, 300, 1000);
    let root = tempfile::tempdir().expect("tempdir");
    std::fs::write(root.path().join("d.zr"), &d.bytes).expect("write");
    let (base, server) = serve(root.path().to_path_buf());
    // The child's GET is answered after 30 s: it is killed long before.
    server.delay_ms.store(30_000, Ordering::SeqCst);
    let url = format!("{base}/d.zr");
    let cache = tempfile::tempdir().expect("tempdir");
    let mut kid = child(&url, cache.path());
    let started = Instant::now();
    while listing(cache.path()).1.is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the child never started its download"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    kid.kill().expect("kill");
    kid.wait().expect("reap");
    let (entries, temps) = listing(cache.path());
    assert!(entries.is_empty(), "a partial download was published");
    assert_eq!(temps.len(), 1);
    // The next open (the lock the dead child held is free) downloads it afresh and
    // deletes the dead download's temporary file.
    server.delay_ms.store(0, Ordering::SeqCst);
    let opts = cache_opts(cache.path(), 1 << 30, WholeObjects::Auto);
    let s = Store::open(&url, opts).expect("open");
    assert_eq!(s.remote_stats().expect("stats").whole_fetches, 1);
    assert_reads_equal(&s, &d, 300);
    let (entries, temps) = listing(cache.path());
    assert_eq!((entries.len(), temps.len()), (1, 0));
    server.stop.store(true, Ordering::SeqCst);
}

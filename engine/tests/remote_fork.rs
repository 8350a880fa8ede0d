//! A child forked from a process that reads remote stores (PyTorch's DataLoader
//! forks its workers from a training process) reads correct data through a runtime
//! of its own, and never waits for the parent's threads: not after the parent's
//! reads, not while other threads are reading, not during the process's first remote
//! read (the runtime being built). Every wait is bounded: a hang is a failure.
//!
//! The stores are served over HTTP by this test process's threads, which keep
//! serving while the children (separate processes) read.
#![cfg(all(unix, feature = "remote"))]

mod common;
mod remote_support;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use remote_support::*;
use zring_engine::remote::{CacheOptions, WholeObjects};
use zring_engine::{Codec, ReadOptions, Store};
use zring_testkit::{child_succeeds, fork_during_first_use, ChildEnd};

/// Far above any real duration: only a hang reaches it.
const TIMEOUT: Duration = Duration::from_secs(120);

/// A zstd store of 300 records of 700 bytes, served at the returned URL.
fn served() -> (Fixture, String, tempfile::TempDir, std::sync::Arc<Server>) {
    let d = fixture_dense(Codec::Zstd, 300, 700);
    let root = tempfile::tempdir().expect("tempdir");
    std::fs::write(root.path().join("d.zr"), &d.bytes).expect("write");
    let (base, server) = serve(root.path().to_path_buf());
    (d, format!("{base}/d.zr"), root, server)
}

fn cached(dir: &Path) -> ReadOptions {
    let cache = CacheOptions::new(dir, 1 << 30)
        .chunk_bytes(16 << 10)
        .whole(WholeObjects::Never);
    ReadOptions::default().remote(quick_retries().cache(cache))
}

fn plain() -> ReadOptions {
    ReadOptions::default().remote(quick_retries())
}

/// Whether `store` gathers `idx` as `want`.
fn gathers(store: &Store, idx: &[u64], want: &[u8]) -> bool {
    store.gather_vec(idx).is_ok_and(|got| got == want)
}

#[test]
fn a_child_forked_after_remote_reads_reads_through_its_own_runtime() {
    let (d, url, _root, server) = served();
    let cache = tempfile::tempdir().expect("tempdir");
    let idx = batch(300, 80, 3);
    let want = d.local.gather_vec(&idx).expect("local");
    let store = Store::open(&url, cached(cache.path())).expect("open");
    assert!(gathers(&store, &idx, &want));
    let other = batch(300, 80, 4);
    let want_other = d.local.gather_vec(&other).expect("local");
    // The child reads through the store it inherited (new records: through the
    // network and the cache) and through a store of its own on the same cache.
    assert!(child_succeeds(TIMEOUT, || {
        let fresh = Store::open(&url, cached(cache.path()));
        gathers(&store, &other, &want_other)
            && gathers(&store, &idx, &want)
            && fresh.is_ok_and(|s| gathers(&s, &idx, &want) && s.verify().is_ok())
    }));
    // The parent's runtime is untouched by the child's.
    assert!(gathers(&store, &other, &want_other));
    server.stop.store(true, Ordering::SeqCst);
}

#[test]
fn children_forked_while_other_threads_read_remotely_do_not_wait_for_them() {
    let (d, url, _root, server) = served();
    let idx = batch(300, 40, 5);
    let want = d.local.gather_vec(&idx).expect("local");
    let store = Store::open(&url, plain()).expect("open");
    let stop = AtomicBool::new(false);
    let failures = std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    assert!(gathers(&store, &idx, &want), "the parent's gather");
                }
            });
        }
        let mut failures = Vec::new();
        for round in 0..40 {
            let end = zring_testkit::run_forked(TIMEOUT, || {
                let ok = Store::open(&url, plain()).is_ok_and(|s| gathers(&s, &idx, &want));
                i32::from(!ok)
            });
            if end != ChildEnd::Exited(0) {
                failures.push((round, end));
            }
        }
        stop.store(true, Ordering::Relaxed);
        failures
    });
    assert!(
        failures.is_empty(),
        "rounds that failed or hung: {failures:?}"
    );
    server.stop.store(true, Ordering::SeqCst);
}

#[test]
fn children_forked_during_the_first_remote_read_build_their_own_runtime() {
    let (d, url, _root, server) = served();
    let idx = batch(300, 40, 6);
    let want = d.local.gather_vec(&idx).expect("local");
    let mut failures = Vec::new();
    for round in 0..100 {
        // Each round in a fresh process, whose runtime does not exist yet: the fork
        // lands while another thread opens the store (and builds the runtime).
        let end = fork_during_first_use(TIMEOUT, || {
            Store::open(&url, plain()).is_ok_and(|s| gathers(&s, &idx, &want))
        });
        if end != ChildEnd::Exited(0) {
            failures.push((round, end));
        }
    }
    assert!(
        failures.is_empty(),
        "rounds that failed or hung: {failures:?}"
    );
    server.stop.store(true, Ordering::SeqCst);
}

//! The remote path under server faults, over HTTP on 127.0.0.1 (object_store's real
//! HTTP client and retry settings, the range server of `remote_support`): transient
//! 500 and 503 `SlowDown` answers are retried and the right bytes come back;
//! persistent 500, 503 and 403 answers are errors naming the URL, in bounded time; a
//! body cut short and a connection reset (a TCP RST, mid-body or before a byte) are
//! retried, or errors naming the URL once they persist, never wrong bytes; an object
//! replaced between two gathers is detected.

#![cfg(feature = "remote")]

mod common;
mod remote_support;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use remote_support::*;
use zring_engine::{Codec, Error, ReadOptions, Store};

/// A dense store served over HTTP, opened with fast retries.
fn served() -> (
    Fixture,
    tempfile::TempDir,
    String,
    std::sync::Arc<Server>,
    Store,
) {
    let d = fixture_dense(Codec::Raw, 300, 200);
    let root = tempfile::tempdir().expect("tempdir");
    std::fs::write(root.path().join("d.zr"), &d.bytes).expect("write");
    let (base, server) = serve(root.path().to_path_buf());
    let url = format!("{base}/d.zr");
    let opts = ReadOptions::default().remote(
        quick_retries()
            .max_retries(3)
            .retry_timeout(Duration::from_secs(10)),
    );
    let s = Store::open(&url, opts).expect("open over http");
    (d, root, url, server, s)
}

fn requests(server: &Server) -> usize {
    server.seen.lock().expect("lock").len()
}

#[test]
fn transient_500_and_503_slowdown_are_retried_and_return_the_right_bytes() {
    let (d, _root, _url, server, s) = served();
    let idx = batch(300, 40, 7);
    let want = d.local.gather_vec(&idx).expect("local");
    for code in [500u16, 503] {
        *server.fail_with.lock().expect("lock") = vec![code, code];
        let before = requests(&server);
        assert_eq!(s.gather_vec(&idx).expect("gather after faults"), want);
        assert!(server.fail_with.lock().expect("lock").is_empty());
        let made = requests(&server) - before;
        assert!(made >= 3, "{code}: {made} requests for a GET failed twice");
    }
}

#[test]
fn persistent_500_503_and_403_are_errors_naming_the_url_in_bounded_time() {
    let (d, _root, url, server, s) = served();
    for code in [500u64, 503, 403] {
        server.fail_always.store(code, Ordering::SeqCst);
        let started = Instant::now();
        let before = requests(&server);
        match s.gather_vec(&[1, 2]) {
            Err(err @ Error::Remote { kind, .. }) => {
                assert!(err.to_string().contains(&url), "{code}: {err}");
                let made = requests(&server) - before;
                if code == 403 {
                    // Refused credentials are not retried.
                    assert_eq!(kind, std::io::ErrorKind::PermissionDenied);
                    assert_eq!(made, 1, "403 asked {made} times");
                } else {
                    // Retried up to max_retries, then given up.
                    assert_eq!(made, 4, "{code} asked {made} times");
                }
            }
            other => panic!("{code}: expected a remote error, got {other:?}"),
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{code}: took {:?}",
            started.elapsed()
        );
    }
    // Once the server recovers, the same store reads again.
    server.fail_always.store(0, Ordering::SeqCst);
    assert_eq!(
        s.gather_vec(&[1, 2]).expect("gather"),
        d.local.gather_vec(&[1, 2]).expect("local")
    );
}

#[test]
fn a_short_body_is_retried_or_an_error_never_wrong_bytes() {
    let (d, _root, url, server, s) = served();
    let idx = batch(300, 40, 3);
    let want = d.local.gather_vec(&idx).expect("local");
    // One body cut short (Content-Length promised, half sent, then close): the GET
    // is retried and the right bytes come back.
    server.short_next.store(1, Ordering::SeqCst);
    let before = requests(&server);
    assert_eq!(s.gather_vec(&idx).expect("gather after a cut body"), want);
    assert_eq!(server.short_next.load(Ordering::SeqCst), 0);
    assert!(requests(&server) - before >= 2);
    // Every body cut: an error naming the URL, in bounded time.
    server.short_next.store(1000, Ordering::SeqCst);
    let started = Instant::now();
    match s.gather_vec(&idx) {
        Err(err @ Error::Remote { .. }) => assert!(err.to_string().contains(&url), "{err}"),
        other => panic!("expected a remote error, got {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(20));
    server.short_next.store(0, Ordering::SeqCst);
    assert_eq!(s.gather_vec(&idx).expect("gather"), want);
}

/// The store of [`served`], opened again with `config` as extra client settings and
/// no cache (every read is a request, whatever the environment says).
fn reopened(url: &str, config: &[(&str, &str)]) -> Store {
    let mut remote = quick_retries()
        .max_retries(3)
        .retry_timeout(Duration::from_secs(10))
        .no_cache(true);
    remote
        .config
        .extend(config.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    Store::open(url, ReadOptions::default().remote(remote)).expect("open over http")
}

/// Which reset a test injects: the server's countdown for it, and what it counts
/// (requests read for a reset mid-body, connections for a reset on accept).
#[derive(Clone, Copy, Debug)]
enum Reset {
    MidBody,
    OnAccept,
}

impl Reset {
    fn countdown(self, server: &Server) -> &std::sync::atomic::AtomicUsize {
        match self {
            Reset::MidBody => &server.reset_mid_body,
            Reset::OnAccept => &server.reset_on_accept,
        }
    }

    fn attempts(self, server: &Server) -> usize {
        match self {
            Reset::MidBody => requests(server),
            Reset::OnAccept => server.accepted.load(Ordering::SeqCst),
        }
    }

    /// The store to read: a reset on accept meets only new connections, so this
    /// one keeps no idle connection and opens one per request.
    fn store(self, url: &str) -> Store {
        match self {
            Reset::MidBody => reopened(url, &[]),
            Reset::OnAccept => reopened(url, &[("pool_max_idle_per_host", "0")]),
        }
    }
}

#[test]
fn transient_connection_resets_are_retried_and_return_the_right_bytes() {
    let (d, _root, url, server, _) = served();
    let idx = batch(300, 40, 11);
    let want = d.local.gather_vec(&idx).expect("local");
    for reset in [Reset::MidBody, Reset::OnAccept] {
        let s = reset.store(&url);
        // What the gather costs without faults: each reset adds one attempt.
        let before = reset.attempts(&server);
        assert_eq!(s.gather_vec(&idx).expect("gather"), want);
        let clean = reset.attempts(&server) - before;
        assert!(clean >= 1, "{reset:?}: {clean} attempts");
        for n in [1, 2] {
            reset.countdown(&server).store(n, Ordering::SeqCst);
            let before = reset.attempts(&server);
            assert_eq!(
                s.gather_vec(&idx).expect("gather after resets"),
                want,
                "{reset:?} x{n}"
            );
            assert_eq!(reset.countdown(&server).load(Ordering::SeqCst), 0);
            let made = reset.attempts(&server) - before;
            assert_eq!(made, clean + n, "{reset:?} x{n}: {made} attempts");
        }
    }
}

/// Whether a cause of `err` is the operating system's "connection reset": the fault
/// arrived as a TCP RST, not as an orderly close.
fn caused_by_a_reset(err: &Error) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = cause {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            if io.kind() == std::io::ErrorKind::ConnectionReset {
                return true;
            }
        }
        cause = e.source();
    }
    false
}

#[test]
fn persistent_connection_resets_are_errors_naming_the_url_in_bounded_time() {
    let (d, _root, url, server, _) = served();
    let want = d.local.gather_vec(&[1, 2]).expect("local");
    for reset in [Reset::MidBody, Reset::OnAccept] {
        let s = reset.store(&url);
        reset.countdown(&server).store(1000, Ordering::SeqCst);
        let started = Instant::now();
        let before = reset.attempts(&server);
        match s.gather_vec(&[1, 2]) {
            Err(err @ Error::Remote { .. }) => {
                assert_eq!(err.path(), Some(std::path::Path::new(&url)), "{err}");
                assert!(caused_by_a_reset(&err), "{reset:?}: {err:?}");
            }
            Err(other) => panic!("{reset:?}: expected a remote error, got {other:?}"),
            Ok(got) => panic!(
                "{reset:?}: expected a remote error, got {} bytes",
                got.len()
            ),
        }
        // One GET, retried up to max_retries, then given up.
        let made = reset.attempts(&server) - before;
        assert_eq!(made, 4, "{reset:?}: {made} attempts");
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{reset:?}: took {:?}",
            started.elapsed()
        );
        // Once the server recovers, the same store reads again.
        reset.countdown(&server).store(0, Ordering::SeqCst);
        assert_eq!(s.gather_vec(&[1, 2]).expect("gather"), want, "{reset:?}");
    }
}

#[test]
fn an_object_replaced_between_gathers_over_http_is_detected() {
    let (d, root, url, _server, s) = served();
    assert_eq!(
        s.gather_vec(&[1]).expect("gather"),
        d.local.gather_vec(&[1]).expect("local")
    );
    // Same length, other bytes: only the ETag can tell.
    let mut other = d.bytes.clone();
    for b in other.iter_mut().take(64) {
        *b = b.wrapping_add(1);
    }
    std::fs::write(root.path().join("d.zr"), &other).expect("replace");
    match s.gather_vec(&[2, 3]) {
        Err(err @ Error::ObjectChanged { .. }) => {
            assert!(err.to_string().contains(&url), "{err}")
        }
        other => panic!("expected ObjectChanged, got {other:?}"),
    }
}

/// Every cache entry file under `dir` (`DIR/v2/KEY/CHUNK`).
fn cache_entries(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for key in std::fs::read_dir(dir.join("v2"))
        .expect("cache dir")
        .flatten()
    {
        for f in std::fs::read_dir(key.path()).expect("key dir").flatten() {
            if !f.file_name().to_string_lossy().starts_with('.') {
                out.push(f.path());
            }
        }
    }
    out
}

#[test]
fn damaged_or_truncated_cache_entries_are_fetched_again_never_served() {
    use zring_engine::remote::{CacheOptions, WholeObjects};
    let d = fixture_dense(Codec::Raw, 300, 200);
    let root = tempfile::tempdir().expect("tempdir");
    std::fs::write(root.path().join("d.zr"), &d.bytes).expect("write");
    let (base, server) = serve(root.path().to_path_buf());
    let cache = tempfile::tempdir().expect("cache");
    let chunks = CacheOptions::new(cache.path(), 1 << 30)
        .chunk_bytes(16 << 10)
        .whole(WholeObjects::Never);
    let opts = ReadOptions::default().remote(quick_retries().cache(chunks));
    let s = Store::open(format!("{base}/d.zr"), opts).expect("open");
    let all: Vec<u64> = (0..300).collect();
    let want = d.local.gather_vec(&all).expect("local");
    assert_eq!(s.gather_vec(&all).expect("fill the cache"), want);
    let before = requests(&server);
    assert_eq!(s.gather_vec(&all).expect("hit"), want);
    assert_eq!(requests(&server), before, "a warm cache asks nothing");
    let entries = cache_entries(cache.path());
    assert!(entries.len() > 1, "{} entries", entries.len());

    // Flip bytes in the middle of each entry's data: every block read is checked.
    for e in &entries {
        let mut bytes = std::fs::read(e).expect("read entry");
        let mid = bytes.len() / 3;
        bytes[mid] ^= 0xff;
        bytes[mid + 1] ^= 0x55;
        std::fs::write(e, &bytes).expect("damage entry");
    }
    let before = requests(&server);
    assert_eq!(s.gather_vec(&all).expect("after damage"), want);
    assert!(
        requests(&server) > before,
        "damaged entries were fetched again"
    );

    // Truncate each entry: its length tells.
    for e in &cache_entries(cache.path()) {
        let len = std::fs::metadata(e).expect("meta").len();
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(e)
            .expect("open entry");
        f.set_len(len / 2).expect("truncate");
    }
    let before = requests(&server);
    assert_eq!(s.gather_vec(&all).expect("after truncation"), want);
    assert!(
        requests(&server) > before,
        "truncated entries were fetched again"
    );
    // And the cache is whole again: no requests.
    let before = requests(&server);
    assert_eq!(s.gather_vec(&all).expect("hit"), want);
    assert_eq!(requests(&server), before);
}

#[test]
fn an_object_replaced_during_a_gather_fails_the_batch_never_mixes_it() {
    let d = fixture_dense(Codec::Raw, 300, 200);
    let root = tempfile::tempdir().expect("tempdir");
    std::fs::write(root.path().join("d.zr"), &d.bytes).expect("write");
    let (base, server) = serve(root.path().to_path_buf());
    let url = format!("{base}/d.zr");
    // Small requests, one at a time, each answered slowly: one gather spans many GETs.
    let opts =
        ReadOptions::default().remote(quick_retries().max_gap(0).max_request(4 << 10).in_flight(1));
    let s = Store::open(&url, opts).expect("open");
    let all: Vec<u64> = (0..300).collect();
    server.delay_ms.store(20, Ordering::SeqCst);
    // Same length, other bytes (the ETag changes), written mid-gather.
    let mut other = d.bytes.clone();
    for b in other.iter_mut().take(64) {
        *b = b.wrapping_add(1);
    }
    let path = root.path().join("d.zr");
    let before = requests(&server);
    let swap = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        std::fs::write(path, &other).expect("replace");
    });
    let got = s.gather_vec(&all);
    swap.join().expect("swap");
    // The first GETs read the old bytes, a later one met the new object.
    let made = requests(&server) - before;
    assert!(made >= 2, "{made} requests; {got:?}");
    match got {
        Err(err @ Error::ObjectChanged { .. }) => {
            assert!(err.to_string().contains(&url), "{err}")
        }
        other => panic!("expected ObjectChanged, got {other:?}"),
    }
}

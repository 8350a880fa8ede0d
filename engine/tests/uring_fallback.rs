//! The one pread fallback rule, seen from a store: a ring refused in the middle of a
//! gather finishes that gather with pread (the platform decides; the engine never
//! asks), later gathers go straight to pread, and stderr says why exactly once.
#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

mod common;

use zring_engine::{Backend, Codec, ReadOptions, Schema, Store, WriteOptions};
use zring_platform::{install_read_hook, ReadFault, ReadSite};

const CHILD_ENV: &str = "ZRING_MID_BATCH_CHILD_STORE";
const WIDTH: usize = 4096;
const RECORDS: usize = 2000;
/// The enter (counted over every thread) that is refused.
const FAIL_AT: usize = 3;

fn indices(n: usize, k: usize, seed: u64) -> Vec<u64> {
    let mut x = seed;
    (0..k)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % n as u64
        })
        .collect()
}

/// Runs only when re-invoked by the parent test.
#[test]
#[ignore = "child process of a_ring_refused_mid_gather_finishes_it_with_pread"]
fn mid_batch_child() {
    let Ok(path) = std::env::var(CHILD_ENV) else {
        return;
    };
    let opts = ReadOptions::with_backend(Backend::Uring).threads(2);
    let store = Store::open(&path, opts).unwrap();
    let mmap = Store::open(&path, ReadOptions::with_backend(Backend::Mmap)).unwrap();
    let enters = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&enters);
    let _guard = install_read_hook(
        std::path::Path::new(&path),
        Arc::new(move |site: &ReadSite| match site {
            ReadSite::Enter if seen.fetch_add(1, Ordering::SeqCst) + 1 == FAIL_AT => Some(
                ReadFault::Fail(std::io::Error::from_raw_os_error(libc::EPERM)),
            ),
            _ => None,
        }),
    )
    .unwrap();

    // The gather the ring is refused in: complete, and exactly the right bytes.
    let first = indices(RECORDS, 1500, 5);
    assert!(store.gather_vec(&first).unwrap() == mmap.gather_vec(&first).unwrap());
    let s = store.reads_served();
    assert!(
        enters.load(Ordering::SeqCst) >= FAIL_AT,
        "the ring was used"
    );
    assert!(
        s.pread > 0,
        "the refused windows were read with pread: {s:?}"
    );
    assert_eq!(s.pread + s.uring, first.len() as u64, "{s:?}");
    assert!(!zring_platform::uring_available());
    assert_eq!(store.backend(), Backend::Pread, "reported as it now reads");

    // Later gathers go straight to pread: no enter at all.
    let entered = enters.load(Ordering::SeqCst);
    let second = indices(RECORDS, 700, 9);
    assert!(store.gather_vec(&second).unwrap() == mmap.gather_vec(&second).unwrap());
    let t = store.reads_served();
    assert_eq!(enters.load(Ordering::SeqCst), entered, "no io_uring_enter");
    assert_eq!(t.uring, s.uring, "{t:?}");
    assert_eq!(t.pread - s.pread, second.len() as u64, "{t:?}");
    println!("CHILD-OK");
}

#[test]
fn a_ring_refused_mid_gather_finishes_it_with_pread() {
    if !common::uring_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("midbatch.zr");
    let data = zring_testkit::ramp(RECORDS * WIDTH, 17);
    let schema = Schema::dense(zring_engine::DType::U8, &[WIDTH as u64]);
    common::write_dense(
        &path,
        &schema,
        WriteOptions::with_codec(Codec::Zstd),
        &data,
        4,
    )
    .unwrap();
    let out = zring_testkit::rerun_test("mid_batch_child")
        .env(CHILD_ENV, &path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("CHILD-OK"),
        "child failed:\n{stdout}\n{stderr}"
    );
    let notices = stderr.matches("io_uring unavailable").count();
    assert_eq!(notices, 1, "one notice, got:\n{stderr}");
    assert!(stderr.contains("io_uring_enter refused"), "{stderr}");
}

//! A store's file truncated while the store is open (by another process, a failing
//! disk, a network file system's server): on every backend but `mmap`, every read
//! entry point returns `Error::FileChanged` naming the path and both lengths, and
//! the process lives on. (`mmap` maps the file: a truncated mapping raises SIGBUS,
//! as documented in docs/engine.md; `Auto` never maps a file on a network file
//! system.)
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;

use common::{dense_mixed, ragged_zstd, Fixture};
use zring_engine::{Backend, Error, ReadOptions, Store};

/// Where the file is cut: the superblock and the first data block survive.
const CUT: u64 = 8192;

/// Every read entry point of a store.
#[derive(Clone, Copy, Debug)]
enum Entry {
    Get,
    Gather,
    Verify,
    Stats,
    Shape,
}

/// The backends that never map the file, with the direct (O_DIRECT) variants.
/// `uring` only where io_uring works (else the skip is printed, or the test fails
/// under `ZRING_REQUIRE_URING=1`): a uring store without a ring reads with pread,
/// which would pass as uring.
fn sources() -> Vec<(&'static str, ReadOptions)> {
    let mut out = Vec::new();
    let backends = if common::uring_here() {
        vec![Backend::Pread, Backend::Uring]
    } else {
        vec![Backend::Pread]
    };
    for backend in backends {
        out.push((backend.name(), ReadOptions::with_backend(backend)));
        let direct = ReadOptions::with_backend(backend).direct(true);
        out.push((
            if backend == Backend::Pread {
                "pread+direct"
            } else {
                "uring+direct"
            },
            direct,
        ));
    }
    out
}

fn expect_changed<T: std::fmt::Debug>(r: zring_engine::Result<T>, path: &Path, what: &str) {
    match r {
        Err(Error::FileChanged {
            path: p,
            len,
            expected,
        }) => {
            assert_eq!(p, path, "{what}");
            assert_eq!(len, CUT, "{what}");
            assert!(expected > CUT, "{what}");
            let msg = Error::FileChanged {
                path: p,
                len,
                expected,
            }
            .to_string();
            assert!(
                msg.contains(&format!("truncated: {CUT} bytes, expected {expected}")),
                "{what}: {msg}"
            );
            assert!(msg.contains(&path.display().to_string()), "{what}: {msg}");
        }
        other => panic!("{what}: expected FileChanged, got {other:?}"),
    }
}

fn check(fx: &Fixture, dir: &Path) {
    let last = fx.records.len() as u64 - 1;
    let all: Vec<u64> = (0..=last).collect();
    for (name, opts) in sources() {
        for entry in [
            Entry::Get,
            Entry::Gather,
            Entry::Verify,
            Entry::Stats,
            Entry::Shape,
        ] {
            let what = format!("{name} {entry:?} ragged={}", fx.ragged);
            let path = dir.join(format!("cut-{name}-{entry:?}.zr"));
            std::fs::write(&path, &fx.bytes).unwrap();
            let store = match Store::open(&path, opts.clone()) {
                Ok(s) => s,
                // O_DIRECT is not supported by every file system (the directory is
                // under the target directory, not a tmpfs /tmp, so that it usually is).
                Err(e @ Error::Io { .. }) if opts.direct => {
                    zring_testkit::require_uring("O_DIRECT", Some(&e.to_string()));
                    continue;
                }
                Err(e) => panic!("{what}: open: {e}"),
            };
            // Read everything once, as a user would before the file changes.
            if fx.ragged {
                store.gather_ragged(&all).unwrap();
            } else {
                store.gather_vec(&all).unwrap();
            }
            std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .unwrap()
                .set_len(CUT)
                .unwrap();
            match entry {
                Entry::Get => expect_changed(store.get(last), &path, &what),
                Entry::Gather if fx.ragged => {
                    expect_changed(store.gather_ragged(&all), &path, &what)
                }
                Entry::Gather => expect_changed(store.gather_vec(&all), &path, &what),
                Entry::Verify => expect_changed(store.verify(), &path, &what),
                // The table and shapes were copied at open: they still answer, and
                // what they say is what the file said.
                Entry::Stats => {
                    assert_eq!(store.stats().unwrap().records, last + 1, "{what}")
                }
                Entry::Shape => {
                    store.shape(last).unwrap();
                }
            }
            // A store opened now sees the cut file for what it is.
            assert!(Store::open(&path, opts.clone()).is_err(), "{what}: reopen");
        }
    }
}

#[test]
fn dense_reads_of_a_truncated_file_fail_with_file_changed_on_every_unmapped_backend() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    check(&dense_mixed(dir.path(), 300), dir.path());
}

#[test]
fn ragged_reads_of_a_truncated_file_fail_with_file_changed_on_every_unmapped_backend() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    check(&ragged_zstd(dir.path(), 300), dir.path());
}

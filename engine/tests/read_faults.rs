//! Read-side faults injected through the platform's seam
//! (`zring_platform::install_read_hook`) on every backend that reads with system
//! calls: `pread`, io_uring on buffered files, and O_DIRECT (with `pread` and with
//! io_uring). EIO is a typed error naming the path and the record; EINTR and short
//! reads are continued transparently; every read after the fault clears is exact.

mod common;

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use common::*;
use zring_engine::{Backend, Codec, DType, Error, ReadOptions, Schema, Store, WriteOptions};
use zring_platform::{install_read_hook, ReadFault, ReadSite};

const WIDTH: usize = 8192;
const RECORDS: usize = 48;

/// A raw store aligned for O_DIRECT (records go straight into their slots) and a
/// zstd store whose records land in scratch first.
fn stores(dir: &Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let data = dense_records(RECORDS, WIDTH, 7, |i| i % 2 == 1);
    let schema = Schema::dense(DType::U8, &[WIDTH as u64]);
    let mut out = Vec::new();
    for (name, codec, align) in [("raw.zr", Codec::Raw, 4096), ("zstd.zr", Codec::Zstd, 0)] {
        let path = dir.join(name);
        let mut opts = WriteOptions::with_codec(codec);
        if align != 0 {
            opts.align = align;
        }
        write_dense(&path, &schema, opts, &data, 2).expect("write");
        out.push((path, data.clone()));
    }
    out
}

/// The ways of reading under test: (name, backend, direct).
fn ways() -> Vec<(&'static str, Backend, bool)> {
    let mut ways = vec![
        ("pread", Backend::Pread, false),
        ("pread+direct", Backend::Pread, true),
    ];
    if uring_here() {
        ways.push(("uring", Backend::Uring, false));
        ways.push(("uring+direct", Backend::Uring, true));
    }
    ways
}

fn open_way(path: &Path, backend: Backend, direct: bool) -> Option<Store> {
    let opts = ReadOptions::default()
        .backend(backend)
        .direct(direct)
        .threads(1);
    if direct {
        open_direct_or_skip(path, opts)
    } else {
        Some(Store::open(path, opts).expect("open"))
    }
}

/// The byte range of a read the seam reports.
fn span(site: &ReadSite) -> Option<std::ops::Range<u64>> {
    match *site {
        ReadSite::Pread { offset, len } | ReadSite::Uring { offset, len, .. } => {
            Some(offset..offset + len as u64)
        }
        _ => None,
    }
}

fn all_exact(store: &Store, data: &[u8], what: &str) {
    let idx: Vec<u64> = (0..RECORDS as u64).rev().collect();
    let got = store
        .gather_vec(&idx)
        .unwrap_or_else(|e| panic!("{what}: gather: {e}"));
    for (k, &i) in idx.iter().enumerate() {
        let i = i as usize;
        assert!(
            got[k * WIDTH..(k + 1) * WIDTH] == data[i * WIDTH..(i + 1) * WIDTH],
            "{what}: record {i} differs"
        );
    }
    for i in [0usize, 17, RECORDS - 1] {
        let one = store
            .get(i as u64)
            .unwrap_or_else(|e| panic!("{what}: get {i}: {e}"));
        assert!(
            one == data[i * WIDTH..(i + 1) * WIDTH],
            "{what}: get {i} differs"
        );
    }
}

#[test]
fn eio_is_a_typed_error_naming_path_and_record_and_the_store_reads_after() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    for (path, data) in stores(dir.path()) {
        for (way, backend, direct) in ways() {
            let what = format!("{} {way}", path.display());
            let Some(store) = open_way(&path, backend, direct) else {
                continue;
            };
            let bad = store.entry(5).expect("entry").offset;
            let fired = Arc::new(AtomicUsize::new(0));
            let f = Arc::clone(&fired);
            let guard = install_read_hook(
                &path,
                Arc::new(move |site: &ReadSite| {
                    span(site).filter(|r| r.contains(&bad)).map(|_| {
                        f.fetch_add(1, Ordering::SeqCst);
                        ReadFault::Fail(io::Error::from_raw_os_error(libc::EIO))
                    })
                }),
            )
            .expect("hook");
            for result in [
                store.get(5).map(drop),
                store.gather_vec(&[30, 5, 12]).map(drop),
            ] {
                match result {
                    Err(Error::RecordIo {
                        path: p,
                        index,
                        source,
                    }) => {
                        assert_eq!(p, path, "{what}");
                        assert_eq!(index, 5, "{what}");
                        assert_eq!(source.raw_os_error(), Some(libc::EIO), "{what}");
                    }
                    other => panic!("{what}: expected RecordIo for record 5, got {other:?}"),
                }
            }
            let e = store.get(5).expect_err("still failing");
            let msg = e.to_string();
            assert!(
                msg.contains(&path.display().to_string()) && msg.contains("record 5"),
                "{msg}"
            );
            assert_eq!(e.record_index(), Some(5));
            assert!(
                fired.load(Ordering::SeqCst) >= 2,
                "{what}: the fault was injected"
            );
            drop(guard);
            all_exact(&store, &data, &what);
        }
    }
}

#[test]
fn eintr_and_short_reads_are_continued_with_exact_data() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    for (path, data) in stores(dir.path()) {
        for (way, backend, direct) in ways() {
            let what = format!("{} {way}", path.display());
            let Some(store) = open_way(&path, backend, direct) else {
                continue;
            };
            let fired = Arc::new(AtomicUsize::new(0));
            let f = Arc::clone(&fired);
            let guard = install_read_hook(
                &path,
                Arc::new(move |site: &ReadSite| {
                    let len = span(site)?.end - span(site)?.start;
                    let k = f.fetch_add(1, Ordering::SeqCst);
                    // Alternate EINTR and short reads for the first 40 reads; short
                    // by whole 4 KiB pages, as O_DIRECT continuations need.
                    match k {
                        _ if k >= 40 => None,
                        _ if k % 2 == 0 => {
                            Some(ReadFault::Fail(io::Error::from_raw_os_error(libc::EINTR)))
                        }
                        _ if len > 4096 => Some(ReadFault::Short(4096)),
                        _ => None,
                    }
                }),
            )
            .expect("hook");
            all_exact(&store, &data, &what);
            assert!(
                fired.load(Ordering::SeqCst) >= 40,
                "{what}: faults were injected"
            );
            if backend == Backend::Uring {
                assert!(
                    store.reads_served().uring > 0,
                    "{what}: read through io_uring"
                );
            }
            drop(guard);
            all_exact(&store, &data, &what);
        }
    }
}

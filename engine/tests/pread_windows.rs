//! `pread` reads compressed records that follow each other in the file (holes of
//! at most a page between them) as one window and decodes them from it: a
//! sequential batch costs one system call per window (at most 256 KiB), not one
//! per record, and every record is still exact and checked. Records out of file
//! order and a raw store's records are read one at a time; a failing window names
//! its first record.

mod common;

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use common::*;
use zring_engine::{Backend, Codec, DType, Error, ReadOptions, Schema, Store, WriteOptions};
use zring_platform::{install_read_hook, ReadFault, ReadSite};

const WIDTH: usize = 2048;
const RECORDS: usize = 300;

fn store(dir: &std::path::Path, codec: Codec) -> (std::path::PathBuf, Vec<u8>) {
    let data = dense_records(RECORDS, WIDTH, 11, |i| i % 3 == 0);
    let path = dir.join(format!("{codec:?}.zr"));
    let opts = WriteOptions::with_codec(codec);
    let schema = Schema::dense(DType::U8, &[WIDTH as u64]);
    write_dense(&path, &schema, opts, &data, 4).expect("write");
    (path, data)
}

fn open_pread(path: &std::path::Path) -> Store {
    let opts = ReadOptions::default().backend(Backend::Pread).threads(1);
    Store::open(path, opts).expect("open")
}

/// Gathers `idx` and checks every record; returns the preads (offset, len) made.
fn gather_counting(
    path: &std::path::Path,
    store: &Store,
    data: &[u8],
    idx: &[u64],
) -> Vec<(u64, usize)> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = Arc::clone(&seen);
    let guard = install_read_hook(
        path,
        Arc::new(move |site: &ReadSite| {
            if let ReadSite::Pread { offset, len } = *site {
                s.lock().expect("lock").push((offset, len));
            }
            None
        }),
    )
    .expect("hook");
    let got = store.gather_vec(idx).expect("gather");
    drop(guard);
    for (k, &i) in idx.iter().enumerate() {
        let i = i as usize;
        assert!(
            got[k * WIDTH..(k + 1) * WIDTH] == data[i * WIDTH..(i + 1) * WIDTH],
            "record {i} differs"
        );
    }
    let v = seen.lock().expect("lock").clone();
    v
}

#[test]
fn a_sequential_compressed_batch_is_read_in_windows_and_exact() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, data) = store(dir.path(), Codec::Zstd);
    let store = open_pread(&path);
    let idx: Vec<u64> = (10..266).collect();
    let reads = gather_counting(&path, &store, &data, &idx);
    let first = store.entry(idx[0]).expect("entry").offset;
    let last = store.entry(idx[idx.len() - 1]).expect("entry");
    let span = last.offset + u64::from(last.stored_len) - first;
    // Every record's bytes read once, by reads that never overlap and never
    // reach outside the batch's span, each at most 256 KiB; the engine cuts a
    // compressed batch into small tasks and a window never crosses one, so a
    // window holds a few records here.
    let mut reads = reads;
    reads.sort_unstable();
    assert!(reads.iter().map(|r| r.1 as u64).sum::<u64>() <= span);
    assert!(
        reads.windows(2).all(|w| w[0].0 + w[0].1 as u64 <= w[1].0),
        "{reads:?}"
    );
    for &i in &idx {
        let e = store.entry(i).expect("entry");
        let end = e.offset + u64::from(e.stored_len);
        assert!(
            reads
                .iter()
                .any(|&(o, l)| o <= e.offset && end <= o + l as u64),
            "record {i} in no read: {reads:?}"
        );
    }
    assert!(reads.iter().all(|r| r.1 <= 256 << 10), "{reads:?}");
    assert!(
        reads.len() * 2 <= idx.len(),
        "{} preads for {} records: windows of fewer than 2 records",
        reads.len(),
        idx.len()
    );
}

#[test]
fn out_of_order_and_raw_records_are_read_one_at_a_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, data) = store(dir.path(), Codec::Zstd);
    let store = open_pread(&path);
    let idx: Vec<u64> = (0..64).rev().chain([100, 120, 140]).collect();
    assert_eq!(gather_counting(&path, &store, &data, &idx).len(), idx.len());
    let (raw, raw_data) = store_raw(dir.path());
    let raw_store = open_pread(&raw);
    let idx: Vec<u64> = (0..64).collect();
    assert_eq!(
        gather_counting(&raw, &raw_store, &raw_data, &idx).len(),
        idx.len()
    );
}

fn store_raw(dir: &std::path::Path) -> (std::path::PathBuf, Vec<u8>) {
    store(dir, Codec::Raw)
}

#[test]
fn a_failing_window_names_its_first_record_and_the_store_reads_after() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, data) = store(dir.path(), Codec::Zstd);
    let store = open_pread(&path);
    let bad = store.entry(40).expect("entry").offset;
    // The offset of the read that failed (a window holding record 40).
    let failed = Arc::new(AtomicU64::new(u64::MAX));
    let f = Arc::clone(&failed);
    let guard = install_read_hook(
        &path,
        Arc::new(move |site: &ReadSite| match *site {
            ReadSite::Pread { offset, len } if (offset..offset + len as u64).contains(&bad) => {
                f.store(offset, Ordering::SeqCst);
                Some(ReadFault::Fail(io::Error::from_raw_os_error(libc::EIO)))
            }
            _ => None,
        }),
    )
    .expect("hook");
    let idx: Vec<u64> = (32..48).collect();
    match store.gather_vec(&idx) {
        Err(Error::RecordIo { index, source, .. }) => {
            // The error names the first record of the failing window.
            let at = failed.load(Ordering::SeqCst);
            assert_eq!(
                store.entry(index).expect("entry").offset,
                at,
                "record {index}"
            );
            assert!((32..=40).contains(&index), "record {index}");
            assert_eq!(source.raw_os_error(), Some(libc::EIO));
        }
        other => panic!("expected RecordIo, got {other:?}"),
    }
    drop(guard);
    gather_counting(&path, &store, &data, &idx);
}

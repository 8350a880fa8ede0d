//! A writer with millions of records under an address-space limit: close must not
//! need a second copy of the metadata (it used to assemble the whole table, 32 bytes
//! per record, in one allocation and abort), the metadata kept while writing stays
//! within a fixed budget (the rest spills to disk), and metadata that cannot grow is
//! an `OutOfMemory` error, not an abort. Each case runs in a forked child whose
//! `RLIMIT_AS` is set just above what it already uses.
#![cfg(target_os = "linux")]

mod common;

use std::path::Path;
use std::time::Duration;

use zring_engine::{
    AllocFailure, Allocation, Backend, Codec, DType, Error, ReadOptions, Schema, Store,
    WriteOptions, Writer,
};
use zring_testkit::os::limit_address_space_to_current_plus;
use zring_testkit::{run_forked, ChildEnd};

/// 96 MB of table: more than one glibc malloc arena (64 MB), whose reserved but unused
/// address space could otherwise hold a copy under the limit.
const RECORDS: usize = 3_000_000;

fn writer_with_many_records(path: &Path) -> Writer {
    let opts = WriteOptions::with_codec(Codec::Raw).threads(1);
    let mut w = Writer::create(path, Schema::dense(DType::U32, &[]), opts).expect("create");
    let batch: Vec<u8> = (0..100_000u32).flat_map(u32::to_le_bytes).collect();
    for _ in 0..RECORDS / 100_000 {
        w.append_dense(&batch).expect("append");
    }
    w
}

fn in_child(f: impl FnOnce() -> i32) {
    let end = run_forked(Duration::from_secs(120), f);
    assert_eq!(
        end,
        ChildEnd::Exited(0),
        "the child failed (see the codes in the test)"
    );
}

#[test]
fn close_of_a_large_writer_needs_no_second_copy_of_its_metadata() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("many.zr");
    in_child(|| {
        let w = writer_with_many_records(&path);
        // The table alone is 96 MB; 24 MB is room for everything close needs now.
        if limit_address_space_to_current_plus(24 << 20).is_err() {
            return 2;
        }
        match w.close() {
            Ok(n) if n == RECORDS as u64 => 0,
            Ok(_) => 3,
            Err(_) => 4,
        }
    });
    let store = Store::open(&path, ReadOptions::default()).expect("open");
    assert_eq!(store.len(), RECORDS as u64);
}

#[test]
fn the_writers_metadata_stays_within_a_fixed_budget_whatever_the_record_count() {
    // The limit is set before any record is written: 96 MB of table entries kept in
    // memory could not fit in 32 MB, the bounded 4 MiB plus one batch's 3.2 MB does.
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("bounded.zr");
    in_child(|| {
        let opts = WriteOptions::with_codec(Codec::Raw).threads(1);
        let batch: Vec<u8> = (0..100_000u32).flat_map(u32::to_le_bytes).collect();
        let mut w = match Writer::create(&path, Schema::dense(DType::U32, &[]), opts) {
            Ok(w) => w,
            Err(_) => return 6,
        };
        if limit_address_space_to_current_plus(32 << 20).is_err() {
            return 2;
        }
        for _ in 0..RECORDS / 100_000 {
            if w.append_dense(&batch).is_err() {
                return 3;
            }
        }
        match w.close() {
            Ok(n) if n == RECORDS as u64 => 0,
            Ok(_) => 4,
            Err(_) => 5,
        }
    });
    let store = Store::open(&path, ReadOptions::default()).expect("open");
    assert_eq!(store.len(), RECORDS as u64);
    store.verify().expect("verify");
}

#[test]
fn metadata_that_cannot_grow_is_an_out_of_memory_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("full.zr");
    in_child(|| {
        let mut w = writer_with_many_records(&path);
        if limit_address_space_to_current_plus(8 << 20).is_err() {
            return 2;
        }
        let batch = vec![0u8; 4 * 1_000_000];
        let err = loop {
            match w.append_dense(&batch) {
                Ok(_) if w.len() < 100_000_000 => {}
                Ok(_) => return 3,
                Err(e) => break e,
            }
        };
        // The writer's metadata could not grow: the allocation is named, with the
        // allocator's refusal as the source.
        match &err {
            Error::OutOfMemory {
                what: Allocation::WriterMetadata { .. } | Allocation::TableEntries { .. },
                source: Some(AllocFailure::Reserve(_)),
                ..
            } if std::error::Error::source(&err).is_some() => {}
            _ => return 4,
        }
        // Poisoned, with the first error kept whole.
        match w.append_dense(&batch[..4]) {
            Err(Error::WriterPoisoned {
                first_error: Some(first),
                ..
            }) if matches!(*first, Error::OutOfMemory { .. }) => {}
            _ => return 5,
        }
        drop(w);
        0
    });
    let left: Vec<_> = std::fs::read_dir(dir.path()).expect("list").collect();
    assert!(left.is_empty(), "the failed writer left {left:?}");
}

/// A ragged u8 store whose record `HUGE` claims 3 GiB: its shape and entry say so,
/// and its stored bytes are a zstd frame header that declares 3 GiB of content (what
/// a hostile file, or a legitimately huge record, looks like before decoding). Every
/// checksum is recomputed so the reads reach the allocation.
const HUGE: u64 = 1;
const CLAIM: u32 = 3 << 30;

fn store_with_a_huge_record(dir: &Path) -> std::path::PathBuf {
    use zring_engine::format;
    use zring_engine::RecordCodec;
    let path = dir.join("huge.zr");
    let r = common::ragged_records(4, 1, DType::U8, 400, 5);
    common::write_ragged(&path, DType::U8, WriteOptions::default(), &r, 1).expect("write");
    let mut bytes = std::fs::read(&path).expect("read");
    // Frame magic, a descriptor with a 4-byte content size and a window byte, the
    // size, then an empty last raw block.
    let mut frame = vec![0x28, 0xB5, 0x2F, 0xFD, 0x80, 0x00];
    frame.extend_from_slice(&CLAIM.to_le_bytes());
    frame.extend_from_slice(&[0x01, 0x00, 0x00]);
    let e = common::entry_of(&bytes, HUGE);
    assert!(e.stored_len as usize >= frame.len(), "room for the frame");
    let at = e.offset as usize;
    bytes[at..at + frame.len()].copy_from_slice(&frame);
    let f = common::footer_of(&bytes);
    let shape = format::shape_range(f.shapes, 1, HUGE);
    bytes[shape.start as usize..shape.end as usize].copy_from_slice(&CLAIM.to_le_bytes());
    common::patch_entry(&mut bytes, HUGE, |e| {
        e.codec = RecordCodec::Zstd;
        e.stored_len = frame.len() as u32;
        e.logical_len = CLAIM;
        e.checksum = format::checksum(&frame);
    });
    common::put(&path, &bytes);
    path
}

#[test]
fn a_record_that_claims_more_memory_than_there_is_is_an_error_naming_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = store_with_a_huge_record(dir.path());
    let is_huge_oom = |r: zring_engine::Result<()>| match r {
        Err(Error::RecordOutOfMemory {
            path: p,
            index,
            bytes,
        }) => p == path && index == HUGE && bytes == u64::from(CLAIM),
        _ => false,
    };
    for backend in [Backend::Pread, Backend::Mmap] {
        in_child(|| {
            let store = match Store::open(&path, ReadOptions::with_backend(backend)) {
                Ok(s) => s,
                Err(_) => return 2,
            };
            // Records beside it read as usual.
            if store.get(0).is_err() {
                return 3;
            }
            // 3 GiB cannot fit in what is left of the address space.
            if limit_address_space_to_current_plus(512 << 20).is_err() {
                return 4;
            }
            if !is_huge_oom(store.get(HUGE).map(drop)) {
                return 5;
            }
            if !is_huge_oom(store.verify()) {
                return 6;
            }
            if store.get(2).is_err() {
                return 7;
            }
            0
        });
    }
}

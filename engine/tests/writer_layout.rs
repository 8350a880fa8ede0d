//! What the writer puts on disk: incompressible records kept raw, record alignment,
//! empty stores, records of several MiB, and user metadata — each read back on every
//! backend.

mod common;

use std::collections::BTreeMap;

use common::*;
use zring_engine::RecordCodec;
use zring_engine::{Backend, Codec, DType, Schema, WriteOptions, Writer};

#[test]
fn incompressible_records_are_stored_raw_and_compressible_ones_are_not() {
    let dir = tempfile::tempdir().expect("tempdir");
    let n = 60usize;
    let noisy = |i: usize| i % 3 == 0;
    let data = dense_records(n, 1024, 5, noisy);
    for codec in [Codec::Zstd, Codec::ZstdDict, Codec::Raw] {
        let path = dir.path().join(format!("{codec}.zr"));
        let mut opts = WriteOptions::with_codec(codec);
        if codec == Codec::ZstdDict {
            opts.dictionary = Some(test_dictionary());
        }
        let schema = Schema::dense(DType::U8, &[1024]);
        write_dense(&path, &schema, opts, &data, 2).expect("write");
        let store = open(&path).expect("open");
        let tag = match codec {
            Codec::Raw => RecordCodec::Raw,
            Codec::Zstd => RecordCodec::Zstd,
            Codec::ZstdDict => RecordCodec::ZstdDict,
        };
        for i in 0..n {
            let e = store.entry(i as u64).expect("entry");
            let want = if noisy(i) { RecordCodec::Raw } else { tag };
            assert_eq!(e.codec, want, "{codec} record {i}");
            assert_eq!(e.logical_len, 1024);
            if e.codec == RecordCodec::Raw {
                assert_eq!(e.stored_len, 1024);
            } else {
                assert!(
                    e.stored_len < 1024 / 2,
                    "{codec} record {i}: {}",
                    e.stored_len
                );
            }
        }
        let stats = store.stats().expect("stats");
        let raw = if codec == Codec::Raw { n } else { n / 3 };
        assert_eq!(stats.raw_records, raw as u64, "{codec}");
        assert_eq!(stats.records, n as u64);
        assert_eq!(stats.logical_bytes, (n * 1024) as u64);
        assert_eq!(
            stats.file_bytes,
            std::fs::metadata(&path).expect("meta").len()
        );
        if codec != Codec::Raw {
            assert!(
                stats.stored_bytes < stats.logical_bytes * 2 / 3,
                "{stats:?}"
            );
        }
        store.verify().expect("verify");
        assert_eq!(read_all(&store).expect("read").concat(), data);
    }
}

#[test]
fn every_record_starts_at_the_requested_alignment() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (align, width, codec) in [
        (4096u32, 4096usize, Codec::Raw),
        (4096, 1000, Codec::Raw),
        (4096, 1000, Codec::Zstd),
        (512, 3000, Codec::Zstd),
        (1 << 20, 5000, Codec::Raw),
    ] {
        let n = if align == 1 << 20 { 4 } else { 40 };
        let data = dense_records(n, width, 8, |i| i % 2 == 0);
        let path = dir.path().join(format!("a{align}-{width}-{codec}.zr"));
        let opts = WriteOptions::with_codec(codec).align(align);
        let schema = Schema::dense(DType::U8, &[width as u64]);
        write_dense(&path, &schema, opts, &data, 3).expect("write");
        for backend in Backend::CONCRETE {
            let store = open_with(&path, backend, true).expect("open");
            assert_eq!(store.align(), align);
            for i in 0..n as u64 {
                let off = store.entry(i).expect("entry").offset;
                assert_eq!(off % u64::from(align), 0, "record {i} at {off}");
            }
            store.verify().expect("verify");
            assert_eq!(read_all(&store).expect("read").concat(), data);
        }
    }
    // Ragged records too.
    let r = ragged_records(50, 1, DType::I32, 100, 12);
    let path = dir.path().join("ragged-4096.zr");
    let opts = WriteOptions::default().align(4096);
    write_ragged(&path, DType::I32, opts, &r, 2).expect("write");
    let store = open(&path).expect("open");
    for i in 0..50 {
        assert_eq!(store.entry(i).expect("entry").offset % 4096, 0);
    }
    assert_eq!(read_all(&store).expect("read").concat(), r.values);
}

#[test]
fn a_store_of_zero_records_opens_verifies_and_reads_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dense = dir.path().join("empty-dense.zr");
    let w = Writer::create(
        &dense,
        Schema::dense(DType::F32, &[3]),
        WriteOptions::default(),
    )
    .expect("create");
    assert!(w.is_empty());
    assert_eq!(w.close().expect("close"), 0);
    let ragged = dir.path().join("empty-ragged.zr");
    let mut w = Writer::create(
        &ragged,
        Schema::ragged(DType::I64, 2),
        WriteOptions::default(),
    )
    .expect("create");
    assert_eq!(w.append_ragged(&[], &[0], &[]).expect("no records"), 0..0);
    assert_eq!(w.close().expect("close"), 0);
    for backend in Backend::CONCRETE {
        for path in [&dense, &ragged] {
            let store = open_with(path, backend, true).expect("open");
            assert_eq!(store.len(), 0);
            assert!(store.is_empty());
            store.verify().expect("verify");
            let stats = store.stats().expect("stats");
            assert_eq!(
                (stats.records, stats.logical_bytes, stats.raw_records),
                (0, 0, 0)
            );
            assert!(matches!(
                store.get(0),
                Err(zring_engine::Error::IndexOutOfRange {
                    index: 0,
                    len: 0,
                    ..
                })
            ));
        }
        let d = open_with(&dense, backend, false).expect("open");
        assert!(d.gather_vec(&[]).expect("empty").is_empty());
        assert!(d.gather_vec(&[0]).is_err());
        let r = open_with(&ragged, backend, false).expect("open");
        assert!(r.gather_ragged(&[]).expect("empty").is_empty());
        assert!(r.gather_ragged(&[0]).is_err());
    }
}

#[test]
fn records_of_several_mebibytes_round_trip() {
    let dir = tempfile::tempdir().expect("tempdir");
    let width = 8 << 20;
    // One noise record (kept raw) and two compressible ones.
    let data = dense_records(3, width, 21, |i| i == 1);
    let schema = Schema::dense(DType::U8, &[width as u64]);
    for codec in [Codec::Raw, Codec::Zstd] {
        let path = dir.path().join(format!("big-{codec}.zr"));
        write_dense(&path, &schema, WriteOptions::with_codec(codec), &data, 2).expect("write");
        for backend in Backend::CONCRETE {
            let store = open_with(&path, backend, true).expect("open");
            store.verify().expect("verify");
            let got = store.gather_vec(&[2, 0, 1, 2]).expect("gather");
            for (k, i) in [2usize, 0, 1, 2].into_iter().enumerate() {
                assert!(
                    got[k * width..(k + 1) * width] == data[i * width..(i + 1) * width],
                    "{codec}/{backend:?}: record {i}"
                );
            }
            assert!(store.get(1).expect("get") == data[width..2 * width]);
        }
    }
    // A ragged store with one 8 MiB record among small ones.
    let big = compressible(width, 22);
    let values: Vec<u8> = [&[1u8, 2, 3][..], &big, &[4, 5]].concat();
    let path = dir.path().join("big-ragged.zr");
    let mut w = Writer::create(&path, Schema::ragged(DType::U8, 1), WriteOptions::default())
        .expect("create");
    let (a, b) = (3u64, 3 + width as u64);
    w.append_ragged(&values, &[0, a, b, b + 2], &[3, width as u32, 2])
        .expect("append");
    w.close().expect("close");
    let store = open_with(&path, Backend::Uring, true).expect("open");
    let batch = store.gather_ragged(&[1, 2, 0]).expect("gather");
    assert!(batch.record(0, 1) == Some(&big[..]));
    assert_eq!(batch.record(1, 1), Some(&[4u8, 5][..]));
    assert_eq!(batch.shapes, vec![width as u32, 2, 3]);
}

#[test]
fn user_metadata_and_the_stored_schema_round_trip() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut schema = Schema::dense(DType::BF16, &[2, 3])
        .with_metadata("tokenizer", "llama-3 \"fast\"")
        .with_metadata("empty", "")
        .with_metadata("unicode ключ", "значение ✓")
        .with_metadata("multi\nline", "a\tb\\c\u{0}d");
    schema.metadata.insert("long".into(), "x".repeat(64 << 10));
    for k in 0..200 {
        schema.metadata.insert(format!("k{k:03}"), format!("v{k}"));
    }
    let path = dir.path().join("meta.zr");
    let mut opts = WriteOptions::with_codec(Codec::ZstdDict);
    opts.dictionary = Some(test_dictionary());
    opts.level = 7;
    let data = dense_records(10, 12, 4, |_| false);
    write_dense(&path, &schema, opts, &data, 1).expect("write");
    let store = open(&path).expect("open");
    assert_eq!(store.schema(), &schema);
    let want: BTreeMap<String, String> = schema.metadata.clone();
    assert_eq!(store.schema().metadata, want);
    let stored = store.stored_schema();
    assert_eq!(stored.codec, Codec::ZstdDict);
    assert_eq!(stored.level, 7);
    assert_eq!(stored.record_count, 10);
    assert!(stored.dict_id.is_some_and(|id| id != 0), "{stored:?}");
    assert_eq!(store.dictionary(), &test_dictionary()[..]);
    assert!(store.writer_version().starts_with("zring "));
    assert_eq!(
        store.format_version(),
        (1, zring_engine::format::FORMAT_MINOR)
    );
}

#[test]
fn padding_is_zero_and_the_file_does_not_depend_on_the_thread_count() {
    use zring_engine::{Codec, DType, Schema, WriteOptions, Writer};
    let dir = tempfile::tempdir().expect("tempdir");
    // Mixed sizes so compressed lengths vary and padding appears between records.
    let bytes: Vec<u8> = (0..3000u32 * 700)
        .map(|i| ((i / 700) as u8).wrapping_mul((i % 13) as u8))
        .collect();
    let mut files = Vec::new();
    for threads in [1usize, 4] {
        let path = dir.path().join(format!("t{threads}.zr"));
        let opts = WriteOptions::with_codec(Codec::Zstd)
            .align(4096)
            .threads(threads)
            .chunk_bytes(64 << 10);
        let mut w = Writer::create(&path, Schema::dense(DType::U8, &[700]), opts).expect("create");
        w.append_dense(&bytes).expect("append");
        w.close().expect("close");
        files.push(std::fs::read(&path).expect("read"));
    }
    assert!(files[0] == files[1], "thread count changed the file");
    let store = zring_engine::Store::open(
        dir.path().join("t1.zr"),
        zring_engine::ReadOptions::default(),
    )
    .expect("open");
    let mut covered = vec![false; files[0].len()];
    for i in 0..store.len() {
        let e = store.entry(i).expect("entry");
        for b in &mut covered[e.offset as usize..(e.offset + u64::from(e.stored_len)) as usize] {
            *b = true;
        }
    }
    let data = 4096..(store.entry(store.len() - 1).expect("last").offset as usize);
    let stray = data.filter(|&k| !covered[k] && files[0][k] != 0).count();
    assert_eq!(stray, 0, "non-zero padding bytes");
}

//! A writer's table entries and shapes past its memory bound go to a temporary file
//! beside the store: the store written that way reads back whole, and no temporary
//! file is left after `close` or after a writer dropped unclosed.

use std::path::Path;

use zring_engine::{Codec, DType, ReadOptions, Schema, Store, WriteOptions, Writer};

/// Temporary files in `dir` (the store's own and the writer's metadata files).
fn temps(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .expect("ls")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".zr-tmp"))
        .count()
}

fn record(i: u64) -> [u8; 4] {
    (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()
}

/// 300,000 records of 4 bytes: 9.6 MB of table entries, past the 4 MiB kept in memory.
const RECORDS: u64 = 300_000;
const BATCH: u64 = 10_000;

fn write_until(path: &Path, batches: u64) -> Writer {
    let mut w = Writer::create(
        path,
        Schema::dense(DType::U8, &[4]),
        WriteOptions::with_codec(Codec::Raw),
    )
    .expect("create");
    for b in 0..batches {
        let data: Vec<u8> = (b * BATCH..(b + 1) * BATCH).flat_map(record).collect();
        w.append_dense(&data).expect("append");
    }
    w
}

#[test]
fn a_store_whose_table_went_to_disk_reads_back_whole() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("big.zr");
    let w = write_until(&path, RECORDS / BATCH);
    assert_eq!(
        temps(dir.path()),
        2,
        "the store's temporary file and the table's spill file"
    );
    assert_eq!(w.close().expect("close"), RECORDS);
    assert_eq!(temps(dir.path()), 0, "no temporary file after close");
    let store = Store::open(&path, ReadOptions::default()).expect("open");
    assert_eq!(store.len(), RECORDS);
    store.verify().expect("verify");
    let all: Vec<u64> = (0..RECORDS).collect();
    let want: Vec<u8> = all.iter().copied().flat_map(record).collect();
    assert_eq!(store.gather_vec(&all).expect("gather"), want);
}

#[test]
fn a_dropped_writer_leaves_no_spill_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("dropped.zr");
    let w = write_until(&path, RECORDS / BATCH);
    assert_eq!(temps(dir.path()), 2);
    drop(w);
    assert_eq!(temps(dir.path()), 0);
    assert!(!path.exists());
}

#[test]
fn ragged_shapes_past_the_bound_read_back() {
    // 1.1 M records: 4.4 MB of shapes (past the bound) and 35 MB of table entries.
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("ragged.zr");
    let mut w = Writer::create(
        &path,
        Schema::ragged(DType::I32, 1),
        WriteOptions::with_codec(Codec::Raw),
    )
    .expect("create");
    let n: u64 = 1_100_000;
    let len = |i: u64| (i % 3) as u32;
    for start in (0..n).step_by(100_000) {
        let (mut values, mut cu, mut shapes) = (Vec::new(), vec![0u64], Vec::new());
        for i in start..start + 100_000 {
            for k in 0..len(i) {
                values.extend_from_slice(&((i * 7 + u64::from(k)) as i32).to_le_bytes());
            }
            cu.push(cu[cu.len() - 1] + u64::from(len(i)));
            shapes.push(len(i));
        }
        w.append_ragged(&values, &cu, &shapes).expect("append");
    }
    w.close().expect("close");
    assert_eq!(temps(dir.path()), 0);
    let store = Store::open(&path, ReadOptions::default()).expect("open");
    assert_eq!(store.len(), n);
    store.verify().expect("verify");
    for i in [0, 1, 2, 131_071, 131_072, 999_999, n - 1] {
        assert_eq!(
            store.shape(i).expect("shape"),
            vec![u64::from(len(i))],
            "record {i}"
        );
        let want: Vec<u8> = (0..len(i))
            .flat_map(|k| ((i * 7 + u64::from(k)) as i32).to_le_bytes())
            .collect();
        assert_eq!(store.get(i).expect("get"), want, "record {i}");
    }
}

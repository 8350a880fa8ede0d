//! `Store::plan`: the reads a batch needs, from the table alone, the same planner the
//! io_uring executor uses.
#![allow(clippy::unwrap_used)]

use zring_engine::{Coalesce, DType, ReadOptions, Schema, Store, WriteOptions, Writer};

#[test]
fn a_plan_names_every_record_once_and_merges_neighbours_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.zr");
    let width = 64usize;
    let mut w = Writer::create(
        &path,
        Schema::dense(DType::U8, &[width as u64]),
        WriteOptions::default(),
    )
    .unwrap();
    let bytes: Vec<u8> = (0..100 * width).map(|i| (i * 7 % 251) as u8).collect();
    w.append_dense(&bytes).unwrap();
    w.close().unwrap();
    let store = Store::open(&path, ReadOptions::default()).unwrap();

    // Consecutive records touch in the file (64-byte records, 8-byte alignment): one
    // read for the run 10..20, then a separate read for the step back to 3.
    let idx: Vec<u64> = (10..20).chain([3]).collect();
    let plan = store.plan(&idx, Coalesce::BUFFERED).unwrap();
    assert_eq!(plan.entries.len(), idx.len());
    assert_eq!(plan.reads.len(), 2);
    assert_eq!(plan.reads[0].records, 0..10);
    assert_eq!(plan.reads[0].len, 10 * width as u64);
    assert_eq!(plan.reads[1].records, 10..11);
    for (k, &i) in idx.iter().enumerate() {
        assert_eq!(plan.entries[k], store.entry(i).unwrap());
    }
    for r in &plan.reads {
        for e in &plan.entries[r.records.clone()] {
            assert!(e.offset >= r.offset && e.offset + u64::from(e.stored_len) <= r.offset + r.len);
        }
    }

    // Without merging: one read per record, in batch order.
    let plan = store.plan(&idx, Coalesce::NONE).unwrap();
    assert_eq!(plan.reads.len(), idx.len());

    // A plan checks its indices like a read does.
    assert!(store.plan(&[100], Coalesce::NONE).is_err());
}

//! A concatenation of stores reads exactly what its parts hold: dense and ragged
//! batches that mix parts in any order, one part straight through, and bad parts
//! or indices refused.

use std::sync::Arc;

use zring_engine::{
    Concat, DType, Error, Never, ReadOptions, Records, Schema, Store, WriteOptions, Writer,
};

fn dense(dir: &std::path::Path, name: &str, first: u32, n: u32) -> Store {
    let path = dir.join(name);
    let mut w = Writer::create(
        &path,
        Schema::dense(DType::U32, &[2]),
        WriteOptions::default(),
    )
    .expect("create");
    let bytes: Vec<u8> = (first..first + n)
        .flat_map(|i| [i, i * 10])
        .flat_map(u32::to_le_bytes)
        .collect();
    w.append_dense(&bytes).expect("append");
    w.close().expect("close");
    Store::open(&path, ReadOptions::default()).expect("open")
}

/// Record `i` (global id `first + k`) holds `id % 7 + 1` copies of the id.
fn ragged(dir: &std::path::Path, name: &str, first: u32, n: u32) -> Store {
    let path = dir.join(name);
    let mut w = Writer::create(
        &path,
        Schema::ragged(DType::U32, 1),
        WriteOptions::default(),
    )
    .expect("create");
    let lens: Vec<u32> = (first..first + n).map(|id| id % 7 + 1).collect();
    let mut cu = vec![0u64];
    let mut values = Vec::new();
    for (k, &len) in lens.iter().enumerate() {
        let id = first + k as u32;
        values.extend((0..len).flat_map(|_| id.to_le_bytes()));
        cu.push(cu[k] + u64::from(len));
    }
    w.append_ragged(&values, &cu, &lens).expect("append");
    w.close().expect("close");
    Store::open(&path, ReadOptions::default()).expect("open")
}

fn parts(stores: &[&Store]) -> Vec<Arc<dyn Records>> {
    stores
        .iter()
        .map(|s| Arc::new((*s).clone()) as Arc<dyn Records>)
        .collect()
}

#[test]
fn dense_batches_mixing_parts_read_each_record_from_its_part() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, b, c) = (
        dense(dir.path(), "a.zr", 0, 10),
        dense(dir.path(), "b.zr", 10, 0),
        dense(dir.path(), "c.zr", 10, 5),
    );
    let all = Concat::new(parts(&[&a, &b, &c])).expect("concat");
    assert_eq!(all.len(), 15);
    assert_eq!(all.start(2), Some(10));
    let indices = [14u64, 0, 9, 10, 3, 14, 12];
    let mut out = vec![0u8; indices.len() * 8];
    all.gather_until(&indices, &mut out, &Never)
        .expect("gather");
    for (k, &i) in indices.iter().enumerate() {
        let got = u32::from_le_bytes(out[k * 8..k * 8 + 4].try_into().expect("4 bytes"));
        assert_eq!(u64::from(got), i, "slot {k}");
    }
    // All from one part: the same bytes as that part's own gather.
    let mut one = vec![0u8; 3 * 8];
    all.gather_until(&[11, 13, 10], &mut one, &Never)
        .expect("gather");
    assert_eq!(one, c.gather_vec(&[1, 3, 0]).expect("part gather"));
}

#[test]
fn ragged_batches_mixing_parts_keep_each_records_shape_and_values() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, b) = (
        ragged(dir.path(), "a.zr", 0, 20),
        ragged(dir.path(), "b.zr", 20, 9),
    );
    let all = Concat::new(parts(&[&a, &b])).expect("concat");
    let indices = [25u64, 1, 28, 0, 20, 19, 25];
    let layout = {
        let mut l = Default::default();
        all.ragged_layout_into(&indices, &mut l).expect("layout");
        l
    };
    let mut values = vec![0u8; layout.values_bytes];
    all.gather_ragged_until(&indices, &layout, &mut values, &Never)
        .expect("gather");
    for (k, &id) in indices.iter().enumerate() {
        let (s, e) = (
            layout.cu_seqlens[k] as usize,
            layout.cu_seqlens[k + 1] as usize,
        );
        assert_eq!(e - s, id as usize % 7 + 1, "record {id}");
        assert_eq!(layout.shapes[k] as usize, e - s);
        for v in values[s * 4..e * 4].chunks_exact(4) {
            assert_eq!(u64::from(u32::from_le_bytes(v.try_into().expect("4"))), id);
        }
    }
}

#[test]
fn mismatched_parts_and_indices_past_the_end_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, r) = (
        dense(dir.path(), "a.zr", 0, 4),
        ragged(dir.path(), "r.zr", 0, 4),
    );
    let err = Concat::new(parts(&[&a, &r])).expect_err("dense and ragged");
    assert!(err.to_string().contains("part 1"), "{err}");
    assert!(matches!(
        Concat::new(Vec::new()),
        Err(Error::InvalidArgument(_))
    ));
    let all = Concat::new(parts(&[&a, &a])).expect("concat");
    let mut out = vec![0u8; 8];
    let err = all
        .gather_until(&[8], &mut out, &Never)
        .expect_err("past the end");
    assert!(
        matches!(
            err,
            Error::IndexOutOfRange {
                index: 8,
                len: 8,
                ..
            }
        ),
        "{err}"
    );
}

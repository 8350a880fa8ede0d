//! The remote side of `records.rs`: a remote store and a remote dataset's field
//! give the same records through `dyn Records` as the local files they were served
//! from (over HTTP on 127.0.0.1, object_store's real client).

#![cfg(feature = "remote")]
#![allow(clippy::unwrap_used)]

mod common;
mod remote_support;

use common::*;
use remote_support::serve;
use zring_engine::dataset::{Dataset, DatasetBuilder};
use zring_engine::{Codec, DType, Never, RaggedLayout, ReadOptions, Records, Schema, Store};

const N: usize = 600;
const WIDTH: usize = 256;

/// A dense and a ragged store of `N` records, and the same records as a dataset of
/// 3 shards (an empty one among them) with a dense and a ragged field.
fn fixture(dir: &std::path::Path, codec: Codec) -> (Vec<u8>, Ragged) {
    let dense = dense_records(N, WIDTH, 7, |i| i % 3 == 0);
    let ragged = ragged_records(N, 2, DType::U16, 9, 11);
    let opts = zring_engine::WriteOptions::with_codec(codec);
    let schema = Schema::dense(DType::U8, &[WIDTH as u64]);
    write_dense(&dir.join("dense.zr"), &schema, opts.clone(), &dense, 4).unwrap();
    write_ragged(&dir.join("ragged.zr"), DType::U16, opts.clone(), &ragged, 3).unwrap();
    let fields = vec![
        ("d".to_string(), schema.clone()),
        ("r".to_string(), Schema::ragged(DType::U16, 2)),
    ];
    let mut b = DatasetBuilder::create(dir.join("ds"), fields, false).unwrap();
    for (k, range) in [0..200, 200..200, 200..N].into_iter().enumerate() {
        let paths = b.shard_paths(k);
        let part = &dense[range.start * WIDTH..range.end * WIDTH];
        write_dense(&paths[0], &schema, opts.clone(), part, 1).unwrap();
        write_ragged(
            &paths[1],
            DType::U16,
            opts.clone(),
            &ragged.slice(range.clone()),
            1,
        )
        .unwrap();
        b.add_shard(range.len() as u64).unwrap();
    }
    b.publish().unwrap();
    (dense, ragged)
}

#[test]
fn a_remote_store_and_a_remote_dataset_field_give_the_local_records() {
    let dir = tempfile::tempdir().unwrap();
    for codec in [Codec::Raw, Codec::Zstd] {
        let sub = dir.path().join(format!("{codec:?}"));
        std::fs::create_dir(&sub).unwrap();
        let (dense, ragged) = fixture(&sub, codec);
        let (base, _server) = serve(sub.clone());
        let idx: Vec<u64> = (0..400u64)
            .map(|k| (k * 7919) % N as u64)
            .chain([0, 199, 200, N as u64 - 1])
            .collect();
        let want_dense: Vec<u8> = idx
            .iter()
            .flat_map(|&i| dense[i as usize * WIDTH..(i as usize + 1) * WIDTH].to_vec())
            .collect();
        let want_values: Vec<u8> = idx
            .iter()
            .flat_map(|&i| ragged.record(i as usize).to_vec())
            .collect();
        let opts = ReadOptions::default();
        let ds = Dataset::open(format!("{base}/ds"), opts.clone()).unwrap();
        let sources: [(Box<dyn Records>, Box<dyn Records>); 2] = [
            (
                Box::new(Store::open(format!("{base}/dense.zr"), opts.clone()).unwrap()),
                Box::new(Store::open(format!("{base}/ragged.zr"), opts.clone()).unwrap()),
            ),
            (
                Box::new(ds.field(0).unwrap()),
                Box::new(ds.field(1).unwrap()),
            ),
        ];
        for (d, r) in &sources {
            let what = format!("{codec:?} {d:?}");
            assert_eq!(d.len(), N as u64, "{what}");
            let mut out = vec![0u8; idx.len() * WIDTH];
            d.gather_until(&idx, &mut out, &Never).unwrap();
            assert_eq!(out, want_dense, "{what}");
            let mut layout = RaggedLayout::default();
            r.ragged_layout_into(&idx, &mut layout).unwrap();
            let mut values = vec![0u8; layout.values_bytes];
            r.gather_ragged_until(&idx, &layout, &mut values, &Never)
                .unwrap();
            assert_eq!(values, want_values, "{what}");
            for (k, &i) in idx.iter().enumerate() {
                assert_eq!(
                    &layout.shapes[k * 2..k * 2 + 2],
                    ragged.shape(i as usize),
                    "{what}"
                );
            }
        }
        assert!(sources[0].0.as_store().is_some() && sources[1].0.as_store().is_none());
    }
}

//! Stores whose records encode their own index, and a step fingerprint, shared by
//! the loader's integration tests.
#![allow(dead_code)]

use std::path::Path;

use zring_engine::{Codec, DType, ReadOptions, Schema, Store, WriteOptions, Writer};
use zring_loader::{Batch, Tensor};

/// Dense u64 records: record `i` is `[i, 2 i]`.
pub fn dense_store(dir: &Path, name: &str, n: u64) -> Store {
    let path = dir.join(name);
    let mut w = Writer::create(
        &path,
        Schema::dense(DType::U64, &[2]),
        WriteOptions::with_codec(Codec::Raw),
    )
    .expect("create dense");
    let bytes: Vec<u8> = (0..n)
        .flat_map(|i| [i, 2 * i])
        .flat_map(u64::to_le_bytes)
        .collect();
    w.append_dense(&bytes).expect("append dense");
    w.close().expect("close dense");
    Store::open(&path, ReadOptions::default()).expect("open dense")
}

/// The length of ragged record `i`.
/// A dense store (record `i` holds `i`) and a zstd ragged store of `n` records each,
/// in a directory that lives as long as this.
pub struct Data {
    _dir: tempfile::TempDir,
    pub dense: Store,
    pub ragged: Store,
}

pub fn data(n: u64) -> Data {
    let dir = tempfile::tempdir().expect("tempdir");
    Data {
        dense: dense_store(dir.path(), "d.zr", n),
        ragged: ragged_store(dir.path(), "r.zr", n, Codec::Zstd),
        _dir: dir,
    }
}

pub fn ragged_len(i: u64) -> u64 {
    1 + i % 7
}

/// Ragged 1-D u64 records: record `i` has `1 + i % 7` elements, all equal to `i`.
pub fn ragged_store(dir: &Path, name: &str, n: u64, codec: Codec) -> Store {
    let path = dir.join(name);
    let mut w = Writer::create(
        &path,
        Schema::ragged(DType::U64, 1),
        WriteOptions::with_codec(codec),
    )
    .expect("create ragged");
    let mut cu = vec![0u64];
    let mut shapes = Vec::new();
    let mut values = Vec::new();
    for i in 0..n {
        let len = ragged_len(i);
        shapes.push(len as u32);
        cu.push(cu[cu.len() - 1] + len);
        for _ in 0..len {
            values.extend_from_slice(&i.to_le_bytes());
        }
    }
    w.append_ragged(&values, &cu, &shapes)
        .expect("append ragged");
    w.close().expect("close ragged");
    Store::open(&path, ReadOptions::default()).expect("open ragged")
}

pub fn u64s(bytes: &[u8]) -> Vec<u64> {
    bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect()
}

/// The record indices held by a tensor of one of the stores above, checking on the
/// way that every record is the one its index says.
pub fn indices_of(t: &Tensor) -> Vec<u64> {
    (0..t.records())
        .map(|k| {
            let rec = u64s(t.record(k).expect("record"));
            let i = rec[0];
            match t {
                Tensor::Dense { .. } => assert_eq!(rec, vec![i, 2 * i], "dense record"),
                Tensor::Ragged { .. } => {
                    assert_eq!(rec.len() as u64, ragged_len(i), "ragged length of {i}");
                    assert!(rec.iter().all(|&v| v == i), "ragged record {i}: {rec:?}");
                }
            }
            i
        })
        .collect()
}

/// Everything a step holds, as plain values, to compare runs.
pub type Fingerprint = Vec<(String, Vec<(Vec<u8>, Vec<u64>, Vec<u32>)>)>;

pub fn fingerprint(b: &Batch) -> Fingerprint {
    b.iter()
        .map(|(name, shards)| {
            let shards = shards
                .iter()
                .map(|t| match t {
                    Tensor::Dense { data, shape, .. } => (
                        data.to_vec(),
                        shape.iter().map(|&d| d as u64).collect(),
                        Vec::new(),
                    ),
                    Tensor::Ragged {
                        values,
                        cu_seqlens,
                        shapes,
                        ..
                    } => (values.to_vec(), cu_seqlens.to_vec(), shapes.to_vec()),
                })
                .collect();
            (name.to_string(), shards)
        })
        .collect()
}

/// Waits until `ready()` holds (polled), or 60 s have passed: the loader's workers
/// reaching a state, as an event rather than a sleep a busy machine may outlast. The
/// caller asserts the state afterwards, so a state never reached fails, not hangs.
pub fn wait_until(mut ready: impl FnMut() -> bool) {
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !ready() && std::time::Instant::now() < give_up {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

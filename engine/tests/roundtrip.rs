//! Round trips through Writer and Store for every dtype, layout, codec and backend.

use zring_engine::{Backend, Codec, DType, ReadOptions, Schema, Store, WriteOptions, Writer};

fn pseudo_bytes(n: usize, seed: u64) -> Vec<u8> {
    // Compressible but not constant: a slow ramp with some noise.
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ((i / 7) as u8).wrapping_add((x & 3) as u8)
        })
        .collect()
}

fn dict_for(records: &[&[u8]]) -> Vec<u8> {
    zring_engine::train_dict(records, 4096).expect("train")
}

#[test]
fn dense_round_trip_every_dtype_codec_and_backend() {
    let dir = tempfile::tempdir().expect("tempdir");
    for dtype in DType::ALL {
        for shape in [vec![], vec![3], vec![4, 5]] {
            let schema = Schema::dense(dtype, &shape);
            let width = schema.item_bytes().expect("dense") as usize;
            let n = 300usize;
            let data = pseudo_bytes(n * width, 7);
            let records: Vec<&[u8]> = data.chunks(width).collect();
            for codec in [Codec::Raw, Codec::Zstd, Codec::ZstdDict] {
                let path = dir
                    .path()
                    .join(format!("{dtype}-{}-{codec}.zr", shape.len()));
                let mut opts = WriteOptions::with_codec(codec);
                if codec == Codec::ZstdDict {
                    let big = pseudo_bytes(64 << 10, 3);
                    let samples: Vec<&[u8]> = big.chunks(256).collect();
                    opts.dictionary = Some(dict_for(&samples));
                }
                let mut w = Writer::create(&path, schema.clone(), opts).expect("create");
                w.append_dense(&data[..100 * width]).expect("append");
                w.append_dense(&data[100 * width..]).expect("append");
                assert_eq!(w.close().expect("close"), n as u64);
                for backend in Backend::CONCRETE {
                    let store =
                        Store::open(&path, ReadOptions::with_backend(backend)).expect("open");
                    assert_eq!(store.len(), n as u64);
                    assert_eq!(store.schema(), &schema);
                    store.verify().expect("verify");
                    let idx: Vec<u64> = vec![5, 299, 0, 5, 17];
                    let got = store.gather_vec(&idx).expect("gather");
                    for (k, &i) in idx.iter().enumerate() {
                        assert_eq!(&got[k * width..(k + 1) * width], records[i as usize]);
                    }
                    let all: Vec<u64> = (0..n as u64).rev().collect();
                    let got = store.gather_vec(&all).expect("gather all");
                    for (k, &i) in all.iter().enumerate() {
                        assert_eq!(&got[k * width..(k + 1) * width], records[i as usize]);
                    }
                    assert!(store.gather_vec(&[]).expect("empty").is_empty());
                    assert_eq!(store.get(42).expect("get"), records[42]);
                }
            }
        }
    }
}

#[test]
fn ragged_round_trip_every_codec_and_backend() {
    let dir = tempfile::tempdir().expect("tempdir");
    for ndim in [1usize, 2] {
        let dtype = DType::I32;
        let n = 500usize;
        let mut shapes = Vec::new();
        let mut cu = vec![0u64];
        for i in 0..n {
            let len = 1 + (i * 37) % 200;
            if ndim == 1 {
                shapes.push(len as u32);
                cu.push(cu[i] + len as u64);
            } else {
                shapes.extend([len as u32, 3]);
                cu.push(cu[i] + 3 * len as u64);
            }
        }
        let values = pseudo_bytes(cu[n] as usize * 4, 11);
        for codec in [Codec::Raw, Codec::Zstd] {
            let path = dir.path().join(format!("ragged-{ndim}-{codec}.zr"));
            let mut w = Writer::create(
                &path,
                Schema::ragged(dtype, ndim),
                WriteOptions::with_codec(codec),
            )
            .expect("create");
            w.append_ragged(&values, &cu, &shapes).expect("append");
            w.close().expect("close");
            for backend in Backend::CONCRETE {
                let store = Store::open(&path, ReadOptions::with_backend(backend)).expect("open");
                store.verify().expect("verify");
                let idx = [3u64, 499, 3, 0, 250];
                let batch = store.gather_ragged(&idx).expect("gather");
                assert_eq!(batch.len(), idx.len());
                for (k, &i) in idx.iter().enumerate() {
                    let i = i as usize;
                    let want = &values[cu[i] as usize * 4..cu[i + 1] as usize * 4];
                    assert_eq!(batch.record(k, 4).expect("record"), want);
                    assert_eq!(
                        &batch.shapes[k * ndim..(k + 1) * ndim],
                        &shapes[i * ndim..(i + 1) * ndim]
                    );
                }
            }
        }
    }
}

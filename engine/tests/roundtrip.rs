//! Round trips through Writer and Store for every dtype, layout, codec and backend.

use zring_engine::{Backend, Codec, DType, ReadOptions, Schema, Store, WriteOptions, Writer};
use zring_testkit::ramp as pseudo_bytes;

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

/// Format v1.2: ragged records may be empty (a 0 dim, `logical_len` 0). They round
/// trip on every codec, alignment and backend, alone, between others and as a whole
/// store, through `get`, `gather_ragged`, `shape` and `verify`.
#[test]
fn empty_ragged_records_round_trip_every_codec_alignment_and_backend() {
    let dir = tempfile::tempdir().expect("tempdir");
    for ndim in [1usize, 2] {
        // Lengths with empty records first, last, in runs and alone.
        let lens: Vec<u32> = (0..300u32)
            .map(|i| {
                if i % 3 == 0 || (100..110).contains(&i) || i == 299 {
                    0
                } else {
                    1 + (i * 13) % 90
                }
            })
            .collect();
        let mut shapes = Vec::new();
        let mut cu = vec![0u64];
        for (i, &len) in lens.iter().enumerate() {
            if ndim == 1 {
                shapes.push(len);
                cu.push(cu[i] + u64::from(len));
            } else {
                // An empty record may have other dims that are not 0.
                shapes.extend([len, 3]);
                cu.push(cu[i] + 3 * u64::from(len));
            }
        }
        let values = pseudo_bytes(cu[lens.len()] as usize * 4, 5);
        let samples: Vec<&[u8]> = values.chunks(256).collect();
        let dict = dict_for(&samples);
        for codec in [Codec::Raw, Codec::Zstd, Codec::ZstdDict] {
            for align in [8u32, 4096] {
                for all_empty in [false, true] {
                    let path = dir
                        .path()
                        .join(format!("e-{ndim}-{codec}-{align}-{all_empty}.zr"));
                    let mut opts = WriteOptions::with_codec(codec);
                    opts.align = align;
                    if codec == Codec::ZstdDict {
                        opts.dictionary = Some(dict.clone());
                    }
                    let mut w = Writer::create(&path, Schema::ragged(DType::I32, ndim), opts)
                        .expect("create");
                    let (vals, cus, shs): (&[u8], Vec<u64>, Vec<u32>) = if all_empty {
                        (&[], vec![0; 5], vec![0; 4 * ndim])
                    } else {
                        (&values, cu.clone(), shapes.clone())
                    };
                    // Two appends: the second starts with an empty record.
                    let n = cus.len() - 1;
                    let half = n / 2 + usize::from(!all_empty && (n / 2) % 3 != 0);
                    let (a, b) = (cus[half] as usize * 4, &cus[half..]);
                    w.append_ragged(&vals[..a], &cus[..=half], &shs[..half * ndim])
                        .expect("append");
                    let rebased: Vec<u64> = b.iter().map(|c| c - cus[half]).collect();
                    w.append_ragged(&vals[a..], &rebased, &shs[half * ndim..])
                        .expect("append");
                    assert_eq!(w.close().expect("close"), n as u64);
                    for backend in Backend::CONCRETE {
                        let ctx = format!(
                            "ndim {ndim} {codec} align {align} all_empty {all_empty} {backend}"
                        );
                        let store =
                            Store::open(&path, ReadOptions::with_backend(backend)).expect("open");
                        store
                            .verify()
                            .unwrap_or_else(|e| panic!("{ctx}: verify: {e}"));
                        let idx: Vec<u64> = (0..n as u64).rev().chain([0, 1, 0]).collect();
                        let batch = store
                            .gather_ragged(&idx)
                            .unwrap_or_else(|e| panic!("{ctx}: {e}"));
                        for (k, &i) in idx.iter().enumerate() {
                            let i = i as usize;
                            let want = &vals[cus[i] as usize * 4..cus[i + 1] as usize * 4];
                            assert_eq!(
                                batch.record(k, 4).expect("record"),
                                want,
                                "{ctx} record {i}"
                            );
                            assert_eq!(
                                &batch.shapes[k * ndim..(k + 1) * ndim],
                                &shs[i * ndim..(i + 1) * ndim],
                                "{ctx}"
                            );
                            assert_eq!(store.get(i as u64).expect("get"), want, "{ctx} get {i}");
                            let dims: Vec<u64> = shs[i * ndim..(i + 1) * ndim]
                                .iter()
                                .map(|&d| u64::from(d))
                                .collect();
                            assert_eq!(store.shape(i as u64).expect("shape"), dims, "{ctx}");
                        }
                    }
                }
            }
        }
    }
}

//! Streams stay aligned, shards cover the global batch, and bad stream sets are
//! refused at construction.

mod common;

use common::{dense_store, indices_of, ragged_store};
use zring_engine::{Codec, DType, ReadOptions, Schema, Store, WriteOptions, Writer};
use zring_loader::{Loader, LoaderError, LoaderOptions, OptionsError, Tensor, View};
use zring_sampler::{Mode, Sampler};

#[test]
fn every_stream_of_a_step_holds_the_same_records_and_shards_make_the_global_batch() {
    let dir = tempfile::tempdir().expect("tempdir");
    let n = 500;
    let dense = dense_store(dir.path(), "d.zr", n);
    let raw = ragged_store(dir.path(), "r.zr", n, Codec::Raw);
    let zstd = ragged_store(dir.path(), "z.zr", n, Codec::Zstd);
    for (mode, workers) in [(Mode::Iid, 0), (Mode::Cyclic, 3), (Mode::Sequential, 2)] {
        let sampler = Sampler::new(n, 12, mode, 9).expect("sampler");
        let streams = vec![
            ("dense", vec![dense.clone(); 3]),
            ("ragged", vec![raw.clone(); 3]),
            ("zstd", vec![zstd.clone(); 3]),
        ];
        let loader =
            Loader::new(streams, sampler.clone(), LoaderOptions::new(workers, 2)).expect("loader");
        for step in loader.take(40) {
            let step = step.expect("step");
            let mut union = Vec::new();
            for shard in 0..3 {
                let ids: Vec<Vec<u64>> = step
                    .shard(shard)
                    .map(|(_, t)| {
                        assert_eq!(t.records(), 4);
                        indices_of(t)
                    })
                    .collect();
                assert_eq!(ids.len(), 3, "one tensor per stream");
                assert!(
                    ids.iter().all(|v| *v == ids[0]),
                    "streams disagree: {ids:?}"
                );
                union.extend_from_slice(&ids[0]);
            }
            assert_eq!(union, sampler.batch(step.step), "step {}", step.step);
        }
    }
}

#[test]
fn dense_shards_are_shaped_batch_by_item_and_ragged_shards_carry_offsets_and_shapes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dense = dense_store(dir.path(), "d.zr", 50);
    let ragged = ragged_store(dir.path(), "r.zr", 50, Codec::Raw);
    let sampler = Sampler::new(50, 8, Mode::Iid, 1).expect("sampler");
    let mut loader = Loader::new(
        [
            ("d", vec![dense.clone(), dense]),
            ("r", vec![ragged.clone(), ragged]),
        ],
        sampler,
        LoaderOptions::new(1, 1),
    )
    .expect("loader");
    let step = loader.next().expect("endless").expect("step");
    assert_eq!(step.shards(), 2);
    assert_eq!(step.names().collect::<Vec<_>>(), ["d", "r"]);
    let Some(Tensor::Dense { data, shape, dtype }) = step.get("d", 1) else {
        panic!("dense tensor expected");
    };
    assert_eq!(&shape[..], &[4, 2]);
    assert_eq!(*dtype, DType::U64);
    assert_eq!(data.len(), 4 * 16);
    assert_eq!(data.as_ptr() as usize % 64, 0);
    let Some(Tensor::Ragged {
        values,
        cu_seqlens,
        shapes,
        ndim,
        ..
    }) = step.get("r", 0)
    else {
        panic!("ragged tensor expected");
    };
    assert_eq!(*ndim, 1);
    assert_eq!(cu_seqlens.len(), 5);
    assert_eq!(shapes.len(), 4);
    assert_eq!(values.len() as u64, cu_seqlens[4] * 8);
    for k in 0..4 {
        assert_eq!(u64::from(shapes[k]), cu_seqlens[k + 1] - cu_seqlens[k]);
    }
    assert!(step.stream("missing").is_none());
    let parts = loader
        .next()
        .expect("endless")
        .expect("step")
        .data
        .into_streams();
    assert_eq!(parts.len(), 2);
    assert_eq!(parts[0].1.len(), 2);
}

#[test]
fn pinned_views_deliver_page_locked_buffers_or_a_clear_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dense = dense_store(dir.path(), "d.zr", 50);
    let sampler = Sampler::new(50, 4, Mode::Iid, 1).expect("sampler");
    let mut loader = Loader::new(
        [("d", vec![View::pinned(dense)])],
        sampler,
        LoaderOptions::new(0, 1),
    )
    .expect("loader");
    match loader.next().expect("endless") {
        Ok(step) => match step.get("d", 0) {
            Some(Tensor::Dense { data, .. }) => {
                assert!(data.is_pinned());
                // The kernel agrees: the buffer's pages are locked.
                let at = data.as_ptr() as usize;
                if let Some(locked) = zring_testkit::os::locked_bytes_at(at) {
                    assert!(locked >= data.len() as u64, "{locked} bytes locked");
                }
            }
            other => panic!("unexpected {other:?}"),
        },
        Err(LoaderError::Buffer { source, .. }) => {
            assert!(
                !zring_testkit::os::pinning_must_work(),
                "pinning must work here (root or a large RLIMIT_MEMLOCK): {source}"
            );
            assert!(source.to_string().contains("mlock"), "{source}")
        }
        Err(e) => panic!("unexpected error {e}"),
    }
}

fn build(streams: Vec<(&str, Vec<Store>)>, sampler: Sampler) -> Result<Loader, LoaderError> {
    Loader::new(streams, sampler, LoaderOptions::default())
}

#[test]
fn bad_stream_sets_are_refused_at_construction() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = dense_store(dir.path(), "a.zr", 100);
    let short = dense_store(dir.path(), "short.zr", 99);
    let r = ragged_store(dir.path(), "r.zr", 100, Codec::Raw);
    let s = |batch| Sampler::new(100, batch, Mode::Iid, 0).expect("sampler");

    let e = build(vec![], s(8)).expect_err("no streams");
    assert!(matches!(e, LoaderError::NoStreams), "{e}");

    let e = build(vec![("a", vec![])], s(8)).expect_err("no views");
    assert!(
        matches!(e, LoaderError::NoViews { ref stream } if stream == "a"),
        "{e}"
    );

    let e = build(vec![("a", vec![a.clone()]), ("b", vec![])], s(8)).expect_err("no views");
    assert!(
        matches!(e, LoaderError::NoViews { ref stream } if stream == "b"),
        "{e}"
    );

    let e = build(
        vec![("a", vec![a.clone(), a.clone()]), ("r", vec![r.clone()])],
        s(8),
    )
    .expect_err("unequal views");
    assert!(
        matches!(
            e,
            LoaderError::UnequalViews {
                views: 1,
                expected: 2,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("one view per placement"), "{e}");

    let e = build(
        vec![("a", vec![a.clone()]), ("s", vec![short.clone()])],
        s(8),
    )
    .expect_err("record counts");
    assert!(
        matches!(
            e,
            LoaderError::RecordCountMismatch {
                records: 99,
                expected: 100,
                ..
            }
        ),
        "{e}"
    );
    let e = build(vec![("a", vec![a.clone(), short.clone()])], s(8)).expect_err("counts");
    assert!(
        matches!(e, LoaderError::RecordCountMismatch { view: 1, .. }),
        "{e}"
    );

    let e = build(vec![("a", vec![a.clone(); 3])], s(8)).expect_err("divisible");
    assert!(
        matches!(e, LoaderError::BatchNotDivisible { batch: 8, views: 3 }),
        "{e}"
    );

    let e =
        build(vec![("a", vec![a.clone()]), ("a", vec![a.clone()])], s(8)).expect_err("duplicate");
    assert!(matches!(e, LoaderError::DuplicateStream { .. }), "{e}");

    let e = build(vec![("a", vec![a.clone(), r.clone()])], s(8)).expect_err("schemas");
    assert!(
        matches!(e, LoaderError::SchemaMismatch { view: 1, .. }),
        "{e}"
    );

    let long = Sampler::new(101, 8, Mode::Iid, 0).expect("sampler");
    let e = build(vec![("a", vec![a.clone()])], long).expect_err("sampler too long");
    assert!(matches!(e, LoaderError::SamplerTooLong { .. }), "{e}");

    let e = Loader::new([("a", vec![a.clone()])], s(8), LoaderOptions::new(2, 0))
        .expect_err("prefetch 0");
    assert!(
        matches!(
            e,
            LoaderError::InvalidOptions(OptionsError::ZeroPrefetch { workers: 2 })
        ),
        "{e}"
    );

    // A sampler over a prefix of the records is fine, and so is prefetch 0 inline.
    let prefix = Sampler::new(10, 8, Mode::Iid, 0).expect("sampler");
    let mut ok = Loader::new([("a", vec![a.clone()])], prefix, LoaderOptions::new(0, 0))
        .expect("prefix sampler");
    let step = ok.next().expect("endless").expect("step");
    let t = step.get("a", 0).expect("tensor");
    assert!(indices_of(t).iter().all(|&i| i < 10));
}

#[test]
fn a_scalar_dense_stream_is_shaped_by_the_shard_length_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("labels.zr");
    let mut w = Writer::create(
        &path,
        Schema::dense(DType::U32, &[]),
        WriteOptions::default(),
    )
    .expect("create");
    w.append_dense(&(0..40u32).flat_map(u32::to_le_bytes).collect::<Vec<u8>>())
        .expect("append");
    w.close().expect("close");
    let labels = Store::open(&path, ReadOptions::default()).expect("open");
    let sampler = Sampler::new(40, 6, Mode::Sequential, 0).expect("sampler");
    let mut loader =
        Loader::new([("y", vec![labels; 2])], sampler, LoaderOptions::new(0, 1)).expect("loader");
    let step = loader.nth(1).expect("endless").expect("step");
    let Some(Tensor::Dense { data, shape, .. }) = step.get("y", 1) else {
        panic!("dense expected");
    };
    assert_eq!(&shape[..], &[3]);
    let ids: Vec<u32> = data
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().expect("4")))
        .collect();
    assert_eq!(ids, [9, 10, 11]);
}

#[test]
fn shards_big_enough_for_parallel_engine_gathers_stay_correct_with_several_workers() {
    // 64 records of 8 KiB per shard: each gather is split over the engine's pool,
    // called from four loader workers at once (nested use of the pool).
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("big.zr");
    let width = 8192usize;
    let n = 300u64;
    let mut w = Writer::create(
        &path,
        Schema::dense(DType::U8, &[width as u64]),
        WriteOptions::with_codec(Codec::Raw),
    )
    .expect("create");
    let mut bytes = Vec::with_capacity(n as usize * width);
    for i in 0..n {
        bytes.extend_from_slice(&i.to_le_bytes());
        bytes.resize(bytes.len() + width - 8, i as u8);
    }
    w.append_dense(&bytes).expect("append");
    w.close().expect("close");
    let big = Store::open(&path, ReadOptions::default()).expect("open");
    let ragged = ragged_store(dir.path(), "r.zr", n, Codec::Zstd);
    let sampler = Sampler::new(n, 128, Mode::Iid, 77).expect("sampler");
    let loader = Loader::new(
        [
            ("big", vec![big.clone(), big]),
            ("r", vec![ragged.clone(), ragged]),
        ],
        sampler.clone(),
        LoaderOptions::new(4, 2),
    )
    .expect("loader");
    for step in loader.take(30) {
        let step = step.expect("step");
        let global = sampler.batch(step.step);
        for shard in 0..2 {
            let want = &global[shard * 64..(shard + 1) * 64];
            let t = step.get("big", shard).expect("big");
            for (k, &i) in want.iter().enumerate() {
                let rec = t.record(k).expect("record");
                assert_eq!(u64::from_le_bytes(rec[..8].try_into().expect("8")), i);
                assert!(rec[8..].iter().all(|&b| b == i as u8), "record {i} torn");
            }
            assert_eq!(indices_of(step.get("r", shard).expect("r")), want);
        }
    }
}

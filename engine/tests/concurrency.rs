//! Many threads reading at once: gathers from one shared `Store` (by reference and
//! by clone) on every backend, and from several stores at once — including stores
//! with different zstd dictionaries, whose decoders are cached per thread — must all
//! be byte-exact.

mod common;

use std::path::Path;

use common::*;
use zring_engine::{Backend, Codec, DType, ReadOptions, Schema, Store, WriteOptions};

const THREADS: usize = 8;

/// Random indices (duplicates likely), some batches small, some large enough that
/// the pool's workers join the gather.
fn random_batch(rng: &mut Rng, n: u64, round: usize) -> Vec<u64> {
    let k = 1 + rng.below(if round % 3 == 0 { 700 } else { 40 });
    (0..k).map(|_| rng.below(n)).collect()
}

/// Gathers `indices` and checks every record (and shape) against the fixture.
fn gather_and_check(store: &Store, fx: &Fixture, indices: &[u64]) {
    if fx.ragged {
        let batch = store.gather_ragged(indices).expect("gather_ragged");
        assert_eq!(batch.len(), indices.len());
        for (k, &i) in indices.iter().enumerate() {
            assert_eq!(
                batch.record(k, 4),
                Some(&fx.records[i as usize][..]),
                "record {i}"
            );
            let ndim = batch.ndim;
            assert_eq!(
                &batch.shapes[k * ndim..(k + 1) * ndim],
                &fx.shapes[i as usize][..]
            );
        }
    } else {
        let got = store.gather_vec(indices).expect("gather");
        let w = fx.records[0].len();
        for (k, &i) in indices.iter().enumerate() {
            assert!(
                got[k * w..(k + 1) * w] == fx.records[i as usize][..],
                "record {i}"
            );
        }
    }
}

/// `THREADS` threads gather random batches from the one `store` at the same time.
/// Returns the records read: `(gathered, got)`, each gathered index and each `get`.
fn hammer(store: &Store, fx: &Fixture, rounds: usize, seed: u64) -> (u64, u64) {
    let n = fx.records.len() as u64;
    std::thread::scope(|s| {
        let threads: Vec<_> = (0..THREADS)
            .map(|t| {
                // Half the threads share the store by reference, half hold a clone.
                let owned = (t % 2 == 1).then(|| store.clone());
                s.spawn(move || {
                    let store = owned.as_ref().unwrap_or(store);
                    let mut rng = Rng::new(seed + t as u64);
                    let mut read = (0u64, 0u64);
                    for round in 0..rounds {
                        let idx = random_batch(&mut rng, n, round + t);
                        gather_and_check(store, fx, &idx);
                        let one = rng.below(n);
                        assert_eq!(store.get(one).expect("get"), fx.records[one as usize]);
                        read.0 += idx.len() as u64;
                        read.1 += 1;
                    }
                    read
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|t| t.join().expect("a reading thread panicked"))
            .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
    })
}

/// Every record `hammer` read came through the backend asked for: an io_uring store
/// that quietly fell back to pread fails here instead of testing pread twice.
/// `Store::get` reads its one record as it always does (from the mapping, else with
/// pread), so with io_uring only the gathered records go through the ring.
fn assert_read_by(store: &Store, backend: Backend, (gathered, got): (u64, u64)) {
    if backend == Backend::Uring && uring_here() {
        let s = store.reads_served();
        assert_eq!(
            (s.pread, s.mmap, s.uring),
            (got, 0, gathered),
            "records served by (pread, mmap, uring) with backend uring"
        );
    } else {
        assert_served_by(store, backend, gathered + got);
    }
}

/// Dense u8[512]: raw, or zstd with a quarter of the records incompressible.
fn dense_store(dir: &Path, name: &str, codec: Codec, n: usize) -> Fixture {
    let width = 512;
    let data = dense_records(n, width, 40, |i| i % 4 == 0);
    let path = dir.join(name);
    let schema = Schema::dense(DType::U8, &[width as u64]);
    write_dense(&path, &schema, WriteOptions::with_codec(codec), &data, 3).expect("write");
    fixture_from(
        &path,
        data.chunks(width).map(<[u8]>::to_vec).collect(),
        Vec::new(),
    )
}

fn ragged_store(dir: &Path, name: &str, codec: Codec, n: usize) -> Fixture {
    let r = ragged_records(n, 2, DType::I32, 60, 41);
    let path = dir.join(name);
    write_ragged(&path, DType::I32, WriteOptions::with_codec(codec), &r, 2).expect("write");
    fixture_from(
        &path,
        (0..n).map(|i| r.record(i).to_vec()).collect(),
        (0..n).map(|i| r.shape(i).to_vec()).collect(),
    )
}

fn fixture_from(path: &Path, records: Vec<Vec<u8>>, shapes: Vec<Vec<u32>>) -> Fixture {
    Fixture {
        path: path.to_path_buf(),
        bytes: Vec::new(),
        ragged: !shapes.is_empty(),
        records,
        shapes,
    }
}

#[test]
fn eight_threads_gather_byte_exact_from_one_store_on_every_backend() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fixtures = [
        dense_store(dir.path(), "raw.zr", Codec::Raw, 1500),
        dense_store(dir.path(), "zstd.zr", Codec::Zstd, 1500),
        ragged_store(dir.path(), "ragged-raw.zr", Codec::Raw, 1200),
        ragged_store(dir.path(), "ragged-zstd.zr", Codec::Zstd, 1200),
        dense_dict(dir.path(), 600),
    ];
    for (f, fx) in fixtures.iter().enumerate() {
        for backend in Backend::CONCRETE {
            let store = open_with(&fx.path, backend, f % 2 == 0).expect("open");
            let read = hammer(&store, fx, 12, 100 * f as u64);
            assert_read_by(&store, backend, read);
        }
    }
}

#[test]
fn direct_reads_are_byte_exact_under_concurrency() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fixtures = [
        dense_store(dir.path(), "raw.zr", Codec::Raw, 800),
        ragged_store(dir.path(), "ragged-zstd.zr", Codec::Zstd, 800),
    ];
    for fx in &fixtures {
        for backend in [Backend::Pread, Backend::Uring] {
            let opts = ReadOptions::default().backend(backend).direct(true);
            let Some(store) = common::open_direct_or_skip(&fx.path, opts) else {
                return;
            };
            let read = hammer(&store, fx, 4, 7);
            assert!(store.is_direct(), "{backend}: not reading with O_DIRECT");
            // All of them, not some: one thread's read that went elsewhere fails.
            assert_read_by(&store, backend, read);
        }
    }
}

#[test]
fn concurrent_gathers_from_different_stores_do_not_mix() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = dense_store(dir.path(), "a.zr", Codec::Zstd, 1000);
    let b = ragged_store(dir.path(), "b.zr", Codec::Zstd, 1000);
    // Two dictionary stores with different dictionaries: a thread that reads both
    // must use the right one for each.
    let d1 = dense_dict(dir.path(), 300);
    let d2_path = dir.path().join("dict2.zr");
    let d2_data = dense_records(300, 256, 77, |_| false);
    let samples: Vec<Vec<u8>> = (0..200).map(|s| compressible(300, 5_000 + s)).collect();
    let refs: Vec<&[u8]> = samples.iter().map(Vec::as_slice).collect();
    let mut opts = WriteOptions::with_codec(Codec::ZstdDict);
    opts.dictionary = Some(zring_engine::train_dict(&refs, 2048).expect("train"));
    write_dense(
        &d2_path,
        &Schema::dense(DType::U8, &[256]),
        opts,
        &d2_data,
        1,
    )
    .expect("write");
    let d2 = fixture_from(
        &d2_path,
        d2_data.chunks(256).map(<[u8]>::to_vec).collect(),
        Vec::new(),
    );
    let pairs = [
        (&a, Backend::Mmap),
        (&b, Backend::Uring),
        (&d1, Backend::Pread),
        (&d2, Backend::Mmap),
    ];
    let stores: Vec<(Store, &Fixture)> = pairs
        .iter()
        .map(|&(fx, backend)| (open_with(&fx.path, backend, false).expect("open"), fx))
        .collect();
    assert_ne!(stores[2].0.dictionary(), stores[3].0.dictionary());
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let stores = &stores;
            s.spawn(move || {
                let mut rng = Rng::new(900 + t as u64);
                for round in 0..12 {
                    // Every thread interleaves all four stores.
                    let (store, fx) = &stores[(round + t) % stores.len()];
                    let idx = random_batch(&mut rng, fx.records.len() as u64, round);
                    gather_and_check(store, fx, &idx);
                }
            });
        }
    });
}

#[test]
fn one_thread_reading_more_dictionary_stores_than_its_decoder_cache_holds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fx = dense_dict(dir.path(), 50);
    // Twelve opens of the store are twelve store ids: more than the per-thread cache
    // of dictionary decoders, so entries are evicted and rebuilt while reading.
    let stores: Vec<Store> = (0..12)
        .map(|_| open_with(&fx.path, Backend::Mmap, true).expect("open"))
        .collect();
    let mut rng = Rng::new(3);
    for round in 0..60 {
        let store = &stores[(round * 5) % stores.len()];
        let idx = random_batch(&mut rng, 50, round);
        gather_and_check(store, &fx, &idx);
    }
}

//! Gather throughput with same-run baselines, all in one binary.
//!
//! - `gather_w1_{raw,zstd}/{pread,mmap}_t{1,2}`: W1 (uint8[3,224,224]) dense gathers
//!   of 256 fresh IID indices, logical bytes/s.
//! - `gather_w2_{raw,zstd}/...`: the same for W2 (int32[512]); records/s is bytes/s
//!   divided by 2048 (`benches/summary.py` prints both).
//! - `gather_w3_{raw,zstd_dict}/...`: W3 ragged gathers (`gather_ragged`), records/s.
//! - `baseline_w{1,2}/memcpy_t{1,2}`: copying the same batch from the records in RAM
//!   (2 threads: `std::thread::scope` halves); `pread_loop_t1`: one `pread` per record
//!   from the raw store's file; `zstd_decode_t1`: decompressing the zstd store's frames
//!   of the batch with one context, 1 thread. `baseline_w3/zstd_dict_decode_t1` ditto.
//!
//! Every configuration is checked against the source records before it is timed.
//! Sizes: `ZRING_BENCH_W{1,2,3}_RECORDS` override 2,000 / 200,000 / 200,000 (under
//! `cargo test --benches` each bench runs once on 300 / 5,000 / 5,000 records);
//! `ZRING_BENCH_BACKENDS=pread,mmap,uring` adds backends; `ZRING_BENCH_DIR` moves
//! the scratch stores.

mod common;

use std::hint::black_box;
use std::path::Path;
use std::time::Instant;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use zring_benches::{baselines, data, stores, Dense, Frames, IidBatches, Ragged};
use zring_benches::{StoreCodec, BATCH, SEED};
use zring_engine::{Backend, ReadOptions, Store};
use zring_platform::{AlignedBuf, DEFAULT_ALIGN};

use common::{
    backends, bench, configure, open_file, print_store_meta, records, scratch_dir, time_batches,
    wanted,
};

const THREADS: [usize; 2] = [1, 2];
/// Every timed loop draws the same index sequence.
const INDEX_SEED: u64 = SEED ^ 0x1d;

fn id(codec: StoreCodec) -> String {
    codec.name().replace('-', "_")
}

fn open(path: &Path, backend: Backend, threads: usize) -> Store {
    let opts = ReadOptions::default()
        .backend(backend)
        .threads(threads)
        .verify_checksums(common::verify_checksums());
    Store::open(path, opts).expect("opening the store")
}

fn batches(len: usize) -> IidBatches {
    IidBatches::new(len as u64, BATCH, INDEX_SEED).expect("sampler")
}

/// Panics unless slot k of `got` holds record `idx[k]` of `data`.
fn check_dense(what: &str, data: &Dense, idx: &[u64], got: &[u8]) {
    for (k, (&i, slot)) in idx
        .iter()
        .zip(got.chunks_exact(data.item_bytes))
        .enumerate()
    {
        assert!(
            slot == data.record(i as usize),
            "{what}: slot {k} does not hold record {i}"
        );
    }
}

/// Panics unless `got` is the records `idx` of `data` back to back.
fn check_ragged(what: &str, data: &Ragged, idx: &[u64], got: &[u8]) {
    let want: Vec<u8> = idx
        .iter()
        .flat_map(|&i| data.record(i as usize).iter().copied())
        .collect();
    assert!(want == got, "{what}: values differ from the source records");
}

/// W1 and W2: every store x backend x threads, then the baselines.
fn bench_dense(c: &mut Criterion, tag: &str, data: &Dense, samples: usize, secs: u64) {
    let dir = scratch_dir();
    let (n, width) = (data.len(), data.item_bytes);
    let batch_bytes = (BATCH * width) as u64;
    let flat = width > 64 << 10;
    let mut built = Vec::new();
    for codec in [StoreCodec::Raw, StoreCodec::Zstd] {
        let path = dir.path().join(format!("{tag}-{}.zr", codec.name()));
        let t = Instant::now();
        stores::write_dense(&path, data, n, stores::write_options(codec, 0, None))
            .expect("building the store");
        let build = t.elapsed();
        stores::warm(&path).expect("warming the page cache");
        print_store_meta(
            &format!("{tag}-{}", codec.name()),
            &open(&path, Backend::Mmap, 1),
            build,
        );
        built.push((codec, path));
    }
    // The destination is an engine buffer (THP-backed when >= 2 MiB), as Python and
    // the loader hand out, for the gathers and the baselines alike.
    let mut dst = AlignedBuf::new(BATCH * width, DEFAULT_ALIGN).expect("destination buffer");

    for (codec, path) in &built {
        let gname = format!("gather_{tag}_{}", id(*codec));
        let mut group = c.benchmark_group(&gname);
        configure(&mut group, samples, secs, flat);
        group.throughput(Throughput::Bytes(batch_bytes));
        for backend in backends() {
            for threads in THREADS {
                let name = format!("{}_t{threads}", backend.name());
                let store = open(path, backend, threads);
                let mut b = batches(n);
                let idx = b.next_batch().to_vec();
                store.gather(&idx, &mut dst).expect("gather");
                check_dense(&name, data, &idx, &dst);
                bench(&mut group, &gname, &name, |bench| {
                    bench.iter_custom(|iters| {
                        time_batches(iters, &mut b, |idx| {
                            store.gather(idx, &mut dst).expect("gather");
                            black_box(&dst);
                        })
                    })
                });
            }
        }
        group.finish();
    }

    let gname = format!("baseline_{tag}");
    let mut group = c.benchmark_group(&gname);
    configure(&mut group, samples, secs, flat);
    group.throughput(Throughput::Bytes(batch_bytes));
    for threads in THREADS {
        let mut b = batches(n);
        let idx = b.next_batch().to_vec();
        baselines::memcpy_gather_threads(&data.bytes, width, &idx, &mut dst, threads);
        check_dense("memcpy", data, &idx, &dst);
        bench(&mut group, &gname, &format!("memcpy_t{threads}"), |bench| {
            bench.iter_custom(|iters| {
                time_batches(iters, &mut b, |idx| {
                    if threads == 1 {
                        baselines::memcpy_gather(&data.bytes, width, idx, &mut dst);
                    } else {
                        baselines::memcpy_gather_threads(
                            &data.bytes,
                            width,
                            idx,
                            &mut dst,
                            threads,
                        );
                    }
                    black_box(&dst);
                })
            })
        });
    }

    let raw = open(&built[0].1, Backend::Mmap, 1);
    let offsets: Vec<u64> = (0..raw.len())
        .map(|i| raw.entry(i).map(|e| e.offset))
        .collect::<Result<_, _>>()
        .expect("raw store table");
    let file = open_file(&built[0].1);
    let mut b = batches(n);
    let idx = b.next_batch().to_vec();
    baselines::pread_gather(&file, &offsets, width, &idx, &mut dst).expect("pread");
    check_dense("pread loop", data, &idx, &dst);
    bench(&mut group, &gname, "pread_loop_t1", |bench| {
        bench.iter_custom(|iters| {
            time_batches(iters, &mut b, |idx| {
                baselines::pread_gather(&file, &offsets, width, idx, &mut dst).expect("pread");
                black_box(&dst);
            })
        })
    });

    let map = zring_platform::Mapping::new(&file).expect("mapping the raw store");
    let mut b = batches(n);
    let idx = b.next_batch().to_vec();
    baselines::mapped_gather(map.bytes(), &offsets, width, &idx, &mut dst);
    check_dense("mmap copy", data, &idx, &dst);
    bench(&mut group, &gname, "mmap_copy_t1", |bench| {
        bench.iter_custom(|iters| {
            time_batches(iters, &mut b, |idx| {
                baselines::mapped_gather(map.bytes(), &offsets, width, idx, &mut dst);
                black_box(&dst);
            })
        })
    });

    let frames = Frames::load(&open(&built[1].1, Backend::Mmap, 1)).expect("zstd frames");
    let mut dctx = zstd::bulk::Decompressor::new().expect("zstd context");
    let mut b = batches(n);
    let idx = b.next_batch().to_vec();
    baselines::zstd_decode_gather(&frames, &mut dctx, &idx, &mut dst).expect("decode");
    check_dense("zstd decode", data, &idx, &dst);
    bench(&mut group, &gname, "zstd_decode_t1", |bench| {
        bench.iter_custom(|iters| {
            time_batches(iters, &mut b, |idx| {
                baselines::zstd_decode_gather(&frames, &mut dctx, idx, &mut dst).expect("decode");
                black_box(&dst);
            })
        })
    });
    group.finish();
}

fn bench_w1(c: &mut Criterion) {
    if !wanted("w1") {
        return;
    }
    let n = records("ZRING_BENCH_W1_RECORDS", zring_benches::W1_RECORDS, 300);
    bench_dense(c, "w1", &data::w1(n, SEED), 10, 3);
}

fn bench_w2(c: &mut Criterion) {
    if !wanted("w2") {
        return;
    }
    let n = records("ZRING_BENCH_W2_RECORDS", zring_benches::W2_RECORDS, 5_000);
    bench_dense(c, "w2", &data::w2(n, SEED), 20, 2);
}

/// W3: ragged gathers (layout from the table, then values) of raw and zstd-dict
/// stores, and the single-thread dictionary decode limit.
fn bench_w3(c: &mut Criterion) {
    if !wanted("w3") {
        return;
    }
    let n = records("ZRING_BENCH_W3_RECORDS", zring_benches::W3_RECORDS, 5_000);
    let data = data::w3(n, SEED);
    let dir = scratch_dir();
    let dict = stores::ragged_dict(&data).expect("training the W3 dictionary");
    let mut built = Vec::new();
    for codec in [StoreCodec::Raw, StoreCodec::ZstdDict] {
        let path = dir.path().join(format!("w3-{}.zr", codec.name()));
        let t = Instant::now();
        stores::write_ragged(&path, &data, stores::write_options(codec, 0, Some(&dict)))
            .expect("building the store");
        let build = t.elapsed();
        stores::warm(&path).expect("warming the page cache");
        print_store_meta(
            &format!("w3-{}", codec.name()),
            &open(&path, Backend::Mmap, 1),
            build,
        );
        built.push((codec, path));
    }

    for (codec, path) in &built {
        let gname = format!("gather_w3_{}", id(*codec));
        let mut group = c.benchmark_group(&gname);
        configure(&mut group, 20, 2, false);
        group.throughput(Throughput::Elements(BATCH as u64));
        for backend in backends() {
            for threads in THREADS {
                let name = format!("{}_t{threads}", backend.name());
                let store = open(path, backend, threads);
                let mut b = batches(n);
                let idx = b.next_batch().to_vec();
                let got = store.gather_ragged(&idx).expect("ragged gather");
                check_ragged(&name, &data, &idx, &got.values);
                bench(&mut group, &gname, &name, |bench| {
                    bench.iter_custom(|iters| {
                        time_batches(iters, &mut b, |idx| {
                            black_box(store.gather_ragged(idx).expect("ragged gather"));
                        })
                    })
                });
            }
        }
        group.finish();
    }

    let gname = "baseline_w3".to_string();
    let mut group = c.benchmark_group(&gname);
    configure(&mut group, 20, 2, false);
    group.throughput(Throughput::Elements(BATCH as u64));
    let frames = Frames::load(&open(&built[1].1, Backend::Mmap, 1)).expect("zstd-dict frames");
    let mut dctx =
        zstd::bulk::Decompressor::with_dictionary(&frames.dictionary).expect("zstd context");
    let mut dst = AlignedBuf::new(BATCH * data::W3_MAX_LEN * 4, DEFAULT_ALIGN).expect("buffer");
    let mut b = batches(n);
    let idx = b.next_batch().to_vec();
    let len = baselines::zstd_decode_gather(&frames, &mut dctx, &idx, &mut dst).expect("decode");
    check_ragged("zstd-dict decode", &data, &idx, &dst[..len]);
    bench(&mut group, &gname, "zstd_dict_decode_t1", |bench| {
        bench.iter_custom(|iters| {
            time_batches(iters, &mut b, |idx| {
                let len = baselines::zstd_decode_gather(&frames, &mut dctx, idx, &mut dst)
                    .expect("decode");
                black_box(&dst[..len]);
            })
        })
    });
    group.finish();
}

criterion_group!(benches, bench_w1, bench_w2, bench_w3);
criterion_main!(benches);

//! W7: building stores from in-memory arrays, the whole `Writer::create` .. `close`
//! (every fsync and the publish included), logical bytes/s, with same-run baselines:
//!
//! - `write_w{1,2}/raw`, `zstd_t1`, `zstd_t2`, `zstd_dict_t2` (zstd level 3; `tN` is
//!   `WriteOptions.threads`; raw uses all cores, though it has nothing to compute).
//! - `baseline_write_w{1,2}/zstd_compress_t1`: zstd-3 of the same records in a loop,
//!   one thread (the single-core compress limit); `write_fsync_t1`: one sequential
//!   `write` of the same bytes to a new file plus `fsync` (the device limit).
//!
//! Sizes (smaller than the gather sets so that a zstd-3 write on one core stays under
//! a second): `ZRING_BENCH_W7_W1_RECORDS` (default 512 = 73.5 MiB) and
//! `ZRING_BENCH_W7_W2_RECORDS` (default 32,768 = 64 MiB); 32 / 2,048 under `cargo test`.

mod common;

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use zring_benches::{baselines, data, stores, Dense, StoreCodec, SEED};
use zring_engine::{ReadOptions, Store};

use common::{bench, configure, records, scratch_dir, wanted};

/// Writes with `write`, `iters` times, and returns the total time.
fn time_writes(iters: u64, mut write: impl FnMut()) -> Duration {
    let t = Instant::now();
    for _ in 0..iters {
        write();
    }
    t.elapsed()
}

fn bench_writes(c: &mut Criterion, tag: &str, data: &Dense) {
    let dir = scratch_dir();
    let path = dir.path().join(format!("{tag}.zr"));
    let n = data.len();
    let dict = stores::dense_dict(data, n).expect("training the dictionary");
    let cases = [
        ("raw", StoreCodec::Raw, 0),
        ("zstd_t1", StoreCodec::Zstd, 1),
        ("zstd_t2", StoreCodec::Zstd, 2),
        ("zstd_dict_t2", StoreCodec::ZstdDict, 2),
    ];

    let gname = format!("write_{tag}");
    let mut group = c.benchmark_group(&gname);
    configure(&mut group, 10, 3, true);
    group.throughput(Throughput::Bytes(data.bytes.len() as u64));
    for (name, codec, threads) in cases {
        let opts = stores::write_options(codec, threads, Some(&dict));
        // Correctness before timing: the written store reads back the source records.
        stores::write_dense(&path, data, n, opts.clone()).expect("writing the store");
        let store = Store::open(&path, ReadOptions::default()).expect("opening the store");
        let idx: Vec<u64> = (0..n as u64).step_by(n.div_ceil(64).max(1)).collect();
        let got = store.gather_vec(&idx).expect("gather");
        for (&i, rec) in idx.iter().zip(got.chunks_exact(data.item_bytes)) {
            assert!(rec == data.record(i as usize), "{name}: record {i} differs");
        }
        let stats = store.stats().expect("stats");
        println!(
            "ZRING_META {{\"store\": \"w7-{tag}-{name}\", \"records\": {n}, \"logical_bytes\": {}, \"stored_bytes\": {}, \"file_bytes\": {}}}",
            stats.logical_bytes, stats.stored_bytes, stats.file_bytes
        );
        drop(store);
        bench(&mut group, &gname, name, |b| {
            b.iter_custom(|iters| {
                time_writes(iters, || {
                    stores::write_dense(&path, data, n, opts.clone()).expect("writing the store");
                })
            })
        });
    }
    group.finish();

    let gname = format!("baseline_write_{tag}");
    let mut group = c.benchmark_group(&gname);
    configure(&mut group, 10, 3, true);
    group.throughput(Throughput::Bytes(data.bytes.len() as u64));
    let mut cctx = zstd::bulk::Compressor::new(stores::ZSTD_LEVEL).expect("zstd context");
    let mut scratch = Vec::new();
    bench(&mut group, &gname, "zstd_compress_t1", |b| {
        b.iter_custom(|iters| {
            time_writes(iters, || {
                let records = (0..n).map(|i| data.record(i));
                black_box(
                    baselines::zstd_compress_records(records, &mut cctx, &mut scratch)
                        .expect("compress"),
                );
            })
        })
    });
    let plain = dir.path().join(format!("{tag}.bin"));
    baselines::write_fsync(&plain, &data.bytes).expect("plain write");
    assert!(std::fs::read(&plain).expect("read back") == data.bytes);
    bench(&mut group, &gname, "write_fsync_t1", |b| {
        b.iter_custom(|iters| {
            time_writes(iters, || {
                baselines::write_fsync(&plain, &data.bytes).expect("plain write");
            })
        })
    });
    group.finish();
}

fn bench_w1(c: &mut Criterion) {
    if !wanted("w1") {
        return;
    }
    let n = records("ZRING_BENCH_W7_W1_RECORDS", 512, 32);
    bench_writes(c, "w1", &data::w1(n, SEED));
}

fn bench_w2(c: &mut Criterion) {
    if !wanted("w2") {
        return;
    }
    let n = records("ZRING_BENCH_W7_W2_RECORDS", 32_768, 2_048);
    bench_writes(c, "w2", &data::w2(n, SEED));
}

criterion_group!(benches, bench_w1, bench_w2);
criterion_main!(benches);

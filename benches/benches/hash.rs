//! The checksum's cost against the copy it checks, one thread, records hot in cache:
//! `hash_{w1,w2,w3}/copy` (copy only), `copy_then_portable` (copy, then
//! `xxhash-rust`'s XXH3 as compiled for the target: SSE2 on baseline x86-64),
//! `copy_then_dispatched` (copy, then the platform's runtime-dispatched XXH3: AVX2
//! where the CPU has it), `copy_and_hash` (the fused one-pass copy and hash the
//! raw read path uses), and the ceilings `hash_hot` / `copy_hot` (one record hashed /
//! copied over and over, so it never leaves L1/L2). Record sizes: W1 150,528 bytes, W2 2,048, W3 520 (a median
//! W3 sequence of 130 int32). Bytes/s of records copied.
//!
//! Before anything is timed, every record is checked: each copy (plain and fused)
//! equals its source, and the fused hash, the dispatched hash and the portable hash
//! agree on it, so a copy or hash that went wrong fails the run instead of being timed.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};

/// Records per iteration: enough that a batch of W1 records (36 MiB) leaves the cache
/// the way a gather's batch does.
const BATCH: usize = 256;

/// Checks every path the group times on each `len`-byte record of `src`: the plain
/// and the fused copy leave the destination equal to the source, and the fused,
/// dispatched and portable hashes give the same value. `xxhash-rust` (the portable
/// one) is the reference: the other two are this crate's own SIMD code.
fn check(name: &str, src: &[u8], len: usize) {
    for (i, s) in src.chunks_exact(len).enumerate() {
        let mut copied = vec![0u8; len];
        copied.copy_from_slice(s);
        assert!(
            copied == s,
            "{name}: record {i}: copy differs from its source"
        );
        let portable = zring_platform::xxh3_64_portable(s);
        let dispatched = zring_platform::xxh3_64(s);
        assert_eq!(
            dispatched, portable,
            "{name}: record {i}: dispatched hash differs from the portable one"
        );
        let mut fused = vec![0u8; len];
        let fused_hash = zring_platform::copy_and_hash(s, &mut fused);
        assert!(
            fused == s,
            "{name}: record {i}: copy_and_hash's copy differs from its source"
        );
        assert_eq!(
            fused_hash, portable,
            "{name}: record {i}: copy_and_hash's hash differs from the portable one"
        );
    }
}

fn bench_size(c: &mut Criterion, name: &str, len: usize) {
    let src: Vec<u8> = (0..len * BATCH)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761) as u8)
        .collect();
    check(name, &src, len);
    let mut dst = vec![0u8; len * BATCH];
    let mut g = c.benchmark_group(name);
    g.throughput(Throughput::Bytes((len * BATCH) as u64));
    let pairs = |dst: &mut Vec<u8>, f: &mut dyn FnMut(&[u8], &mut [u8]) -> u64| {
        let mut acc = 0u64;
        for (s, d) in src.chunks_exact(len).zip(dst.chunks_exact_mut(len)) {
            acc ^= f(s, d);
        }
        acc
    };
    g.bench_function("copy", |b| {
        b.iter(|| {
            pairs(&mut dst, &mut |s, d| {
                d.copy_from_slice(s);
                0
            })
        })
    });
    g.bench_function("copy_then_portable", |b| {
        b.iter(|| {
            pairs(&mut dst, &mut |s, d| {
                d.copy_from_slice(s);
                zring_platform::xxh3_64_portable(black_box(d))
            })
        })
    });
    g.bench_function("copy_then_dispatched", |b| {
        b.iter(|| {
            pairs(&mut dst, &mut |s, d| {
                d.copy_from_slice(s);
                zring_platform::xxh3_64(black_box(d))
            })
        })
    });
    g.bench_function("copy_and_hash", |b| {
        b.iter(|| pairs(&mut dst, &mut |s, d| zring_platform::copy_and_hash(s, d)))
    });
    // The ceiling: one record hashed `BATCH` times, so it stays in L1/L2. No copy can
    // be checked faster than this, whatever the read path does.
    let hot = &src[..len];
    g.bench_function("hash_hot", |b| {
        b.iter(|| {
            let mut acc = 0u64;
            for _ in 0..BATCH {
                acc ^= zring_platform::xxh3_64(black_box(hot));
            }
            acc
        })
    });
    // Copying that hot record as often: against `hash_hot`, the least a check can
    // cost relative to a copy served from cache.
    let mut hot_dst = vec![0u8; len];
    g.bench_function("copy_hot", |b| {
        b.iter(|| {
            for _ in 0..BATCH {
                hot_dst.copy_from_slice(black_box(hot));
            }
            black_box(&hot_dst);
        })
    });
    g.finish();
}

fn benches(c: &mut Criterion) {
    eprintln!(
        "hash: AVX2 path in use: {}",
        zring_platform::xxh3_uses_avx2()
    );
    bench_size(c, "hash_w1", 150_528);
    bench_size(c, "hash_w2", 2048);
    bench_size(c, "hash_w3", 520);
}

criterion_group! {
    name = group;
    config = Criterion::default().sample_size(20).measurement_time(std::time::Duration::from_secs(2)).warm_up_time(std::time::Duration::from_millis(500));
    targets = benches
}
criterion_main!(group);

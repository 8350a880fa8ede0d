//! Per-index cost of `Sampler::fill` against a `rand` baseline filling the
//! same buffer in the same run.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use zring_sampler::{Mixture, Mode, Sampler};

const N: u64 = 1_000_000;
const BATCHES: [usize; 3] = [256, 1024, 8192];

/// Before timing: `fill` writes what the sampler promises. Every index is in range and
/// equals `batch(step)`; sequential steps are consecutive; a cyclic epoch's steps never
/// repeat an index.
fn check(sampler: &Sampler, mode: Mode, batch: usize) {
    let steps = (N as usize / batch).min(32) as u64;
    let mut seen = std::collections::HashSet::new();
    let mut out = vec![0u64; batch];
    for step in 0..steps {
        sampler.fill(step, &mut out).expect("right length");
        assert_eq!(out, sampler.batch(step), "{mode:?} fill and batch differ");
        assert!(out.iter().all(|&i| i < N), "{mode:?}: index out of range");
        match mode {
            Mode::Sequential => {
                let first = step * batch as u64;
                assert!(out
                    .iter()
                    .enumerate()
                    .all(|(k, &i)| i == (first + k as u64) % N));
            }
            Mode::Cyclic => assert!(out.iter().all(|&i| seen.insert(i)), "cyclic repeat"),
            _ => {}
        }
    }
}

fn bench_modes(c: &mut Criterion) {
    for mode in [Mode::Iid, Mode::Cyclic, Mode::Sequential] {
        let mut group = c.benchmark_group(mode.as_str());
        for batch in BATCHES {
            let sampler = Sampler::new(N, batch, mode, 0x5eed).expect("valid sampler");
            check(&sampler, mode, batch);
            let mut out = vec![0u64; batch];
            let mut step = 0u64;
            group.throughput(Throughput::Elements(batch as u64));
            group.bench_function(BenchmarkId::from_parameter(batch), |b| {
                b.iter(|| {
                    sampler
                        .fill(black_box(step), &mut out)
                        .expect("right length");
                    step += 1;
                    black_box(&out);
                })
            });
        }
        group.finish();
    }
}

fn bench_rand_baseline(c: &mut Criterion) {
    let mut group = c.benchmark_group("rand_smallrng");
    for batch in BATCHES {
        let mut rng = SmallRng::seed_from_u64(0x5eed);
        let mut out = vec![0u64; batch];
        group.throughput(Throughput::Elements(batch as u64));
        group.bench_function(BenchmarkId::from_parameter(batch), |b| {
            b.iter(|| {
                for slot in out.iter_mut() {
                    *slot = rng.gen_range(0..black_box(N));
                }
                black_box(&out);
            })
        });
    }
    group.finish();
}

/// A mixture's batch of positions to records (three sources, scattered positions
/// as a shuffled plan gives them) against one source's cyclic fill of as many
/// records: what mixing costs per record on top of sampling.
fn bench_mixture(c: &mut Criterion) {
    let mixture = Mixture::new(
        &[500_000, 300_000, 200_000],
        &[0.5, 0.3, 0.2],
        Mode::Cyclic,
        7,
    )
    .expect("valid mixture");
    let batch = 256usize;
    let plan = Sampler::new(N, batch, Mode::Cyclic, 3).expect("valid sampler");
    let mut positions = vec![0u64; batch];
    let mut out = vec![0u64; batch];
    let mut group = c.benchmark_group("mixture");
    group.throughput(Throughput::Elements(batch as u64));
    let mut step = 0u64;
    group.bench_function(BenchmarkId::new("fill_indices", batch), |b| {
        b.iter(|| {
            plan.fill(step, &mut positions).expect("right length");
            mixture
                .fill_indices(black_box(&positions), &mut out)
                .expect("in range");
            step += 1;
            black_box(&out);
        })
    });
    let mut step = 0u64;
    group.bench_function(BenchmarkId::new("one_source_fill", batch), |b| {
        b.iter(|| {
            plan.fill(step, &mut positions).expect("right length");
            step += 1;
            black_box(&positions);
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    // Short runs: the machine has two shared cores.
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
        .sample_size(50);
    targets = bench_modes, bench_rand_baseline, bench_mixture
}
criterion_main!(benches);

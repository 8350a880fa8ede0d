//! `Mode::Sequential`: `(t*B + i) mod N`, exact for every step.

use zring_sampler::{Mode, Sampler};

fn sequential(n: u64, batch: usize) -> Sampler {
    Sampler::new(n, batch, Mode::Sequential, 0).expect("valid sampler")
}

/// `(t*B + i) mod N` in u128, the definition itself.
fn reference(n: u64, batch: usize, step: u64, i: usize) -> u64 {
    ((u128::from(step) * batch as u128 + i as u128) % u128::from(n)) as u64
}

#[test]
fn walks_the_records_in_order_and_wraps() {
    let s = sequential(10, 4);
    assert_eq!(s.batch(0), [0, 1, 2, 3]);
    assert_eq!(s.batch(1), [4, 5, 6, 7]);
    assert_eq!(s.batch(2), [8, 9, 0, 1]);
    // N < B wraps inside one batch.
    assert_eq!(sequential(3, 7).batch(1), [1, 2, 0, 1, 2, 0, 1]);
    assert_eq!(sequential(1, 3).batch(u64::MAX), [0, 0, 0]);
}

#[test]
fn exact_for_huge_steps() {
    let steps = [
        u64::MAX,
        u64::MAX - 1,
        1 << 63,
        (1 << 63) - 1,
        0xDEAD_BEEF_CAFE_F00D,
    ];
    let sizes = [
        1,
        2,
        7,
        1_000_000,
        (1 << 40) + 3,
        (1 << 63) + 1,
        u64::MAX - 1,
        u64::MAX,
    ];
    for n in sizes {
        for batch in [1, 3, 1000, 4096] {
            let s = sequential(n, batch);
            for step in steps {
                let got = s.batch(step);
                let want: Vec<u64> = (0..batch).map(|i| reference(n, batch, step, i)).collect();
                assert_eq!(got, want, "n {n} batch {batch} step {step}");
            }
        }
    }
}

/// A global batch of 2^40 positions (only a 4-index shard is materialized)
/// at the last step: positions near 2^104 stay exact.
#[test]
fn exact_for_huge_global_batches() {
    let batch = 1usize << 40;
    let world = 1usize << 38;
    for n in [7u64, 1_000_003, u64::MAX] {
        for rank in [0, 1, world - 1] {
            let s = sequential(n, batch)
                .shard(rank, world)
                .expect("valid shard");
            assert_eq!(s.batch_size(), 4);
            for step in [0, 12_345, u64::MAX] {
                let want: Vec<u64> = (0..4)
                    .map(|i| reference(n, batch, step, rank * 4 + i))
                    .collect();
                assert_eq!(s.batch(step), want, "n {n} rank {rank} step {step}");
            }
        }
    }
}

//! `Mode::Cyclic`: every cycle a fresh permutation, the remainder rule, and
//! sampled checks on a dataset too large to enumerate.

mod common;

use std::collections::HashSet;

use common::{chi_square, chi_square_critical, positions, TestRng};
use zring_sampler::{Mode, Sampler};

fn cyclic(n: u64, batch: usize, seed: u64) -> Sampler {
    Sampler::new(n, batch, Mode::Cyclic, seed).expect("valid sampler")
}

fn sorted(mut v: Vec<u64>) -> Vec<u64> {
    v.sort_unstable();
    v
}

/// Records of cycle `c`: stream positions `[c*n, (c+1)*n)`.
fn cycle_of(s: &Sampler, c: u128) -> Vec<u64> {
    let n = s.len();
    positions(s, c * u128::from(n), n as usize)
}

#[test]
fn every_cycle_is_a_permutation() {
    for n in [1u64, 2, 3, 7, 10, 16, 17, 1000, 65537] {
        for seed in [0, 1, 0xDEAD_BEEF] {
            // Batch sizes that divide n, that don't, and that exceed it
            // (tiny batches cost a key derivation per index in debug builds,
            // so the largest n uses larger ones).
            let batches: &[usize] = if n > 1000 { &[7, 1000] } else { &[1, 3, 64] };
            for &batch in batches {
                let s = cyclic(n, batch, seed);
                // The last whole cycle that u64 steps reach, as well as the first.
                let last = (u128::from(u64::MAX) * batch as u128) / u128::from(n) - 1;
                let cycles: &[u128] = if n > 1000 {
                    &[0, 1, last]
                } else {
                    &[0, 1, 2, last]
                };
                for &c in cycles {
                    let want: Vec<u64> = (0..n).collect();
                    assert_eq!(
                        sorted(cycle_of(&s, c)),
                        want,
                        "n {n} seed {seed} batch {batch} cycle {c}"
                    );
                }
            }
        }
    }
}

#[test]
fn batches_cover_each_record_once_per_cycle_when_batch_divides_len() {
    for (n, batch) in [(1000u64, 100usize), (1000, 8), (16, 16), (17, 1)] {
        let s = cyclic(n, batch, 5);
        let per_cycle = n / batch as u64;
        for c in 0..3 {
            let group: Vec<u64> = (c * per_cycle..(c + 1) * per_cycle)
                .flat_map(|t| s.batch(t))
                .collect();
            assert_eq!(
                sorted(group),
                (0..n).collect::<Vec<_>>(),
                "n {n} batch {batch} cycle {c}"
            );
        }
    }
}

#[test]
fn different_cycles_use_different_permutations() {
    for seed in [0, 3, 99] {
        let s = cyclic(1000, 100, seed);
        let cycles: Vec<Vec<u64>> = (0..6).map(|c| cycle_of(&s, c)).collect();
        for (i, a) in cycles.iter().enumerate() {
            for b in &cycles[i + 1..] {
                // Two independent permutations agree at about 1 of 1000 offsets.
                let same = a.iter().zip(b).filter(|(x, y)| x == y).count();
                assert!(same < 10, "seed {seed}: cycles agree at {same} offsets");
            }
        }
    }
}

#[test]
fn different_seeds_use_different_permutations() {
    let a = cycle_of(&cyclic(1000, 10, 1), 0);
    let b = cycle_of(&cyclic(1000, 10, 2), 0);
    assert!(a.iter().zip(&b).filter(|(x, y)| x == y).count() < 10);
}

/// N = 10, B = 4: N mod B = 2, so even cycles end in a batch that also
/// holds the head of the next cycle. Those "leftover" records (what a
/// drop-last loader would skip) come from a fresh permutation each time,
/// so they change between cycles and every record takes a turn.
#[test]
fn leftover_records_rotate_between_cycles() {
    let (n, b) = (10u64, 4u128);
    let s = cyclic(n, b as usize, 11);
    let mut leftovers = Vec::new();
    for c in 0..40u128 {
        let end = (c + 1) * u128::from(n); // first position of cycle c + 1
        if end % b == 0 {
            continue; // cycle c ends on a batch boundary
        }
        let batch_start = end - end % b;
        let tail = positions(&s, batch_start, (end - batch_start) as usize);
        leftovers.push(sorted(tail));
    }
    assert_eq!(leftovers.len(), 20);
    let distinct: HashSet<&Vec<u64>> = leftovers.iter().collect();
    assert!(
        distinct.len() > 10,
        "leftover sets barely change: {distinct:?}"
    );
    let seen: HashSet<u64> = leftovers.iter().flatten().copied().collect();
    assert_eq!(seen.len(), n as usize, "some record is never a leftover");
}

/// Every batch is full; with B <= N a record appears at most twice in one
/// batch (once from each cycle it straddles), and does so somewhere.
#[test]
fn straddling_batches_repeat_a_record_at_most_twice() {
    let (n, b) = (10u64, 7usize);
    let s = cyclic(n, b, 4);
    let mut max_seen = 0;
    for step in 0..2000 {
        let batch = s.batch(step);
        assert_eq!(batch.len(), b);
        let mut counts = [0u32; 10];
        for v in batch {
            counts[v as usize] += 1;
        }
        max_seen = max_seen.max(*counts.iter().max().expect("ten counters"));
    }
    assert_eq!(max_seen, 2);
}

/// N < B: a batch spans several cycles, so each record appears between
/// floor(B/N) - 1 and ceil(B/N) + 1 times in it.
#[test]
fn small_datasets_fill_batches_from_several_cycles() {
    let (n, b) = (7u64, 64usize);
    let s = cyclic(n, b, 8);
    for step in [0, 1, 2, 3, 1000, u64::MAX] {
        let mut counts = [0usize; 7];
        for v in s.batch(step) {
            counts[v as usize] += 1;
        }
        assert_eq!(counts.iter().sum::<usize>(), b);
        assert!(
            counts.iter().all(|&c| (8..=11).contains(&c)),
            "step {step}: {counts:?}"
        );
    }
    // N = 1 is the degenerate case: every index is 0.
    assert!(cyclic(1, 100, 0).batch(9).iter().all(|&v| v == 0));
}

/// N = 2^40 + 3 cannot be enumerated: check range and injectivity on 100k
/// offsets of cycle 0 (contiguous runs at random places plus scattered
/// single offsets), and that the values spread over the whole range.
#[test]
fn large_dataset_sampled_injectivity_and_range() {
    let n = (1u64 << 40) + 3;
    let runs = cyclic(n, 1000, 21);
    let single = cyclic(n, 1, 21);
    let mut rng = TestRng::from_state(5);
    let mut values = Vec::with_capacity(100_000);
    for _ in 0..50 {
        let start = rng.next_u64() % (n - 1000);
        values.extend(positions(&runs, u128::from(start), 1000));
    }
    for _ in 0..50_000 {
        values.push(single.batch(rng.next_u64() % n)[0]);
    }
    // Also the very last offsets of the cycle.
    values.extend(positions(&runs, u128::from(n) - 3, 3));
    let count = values.len();
    assert!(values.iter().all(|&v| v < n));
    let distinct: HashSet<u64> = values.iter().copied().collect();
    // The scattered offsets may repeat one another (or a run); the check is
    // that equal values come only from equal offsets, so count those.
    assert!(
        count - distinct.len() < 5,
        "{} collisions",
        count - distinct.len()
    );
    let mean = values.iter().map(|&v| v as f64).sum::<f64>() / count as f64;
    assert!(
        (mean / n as f64 - 0.5).abs() < 0.01,
        "mean at {:.4} of n",
        mean / n as f64
    );
    assert!(
        values.iter().any(|&v| v > n - n / 100),
        "top of the range never reached"
    );
}

#[test]
fn large_dataset_is_injective_on_distinct_offsets() {
    let n = (1u64 << 40) + 3;
    let s = cyclic(n, 1, 33);
    let mut rng = TestRng::from_state(6);
    let offsets: HashSet<u64> = (0..20_000).map(|_| rng.next_u64() % n).collect();
    let images: HashSet<u64> = offsets.iter().map(|&o| s.batch(o)[0]).collect();
    assert_eq!(images.len(), offsets.len());
}

/// Small-N quality: across cycles, the record at offset 0 and the ordered
/// pair at offsets (0, 1) are uniform, as for random permutations. Tiny
/// domains are where Feistel networks are weakest (see `feistel.rs`); for
/// larger N the records are grouped into 10 buckets.
#[test]
fn small_permutations_look_random_across_cycles() {
    let cycles = 20_000u64;
    for n in [3u64, 5, 7, 10, 17, 300, 1000] {
        let s = cyclic(n, 2, 12);
        let buckets = n.min(10);
        let bucket = |v: u64| v * buckets / n;
        let mut first = vec![0u64; buckets as usize];
        let mut pairs = vec![0u64; (buckets * buckets) as usize];
        let mut pair_probability = vec![0.0f64; pairs.len()];
        for c in 0..cycles {
            let pair = positions(&s, u128::from(c) * u128::from(n), 2);
            first[bucket(pair[0]) as usize] += 1;
            pairs[(bucket(pair[0]) * buckets + bucket(pair[1])) as usize] += 1;
        }
        // Exact expected pair frequencies for distinct records (a bucket
        // cannot hold a pair twice when it holds one record).
        let sizes: Vec<f64> = (0..buckets)
            .map(|b| (0..n).filter(|&v| bucket(v) == b).count() as f64)
            .collect();
        for (i, si) in sizes.iter().enumerate() {
            for (j, sj) in sizes.iter().enumerate() {
                let same = if i == j { 1.0 } else { 0.0 };
                pair_probability[i * buckets as usize + j] =
                    si * (sj - same) / (n * (n - 1)) as f64;
            }
        }
        let expected: Vec<f64> = sizes.iter().map(|s| s / n as f64 * cycles as f64).collect();
        let stat = chi_square(&first, &expected);
        assert!(
            stat < chi_square_critical(first.len() - 1),
            "n {n} first record: {stat:.1}"
        );
        let (observed, expected): (Vec<u64>, Vec<f64>) = pairs
            .iter()
            .zip(&pair_probability)
            .filter(|(_, &p)| p > 0.0)
            .map(|(&o, &p)| (o, p * cycles as f64))
            .unzip();
        assert_eq!(pairs.iter().sum::<u64>(), observed.iter().sum::<u64>());
        let stat = chi_square(&observed, &expected);
        assert!(
            stat < chi_square_critical(observed.len() - 1),
            "n {n} pairs: {stat:.1}"
        );
    }
}

/// Within one large cycle, consecutive records are not correlated.
#[test]
fn consecutive_records_are_independent_within_a_cycle() {
    let n = 1u64 << 20;
    let values = positions(&cyclic(n + 5, 4096, 13), 0, 100_000);
    let mut grid = vec![0u64; 256];
    for w in values.windows(2) {
        grid[((w[0] * 16 / (n + 5)) * 16 + w[1] * 16 / (n + 5)) as usize] += 1;
    }
    let e = vec![(values.len() - 1) as f64 / 256.0; 256];
    let stat = chi_square(&grid, &e);
    assert!(stat < chi_square_critical(255), "serial: {stat:.1}");
}

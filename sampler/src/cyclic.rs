//! `Mode::Cyclic`: draws without replacement, one keyed permutation per cycle.

use crate::feistel::{domain_bits, Feistel, ROUNDS, SMALL_DOMAIN_BITS, SMALL_ROUNDS};

/// Writes `perm_c(p mod n)` with `c = p / n` for the positions `p0, p0 + 1, ...`.
pub(crate) fn fill(n: u64, seed: u64, p0: u128, out: &mut [u64]) {
    if domain_bits(n) <= SMALL_DOMAIN_BITS {
        fill_rounds::<SMALL_ROUNDS>(n, seed, p0, out);
    } else {
        fill_rounds::<ROUNDS>(n, seed, p0, out);
    }
}

/// The round keys are derived once per cycle touched by the call (one per
/// call unless the batch crosses a cycle boundary), never per index.
fn fill_rounds<const R: usize>(n: u64, seed: u64, p0: u128, out: &mut [u64]) {
    let wide_n = u128::from(n);
    let mut cycle = p0 / wide_n;
    let mut offset = (p0 % wide_n) as u64;
    let mut rest = out;
    while !rest.is_empty() {
        // `offset < n`, so at least one slot is taken each pass.
        let take = (n - offset).min(rest.len() as u64) as usize;
        let (head, tail) = rest.split_at_mut(take);
        Feistel::<R>::new(n, seed, cycle).fill(offset, head);
        rest = tail;
        offset = 0;
        // The last position is below 2^128 - 2^64, so `cycle + 1` fits.
        cycle += 1;
    }
}

/// Writes `perm_c(p mod n)` with `c = p / n` for each of `positions`, in any
/// order: the positions of each cycle touched (usually one or two per call)
/// permuted together, with that cycle's round keys derived once.
pub(crate) fn fill_at(n: u64, seed: u64, positions: &[u128], out: &mut [u64]) {
    if domain_bits(n) <= SMALL_DOMAIN_BITS {
        fill_at_rounds::<SMALL_ROUNDS>(n, seed, positions, out);
    } else {
        fill_at_rounds::<ROUNDS>(n, seed, positions, out);
    }
}

fn fill_at_rounds<const R: usize>(n: u64, seed: u64, positions: &[u128], out: &mut [u64]) {
    let wide_n = u128::from(n);
    // Each slot's cycle; the offsets go into `out`, permuted in place below.
    let mut cycles = Vec::with_capacity(positions.len());
    for (&p, slot) in positions.iter().zip(out.iter_mut()) {
        // A 64-bit division where the position fits (a 128-bit one costs several
        // times more, and this runs once per record).
        let (cycle, offset) = match u64::try_from(p) {
            Ok(p) => (u128::from(p / n), p % n),
            Err(_) => (p / wide_n, (p % wide_n) as u64),
        };
        cycles.push(cycle);
        *slot = offset;
    }
    let Some(&first) = cycles.first() else {
        return;
    };
    if cycles.iter().all(|&c| c == first) {
        Feistel::<R>::new(n, seed, first).fill_offsets(out);
        return;
    }
    let mut distinct = cycles.clone();
    distinct.sort_unstable();
    distinct.dedup();
    let mut slots = Vec::new();
    let mut buf = Vec::new();
    for cycle in distinct {
        slots.clear();
        buf.clear();
        for (k, &c) in cycles.iter().enumerate() {
            if c == cycle {
                slots.push(k);
                buf.push(out[k]);
            }
        }
        Feistel::<R>::new(n, seed, cycle).fill_offsets(&mut buf);
        for (&k, &record) in slots.iter().zip(&buf) {
            out[k] = record;
        }
    }
}

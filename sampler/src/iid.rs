//! `Mode::Iid`: uniform draws with replacement from a counter hash.
//!
//! Words come from a splitmix-style Weyl stream: the word at counter `c` is
//! `mum(s, s ^ K)` with `s = key + c * gamma` (wyrand's output function),
//! where `(key, gamma)` are derived from `(seed, c >> 64, round)`. Walking a
//! run of counters costs one add per word; the gamma depends on the seed, so
//! two seeds give two different sequences rather than shifted copies of one.
//!
//! Reduction to `[0, N)` is Lemire's multiply-shift with rejection, so every
//! `N` is exactly uniform:
//!
//! - `N < 2^32` (narrow): the word of counter `p / 2` gives its low 32 bits
//!   to position `p` when `p` is even and its high 32 bits when `p` is odd;
//!   each half is reduced with a 32x32->64 multiply. Sharing one
//!   64x64->128 hash multiply between two indices is what brings the cost
//!   under 1 ns/index: with a wide hash and a wide reduction per index it
//!   measured ~1.05 ns on the benchmark machine, against ~0.75 ns now.
//! - `N >= 2^32` (wide): the word of counter `p` is reduced with a
//!   64x64->128 multiply.
//!
//! A rejected position is redrawn from the wide word of counter `p` with
//! `round = 1, 2, ...` until accepted; rounds are independent, so the
//! accepted value stays uniform.

use crate::hash::{derive, gamma, mum, TAG_IID};

/// The Weyl stream of one `(seed, hi, round)`.
#[derive(Clone, Copy)]
struct Stream {
    key: u64,
    gamma: u64,
}

impl Stream {
    #[inline]
    fn new(seed: u64, hi: u64, round: u64) -> Self {
        let key = derive(seed, TAG_IID, hi, round);
        Self {
            key,
            gamma: gamma(key),
        }
    }

    /// The Weyl state of counter `lo`; `word` of it is the hash.
    #[inline(always)]
    fn at(self, lo: u64) -> u64 {
        self.key.wrapping_add(lo.wrapping_mul(self.gamma))
    }
}

/// wyrand's output function: one folded 64x64->128 multiply.
#[inline(always)]
fn word(state: u64) -> u64 {
    mum(state, state ^ 0xE703_7ED1_A0B4_28DB)
}

/// Draws `out.len()` indices for the positions `p0, p0 + 1, ...`.
pub(crate) fn fill(n: u64, seed: u64, p0: u128, out: &mut [u64]) {
    if let Ok(n) = u32::try_from(n) {
        fill_narrow(n, seed, p0, out);
    } else {
        fill_wide(n, seed, p0, out);
    }
}

/// How many counters from `lo` fit before `lo` wraps (which would change
/// the stream key), capped at `want`.
#[inline]
fn run_len(lo: u64, want: usize) -> usize {
    let room = u64::MAX - lo; // counters after `lo` with the same high word
    if (want as u64).saturating_sub(1) <= room {
        want
    } else {
        room as usize + 1
    }
}

/// Splits a 128-bit counter into the stream selector and the Weyl counter.
#[inline]
fn split(c: u128) -> (u64, u64) {
    ((c >> 64) as u64, c as u64)
}

fn fill_narrow(n: u32, seed: u64, p0: u128, out: &mut [u64]) {
    // 32-bit Lemire bound: `2^32 mod n`.
    let thresh = n.wrapping_neg() % n;
    let mut p = p0;
    let mut rest = out;
    // An odd start takes the high half of its pair's word alone.
    if p & 1 == 1 {
        if let Some((first, tail)) = std::mem::take(&mut rest).split_first_mut() {
            *first = narrow_one(n, thresh, seed, p);
            p += 1;
            rest = tail;
        }
    }
    while rest.len() >= 2 {
        let (hi, lo) = split(p >> 1);
        let pairs = run_len(lo, rest.len() / 2);
        let (head, tail) = rest.split_at_mut(pairs * 2);
        fill_pairs(n, thresh, seed, hi, lo, head);
        p += 2 * pairs as u128;
        rest = tail;
    }
    if let Some(last) = rest.first_mut() {
        *last = narrow_one(n, thresh, seed, p);
    }
}

/// Words hashed per block; they wait in a stack buffer between the passes.
const BLOCK_WORDS: usize = 128;

/// Writes the even/odd positions of the pair counters `lo, lo + 1, ...`.
///
/// Two passes per block: hash the words (one scalar 64x64->128 multiply
/// each), then split and reduce them (independent 32x32->64 multiplies,
/// which vectorize). The rejection checks of a block share one rarely
/// taken branch.
fn fill_pairs(n: u32, thresh: u32, seed: u64, hi: u64, lo: u64, out: &mut [u64]) {
    let stream = Stream::new(seed, hi, 0);
    let mut state = stream.at(lo);
    let mut q = lo;
    let mut buffer = [0u64; BLOCK_WORDS];
    for block in out.chunks_mut(2 * BLOCK_WORDS) {
        let words = &mut buffer[..block.len() / 2];
        for w in words.iter_mut() {
            *w = word(state);
            state = state.wrapping_add(stream.gamma);
        }
        let low = reduce_fast(n, words, block);
        if low < thresh {
            for (k, (pair, &w)) in block.chunks_exact_mut(2).zip(words.iter()).enumerate() {
                // `q + k` does not wrap: `run_len` ended the run before that.
                let m = [reduce32(w as u32, n), reduce32((w >> 32) as u32, n)];
                fix_pair(n, thresh, seed, hi, q + k as u64, m, pair);
            }
        }
        q = q.wrapping_add(words.len() as u64);
    }
}

/// [`reduce`], run as its AVX2 build on CPUs that have AVX2 (4 multiplies per
/// instruction); same output.
#[inline]
fn reduce_fast(n: u32, words: &[u64], out: &mut [u64]) -> u32 {
    zring_platform::with_avx2(
        #[inline(always)]
        || reduce(n, words, out),
    )
}

/// Writes the candidate indices of both halves of each word and returns
/// the smallest low product half (a rejection exists iff it is below the
/// threshold).
#[inline(always)]
fn reduce(n: u32, words: &[u64], out: &mut [u64]) -> u32 {
    let mut low = u32::MAX;
    for (pair, &w) in out.chunks_exact_mut(2).zip(words) {
        let m0 = reduce32(w as u32, n);
        let m1 = reduce32((w >> 32) as u32, n);
        pair[0] = m0 >> 32;
        pair[1] = m1 >> 32;
        low = low.min(m0 as u32).min(m1 as u32);
    }
    low
}

/// Redraws the rejected halves of pair counter `(hi, lo)`, whose positions
/// are `2q` and `2q + 1` with `q = hi * 2^64 + lo`.
#[cold]
#[inline(never)]
fn fix_pair(
    n: u32,
    thresh: u32,
    seed: u64,
    hi: u64,
    lo: u64,
    products: [u64; 2],
    pair: &mut [u64],
) {
    let q = (u128::from(hi) << 64) | u128::from(lo);
    for (j, (slot, m)) in pair.iter_mut().zip(products).enumerate() {
        if (m as u32) < thresh {
            *slot = redraw(n.into(), seed, 2 * q + j as u128);
        }
    }
}

/// The value of one narrow position, from scratch.
fn narrow_one(n: u32, thresh: u32, seed: u64, p: u128) -> u64 {
    let (hi, lo) = split(p >> 1);
    let h = word(Stream::new(seed, hi, 0).at(lo));
    let m = reduce32((h >> (32 * (p & 1) as u32)) as u32, n);
    if (m as u32) >= thresh {
        m >> 32
    } else {
        redraw(n.into(), seed, p)
    }
}

/// Lemire's 32-bit product: its high half is the candidate index, its low
/// half decides rejection.
#[inline(always)]
fn reduce32(x: u32, n: u32) -> u64 {
    u64::from(x) * u64::from(n)
}

fn fill_wide(n: u64, seed: u64, p0: u128, out: &mut [u64]) {
    // 64-bit Lemire bound: `2^64 mod n`.
    let thresh = n.wrapping_neg() % n;
    let wide_n = u128::from(n);
    let mut p = p0;
    let mut rest = out;
    while !rest.is_empty() {
        let (hi, lo) = split(p);
        let take = run_len(lo, rest.len());
        let (head, tail) = rest.split_at_mut(take);
        let stream = Stream::new(seed, hi, 0);
        let mut state = stream.at(lo);
        for (k, slot) in head.iter_mut().enumerate() {
            let m = u128::from(word(state)) * wide_n;
            state = state.wrapping_add(stream.gamma);
            *slot = if (m as u64) < thresh {
                redraw(n, seed, p + k as u128)
            } else {
                (m >> 64) as u64
            };
        }
        p += take as u128;
        rest = tail;
    }
}

/// Redraws position `p` with rounds 1, 2, ... until Lemire accepts.
///
/// Cold: a first draw is rejected with probability `(2^w mod n) / 2^w`
/// (`w` = 32 or 64), below `n / 2^w`, and each retry succeeds with
/// probability above 1/2.
#[cold]
#[inline(never)]
fn redraw(n: u64, seed: u64, p: u128) -> u64 {
    let (hi, lo) = split(p);
    let thresh = n.wrapping_neg() % n;
    let wide_n = u128::from(n);
    let mut round = 1u64;
    loop {
        let m = u128::from(word(Stream::new(seed, hi, round).at(lo))) * wide_n;
        if (m as u64) >= thresh {
            return (m >> 64) as u64;
        }
        round = round.wrapping_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::GOLDEN;

    /// The value of position `p` straight from the definition in the module
    /// docs, one position at a time.
    fn reference(n: u64, seed: u64, p: u128) -> u64 {
        if let Ok(n) = u32::try_from(n) {
            narrow_one(n, n.wrapping_neg() % n, seed, p)
        } else {
            let (hi, lo) = split(p);
            let m = u128::from(word(Stream::new(seed, hi, 0).at(lo))) * u128::from(n);
            if (m as u64) < n.wrapping_neg() % n {
                redraw(n, seed, p)
            } else {
                (m >> 64) as u64
            }
        }
    }

    fn check_runs(n: u64, starts: &[u128]) {
        for &p0 in starts {
            for len in [0, 1, 2, 3, 4, 5, 7, 64, 131] {
                let mut out = vec![u64::MAX; len];
                fill(n, 99, p0, &mut out);
                let want: Vec<u64> = (0..len).map(|i| reference(n, 99, p0 + i as u128)).collect();
                assert_eq!(out, want, "n = {n}, p0 = {p0}, len = {len}");
            }
        }
    }

    #[test]
    fn batch_fill_matches_the_per_position_definition() {
        // Includes starts where the 64-bit counter wraps inside the run:
        // 2^64 for wide counters, 2^65 (pair counter 2^64) for narrow ones.
        let starts = [0, 1, 5, (1 << 64) - 3, (1 << 65) - 5, u128::MAX / 2 - 3];
        // 2^31 + 1 and 2^63 + 1 reject about half of all first draws, so
        // the redraw paths run constantly there.
        for n in [
            1,
            2,
            7,
            1_000_000,
            (1 << 31) + 1,
            u32::MAX.into(),
            1 << 32,
            (1 << 63) + 1,
            u64::MAX,
        ] {
            check_runs(n, &starts);
        }
    }

    /// The AVX2 build of the reduction (used on this machine when it has
    /// AVX2) and the portable one agree.
    #[test]
    fn reduction_builds_agree() {
        let words: Vec<u64> = (0..BLOCK_WORDS as u64)
            .map(|i| word(i.wrapping_mul(GOLDEN)))
            .collect();
        for n in [1, 7, 1_000_000, (1 << 31) + 1, u32::MAX] {
            let (mut fast, mut portable) = ([0; 2 * BLOCK_WORDS], [0; 2 * BLOCK_WORDS]);
            let low = reduce_fast(n, &words, &mut fast);
            assert_eq!(low, reduce(n, &words, &mut portable), "n = {n}");
            assert_eq!(fast, portable, "n = {n}");
        }
    }

    #[test]
    fn rejection_heavy_sizes_stay_in_range() {
        for n in [(1u64 << 31) + 1, (1 << 63) + 1] {
            let mut out = vec![0; 10_000];
            fill(n, 5, 12_345, &mut out);
            assert!(out.iter().all(|&v| v < n));
        }
    }
}

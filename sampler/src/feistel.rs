//! A keyed bijection of `[0, N)` without an `N`-sized table.
//!
//! An unbalanced Feistel network permutes the `bits`-bit domain
//! `[0, 2^bits)`, `2^bits` being the smallest power of two `>= N` (but at
//! least 2^4); cycle walking (re-applying it until the value lands below
//! `N`) restricts it to `[0, N)`. Because `2^bits < 2N` for `N > 8`, the
//! expected number of applications per index is below 2 (about 1.05 for
//! `N = 1_000_000`).
//!
//! Tiny domains need more rounds: on 16 or 32 values, six rounds of this
//! round function give visibly non-uniform permutations (the pair test in
//! `tests/cyclic.rs` fails by 3-40x for N = 4..17), and on 8 values even
//! twelve rounds do. So domains hold at least 2^4 values, and domains of at
//! most 2^8 values use [`SMALL_ROUNDS`]; datasets that small are cheap to
//! walk and to permute twice as long.

use crate::hash::{derive, mix64, GOLDEN, TAG_CYCLIC};

/// Feistel rounds. Four leave a measurable avalanche bias with this cheap
/// round function (flipping one input bit flips some output bits far from
/// half the time); six do not.
pub(crate) const ROUNDS: usize = 6;

/// Rounds for domains of at most `2^SMALL_DOMAIN_BITS` values.
pub(crate) const SMALL_ROUNDS: usize = 12;
pub(crate) const SMALL_DOMAIN_BITS: u32 = 8;

/// The smallest domain is `2^MIN_BITS`: below that even twelve rounds leave
/// visible bias, and a walk over 16 values is still cheap.
const MIN_BITS: u32 = 4;

/// `bits` of the power-of-two domain used for `n` records.
pub(crate) fn domain_bits(n: u64) -> u32 {
    (u64::BITS - n.saturating_sub(1).leading_zeros()).max(MIN_BITS)
}

/// Offsets permuted side by side. The rounds of one offset form a serial
/// multiply chain; interleaving independent offsets lets the CPU overlap
/// them instead of waiting on each chain.
const LANES: usize = 8;

/// Slots whose walk is tracked at once; a stack array of this size holds
/// the pending slots, so walking allocates nothing.
const WALK_BLOCK: usize = 256;

/// The permutation of one cycle, with `R` (even) rounds.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Feistel<const R: usize> {
    n: u64,
    /// The low half `b` has `width_b = bits / 2` bits; the high half `a`
    /// gets the extra bit when `bits` is odd, which is all the unbalancing
    /// an odd width needs.
    width_b: u32,
    mask_b: u64,
    /// `64 - width` of each half: the round function keeps the top bits of
    /// its product, the best-mixed ones.
    shift_a: u32,
    shift_b: u32,
    xor: [u64; R],
    mul: [u64; R],
}

/// Where [`Feistel::fill_lanes`] takes its offsets from.
#[derive(Clone, Copy)]
enum Offsets {
    /// `first, first + 1, ...`.
    From(u64),
    /// The output slots themselves.
    InPlace,
}

impl<const R: usize> Feistel<R> {
    /// The permutation of `[0, n)` for `cycle` under `seed`; `n >= 1`.
    pub(crate) fn new(n: u64, seed: u64, cycle: u128) -> Self {
        const { assert!(R % 2 == 0, "rounds come in pairs") };
        let bits = domain_bits(n);
        let width_a = bits - bits / 2;
        let width_b = bits / 2;
        let mut state = derive(seed, TAG_CYCLIC, cycle as u64, (cycle >> 64) as u64);
        let mut next = || {
            state = state.wrapping_add(GOLDEN);
            mix64(state)
        };
        let mut xor = [0u64; R];
        let mut mul = [0u64; R];
        for (x, m) in xor.iter_mut().zip(&mut mul) {
            *x = next();
            *m = next() | 1;
        }
        Self {
            n,
            width_b,
            mask_b: (1u64 << width_b) - 1,
            shift_a: u64::BITS - width_a,
            shift_b: u64::BITS - width_b,
            xor,
            mul,
        }
    }

    /// Round `j`: multiply-shift hashing of the keyed half. The key's high
    /// bits enter the product too, so each round is a different function.
    #[inline(always)]
    fn round(&self, j: usize, half: u64) -> u64 {
        (half ^ self.xor[j]).wrapping_mul(self.mul[j])
    }

    /// One pass of the network over the power-of-two domain.
    #[inline(always)]
    pub(crate) fn permute(&self, x: u64) -> u64 {
        let mut a = x >> self.width_b;
        let mut b = x & self.mask_b;
        for j in (0..R).step_by(2) {
            a ^= self.round(j, b) >> self.shift_a;
            b ^= self.round(j + 1, a) >> self.shift_b;
        }
        (a << self.width_b) | b
    }

    /// [`permute`](Self::permute) of `LANES` values, round by round.
    #[inline(always)]
    fn permute_lanes(&self, x: [u64; LANES]) -> [u64; LANES] {
        let mut a = x.map(|v| v >> self.width_b);
        let mut b = x.map(|v| v & self.mask_b);
        for j in (0..R).step_by(2) {
            for (a, b) in a.iter_mut().zip(&b) {
                *a ^= self.round(j, *b) >> self.shift_a;
            }
            for (b, a) in b.iter_mut().zip(&a) {
                *b ^= self.round(j + 1, *a) >> self.shift_b;
            }
        }
        let mut y = [0u64; LANES];
        for ((y, a), b) in y.iter_mut().zip(a).zip(b) {
            *y = (a << self.width_b) | b;
        }
        y
    }

    /// Undoes [`permute`](Self::permute); only tests need it, to prove the
    /// network is a bijection on domains too large to enumerate.
    #[cfg(test)]
    pub(crate) fn unpermute(&self, y: u64) -> u64 {
        let mut a = y >> self.width_b;
        let mut b = y & self.mask_b;
        for j in (0..R).step_by(2).rev() {
            b ^= self.round(j + 1, a) >> self.shift_b;
            a ^= self.round(j, b) >> self.shift_a;
        }
        (a << self.width_b) | b
    }

    /// The record at `offset` (`< n`) of this cycle.
    ///
    /// Walking from a point inside `[0, n)` along the permutation's own cycle
    /// must come back into `[0, n)`, and does so at a point no other offset
    /// reaches first, so the result is again a bijection of `[0, n)`.
    #[cfg(test)]
    pub(crate) fn index(&self, offset: u64) -> u64 {
        let mut x = self.permute(offset);
        while x >= self.n {
            x = self.permute(x);
        }
        x
    }

    /// Writes the records at offsets `first, first + 1, ...` (all `< n`).
    ///
    /// On x86-64 CPUs with AVX2 the same code runs compiled for AVX2, where
    /// the lane loops become vector instructions (about 1.8x faster); the
    /// arithmetic, and so the output, is identical.
    pub(crate) fn fill(&self, first: u64, out: &mut [u64]) {
        self.dispatch(Offsets::From(first), out);
    }

    /// Replaces every offset of `out` (each `< n`, in any order) by its record:
    /// [`Feistel::fill`] for offsets that are not consecutive.
    pub(crate) fn fill_offsets(&self, out: &mut [u64]) {
        self.dispatch(Offsets::InPlace, out);
    }

    fn dispatch(&self, offsets: Offsets, out: &mut [u64]) {
        zring_platform::with_avx2(
            #[inline(always)]
            || self.fill_lanes(offsets, out),
        );
    }

    /// `index` for every slot, in two passes: a branch-free pass over all
    /// slots, then walks for the few that left `[0, n)`. A walk branch
    /// inside the first pass would be mispredicted on every rare walk and
    /// throw away the overlapped work of the neighbouring lanes.
    #[inline(always)]
    fn fill_lanes(&self, offsets: Offsets, out: &mut [u64]) {
        let mut chunks = out.chunks_exact_mut(LANES);
        let mut at = 0u64;
        for chunk in &mut chunks {
            let x = match offsets {
                Offsets::From(first) => std::array::from_fn(|l| first + at + l as u64),
                Offsets::InPlace => std::array::from_fn(|l| chunk[l]),
            };
            chunk.copy_from_slice(&self.permute_lanes(x));
            at += LANES as u64;
        }
        for slot in chunks.into_remainder() {
            let x = match offsets {
                Offsets::From(first) => first + at,
                Offsets::InPlace => *slot,
            };
            *slot = self.permute(x);
            at += 1;
        }
        for block in out.chunks_mut(WALK_BLOCK) {
            self.walk(block);
        }
    }

    /// Re-permutes every slot of `block` until it is below `n`.
    #[inline(always)]
    fn walk(&self, block: &mut [u64]) {
        let mut pending = [0u8; WALK_BLOCK];
        let mut count = 0;
        for (i, &y) in block.iter().enumerate() {
            pending[count] = i as u8; // i < WALK_BLOCK = 256
            count += usize::from(y >= self.n);
        }
        while count > 0 {
            // Compact in place: entry `kept` is overwritten only after entry
            // `i >= kept` has been read.
            let mut kept = 0;
            let mut i = 0;
            while i + LANES <= count {
                let slots: [u8; LANES] = std::array::from_fn(|l| pending[i + l]);
                let x = slots.map(|slot| block[usize::from(slot)]);
                for (slot, y) in slots.into_iter().zip(self.permute_lanes(x)) {
                    block[usize::from(slot)] = y;
                    pending[kept] = slot;
                    kept += usize::from(y >= self.n);
                }
                i += LANES;
            }
            for i in i..count {
                let slot = pending[i];
                let y = self.permute(block[usize::from(slot)]);
                block[usize::from(slot)] = y;
                pending[kept] = slot;
                kept += usize::from(y >= self.n);
            }
            count = kept;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bijection_on_power_of_two_domains<const R: usize>() {
        for bits in MIN_BITS..=14 {
            let n = 1u64 << bits;
            let f = Feistel::<R>::new(n, 42, u128::from(bits));
            let mut seen = vec![false; n as usize];
            for x in 0..n {
                let y = f.permute(x);
                assert!(y < n, "bits {bits}: {x} -> {y} leaves the domain");
                assert!(!seen[y as usize], "bits {bits}: {y} hit twice");
                seen[y as usize] = true;
                assert_eq!(f.unpermute(y), x);
            }
        }
    }

    #[test]
    fn network_is_a_bijection_of_every_small_domain() {
        bijection_on_power_of_two_domains::<ROUNDS>();
        bijection_on_power_of_two_domains::<SMALL_ROUNDS>();
    }

    #[test]
    fn network_inverts_on_the_full_64_bit_domain() {
        let f = Feistel::<ROUNDS>::new(u64::MAX, 7, u128::MAX);
        assert_eq!((f.width_b, f.shift_a, f.shift_b), (32, 32, 32));
        let mut x = 0x0123_4567_89ab_cdefu64;
        for _ in 0..10_000 {
            x = mix64(x.wrapping_add(GOLDEN));
            assert_eq!(f.unpermute(f.permute(x)), x);
        }
    }

    #[test]
    fn domain_sizes_and_half_widths() {
        for (n, bits) in [
            (1, 4),
            (16, 4),
            (17, 5),
            (1_000_000, 20),
            (1 << 40, 40),
            (u64::MAX, 64),
        ] {
            assert_eq!(domain_bits(n), bits, "n = {n}");
        }
        // An odd width gives the extra bit to the high half `a`.
        let f = Feistel::<ROUNDS>::new(17, 1, 0);
        assert_eq!((f.width_b, f.shift_a, f.shift_b), (2, 61, 62));
        let f = Feistel::<ROUNDS>::new(1, 1, 0);
        assert_eq!((f.width_b, f.shift_a, f.shift_b), (2, 62, 62));
    }

    fn batched_fill_equals_walk<const R: usize>(sizes: &[u64]) {
        for &n in sizes {
            for first in [0, n / 3, n.saturating_sub(700)] {
                let f = Feistel::<R>::new(n, 3, 9);
                let len = (n - first).min(600) as usize;
                let mut out = vec![0; len];
                f.fill(first, &mut out);
                let want: Vec<u64> = (first..).take(len).map(|o| f.index(o)).collect();
                assert_eq!(out, want, "n = {n}, first = {first}");
                let mut portable = vec![0; len];
                f.fill_lanes(Offsets::From(first), &mut portable);
                assert_eq!(portable, want, "portable path, n = {n}");
                // Offsets in any order, permuted in place, on both paths.
                let scattered: Vec<u64> =
                    (0..len as u64).map(|k| (k * 7_919 + first) % n).collect();
                let want: Vec<u64> = scattered.iter().map(|&o| f.index(o)).collect();
                let mut out = scattered.clone();
                f.fill_offsets(&mut out);
                assert_eq!(out, want, "scattered offsets, n = {n}");
                let mut portable = scattered;
                f.fill_lanes(Offsets::InPlace, &mut portable);
                assert_eq!(portable, want, "scattered offsets, portable path, n = {n}");
            }
        }
    }

    /// The lane and walk machinery must give exactly `index` per slot,
    /// including domains where most values need walking (n = 1, 2, 3).
    #[test]
    fn batched_fill_equals_per_index_walk() {
        batched_fill_equals_walk::<SMALL_ROUNDS>(&[1, 2, 3, 5, 17, 100, 257]);
        batched_fill_equals_walk::<ROUNDS>(&[257, 1000, (1 << 16) + 1, 1_000_000]);
    }

    /// Avalanche: flipping one input bit must flip each output bit about
    /// half the time. With four rounds of this round function the worst
    /// cell is off by ~0.08; six rounds give ~0.025, which is the noise of
    /// 4096 samples per cell (sigma 0.008) over 882 cells.
    #[test]
    fn six_rounds_avalanche_without_bias() {
        let bits = 21u32;
        let mut worst: f64 = 0.0;
        for cycle in 0..2u128 {
            let f = Feistel::<ROUNDS>::new(1 << bits, 11, cycle);
            let samples = 4096;
            let mut flips = vec![0u32; (bits * bits) as usize];
            let mut state = cycle as u64;
            for _ in 0..samples {
                state = state.wrapping_add(GOLDEN);
                let x = mix64(state) >> (64 - bits);
                let y = f.permute(x);
                for i in 0..bits {
                    let d = y ^ f.permute(x ^ (1 << i));
                    for o in 0..bits {
                        flips[(i * bits + o) as usize] += ((d >> o) & 1) as u32;
                    }
                }
            }
            for &c in &flips {
                worst = worst.max((f64::from(c) / f64::from(samples) - 0.5).abs());
            }
        }
        assert!(worst < 0.035, "avalanche bias {worst}");
    }
}

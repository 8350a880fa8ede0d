//! 64-bit mixing and key derivation shared by the random modes.
//!
//! Everything here is a pure function of its arguments: that is what lets a
//! batch be recomputed from `(seed, step)` alone.

/// The splitmix64 increment (2^64 / golden ratio, odd).
pub(crate) const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// Domain tags keep the key streams of different modes apart, so that the
/// same seed never reuses one mode's keys in another.
pub(crate) const TAG_IID: u64 = 0x6969_6400_0000_0001;
pub(crate) const TAG_CYCLIC: u64 = 0x6379_636c_6963_0002;
pub(crate) const TAG_MIXTURE: u64 = 0x6d69_7874_7572_0003;

/// The splitmix64 finalizer: a bijection on `u64` whose output bits each
/// depend on every input bit (it passes BigCrush as a counter hash).
#[inline(always)]
pub(crate) fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A 64-bit key for `(seed, tag, a, b)`.
///
/// Chaining the bijection `mix64` over the words means two different inputs
/// collide only like two random 64-bit values would.
#[inline]
pub(crate) fn derive(seed: u64, tag: u64, a: u64, b: u64) -> u64 {
    let h = mix64(seed ^ mix64(tag));
    let h = mix64(h.wrapping_add(GOLDEN) ^ a);
    mix64(h.wrapping_add(GOLDEN) ^ b)
}

/// An odd Weyl increment for a key, rejecting the sparse ones.
///
/// A Weyl sequence `s += gamma` fed to `mix64` is splitmix64; increments
/// with few bit transitions (like 1 or 0x5555..) leave visible structure, so
/// they are flipped the way Java's `SplittableRandom.mixGamma` does.
#[inline]
pub(crate) fn gamma(key: u64) -> u64 {
    let g = mix64(key) | 1;
    if (g ^ (g >> 1)).count_ones() < 24 {
        g ^ 0xAAAA_AAAA_AAAA_AAAA
    } else {
        g
    }
}

/// The folded 128-bit product (wyhash's `mum`): every input bit reaches
/// the middle of the product, and the fold brings it to both halves.
#[inline(always)]
pub(crate) fn mum(a: u64, b: u64) -> u64 {
    let m = u128::from(a) * u128::from(b);
    (m as u64) ^ ((m >> 64) as u64)
}

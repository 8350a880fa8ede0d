//! Deterministic bytes for tests: fixed seeds make every failure reproducible.

/// SplitMix64: a small, fast, well-mixed generator.
///
/// The benchmark workloads have their own splitmix64 (`zring::synth::rng`, in the
/// root crate) and this one does not reuse it, for the dependency direction: the root
/// crate's tests use this kit, so the kit cannot depend on the root crate (every
/// crate's tests would then build it, CLI and all), and the root crate cannot take a
/// normal dependency on a dev-only kit. Tests that want the benchmark data (W1-W3)
/// take it from `zring::synth`; this generator is for tests' own inputs, seeded with
/// `new(seed)` (or `from_state`) rather than per record.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed ^ 0x5851_F42D_4C95_7F2D)
    }

    /// A generator whose state is `state` as given (tests that fixed their inputs by
    /// the raw state keep them).
    pub fn from_state(state: u64) -> Self {
        Self(state)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0); the modulo bias is irrelevant for tests.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    pub fn usize_below(&mut self, n: usize) -> usize {
        self.below(n as u64) as usize
    }

    pub fn bool(&mut self) -> bool {
        self.next_u64() & 1 == 1
    }
}

/// A slow ramp with a little noise: compressible but not constant, different for
/// every seed.
pub fn ramp(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ((i / 7) as u8).wrapping_add((x & 3) as u8)
        })
        .collect()
}

/// Bytes that zstd shrinks well but that are not constant: phrases drawn from a
/// small vocabulary shared by every seed (so a trained dictionary helps too), with
/// a seed-dependent byte now and then.
pub fn compressible(n: usize, seed: u64) -> Vec<u8> {
    const VOCAB: [&[u8; 8]; 8] = [
        b"the quic",
        b"k brown ",
        b"fox jump",
        b"s over t",
        b"he lazy ",
        b"dog; 012",
        b"45678,9a",
        b"bcdefgh.",
    ];
    let mut r = Rng::new(seed);
    let mut out = Vec::with_capacity(n + 8);
    while out.len() < n {
        let w = r.next_u64();
        out.extend_from_slice(VOCAB[(w % 8) as usize]);
        if w % 5 == 0 {
            out.push((w >> 32) as u8);
        }
    }
    out.truncate(n);
    out
}

/// Uniformly random bytes: zstd cannot shrink them, so a writer keeps them raw.
pub fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut r = Rng::new(seed);
    let mut out = Vec::with_capacity(n + 8);
    while out.len() < n {
        out.extend_from_slice(&r.next_u64().to_le_bytes());
    }
    out.truncate(n);
    out
}

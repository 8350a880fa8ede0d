//! A tiny deterministic generator (splitmix64): the benchmark data must be the same
//! on every machine and every run, and must not depend on a `rand` version. The one
//! splitmix64 of zring's data: the test kit's generator (`zring_testkit::Rng`) is
//! this one, seeded its own way.

/// splitmix64's finaliser: a good 64-bit mix of `x`.
pub fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// splitmix64: one add and one mix per draw.
#[derive(Clone, Debug)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// A generator for stream `stream` of `seed` (e.g. one stream per record, so
    /// records can be generated in any order or in parallel with the same result).
    pub fn new(seed: u64, stream: u64) -> Self {
        Self {
            state: mix(seed ^ mix(stream.wrapping_add(0x9e37_79b9_7f4a_7c15))),
        }
    }

    /// A generator whose state is `state` as given: the draws are splitmix64's
    /// sequence after `state` (for callers with their own seeding, such as the test
    /// kit's `Rng::new(seed)`).
    pub fn from_state(state: u64) -> Self {
        Self { state }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix(self.state)
    }

    /// Uniform in `[0, 1)` with 53 random bits.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in `[0, n)` (multiply-shift; the bias is below 2^-32 for the small `n`
    /// used here, irrelevant for benchmark data).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_and_stream_give_the_same_draws() {
        let a: Vec<u64> = (0..8)
            .map({
                let mut r = Rng::new(1, 2);
                move |_| r.next_u64()
            })
            .collect();
        let mut r = Rng::new(1, 2);
        let b: Vec<u64> = (0..8).map(|_| r.next_u64()).collect();
        assert_eq!(a, b);
        let mut other = Rng::new(1, 3);
        assert_ne!(a[0], other.next_u64());
    }

    #[test]
    fn from_state_draws_splitmix64s_reference_sequence() {
        // splitmix64 (Steele, Lea and Flood 2014; Vigna's splitmix64.c) from state 0.
        let mut r = Rng::from_state(0);
        assert_eq!(r.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(r.next_u64(), 0x6e78_9e6a_a1b9_65f4);
        assert_eq!(r.next_u64(), 0x06c4_5d18_8009_454f);
    }

    #[test]
    fn below_and_unit_stay_in_range() {
        let mut r = Rng::new(7, 0);
        for _ in 0..10_000 {
            assert!(r.below(10) < 10);
            let u = r.unit();
            assert!((0.0..1.0).contains(&u));
        }
    }
}

//! Random choices as pure functions of `(seed, epoch, record)`.

/// The splitmix64 finalizer.
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A stream of uniform draws for one `(seed, epoch, record)`.
pub(crate) struct Draws {
    state: u64,
}

impl Draws {
    pub(crate) fn new(seed: u64, epoch: u64, record: u64) -> Self {
        let key = mix64(mix64(seed ^ 0x696d_6167_6500_0001) ^ epoch);
        Self {
            state: mix64(key ^ record.wrapping_mul(0x9E37_79B9_7F4A_7C15)),
        }
    }

    /// The next draw in `[0, 1)`, with 53 random bits.
    pub(crate) fn unit(&mut self) -> f64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        (mix64(self.state) >> 11) as f64 / (1u64 << 53) as f64
    }
}

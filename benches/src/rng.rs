//! The seeded splitmix64 of the benchmark data: [`zring::synth::rng`].

pub use zring::synth::rng::{mix, Rng};

//! The seeded splitmix64 of the benchmark data: [`zring_workloads::rng`].

pub use zring_workloads::rng::{mix, Rng};

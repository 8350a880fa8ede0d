//! What zring's tests (and benches) share, so each helper exists once:
//!
//! - [`alloc`]: counting every allocation, C libraries' included;
//! - [`data`]: deterministic record bytes (a seeded generator, compressible and
//!   incompressible bytes);
//! - [`skip`]: skipping a test whose OS feature is missing, loudly, or failing it
//!   when `ZRING_REQUIRE_URING=1` says the feature must work here;
//! - [`npy`]: writing `.npy` files;
//! - [`os`]: what the OS says about the process (locked memory, pinning limits);
//! - [`watchdog`]: turning a hang into a failure with a generous timeout, so tests
//!   assert events instead of durations.
//!
//! Forked children run through `zring_platform::run_forked` (one runner,
//! with a timeout). This crate depends on no zring crate, so every zring crate (platform included)
//! can use it from its tests without a dependency cycle.

pub mod alloc;
pub mod data;
pub mod npy;
pub mod os;
pub mod skip;
pub mod watchdog;

pub use data::{compressible, noise, ramp, Rng};
pub use skip::{require_uring, uring_required};
pub use watchdog::{watchdog, Watchdog};

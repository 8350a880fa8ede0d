//! What zring's tests (and benches) share, so each helper exists once:
//!
//! - [`alloc`]: counting every allocation, C libraries' included;
//! - [`data`]: deterministic record bytes (a seeded generator, compressible and
//!   incompressible bytes);
//! - [`skip`]: skipping a test whose OS feature is missing, loudly, or failing it
//!   when `ZRING_REQUIRE_URING=1` says the feature must work here;
//! - [`npy`]: writing `.npy` files;
//! - [`os`]: what the OS says about the process (locked memory, pinning limits), and
//!   limiting its address space;
//! - [`watchdog`]: turning a hang into a failure with a generous timeout, so tests
//!   assert events instead of durations;
//! - [`fork`]: running a closure in a forked child, with a timeout;
//! - [`child`]: re-running this test binary for one test in a fresh process.
//!
//! This crate depends on no zring crate, so every zring crate (platform included)
//! can use it from its tests without a dependency cycle.

pub mod alloc;
pub mod child;
pub mod data;
pub mod fork;
pub mod npy;
pub mod os;
pub mod skip;
pub mod watchdog;

pub use child::rerun_test;
pub use data::{compressible, noise, ramp, Rng};
#[cfg(unix)]
pub use fork::{child_succeeds, fork_during_first_use, run_forked, ChildEnd};
pub use skip::{require_uring, uring_required};
pub use watchdog::{watchdog, Watchdog};

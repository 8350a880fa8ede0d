//! zring: typed record stores read by random batched gathers at the speed of the hardware.
//!
//! This facade re-exports the workspace crates, and holds the `zring` command-line
//! tool ([`cli`]) and its `.npy` reader ([`npy`]).
pub use zring_engine as engine;
pub use zring_platform as platform;
pub use zring_sampler as sampler;

pub mod cli;
pub mod npy;

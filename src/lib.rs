//! zring: typed record stores read by random batched gathers at the speed of the hardware.
//!
//! This facade re-exports the workspace crates, holds the `.npy` reader ([`npy`]), the
//! generated workloads of the CLI and the benchmarks ([`synth`]), and
//! runs the `zring` command line ([`run_cli`]), which the `zring` binary
//! (`src/bin/zring.rs`) and the Python package's `zring` command both call. The
//! command's modules (`src/cli/`) are private: they are not the library's API.
//!
//! No `unsafe` here: the system calls and mappings it needs are zring-platform's
//! safe wrappers.
#![deny(unsafe_code)]

pub use zring_engine as engine;
pub use zring_platform as platform;
pub use zring_sampler as sampler;

mod cli;
pub mod npy;
pub mod synth;

/// Runs the `zring` command line on `args` (program name first); returns the exit status.
pub use cli::run_args as run_cli;

//! The soak (`src/bin/soak.rs`): the loader plus single-record gets from many threads,
//! for half an hour, over an O_DIRECT store several times the process's memory
//! limit, checking every byte read and that memory, file descriptors and threads
//! stay flat. docs/testing.md ("Soak") has the command and the recorded figures.
//!
//! - [`records`]: the store's records, recomputable from their index, and writing
//!   (or reusing) the store.
//! - [`cgroup`]: the memory limit (a cgroup v2 or v1 memory cgroup).
//! - [`procfs`]: RSS, file descriptors and threads from `/proc/self`.
//! - [`run`]: the readers, the loader and the sampling loop.
//! - [`stats`]: per-period figures, the end-of-run checks, the CSV files.
//! - [`plot`]: the SVG of latency per period and RSS over time.

pub mod cgroup;
pub mod plot;
pub mod procfs;
pub mod records;
pub mod run;
pub mod stats;

use std::path::PathBuf;

/// What can stop a soak (a wrong byte or a failed read does not stop it: they are
/// counted, reported and fail the run at the end).
#[derive(Debug, thiserror::Error)]
pub enum SoakError {
    #[error(transparent)]
    Engine(#[from] zring_engine::Error),
    #[error(transparent)]
    Loader(#[from] zring_loader::LoaderError),
    #[error(transparent)]
    Sampler(#[from] zring_sampler::SamplerError),
    #[error("{}: {what}: {source}", path.display())]
    Io {
        path: PathBuf,
        what: &'static str,
        source: std::io::Error,
    },
    #[error("{}: not a soak store ({reason}); remove it or pass another --store", path.display())]
    NotASoakStore { path: PathBuf, reason: String },
    #[error("{0}")]
    Wrong(String),
    #[error("drawing the plot: {0}")]
    Plot(String),
    #[error("{0}")]
    Usage(String),
}

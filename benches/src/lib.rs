//! zring's benchmark harness: deterministic workloads, store builders and the
//! same-run baselines the criterion benches in `benches/` compare against.
//!
//! - [`rng`]: a seeded splitmix64, so data is identical on every machine.
//! - [`data`]: the docs/workloads.md workloads W1 (image-like uint8[3,224,224]),
//!   W2 (int32[512] Zipf tokens) and W3 (ragged int32 sequences).
//! - [`stores`]: writing them as raw / zstd-3 / zstd-dict stores, warming the page
//!   cache, and reading back the stored frames.
//! - [`indices`]: fresh IID index batches (zring-sampler), drawn outside timing.
//! - [`baselines`]: memcpy, pread-loop, zstd decode/compress and write+fsync limits.
//! - [`load`]: how many cores other processes used while a bench ran.
//! - [`npy`]: `.npy` output for the NumPy baseline (`benches/npy_baseline.py`).
//! - [`soak`]: the half-hour soak of the loader and concurrent gets
//!   (`src/bin/soak.rs`).
//!
//! How to run everything and read the ratios: `benches/run.sh` and
//! docs/benchmarks.md.

pub mod baselines;
pub mod data;
pub mod indices;
pub mod load;
pub use zring_testkit::npy;
pub mod rng;
pub mod soak;
pub mod stores;

pub use data::{Dense, Ragged};
pub use indices::IidBatches;
pub use stores::{Frames, StoreCodec};

/// The seed of all benchmark data.
pub const SEED: u64 = 0x7a72_696e_6721;
/// Records per gather batch.
pub const BATCH: usize = 256;
/// Default workload sizes (docs/workloads.md).
pub const W1_RECORDS: usize = 2_000;
pub const W2_RECORDS: usize = 200_000;
pub const W3_RECORDS: usize = 200_000;

/// `default`, or the value of environment variable `var` when it is a positive
/// integer (e.g. `ZRING_BENCH_W1_RECORDS=1000` to shrink W1 on a small disk).
pub fn records_from_env(var: &str, default: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or(default)
}

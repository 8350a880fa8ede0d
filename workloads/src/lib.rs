//! zring's generated workloads, the one source of synthetic data: `zring bench`
//! (zring-cli, at run time), the criterion benches (`zring-benches`), the loader's
//! bench and the test kit's generator all draw from here, so a workload and its seed
//! mean the same bytes everywhere.
//!
//! A leaf crate: it depends on nothing of zring's (the test kit, which every zring
//! crate's tests use, builds on it without a dependency cycle). Records are bytes;
//! their store schema is the caller's (the dtype is named, NumPy's way, in
//! [`Dense::dtype`]).
//!
//! - [`rng`]: a seeded splitmix64 (no `rand` dependency: the data must be the same on
//!   every machine and every version), the one splitmix64 of zring's data.
//! - The docs/workloads.md workloads: [`w1`] (image-like uint8[3,224,224]), [`w2`]
//!   (int32[512] Zipf tokens) and [`w3`] (ragged int32 sequences), as [`Dense`] and
//!   [`Ragged`] batches.
//! - [`SynthSpec`]: `zring bench`'s image-like records of any size, dense or ragged,
//!   each a pure function of `(seed, index)`.
//!
//! Every record is generated from its own stream `(seed, index)`, so its bytes do not
//! depend on how many records are made or on how many threads make them.
#![deny(unsafe_code)]

mod image;
mod photo;
pub mod rng;
mod workloads;

pub use image::{SynthSpec, IMAGE_BYTES, IMAGE_SHAPE};
pub use photo::{photo_pixels, PHOTO_HEIGHT, PHOTO_WIDTH};
pub use rng::Rng;
pub use workloads::*;

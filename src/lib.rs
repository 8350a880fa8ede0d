//! zring: typed record stores read by random batched gathers at the speed of the hardware.
//!
//! This crate is the library facade and nothing else: it re-exports the workspace's
//! library crates under one name,
//!
//! - [`platform`] (zring-platform): the OS seams, positional I/O backends, aligned
//!   and pinned buffers, CPU topology;
//! - [`engine`] (zring-engine): the container format, schema and dtypes, codecs,
//!   `Writer`, `Store`, datasets and the gather path;
//! - [`sampler`] (zring-sampler): stateless counter-based batch indices;
//! - [`loader`] (zring-loader): the endless multi-stream prefetching loader.
//!
//! The `zring` command line (and its benchmark suite, `zring bench`, and `.npy`
//! reader) is the zring-cli crate, and the generated workloads are zring-workloads:
//! a program that links this crate links no command-line, progress-bar or plotting
//! code. Feature `remote` (default) turns on the engine's stores at s3://, gs://,
//! az://, http(s):// and file:// URLs.
//!
//! ```
//! use zring::engine::{DType, Schema};
//! use zring::loader::LoaderOptions;
//! use zring::sampler::Sampler;
//!
//! let schema = Schema::dense(DType::U8, &[3, 224, 224]);
//! assert_eq!(schema.item_bytes(), Some(3 * 224 * 224));
//! let _ = (LoaderOptions::new(2, 2), std::any::type_name::<Sampler>());
//! ```
#![deny(unsafe_code)]

pub use zring_engine as engine;
pub use zring_loader as loader;
pub use zring_platform as platform;
pub use zring_sampler as sampler;

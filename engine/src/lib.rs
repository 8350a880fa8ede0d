//! zring-engine: typed, immutable, single-file record stores and their read path.
//!
//! Contents (docs/architecture.md draws how they fit):
//!
//! - Writing: [`Writer`] and [`WriteOptions`] build a store from whole batches,
//!   compressing in parallel, and publish it crash-safely; [`train_dict`] and
//!   [`train_dict_from_store`] train zstd dictionaries.
//! - Reading: [`Store`] opens and validates a store ([`ReadOptions`], [`Backend`]);
//!   `get`, `gather`, `gather_ragged` ([`RaggedLayout`], [`RaggedBatch`]), `verify`
//!   and the async [`Pending`] reads all go through the read path (`read/`), whose
//!   planner is public: [`Store::plan`], [`Planner`], [`Coalesce`], [`Read`],
//!   [`ReadPlan`].
//! - Datasets: [`dataset`] — [`dataset::Dataset`] reads several stores as one (named
//!   fields x shards) through a checksummed manifest; [`dataset::DatasetBuilder`]
//!   publishes one.
//! - Types: [`DType`], [`Schema`], [`Layout`], [`Codec`], [`StoreSchema`], and a
//!   record's table [`Entry`] ([`RecordCodec`]).
//! - Remote stores: [`remote`] — `s3://`, `gs://`, `az://`, `http(s)://` and
//!   `file://` URLs open wherever paths do (cargo feature `remote`), tuned by
//!   [`remote::RemoteOptions`] in [`ReadOptions::remote`], with an optional local
//!   chunk cache ([`remote::CacheOptions`]).
//! - Configuration: [`Config`] (threads, pinning, io_uring; from the `ZRING_*`
//!   environment by default, installed for the process with [`Config::set_global`])
//!   and the worker pools reads and writes run on ([`Pool`], [`PoolHandle`], taken by
//!   [`ReadOptions::with_pool`] and [`WriteOptions::with_pool`]), re-exported from
//!   zring-platform so an embedding program needs only this crate.
//! - Errors: [`Error`] (with the details [`ArgumentError`], [`SchemaError`],
//!   [`CodecError`], [`InternalError`], [`ObjectChange`], [`NoCredentials`], and [`EntryError`],
//!   [`ParseBackendError`]; [`SharedError`] holds a poisoned writer's first error's
//!   source) and [`Result`].
//!
//! The byte layout (superblock, table entries, footer) is specified in
//! docs/format.md and implemented in `format`, which is not public API (tests and
//! fuzz targets reach it through a hidden path).
//!
//! ```
//! use zring_engine::{DType, ReadOptions, Schema, Store, WriteOptions, Writer};
//! # let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("vectors.zr");
//! let mut w = Writer::create(&path, Schema::dense(DType::F32, &[4]), WriteOptions::default())?;
//! let rows: Vec<u8> = (0..10 * 4).flat_map(|x| (x as f32).to_le_bytes()).collect();
//! w.append_dense(&rows)?;
//! w.close()?;
//!
//! let store = Store::open(&path, ReadOptions::default())?;
//! let batch = store.gather_vec(&[7, 2, 7])?;
//! assert_eq!(&batch[..16], &rows[7 * 16..8 * 16]);
//! # Ok::<(), zring_engine::Error>(())
//! ```

#![deny(unsafe_code)]

mod concat;
pub mod dataset;
mod dict;
mod dtype;
mod entry;
mod error;
#[doc(hidden)]
pub mod format;
mod pending;
mod read;
mod records;
pub mod remote;
mod schema;
mod size;
mod store;
mod types;
mod writer;

pub use concat::Concat;
pub use dict::{train_dict, train_dict_from_store};
pub use dtype::DType;
pub use entry::{Entry, EntryError, RecordCodec};
pub use error::{
    AllocFailure, Allocation, ArgumentError, CodecError, Error, InternalError, ManifestProblem,
    NoCredentials, ObjectChange, RecordProblem, Result, SchemaError, SchemaJsonError,
    ShardMismatch, SharedError, StoreMismatch, StoreProblem, UrlProblem,
};
pub use format::{BlockKind, SectionKind};
pub use pending::Pending;
pub use read::plan::Planner;
pub use read::{
    Backend, Coalesce, Interrupt, Never, ParseBackendError, RaggedBatch, RaggedLayout, Read,
    ReadOptions, ReadSetup, ReadsServed, StoreStats,
};
pub use records::Records;
pub use schema::{shape_bytes, Codec, Layout, Schema, StoreSchema, MAX_NDIM};
pub use size::{parse_size, SizeError};
pub use store::{ReadPlan, Store};
pub use writer::{WriteOptions, Writer};
pub use zring_platform::{Config, Pool, PoolHandle, UringMode};

//! zring-engine: typed, immutable, single-file record stores and their gather path.
//!
//! - [`format`]: container format v1 (superblock, table entries, footer); the
//!   specification is docs/format.md.
//! - [`dtype`] and [`schema`]: element types, dense and ragged layouts, codecs, and
//!   the JSON schema stored in every file.
//! - [`writer`]: [`Writer`] builds a store from whole batches, compressing in parallel,
//!   and publishes it crash-safely.
//! - [`store`]: [`Store`] opens and validates a store; `gather`, `gather_ragged`,
//!   `get` and `verify` live in `gather`.
//! - [`pending`]: `get_async` / `gather_async`, runtime-agnostic futures completed by
//!   a zring worker through the task's waker.
//! - [`dict`]: training zstd dictionaries from records spread over the input.
//! - [`error`]: the [`Error`] every call returns.
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

pub mod dict;
pub mod dtype;
pub mod error;
pub mod format;
pub mod gather;
pub mod pending;
mod read;
pub mod schema;
pub mod store;
pub mod writer;

pub use dict::{train_dict, train_dict_from_store};
pub use dtype::DType;
pub use error::{Error, Result};
pub use gather::{RaggedBatch, RaggedLayout};
pub use pending::Pending;
pub use schema::{Codec, Layout, Schema, StoreSchema};
pub use store::{ReadOptions, Store, StoreStats};
pub use writer::{WriteOptions, Writer};
pub use zring_platform::Backend;

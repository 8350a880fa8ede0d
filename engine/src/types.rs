//! The value types the rest of the crate speaks in: how records are shaped
//! ([`Layout`]), how they are compressed ([`Codec`]) and the rank limit
//! ([`MAX_NDIM`]); [`DType`](crate::DType) has its own file.
//!
//! Like `dtype` and `format`, this module imports nothing from the crate, so
//! `error` can carry these values without the modules importing each other. Parsing
//! their names reports [`Error`](crate::Error) and so lives in `schema`, above
//! `error`.

use std::fmt;

use serde_json::{json, Map, Value};

/// The most dimensions a record may have (NumPy's limit, less the batch axis).
pub const MAX_NDIM: usize = 63;

/// How records are shaped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Every record has the same shape; `item_shape` may be empty (scalar records).
    Dense { item_shape: Vec<u64> },
    /// Each record has its own shape of `ndim` dimensions (ndim >= 1).
    Ragged { ndim: usize },
}

impl Layout {
    /// Adds `layout` and `item_shape` or `ndim` to a JSON object (store schemas and
    /// dataset manifests spell layouts alike).
    pub(crate) fn insert_json(&self, obj: &mut Map<String, Value>) {
        match self {
            Layout::Dense { item_shape } => {
                obj.insert("layout".into(), json!("dense"));
                obj.insert("item_shape".into(), json!(item_shape));
            }
            Layout::Ragged { ndim } => {
                obj.insert("layout".into(), json!("ragged"));
                obj.insert("ndim".into(), json!(ndim));
            }
        }
    }
}

/// How a store's records are compressed. Individual records that do not shrink are
/// stored raw whatever the store's codec (see the per-record tag in docs/format.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Codec {
    /// Stored as they are.
    Raw,
    /// One zstd frame per record.
    #[default]
    Zstd,
    /// One zstd frame per record, compressed with the store's trained dictionary.
    ZstdDict,
}

impl Codec {
    /// The name used in the schema, the CLI and Python.
    pub fn name(self) -> &'static str {
        match self {
            Codec::Raw => "raw",
            Codec::Zstd => "zstd",
            Codec::ZstdDict => "zstd-dict",
        }
    }
}

impl fmt::Display for Codec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

//! What is wrong with a schema or dtype ([`super::Error::Schema`]), and with a store's
//! schema section.

use std::fmt;

use crate::dtype::DType;
use crate::types::MAX_NDIM;

use super::argument::FieldNameDisplay;

// SchemaError's Display and source() are written out, not derived: `Field`'s field
// named `source` is a `Box<SchemaError>`, and thiserror's derived source() would return
// the `Box` itself, which does not downcast to the `SchemaError` inside as callers do
// (and `UnknownDType` lists every dtype, a loop).
/// What is wrong with a schema or dtype, or how it does not fit the operation
/// ([`Error::Schema`](super::Error::Schema)).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SchemaError {
    /// A big-endian NumPy dtype (stores are little-endian).
    BigEndian { descr: String },
    /// A NumPy dtype descr zring has no dtype for.
    UnsupportedDescr { descr: String },
    /// A dtype name zring does not know.
    UnknownDType { name: String },
    /// A codec name zring does not know.
    UnknownCodec { name: String },
    /// A dense item_shape with more than [`MAX_NDIM`] dimensions.
    TooManyDims { ndim: usize },
    /// A dense record larger than the per-record size limit.
    RecordTooLarge {
        shape: Vec<u64>,
        dtype: DType,
        limit: u64,
    },
    /// A ragged ndim of 0 or above [`MAX_NDIM`].
    RaggedNdim { ndim: usize },
    /// Dense records of zero bytes (an item_shape with a 0).
    ZeroSizeRecords,
    /// An operation for the other layout: `operation` on a ragged (or dense) store;
    /// `instead` is the one to use.
    WrongLayout {
        operation: &'static str,
        ragged: bool,
        instead: &'static str,
    },
    /// A dataset field gathered with the destination of the other layout.
    FieldLayout { field: String, ragged: bool },
    /// A dataset without fields.
    NoFields,
    /// A field name that cannot be used as part of a file name.
    FieldName { name: String },
    /// Two fields with one name.
    DuplicateField { name: String },
    /// A field's schema is invalid.
    Field {
        name: String,
        source: Box<SchemaError>,
    },
}

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let layout = |ragged: bool| if ragged { "ragged" } else { "dense" };
        match self {
            SchemaError::BigEndian { descr } => write!(
                f,
                "big-endian dtype {descr:?} is not supported; convert with arr.astype(arr.dtype.newbyteorder('<'))"
            ),
            SchemaError::UnsupportedDescr { descr } => {
                write!(f, "unsupported NumPy dtype descr {descr:?}")
            }
            SchemaError::UnknownDType { name } => {
                write!(f, "unknown dtype {name:?}; expected one of ")?;
                for (k, d) in DType::ALL.iter().enumerate() {
                    if k > 0 {
                        f.write_str(", ")?;
                    }
                    f.write_str(d.name())?;
                }
                Ok(())
            }
            SchemaError::UnknownCodec { name } => write!(
                f,
                "unknown codec {name:?} (expected raw, zstd or zstd-dict)"
            ),
            SchemaError::TooManyDims { ndim } => write!(
                f,
                "item_shape has {ndim} dimensions; at most {} are allowed",
                MAX_NDIM
            ),
            SchemaError::RecordTooLarge {
                shape,
                dtype,
                limit,
            } => write!(
                f,
                "a record of shape {shape:?} and dtype {dtype} is larger than the {limit}-byte record limit"
            ),
            SchemaError::RaggedNdim { ndim } => write!(
                f,
                "ragged ndim must be between 1 and {}, got {ndim}",
                MAX_NDIM
            ),
            SchemaError::ZeroSizeRecords => f.write_str(
                "dense records of zero bytes cannot be stored (item_shape has a 0)",
            ),
            SchemaError::WrongLayout {
                operation,
                ragged,
                instead,
            } => write!(
                f,
                "{operation} on a {} store; use {instead}",
                layout(*ragged)
            ),
            SchemaError::FieldLayout { field, ragged } => write!(
                f,
                "field {field:?} is {}; gather it with FieldDest::{}",
                layout(*ragged),
                if *ragged { "Ragged" } else { "Dense" }
            ),
            SchemaError::NoFields => f.write_str("a dataset needs at least one field"),
            SchemaError::FieldName { name } => write!(f, "{}", FieldNameDisplay(name)),
            SchemaError::DuplicateField { name } => write!(f, "field {name:?} appears twice"),
            SchemaError::Field { name, source } => write!(f, "field {name:?}: {source}"),
        }
    }
}

impl std::error::Error for SchemaError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SchemaError::Field { source, .. } => Some(source.as_ref()),
            _ => None,
        }
    }
}

// SchemaJsonError's Display and source() are written out, not derived: `Json` holds
// serde_json's error in an `Arc` (thiserror's source() would return the `Arc`, which
// does not downcast to `serde_json::Error`).
/// What is wrong with a store's schema section (its JSON).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum SchemaJsonError {
    /// Not JSON (serde_json's error is the source).
    Json(std::sync::Arc<serde_json::Error>),
    /// JSON, but not an object.
    NotAnObject,
    /// A field is missing.
    Missing { key: &'static str },
    /// A field holds the wrong kind of value (`expected` says what it should be).
    WrongType {
        key: &'static str,
        expected: &'static str,
    },
    /// The `format` field is not `"zring"`.
    NotZring,
    /// The layout is neither `dense` nor `ragged`.
    UnknownLayout { layout: String },
    /// A metadata value is not a string.
    MetadataValue { key: String },
    /// The dtype, codec or schema is invalid.
    Invalid(SchemaError),
}

impl fmt::Display for SchemaJsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SchemaJsonError::Json(e) => write!(f, "schema JSON: {e}"),
            SchemaJsonError::NotAnObject => f.write_str("schema is not a JSON object"),
            SchemaJsonError::Missing { key } => write!(f, "schema has no {key:?} field"),
            SchemaJsonError::WrongType { key, expected } => {
                write!(f, "schema field {key:?} is not {expected}")
            }
            SchemaJsonError::NotZring => f.write_str("schema format is not \"zring\""),
            SchemaJsonError::UnknownLayout { layout } => write!(f, "unknown layout {layout:?}"),
            SchemaJsonError::MetadataValue { key } => {
                write!(f, "metadata value of {key:?} is not a string")
            }
            SchemaJsonError::Invalid(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for SchemaJsonError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SchemaJsonError::Json(e) => Some(e.as_ref()),
            SchemaJsonError::Invalid(e) => e.source(),
            _ => None,
        }
    }
}

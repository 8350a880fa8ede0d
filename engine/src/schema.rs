//! What a store holds: its layout, element type, codec and user metadata, and the JSON
//! form of all of it stored in the file's schema section.

use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::Arc;

use serde_json::{json, Map, Value};

use crate::dtype::DType;
use crate::error::{Error, Result, SchemaError, SchemaJsonError};
use crate::format::MAX_RECORD_BYTES;
pub use crate::types::{Codec, Layout, MAX_NDIM};

// DType and Codec are parsed from their names here rather than next to their
// definitions: parsing reports `Error`, which carries those values, so the
// definitions stay below `error` and the parsers above it.
impl DType {
    /// Parses a NumPy array-protocol type string as found in `.npy` headers
    /// (`<f4`, `|u1`, `<c16`, `|b1`). Big-endian types are refused: stores are
    /// little-endian and a silent byte swap would be a surprise.
    pub fn from_numpy_descr(descr: &str) -> Result<Self, Error> {
        let (order, code) = descr.split_at(descr.len().min(1));
        if order == ">" {
            return Err(Error::Schema(SchemaError::BigEndian {
                descr: descr.to_string(),
            }));
        }
        let code = if matches!(order, "<" | "|" | "=") {
            code
        } else {
            descr
        };
        let dtype = match code {
            "b1" => DType::Bool,
            "u1" => DType::U8,
            "u2" => DType::U16,
            "u4" => DType::U32,
            "u8" => DType::U64,
            "i1" => DType::I8,
            "i2" => DType::I16,
            "i4" => DType::I32,
            "i8" => DType::I64,
            "f2" => DType::F16,
            "f4" => DType::F32,
            "f8" => DType::F64,
            "c8" => DType::Complex64,
            "c16" => DType::Complex128,
            // ml_dtypes types have no standard code; their .npy descr is "|V2"/"|V1",
            // which is ambiguous, so they must be named explicitly.
            _ => {
                return Err(Error::Schema(SchemaError::UnsupportedDescr {
                    descr: descr.to_string(),
                }))
            }
        };
        Ok(dtype)
    }
}

impl FromStr for DType {
    type Err = Error;

    /// Accepts the canonical names and the common short aliases (`f4`, `float`,
    /// `half`, `i8`-style NumPy codes are deliberately not guessed: `i8` means int64
    /// to NumPy and int8 to Rust).
    fn from_str(s: &str) -> Result<Self, Error> {
        let lower = s.trim().to_ascii_lowercase();
        if let Some(d) = DType::ALL.iter().find(|d| d.name() == lower) {
            return Ok(*d);
        }
        let alias = match lower.as_str() {
            "bool_" => DType::Bool,
            "u1" | "u8_" => DType::U8,
            "half" => DType::F16,
            "single" => DType::F32,
            "double" => DType::F64,
            "cfloat" | "cdouble" => DType::Complex128,
            "csingle" => DType::Complex64,
            _ => {
                return Err(Error::Schema(SchemaError::UnknownDType {
                    name: s.to_string(),
                }));
            }
        };
        Ok(alias)
    }
}

impl FromStr for Codec {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().replace('_', "-").as_str() {
            "raw" | "none" => Ok(Codec::Raw),
            "zstd" => Ok(Codec::Zstd),
            "zstd-dict" | "zstdict" => Ok(Codec::ZstdDict),
            _ => Err(Error::Schema(SchemaError::UnknownCodec {
                name: s.to_string(),
            })),
        }
    }
}

/// The declared type of a store's records: layout, dtype and user metadata.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schema {
    pub layout: Layout,
    pub dtype: DType,
    /// Free-form string attributes kept with the store (provenance, tokenizer, ...).
    pub metadata: BTreeMap<String, String>,
}

impl Schema {
    /// Fixed-shape records of `item_shape` (empty for scalars).
    pub fn dense(dtype: DType, item_shape: &[u64]) -> Self {
        Self {
            layout: Layout::Dense {
                item_shape: item_shape.to_vec(),
            },
            dtype,
            metadata: BTreeMap::new(),
        }
    }

    /// Variable-shape records of `ndim` dimensions.
    pub fn ragged(dtype: DType, ndim: usize) -> Self {
        Self {
            layout: Layout::Ragged { ndim },
            dtype,
            metadata: BTreeMap::new(),
        }
    }

    /// Adds one metadata attribute.
    pub fn with_metadata(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.metadata.insert(key.into(), value.into());
        self
    }

    /// Whether records are ragged.
    pub fn is_ragged(&self) -> bool {
        matches!(self.layout, Layout::Ragged { .. })
    }

    /// The number of dimensions of one record.
    pub fn ndim(&self) -> usize {
        match &self.layout {
            Layout::Dense { item_shape } => item_shape.len(),
            Layout::Ragged { ndim } => *ndim,
        }
    }

    /// Bytes per dense record; `None` for ragged stores.
    pub fn item_bytes(&self) -> Option<u64> {
        match &self.layout {
            Layout::Dense { item_shape } => shape_bytes(item_shape, self.dtype),
            Layout::Ragged { .. } => None,
        }
    }

    /// Checks the schema can be stored: rank limits, record size limit.
    pub fn validate(&self) -> Result<()> {
        self.check().map_err(Error::Schema)
    }

    /// [`Schema::validate`]'s check, saying what is wrong.
    pub(crate) fn check(&self) -> Result<(), SchemaError> {
        match &self.layout {
            Layout::Dense { item_shape } => {
                if item_shape.len() > MAX_NDIM {
                    return Err(SchemaError::TooManyDims {
                        ndim: item_shape.len(),
                    });
                }
                match shape_bytes(item_shape, self.dtype) {
                    Some(b) if b <= MAX_RECORD_BYTES => Ok(()),
                    _ => Err(SchemaError::RecordTooLarge {
                        shape: item_shape.clone(),
                        dtype: self.dtype,
                        limit: MAX_RECORD_BYTES,
                    }),
                }
            }
            Layout::Ragged { ndim } => {
                if *ndim == 0 || *ndim > MAX_NDIM {
                    return Err(SchemaError::RaggedNdim { ndim: *ndim });
                }
                Ok(())
            }
        }
    }
}

/// Bytes of one record of `shape`, or `None` on overflow.
pub fn shape_bytes(shape: &[u64], dtype: DType) -> Option<u64> {
    shape
        .iter()
        .try_fold(dtype.itemsize() as u64, |acc, &d| acc.checked_mul(d))
}

/// Everything the schema section of a store says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreSchema {
    pub schema: Schema,
    pub codec: Codec,
    /// The zstd level records were compressed with (informative).
    pub level: i32,
    /// The zstd dictionary's id (zstd-dict stores only).
    pub dict_id: Option<u32>,
    pub record_count: u64,
}

impl StoreSchema {
    /// The JSON text stored in the file.
    pub fn to_json(&self) -> String {
        let s = &self.schema;
        let mut obj = Map::new();
        obj.insert("format".into(), json!("zring"));
        s.layout.insert_json(&mut obj);
        obj.insert("dtype".into(), json!(s.dtype.name()));
        obj.insert("codec".into(), json!(self.codec.name()));
        obj.insert("level".into(), json!(self.level));
        obj.insert("dict_id".into(), json!(self.dict_id));
        obj.insert("record_count".into(), json!(self.record_count));
        obj.insert("metadata".into(), json!(s.metadata));
        Value::Object(obj).to_string()
    }

    /// Parses and validates the stored JSON; the error says which field is wrong.
    pub fn from_json(text: &[u8]) -> std::result::Result<Self, SchemaJsonError> {
        type R<T> = std::result::Result<T, SchemaJsonError>;
        let v: Value =
            serde_json::from_slice(text).map_err(|e| SchemaJsonError::Json(Arc::new(e)))?;
        let obj = v.as_object().ok_or(SchemaJsonError::NotAnObject)?;
        let field = |key: &'static str| obj.get(key).ok_or(SchemaJsonError::Missing { key });
        let wrong = |key: &'static str, expected: &'static str| SchemaJsonError::WrongType {
            key,
            expected,
        };
        let str_field = |k: &'static str| -> R<String> {
            field(k)?
                .as_str()
                .map(str::to_string)
                .ok_or(wrong(k, "a string"))
        };
        let u64_field = |k: &'static str| -> R<u64> {
            field(k)?.as_u64().ok_or(wrong(k, "a non-negative integer"))
        };
        if str_field("format")? != "zring" {
            return Err(SchemaJsonError::NotZring);
        }
        let name = str_field("dtype")?;
        let dtype = DType::from_str(&name)
            .map_err(|_| SchemaJsonError::Invalid(SchemaError::UnknownDType { name }))?;
        let layout = match str_field("layout")?.as_str() {
            "dense" => {
                let dims = field("item_shape")?
                    .as_array()
                    .ok_or(wrong("item_shape", "a list"))?;
                let item_shape = dims
                    .iter()
                    .map(|d| {
                        d.as_u64()
                            .ok_or(wrong("item_shape", "a list of non-negative integers"))
                    })
                    .collect::<R<Vec<u64>>>()?;
                Layout::Dense { item_shape }
            }
            "ragged" => Layout::Ragged {
                ndim: usize::try_from(u64_field("ndim")?)
                    .map_err(|_| wrong("ndim", "a dimension count this machine can hold"))?,
            },
            other => {
                return Err(SchemaJsonError::UnknownLayout {
                    layout: other.to_string(),
                })
            }
        };
        let name = str_field("codec")?;
        let codec = Codec::from_str(&name)
            .map_err(|_| SchemaJsonError::Invalid(SchemaError::UnknownCodec { name }))?;
        let level = field("level")?
            .as_i64()
            .and_then(|l| i32::try_from(l).ok())
            .ok_or(wrong("level", "a 32-bit integer"))?;
        let dict_id = match field("dict_id")? {
            Value::Null => None,
            v => Some(
                v.as_u64()
                    .and_then(|d| u32::try_from(d).ok())
                    .ok_or(wrong("dict_id", "a u32 or null"))?,
            ),
        };
        let record_count = u64_field("record_count")?;
        let mut metadata = BTreeMap::new();
        for (k, v) in field("metadata")?
            .as_object()
            .ok_or(wrong("metadata", "an object"))?
        {
            let v = v
                .as_str()
                .ok_or_else(|| SchemaJsonError::MetadataValue { key: k.clone() })?;
            metadata.insert(k.clone(), v.to_string());
        }
        let schema = Schema {
            layout,
            dtype,
            metadata,
        };
        schema.check().map_err(SchemaJsonError::Invalid)?;
        Ok(Self {
            schema,
            codec,
            level,
            dict_id,
            record_count,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_round_trips_dense_and_ragged() {
        for schema in [
            Schema::dense(DType::U8, &[3, 224, 224]).with_metadata("source", "imagenet"),
            Schema::dense(DType::F32, &[]),
            Schema::ragged(DType::I32, 2),
        ] {
            let stored = StoreSchema {
                schema,
                codec: Codec::ZstdDict,
                level: 3,
                dict_id: Some(7),
                record_count: 1 << 40,
            };
            let back = StoreSchema::from_json(stored.to_json().as_bytes()).expect("parse");
            assert_eq!(back, stored);
        }
    }

    #[test]
    fn bad_schemas_name_the_problem() {
        assert!(Schema::ragged(DType::U8, 0).validate().is_err());
        assert!(Schema::dense(DType::U64, &[1 << 30, 1 << 30])
            .validate()
            .is_err());
        let err =
            StoreSchema::from_json(br#"{"format":"zring","dtype":"uint8"}"#).expect_err("missing");
        assert!(
            matches!(err, SchemaJsonError::Missing { key: "layout" }),
            "{err}"
        );
        let err = StoreSchema::from_json(b"not json").expect_err("not json");
        assert!(matches!(err, SchemaJsonError::Json(_)), "{err}");
        assert!(
            std::error::Error::source(&err).is_some(),
            "serde_json's error is kept"
        );
    }

    #[test]
    fn codec_names_parse() {
        for c in [Codec::Raw, Codec::Zstd, Codec::ZstdDict] {
            assert_eq!(c.name().parse::<Codec>().expect("parse"), c);
        }
        assert!("lz4".parse::<Codec>().is_err());
    }
}

//! What a store holds: its layout, element type, codec and user metadata, and the JSON
//! form of all of it stored in the file's schema section.

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;
use std::str::FromStr;
use std::sync::Arc;

use serde::de::value::MapAccessDeserializer;
use serde::de::{DeserializeOwned, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Number, Value};

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
    /// The JSON text stored in the file: canonical JSON (`canonical_json`), so the
    /// same schema is always the same bytes, whatever serde_json's features.
    pub fn to_json(&self) -> String {
        let s = &self.schema;
        let mut layout = Map::new();
        s.layout.insert_json(&mut layout);
        let out = SchemaOut {
            format: "zring",
            layout,
            dtype: s.dtype.name(),
            codec: self.codec.name(),
            level: self.level,
            dict_id: self.dict_id,
            record_count: self.record_count,
            metadata: &s.metadata,
        };
        // Cannot fail: every key is a string and every number an integer.
        let value = serde_json::to_value(&out).unwrap_or_default();
        canonical_json(&value, false)
    }

    /// Parses and validates the stored JSON; the error says which field is wrong.
    /// Unknown keys are ignored (docs/format.md: room for minor versions).
    pub fn from_json(text: &[u8]) -> std::result::Result<Self, SchemaJsonError> {
        type R<T> = std::result::Result<T, SchemaJsonError>;
        let raw: Slot<Object<SchemaIn>> =
            serde_json::from_slice(text).map_err(|e| SchemaJsonError::Json(Arc::new(e)))?;
        let Object(raw) = raw.take(
            || SchemaJsonError::NotAnObject,
            || SchemaJsonError::NotAnObject,
        )?;
        // Checked in the order the keys are documented, so the first problem is named.
        fn get<T>(slot: Slot<T>, key: &'static str, expected: &'static str) -> R<T> {
            slot.take(
                || SchemaJsonError::Missing { key },
                || SchemaJsonError::WrongType { key, expected },
            )
        }
        if get(raw.format, "format", "a string")? != "zring" {
            return Err(SchemaJsonError::NotZring);
        }
        let name = get(raw.dtype, "dtype", "a string")?;
        let dtype = DType::from_str(&name)
            .map_err(|_| SchemaJsonError::Invalid(SchemaError::UnknownDType { name }))?;
        let layout = match get(raw.layout, "layout", "a string")?.as_str() {
            "dense" => {
                let dims = get(raw.item_shape, "item_shape", "a list")?;
                let item_shape = dims
                    .into_iter()
                    .map(|d| get(d, "item_shape", "a list of non-negative integers"))
                    .collect::<R<Vec<u64>>>()?;
                Layout::Dense { item_shape }
            }
            "ragged" => Layout::Ragged {
                ndim: usize::try_from(get(raw.ndim, "ndim", "a non-negative integer")?).map_err(
                    |_| SchemaJsonError::WrongType {
                        key: "ndim",
                        expected: "a dimension count this machine can hold",
                    },
                )?,
            },
            other => {
                return Err(SchemaJsonError::UnknownLayout {
                    layout: other.to_string(),
                })
            }
        };
        let name = get(raw.codec, "codec", "a string")?;
        let codec = Codec::from_str(&name)
            .map_err(|_| SchemaJsonError::Invalid(SchemaError::UnknownCodec { name }))?;
        let level = get(raw.level, "level", "a 32-bit integer")?;
        let dict_id = get(raw.dict_id, "dict_id", "a u32 or null")?;
        let record_count = get(raw.record_count, "record_count", "a non-negative integer")?;
        let metadata = get(raw.metadata, "metadata", "an object")?
            .into_iter()
            .map(|(key, v)| match v {
                Slot::Found(v) => Ok((key, v)),
                _ => Err(SchemaJsonError::MetadataValue { key }),
            })
            .collect::<R<BTreeMap<String, String>>>()?;
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

/// The schema section as written.
#[derive(Serialize)]
struct SchemaOut<'a> {
    format: &'static str,
    /// `layout` and `item_shape` or `ndim`, spelled as in dataset manifests.
    #[serde(flatten)]
    layout: Map<String, Value>,
    dtype: &'static str,
    codec: &'static str,
    level: i32,
    dict_id: Option<u32>,
    record_count: u64,
    metadata: &'a BTreeMap<String, String>,
}

/// The schema section as read: every key a [`Slot`], so that a missing or mistyped
/// key is reported by name ([`SchemaJsonError`]) and in a fixed order. Unknown keys
/// are ignored.
#[derive(Deserialize, Default)]
#[serde(default)]
struct SchemaIn {
    format: Slot<String>,
    dtype: Slot<String>,
    layout: Slot<String>,
    item_shape: Slot<Vec<Slot<u64>>>,
    ndim: Slot<u64>,
    codec: Slot<String>,
    level: Slot<i32>,
    dict_id: Slot<Option<u32>>,
    record_count: Slot<u64>,
    metadata: Slot<BTreeMap<String, Slot<String>>>,
}

// --- JSON helpers shared with the dataset manifest ------------------------------

/// One value of a JSON document as a reader found it: absent, of the type asked
/// for, or of another. Derived `Deserialize` structs hold their keys as slots
/// (with `#[serde(default)]`), so that parsing never fails on a missing or mistyped
/// key and the reader reports it with its own error, naming the key, in the order
/// it chooses (serde's own message would name neither the key nor, for a value
/// inside a list, the list).
///
/// A slot reads the value as a `serde_json::Value` first, then converts it to `T`,
/// so it behaves the same under every serde_json feature (`arbitrary_precision`
/// included, which serde's untagged enums do not survive); a JSON object with a
/// key given twice keeps the last value, as serde_json's `Value` does.
#[derive(Debug, Default)]
pub(crate) enum Slot<T> {
    /// The key is not there.
    #[default]
    Absent,
    /// The value, of the type asked for.
    Found(T),
    /// Something else (`null` counts as something else unless `T` is an `Option`).
    Wrong,
}

impl<T> Slot<T> {
    /// The value, or the error for an absent or a mistyped one.
    pub(crate) fn take<E>(
        self,
        absent: impl FnOnce() -> E,
        wrong: impl FnOnce() -> E,
    ) -> std::result::Result<T, E> {
        match self {
            Slot::Found(v) => Ok(v),
            Slot::Absent => Err(absent()),
            Slot::Wrong => Err(wrong()),
        }
    }

    /// The value, if it is there and of the type asked for.
    pub(crate) fn found(self) -> Option<T> {
        match self {
            Slot::Found(v) => Some(v),
            _ => None,
        }
    }
}

impl<T: DeserializeOwned> Slot<T> {
    /// Converts a JSON value.
    pub(crate) fn from_value(v: Value) -> Self {
        serde_json::from_value(v).map_or(Slot::Wrong, Slot::Found)
    }
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for Slot<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        Value::deserialize(d).map(Slot::from_value)
    }
}

/// A `T` read from a JSON object and from nothing else (a derived struct would also
/// accept a JSON list of its fields' values, in order).
pub(crate) struct Object<T>(pub(crate) T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct Only<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for Only<T> {
            type Value = Object<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                map: A,
            ) -> std::result::Result<Object<T>, A::Error> {
                T::deserialize(MapAccessDeserializer::new(map)).map(Object)
            }
        }
        d.deserialize_map(Only(PhantomData))
    }
}

/// `v` as canonical JSON: every object's members sorted by key (byte order of the
/// keys' UTF-8, which is code point order), strings escaped as serde_json escapes
/// them (`\"`, `\\`, and control characters as `\b \t \n \f \r` or `\u00xx`; every
/// other character as itself, in UTF-8), integers in decimal, other numbers in
/// serde_json's shortest round-trip form. Compact (no whitespace at all) or, with
/// `pretty`, laid out as serde_json's pretty printer does (two-space indent, `": "`
/// after keys, `[]` and `{}` when empty).
///
/// The order is sorted here explicitly rather than taken from `serde_json::Map`,
/// whose order depends on serde_json's `preserve_order` feature, which any crate in
/// a program may turn on. Store schemas and dataset manifests are written in this
/// form, and a manifest's checksum is over the compact form of its `manifest` value
/// (docs/format.md, Datasets).
pub(crate) fn canonical_json(v: &Value, pretty: bool) -> String {
    let mut out = String::new();
    write_canonical(&mut out, v, pretty.then_some(0));
    out
}

fn write_canonical(out: &mut String, v: &Value, depth: Option<usize>) {
    let newline = |out: &mut String, depth: usize| {
        out.push('\n');
        for _ in 0..depth {
            out.push_str("  ");
        }
    };
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => write_number(out, n),
        Value::String(s) => write_string(out, s),
        Value::Array(items) if items.is_empty() => out.push_str("[]"),
        Value::Array(items) => {
            out.push('[');
            for (k, item) in items.iter().enumerate() {
                if k > 0 {
                    out.push(',');
                }
                if let Some(d) = depth {
                    newline(out, d + 1);
                }
                write_canonical(out, item, depth.map(|d| d + 1));
            }
            if let Some(d) = depth {
                newline(out, d);
            }
            out.push(']');
        }
        Value::Object(map) if map.is_empty() => out.push_str("{}"),
        Value::Object(map) => {
            let mut members: Vec<(&String, &Value)> = map.iter().collect();
            members.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (k, (key, value)) in members.into_iter().enumerate() {
                if k > 0 {
                    out.push(',');
                }
                if let Some(d) = depth {
                    newline(out, d + 1);
                }
                write_string(out, key);
                out.push_str(if depth.is_some() { ": " } else { ":" });
                write_canonical(out, value, depth.map(|d| d + 1));
            }
            if let Some(d) = depth {
                newline(out, d);
            }
            out.push('}');
        }
    }
}

/// Integers in decimal; other numbers as serde_json writes an `f64` (also when
/// serde_json's `arbitrary_precision` keeps numbers as they were written).
fn write_number(out: &mut String, n: &Number) {
    use std::fmt::Write as _;
    // Writing to a String cannot fail.
    let _ = match (
        n.as_u64(),
        n.as_i64(),
        n.as_f64().and_then(Number::from_f64),
    ) {
        (Some(u), _, _) => write!(out, "{u}"),
        (None, Some(i), _) => write!(out, "{i}"),
        (None, None, Some(f)) => write!(out, "{f}"),
        // Not finite: JSON text cannot hold one, so parsing never gives one.
        (None, None, None) => write!(out, "null"),
    };
}

/// A JSON string literal, escaped as serde_json escapes.
fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\u{c}' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            c if u32::from(c) < 0x20 => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                let b = u32::from(c) as usize;
                out.push_str("\\u00");
                out.push(char::from(HEX[b >> 4]));
                out.push(char::from(HEX[b & 0xf]));
            }
            c => out.push(c),
        }
    }
    out.push('"');
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
    fn json_is_canonical_and_as_written_before() {
        // The bytes zring wrote before the JSON went through serde derive: keys sorted,
        // no whitespace (tests/hostile.rs edits them as text).
        let dense = StoreSchema {
            schema: Schema::dense(DType::U8, &[3, 224, 224])
                .with_metadata("c", "d")
                .with_metadata("a", "b"),
            codec: Codec::Zstd,
            level: 3,
            dict_id: None,
            record_count: 2000,
        };
        assert_eq!(
            dense.to_json(),
            r#"{"codec":"zstd","dict_id":null,"dtype":"uint8","format":"zring","item_shape":[3,224,224],"layout":"dense","level":3,"metadata":{"a":"b","c":"d"},"record_count":2000}"#
        );
        let ragged = StoreSchema {
            schema: Schema::ragged(DType::I32, 2),
            codec: Codec::ZstdDict,
            level: -5,
            dict_id: Some(77),
            record_count: 0,
        };
        assert_eq!(
            ragged.to_json(),
            r#"{"codec":"zstd-dict","dict_id":77,"dtype":"int32","format":"zring","layout":"ragged","level":-5,"metadata":{},"ndim":2,"record_count":0}"#
        );
    }

    #[test]
    fn json_keys_are_checked_by_name_and_unknown_ones_ignored() {
        let good = r#"{"codec":"raw","dict_id":null,"dtype":"uint8","format":"zring","item_shape":[2],"layout":"dense","level":0,"metadata":{},"record_count":1}"#;
        let parse = |text: &str| StoreSchema::from_json(text.as_bytes());
        let base = parse(good).expect("parse");
        // Unknown keys (a later minor version's) are ignored, nested values included.
        let extra = good.replacen('{', r#"{"zz":{"b":[1,2.5,null]},"#, 1);
        assert_eq!(parse(&extra).expect("unknown keys"), base);
        // A key given twice keeps its last value, as before.
        let twice = good.replacen('{', r#"{"record_count":"x","#, 1);
        assert_eq!(parse(&twice).expect("duplicate key"), base);
        // A list is not a schema, even one holding the keys' values in order.
        for text in [
            "[]",
            r#"["raw",null,"uint8","zring",[2],"dense",0,{},1]"#,
            "null",
            "3",
        ] {
            assert!(
                matches!(parse(text), Err(SchemaJsonError::NotAnObject)),
                "{text}"
            );
        }
        // `dict_id` must be there; null says "no dictionary".
        let err = parse(&good.replace(r#""dict_id":null,"#, "")).expect_err("no dict_id");
        assert_eq!(err.to_string(), "schema has no \"dict_id\" field");
        let cases = [
            (
                r#""item_shape":[2]"#,
                r#""item_shape":"2""#,
                "schema field \"item_shape\" is not a list",
            ),
            (
                r#""item_shape":[2]"#,
                r#""item_shape":[2.0]"#,
                "schema field \"item_shape\" is not a list of non-negative integers",
            ),
            (
                r#""level":0"#,
                r#""level":4294967296"#,
                "schema field \"level\" is not a 32-bit integer",
            ),
            (
                r#""dict_id":null"#,
                r#""dict_id":-1"#,
                "schema field \"dict_id\" is not a u32 or null",
            ),
            (
                r#""format":"zring""#,
                r#""format":null"#,
                "schema field \"format\" is not a string",
            ),
            (
                r#""metadata":{}"#,
                r#""metadata":{"a":"x","b":[]}"#,
                "metadata value of \"b\" is not a string",
            ),
            (
                r#""item_shape":[2],"layout":"dense""#,
                r#""layout":"ragged","ndim":1.5"#,
                "schema field \"ndim\" is not a non-negative integer",
            ),
        ];
        for (from, to, message) in cases {
            let text = good.replace(from, to);
            let err = parse(&text).expect_err(&text);
            assert_eq!(err.to_string(), message, "{text}");
        }
    }

    /// Whether this build's serde_json keeps object keys sorted (no `preserve_order`).
    fn serde_json_sorts() -> bool {
        let v: Value = serde_json::from_str(r#"{"b":1,"a":2}"#).expect("json");
        let text = v.to_string();
        text == r#"{"a":2,"b":1}"#
    }

    #[test]
    fn canonical_json_sorts_keys_itself() {
        let v: Value = serde_json::from_str(
            r#"{"b":{"z":[],"é":{},"Z":[1,{"y":null,"x":true}]},"a":-0.5,"":""}"#,
        )
        .expect("json");
        assert_eq!(
            canonical_json(&v, false),
            r#"{"":"","a":-0.5,"b":{"Z":[1,{"x":true,"y":null}],"z":[],"é":{}}}"#
        );
        let pretty = "{\n  \"\": \"\",\n  \"a\": -0.5,\n  \"b\": {\n    \"Z\": [\n      1,\n      {\n        \"x\": true,\n        \"y\": null\n      }\n    ],\n    \"z\": [],\n    \"é\": {}\n  }\n}";
        assert_eq!(canonical_json(&v, true), pretty);
    }

    /// The canonical form is the text serde_json wrote when its map kept keys sorted
    /// (which is what zring's checksums were computed over), for every kind of value:
    /// checked against serde_json itself, in a build without `preserve_order`.
    #[test]
    fn canonical_json_is_what_serde_json_wrote_with_sorted_keys() {
        let mut control = String::new();
        for c in 0u8..0x20 {
            control.push(char::from(c));
        }
        let control = serde_json::to_string(&control).expect("json");
        let texts = [
            "0",
            "-0",
            "-0.0",
            "0.0",
            "1.0",
            "1e2",
            "1E-7",
            "0.1",
            "2.5e-3",
            "-1",
            "1.5e300",
            "123456789012345678901234567890",
            "-9223372036854775808",
            "-9223372036854775809",
            "18446744073709551615",
            "18446744073709551616",
            "5e-324",
            "1.7976931348623157e308",
            "4.35",
            "100000000000000000000.0",
            "1e21",
            "1e-7",
            "null",
            "true",
            "false",
            r#""""#,
            r#""quote \" backslash \\ slash \/ del  \u2028 \ud83d\ude00 é 漢""#,
            &control,
            "[]",
            "{}",
            "[[],{},[{}]]",
            r#"{"b":1,"a":{"d":[3,{"f":1,"e":2}],"c":"x"},"A":[],"":0,"é":1,"e":2,"\u0000":3}"#,
            r#"{"k":1,"k":2,"j":{"y":1,"x":2}}"#,
        ];
        let sorts = serde_json_sorts();
        for text in texts {
            let v: Value = serde_json::from_str(text).expect(text);
            let compact = canonical_json(&v, false);
            let pretty = canonical_json(&v, true);
            // Parses back to the same value.
            assert_eq!(serde_json::from_str::<Value>(&compact).expect("compact"), v);
            assert_eq!(serde_json::from_str::<Value>(&pretty).expect("pretty"), v);
            if sorts {
                assert_eq!(compact, v.to_string(), "{text}");
                assert_eq!(
                    pretty,
                    serde_json::to_string_pretty(&v).expect("pretty"),
                    "{text}"
                );
            }
        }
    }

    #[test]
    fn codec_names_parse() {
        for c in [Codec::Raw, Codec::Zstd, Codec::ZstdDict] {
            assert_eq!(c.name().parse::<Codec>().expect("parse"), c);
        }
        assert!("lz4".parse::<Codec>().is_err());
    }
}

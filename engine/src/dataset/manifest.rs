//! The dataset manifest: which fields a dataset has and which store holds each field
//! of each shard, as checksummed JSON (specified in docs/format.md).
//!
//! The file is `{"checksum": "<xxh3-64 hex>", "manifest": {...}}`; the checksum is
//! over the compact JSON text of the `manifest` value, so a reader re-serialises what
//! it parsed and compares.

use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::Arc;

use serde_json::{json, Map, Value};

use crate::dtype::DType;
use crate::error::{ManifestProblem, SchemaError};
use crate::format;
use crate::schema::{Layout, Schema};

/// The manifest format this zring writes; a reader accepts this major version.
pub const MANIFEST_MAJOR: u64 = 1;

/// The name of the current manifest inside a dataset directory.
pub const MANIFEST_FILE: &str = "manifest.json";
/// The directory holding every published manifest version (`<version>.json`), so a
/// reader can reopen exactly the version it opened before.
pub const VERSIONS_DIR: &str = "manifests";
/// The directory holding the shards' stores.
pub const DATA_DIR: &str = "data";

/// One named field: every shard holds one store of this schema for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    pub schema: Schema,
}

/// One shard: `records` records, and the store (a path relative to the dataset
/// directory) that holds each field of them, in the order of the manifest's fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shard {
    pub records: u64,
    pub files: Vec<String>,
}

/// A parsed, validated manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manifest {
    /// Starts at 1 and grows by one with every publication.
    pub version: u64,
    pub fields: Vec<Field>,
    pub shards: Vec<Shard>,
}

impl Manifest {
    /// Total records over all shards.
    pub fn records(&self) -> u64 {
        self.shards.iter().map(|s| s.records).sum()
    }

    /// The position of field `name`.
    pub fn field_index(&self, name: &str) -> Option<usize> {
        self.fields.iter().position(|f| f.name == name)
    }

    /// The JSON text of the manifest file, checksum included.
    pub fn to_json(&self) -> String {
        let fields: Vec<Value> = self.fields.iter().map(field_json).collect();
        let shards: Vec<Value> = self
            .shards
            .iter()
            .map(|s| json!({"records": s.records, "files": s.files}))
            .collect();
        let body = json!({
            "format": "zring-dataset",
            "format_major": MANIFEST_MAJOR,
            "version": self.version,
            "writer": concat!("zring ", env!("CARGO_PKG_VERSION")),
            "fields": fields,
            "shards": shards,
        });
        let sum = format::checksum(body.to_string().as_bytes());
        let mut top = Map::new();
        top.insert("checksum".into(), json!(format!("{sum:016x}")));
        top.insert("manifest".into(), body);
        let mut text = serde_json::to_string_pretty(&Value::Object(top)).unwrap_or_default();
        text.push('\n');
        text
    }

    /// Parses and validates a manifest file's text; the error says what is wrong.
    pub fn from_json(text: &[u8]) -> Result<Self, ManifestProblem> {
        let missing = |what: &'static str| ManifestProblem::Missing { what };
        let top: Value =
            serde_json::from_slice(text).map_err(|e| ManifestProblem::Json(Arc::new(e)))?;
        let want = top
            .get("checksum")
            .and_then(Value::as_str)
            .ok_or(missing("\"checksum\" string"))?;
        let body = top.get("manifest").ok_or(missing("\"manifest\" object"))?;
        let computed = format::checksum(body.to_string().as_bytes());
        if format!("{computed:016x}") != want {
            return Err(ManifestProblem::ChecksumMismatch {
                stored: want.to_string(),
                computed,
            });
        }
        let obj = body.as_object().ok_or(missing("\"manifest\" object"))?;
        if obj.get("format").and_then(Value::as_str) != Some("zring-dataset") {
            return Err(ManifestProblem::NotADataset);
        }
        let major = obj
            .get("format_major")
            .and_then(Value::as_u64)
            .ok_or(missing("format_major"))?;
        if major != MANIFEST_MAJOR {
            return Err(ManifestProblem::UnsupportedMajor {
                major,
                supported: MANIFEST_MAJOR,
            });
        }
        let version = obj
            .get("version")
            .and_then(Value::as_u64)
            .ok_or(missing("version"))?;
        let fields = obj
            .get("fields")
            .and_then(Value::as_array)
            .ok_or(missing("fields list"))?
            .iter()
            .map(parse_field)
            .collect::<Result<Vec<_>, _>>()?;
        let shards = obj
            .get("shards")
            .and_then(Value::as_array)
            .ok_or(missing("shards list"))?
            .iter()
            .enumerate()
            .map(|(k, s)| parse_shard(k, s, fields.len()))
            .collect::<Result<Vec<_>, _>>()?;
        let m = Manifest {
            version,
            fields,
            shards,
        };
        m.validate()?;
        Ok(m)
    }

    /// Checks the fields: at least one, names usable in file names and unique,
    /// schemas valid.
    pub fn validate_fields(&self) -> Result<(), SchemaError> {
        if self.fields.is_empty() {
            return Err(SchemaError::NoFields);
        }
        for (k, f) in self.fields.iter().enumerate() {
            check_field_name(&f.name)?;
            if self.fields[..k].iter().any(|g| g.name == f.name) {
                return Err(SchemaError::DuplicateField {
                    name: f.name.clone(),
                });
            }
            f.schema.check().map_err(|e| SchemaError::Field {
                name: f.name.clone(),
                source: Box::new(e),
            })?;
        }
        Ok(())
    }

    /// Checks what JSON parsing cannot: field names usable in file names and unique,
    /// at least one field, shard paths inside the dataset, totals that fit.
    pub fn validate(&self) -> Result<(), ManifestProblem> {
        self.validate_fields().map_err(ManifestProblem::Fields)?;
        let mut total = 0u64;
        for (k, s) in self.shards.iter().enumerate() {
            if s.files.len() != self.fields.len() {
                return Err(ManifestProblem::ShardFiles {
                    shard: k,
                    files: s.files.len(),
                    fields: self.fields.len(),
                });
            }
            for f in &s.files {
                if !is_relative_inside(f) {
                    return Err(ManifestProblem::StorePath {
                        shard: k,
                        path: f.clone(),
                    });
                }
            }
            total = total
                .checked_add(s.records)
                .ok_or(ManifestProblem::RecordCountOverflow)?;
        }
        Ok(())
    }
}

/// Field names become parts of file names and Python dict keys: letters, digits,
/// `_`, `-` and `.`, not starting with `.`, at most 128 bytes.
pub fn check_field_name(name: &str) -> Result<(), SchemaError> {
    let ok_chars = name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.');
    if name.is_empty() || name.len() > 128 || !ok_chars || name.starts_with('.') {
        return Err(SchemaError::FieldName {
            name: name.to_string(),
        });
    }
    Ok(())
}

/// A shard's store path must stay inside the dataset directory.
fn is_relative_inside(p: &str) -> bool {
    !p.is_empty()
        && std::path::Path::new(p)
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)))
}

fn field_json(f: &Field) -> Value {
    let mut obj = Map::new();
    obj.insert("name".into(), json!(f.name));
    obj.insert("dtype".into(), json!(f.schema.dtype.name()));
    f.schema.layout.insert_json(&mut obj);
    obj.insert("metadata".into(), json!(f.schema.metadata));
    Value::Object(obj)
}

fn parse_field(v: &Value) -> Result<Field, ManifestProblem> {
    let get = |key: &'static str| v.get(key).ok_or(ManifestProblem::FieldMissing { key });
    let name = get("name")?
        .as_str()
        .ok_or(ManifestProblem::FieldMissing { key: "name" })?;
    let bad = |what: &'static str| ManifestProblem::FieldValue {
        field: name.to_string(),
        what,
    };
    let dtype_name = get("dtype")?.as_str().ok_or_else(|| bad("dtype"))?;
    let dtype = DType::from_str(dtype_name).map_err(|_| {
        ManifestProblem::Fields(SchemaError::Field {
            name: name.to_string(),
            source: Box::new(SchemaError::UnknownDType {
                name: dtype_name.to_string(),
            }),
        })
    })?;
    let layout = match get("layout")?.as_str() {
        Some("dense") => Layout::Dense {
            item_shape: get("item_shape")?
                .as_array()
                .ok_or_else(|| bad("item_shape is not a list"))?
                .iter()
                .map(|d| {
                    d.as_u64()
                        .ok_or_else(|| bad("item_shape has a non-integer"))
                })
                .collect::<Result<_, _>>()?,
        },
        Some("ragged") => Layout::Ragged {
            ndim: get("ndim")?
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| bad("ndim"))?,
        },
        _ => return Err(bad("layout is not \"dense\" or \"ragged\"")),
    };
    let mut metadata = BTreeMap::new();
    if let Some(m) = v.get("metadata") {
        for (k, val) in m.as_object().ok_or_else(|| bad("metadata"))? {
            let s = val.as_str().ok_or_else(|| bad("metadata value"))?;
            metadata.insert(k.clone(), s.to_string());
        }
    }
    Ok(Field {
        name: name.to_string(),
        schema: Schema {
            layout,
            dtype,
            metadata,
        },
    })
}

fn parse_shard(k: usize, v: &Value, fields: usize) -> Result<Shard, ManifestProblem> {
    let missing = |what: &'static str| ManifestProblem::ShardMissing { shard: k, what };
    let records = v
        .get("records")
        .and_then(Value::as_u64)
        .ok_or(missing("record count"))?;
    let files = v
        .get("files")
        .and_then(Value::as_array)
        .ok_or(missing("files list"))?
        .iter()
        .map(|f| {
            f.as_str()
                .map(str::to_string)
                .ok_or(missing("files list of strings"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    if files.len() != fields {
        return Err(ManifestProblem::ShardFiles {
            shard: k,
            files: files.len(),
            fields,
        });
    }
    Ok(Shard { records, files })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Manifest {
        Manifest {
            version: 3,
            fields: vec![
                Field {
                    name: "tokens".into(),
                    schema: Schema::ragged(DType::I32, 1),
                },
                Field {
                    name: "text".into(),
                    schema: Schema::ragged(DType::U8, 1).with_metadata("encoding", "utf-8"),
                },
                Field {
                    name: "label".into(),
                    schema: Schema::dense(DType::I64, &[]),
                },
            ],
            shards: vec![Shard {
                records: 10,
                files: vec!["data/a".into(), "data/b".into(), "data/c".into()],
            }],
        }
    }

    #[test]
    fn round_trips_and_detects_damage() {
        let m = sample();
        let text = m.to_json();
        assert_eq!(Manifest::from_json(text.as_bytes()).expect("parse"), m);
        let damaged = text.replace("\"records\": 10", "\"records\": 11");
        assert_ne!(damaged, text);
        let err = Manifest::from_json(damaged.as_bytes()).expect_err("checksum");
        assert!(
            matches!(err, ManifestProblem::ChecksumMismatch { .. }),
            "{err}"
        );
        assert!(
            err.to_string().starts_with("checksum mismatch (stored "),
            "{err}"
        );
        assert!(matches!(
            Manifest::from_json(b"{}"),
            Err(ManifestProblem::Missing { .. })
        ));
        let err = Manifest::from_json(b"not json").expect_err("not json");
        assert!(matches!(err, ManifestProblem::Json(_)), "{err}");
        assert!(
            std::error::Error::source(&err).is_some(),
            "serde_json's error is kept"
        );
    }

    #[test]
    fn rejects_escaping_paths_and_bad_names() {
        let mut m = sample();
        m.shards[0].files[0] = "../elsewhere.zr".into();
        assert!(matches!(
            m.validate(),
            Err(ManifestProblem::StorePath { shard: 0, .. })
        ));
        m.shards[0].files[0] = "/abs.zr".into();
        assert!(matches!(
            m.validate(),
            Err(ManifestProblem::StorePath { shard: 0, .. })
        ));
        let mut m = sample();
        m.fields[1].name = "tokens".into();
        assert!(matches!(
            m.validate(),
            Err(ManifestProblem::Fields(SchemaError::DuplicateField { .. }))
        ));
        for bad in ["", ".hidden", "a/b", "a b"] {
            assert!(check_field_name(bad).is_err(), "{bad}");
        }
    }
}

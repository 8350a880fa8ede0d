//! The dataset manifest: which fields a dataset has and which store holds each field
//! of each shard, as checksummed JSON (specified in docs/format.md).
//!
//! The file is `{"checksum": "<xxh3-64 hex>", "manifest": {...}}`; the checksum is
//! over the canonical compact JSON text of the `manifest` value (members sorted by
//! key, no whitespace: [`canonical_json`]), so a reader rewrites what it parsed in
//! that form and compares. The form is zring's own, not serde_json's order, which
//! changes when any crate in a program turns on serde_json's `preserve_order`.

use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::dtype::DType;
use crate::error::{ManifestProblem, SchemaError};
use crate::format;
use crate::schema::{canonical_json, Layout, Object, Schema, Slot};

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

    /// The JSON text of the manifest file, checksum included: canonical JSON
    /// (`canonical_json`) in the pretty layout, so the same manifest is always the
    /// same bytes, whatever serde_json's features (and the bytes zring wrote before).
    pub fn to_json(&self) -> String {
        let body = ManifestOut {
            format: "zring-dataset",
            format_major: MANIFEST_MAJOR,
            version: self.version,
            writer: concat!("zring ", env!("CARGO_PKG_VERSION")),
            fields: self.fields.iter().map(FieldOut::new).collect(),
            shards: self
                .shards
                .iter()
                .map(|s| ShardOut {
                    records: s.records,
                    files: &s.files,
                })
                .collect(),
        };
        // Cannot fail: every key is a string and every number an integer.
        let body = serde_json::to_value(&body).unwrap_or_default();
        let file = serde_json::to_value(FileOut {
            checksum: format!("{:016x}", manifest_checksum(&body)),
            manifest: body,
        })
        .unwrap_or_default();
        let mut text = canonical_json(&file, true);
        text.push('\n');
        text
    }

    /// Parses and validates a manifest file's text; the error says what is wrong.
    /// Keys zring does not know are ignored (and covered by the checksum).
    pub fn from_json(text: &[u8]) -> Result<Self, ManifestProblem> {
        let missing = |what: &'static str| move || ManifestProblem::Missing { what };
        let file: Slot<Object<FileIn>> =
            serde_json::from_slice(text).map_err(|e| ManifestProblem::Json(Arc::new(e)))?;
        // Not an object: it has no checksum either.
        let Object(file) = file.found().ok_or_else(missing("\"checksum\" string"))?;
        let want = file
            .checksum
            .found()
            .ok_or_else(missing("\"checksum\" string"))?;
        let body = file
            .manifest
            .found()
            .ok_or_else(missing("\"manifest\" object"))?;
        let computed = manifest_checksum(&body);
        if format!("{computed:016x}") != want {
            return Err(ManifestProblem::ChecksumMismatch {
                stored: want,
                computed,
            });
        }
        let Object(body) = Slot::<Object<ManifestIn>>::from_value(body)
            .found()
            .ok_or_else(missing("\"manifest\" object"))?;
        if body.format.found().as_deref() != Some("zring-dataset") {
            return Err(ManifestProblem::NotADataset);
        }
        let major = body
            .format_major
            .found()
            .ok_or_else(missing("format_major"))?;
        if major != MANIFEST_MAJOR {
            return Err(ManifestProblem::UnsupportedMajor {
                major,
                supported: MANIFEST_MAJOR,
            });
        }
        let version = body.version.found().ok_or_else(missing("version"))?;
        let fields = body
            .fields
            .found()
            .ok_or_else(missing("fields list"))?
            .into_iter()
            .map(parse_field)
            .collect::<Result<Vec<_>, _>>()?;
        let shards = body
            .shards
            .found()
            .ok_or_else(missing("shards list"))?
            .into_iter()
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

/// The checksum of a manifest value: XXH3-64 of its canonical compact JSON.
fn manifest_checksum(body: &Value) -> u64 {
    format::checksum(canonical_json(body, false).as_bytes())
}

/// The manifest file as written.
#[derive(Serialize)]
struct FileOut {
    checksum: String,
    manifest: Value,
}

/// The `manifest` value as written.
#[derive(Serialize)]
struct ManifestOut<'a> {
    format: &'static str,
    format_major: u64,
    version: u64,
    writer: &'static str,
    fields: Vec<FieldOut<'a>>,
    shards: Vec<ShardOut<'a>>,
}

#[derive(Serialize)]
struct FieldOut<'a> {
    name: &'a str,
    dtype: &'static str,
    /// `layout` and `item_shape` or `ndim`, spelled as in store schemas.
    #[serde(flatten)]
    layout: Map<String, Value>,
    metadata: &'a BTreeMap<String, String>,
}

impl<'a> FieldOut<'a> {
    fn new(f: &'a Field) -> Self {
        let mut layout = Map::new();
        f.schema.layout.insert_json(&mut layout);
        FieldOut {
            name: &f.name,
            dtype: f.schema.dtype.name(),
            layout,
            metadata: &f.schema.metadata,
        }
    }
}

#[derive(Serialize)]
struct ShardOut<'a> {
    records: u64,
    files: &'a [String],
}

/// The manifest file as read. Each key is a [`Slot`], so that what is missing or of
/// the wrong kind becomes a [`ManifestProblem`] naming it, checked in a fixed order;
/// unknown keys are ignored.
#[derive(Deserialize, Default)]
#[serde(default)]
struct FileIn {
    checksum: Slot<String>,
    /// Kept as parsed: the checksum is over its canonical form.
    manifest: Slot<Value>,
}

/// The `manifest` value as read.
#[derive(Deserialize, Default)]
#[serde(default)]
struct ManifestIn {
    format: Slot<String>,
    format_major: Slot<u64>,
    version: Slot<u64>,
    fields: Slot<Vec<Slot<Object<FieldIn>>>>,
    shards: Slot<Vec<Slot<Object<ShardIn>>>>,
}

/// One entry of `fields` as read.
#[derive(Deserialize, Default)]
#[serde(default)]
struct FieldIn {
    name: Slot<String>,
    dtype: Slot<String>,
    layout: Slot<String>,
    item_shape: Slot<Vec<Slot<u64>>>,
    ndim: Slot<u64>,
    metadata: Slot<BTreeMap<String, Slot<String>>>,
}

/// One entry of `shards` as read.
#[derive(Deserialize, Default)]
#[serde(default)]
struct ShardIn {
    records: Slot<u64>,
    files: Slot<Vec<Slot<String>>>,
}

fn parse_field(v: Slot<Object<FieldIn>>) -> Result<Field, ManifestProblem> {
    let missing = |key: &'static str| move || ManifestProblem::FieldMissing { key };
    // An entry that is not an object has no name either.
    let Some(Object(v)) = v.found() else {
        return Err(ManifestProblem::FieldMissing { key: "name" });
    };
    let name = v.name.found().ok_or_else(missing("name"))?;
    let bad = |what: &'static str| {
        let field = name.clone();
        move || ManifestProblem::FieldValue { field, what }
    };
    let dtype_name = v.dtype.take(missing("dtype"), bad("dtype"))?;
    let dtype = DType::from_str(&dtype_name).map_err(|_| {
        ManifestProblem::Fields(SchemaError::Field {
            name: name.clone(),
            source: Box::new(SchemaError::UnknownDType { name: dtype_name }),
        })
    })?;
    let not_a_layout = "layout is not \"dense\" or \"ragged\"";
    let layout = match v
        .layout
        .take(missing("layout"), bad(not_a_layout))?
        .as_str()
    {
        "dense" => Layout::Dense {
            item_shape: v
                .item_shape
                .take(missing("item_shape"), bad("item_shape is not a list"))?
                .into_iter()
                .map(|d| d.found().ok_or_else(bad("item_shape has a non-integer")))
                .collect::<Result<_, _>>()?,
        },
        "ragged" => Layout::Ragged {
            ndim: usize::try_from(v.ndim.take(missing("ndim"), bad("ndim"))?)
                .map_err(|_| bad("ndim")())?,
        },
        _ => return Err(bad(not_a_layout)()),
    };
    // Optional: a field without metadata has none.
    let metadata = match v.metadata {
        Slot::Absent => BTreeMap::new(),
        m => m
            .found()
            .ok_or_else(bad("metadata"))?
            .into_iter()
            .map(|(k, val)| Ok((k, val.found().ok_or_else(bad("metadata value"))?)))
            .collect::<Result<_, ManifestProblem>>()?,
    };
    Ok(Field {
        name,
        schema: Schema {
            layout,
            dtype,
            metadata,
        },
    })
}

fn parse_shard(
    k: usize,
    v: Slot<Object<ShardIn>>,
    fields: usize,
) -> Result<Shard, ManifestProblem> {
    let missing = |what: &'static str| move || ManifestProblem::ShardMissing { shard: k, what };
    // An entry that is not an object has no record count either.
    let Some(Object(v)) = v.found() else {
        return Err(missing("record count")());
    };
    let records = v.records.found().ok_or_else(missing("record count"))?;
    let files = v
        .files
        .found()
        .ok_or_else(missing("files list"))?
        .into_iter()
        .map(|f| f.found().ok_or_else(missing("files list of strings")))
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

    /// `v` as compact JSON with every object's keys in reverse order and every
    /// non-ASCII character escaped: what another writer (or serde_json with
    /// `preserve_order`, in some other order) might produce.
    fn reordered(v: &Value) -> String {
        let string = |s: &str| {
            let mut out = String::new();
            for c in serde_json::to_string(s).expect("json").chars() {
                match c.is_ascii() {
                    true => out.push(c),
                    false => {
                        let mut units = [0u16; 2];
                        for u in c.encode_utf16(&mut units) {
                            out.push_str(&format!("\\u{u:04X}"));
                        }
                    }
                }
            }
            out
        };
        match v {
            Value::String(s) => string(s),
            Value::Array(a) => format!(
                "[{}]",
                a.iter().map(reordered).collect::<Vec<_>>().join(", ")
            ),
            Value::Object(m) => {
                let mut members: Vec<_> = m.iter().collect();
                members.sort_by(|a, b| b.0.cmp(a.0));
                let members: Vec<String> = members
                    .into_iter()
                    .map(|(k, v)| format!("{} :{}", string(k), reordered(v)))
                    .collect();
                format!("{{ {} }}", members.join(","))
            }
            other => other.to_string(),
        }
    }

    /// A manifest file around `body`, with its checksum.
    fn file_of(body: &Value) -> String {
        let sum = manifest_checksum(body);
        format!(
            "{{\"manifest\": {}, \"checksum\": \"{sum:016x}\"}}",
            reordered(body)
        )
    }

    #[test]
    fn the_checksum_does_not_depend_on_key_order_spacing_or_escapes() {
        let mut m = sample();
        m.fields[1].schema = m.fields[1]
            .schema
            .clone()
            .with_metadata("Zé", "ü \"q\" \u{1}")
            .with_metadata("a", "😀");
        let text = m.to_json();
        // Written canonical: sorted, in serde_json's pretty layout.
        let v: Value = serde_json::from_str(&text).expect("json");
        assert_eq!(text, canonical_json(&v, true) + "\n");
        let body = &v["manifest"];
        let stored = v["checksum"].as_str().expect("checksum");
        assert_eq!(stored, format!("{:016x}", manifest_checksum(body)));
        // The same manifest laid out otherwise verifies and reads the same.
        let other = format!(
            "{{\"checksum\":\"{stored}\",\"manifest\":{}}}",
            reordered(body)
        );
        assert_ne!(other.replace(' ', ""), canonical_json(&v, false));
        assert_eq!(Manifest::from_json(other.as_bytes()).expect("reordered"), m);
        let compact = canonical_json(&v, false);
        assert_eq!(Manifest::from_json(compact.as_bytes()).expect("compact"), m);
    }

    #[test]
    fn bad_entries_are_named() {
        let body = || -> Value {
            let v: Value = serde_json::from_str(&sample().to_json()).expect("json");
            v["manifest"].clone()
        };
        let check = |body: &Value, want: &str| {
            let err = Manifest::from_json(file_of(body).as_bytes()).expect_err(want);
            assert_eq!(err.to_string(), want, "{body}");
        };
        let mut b = body();
        b["fields"][1] = serde_json::json!(["text", "uint8", "ragged", 1]);
        check(&b, "a field has no \"name\" string");
        let mut b = body();
        b["fields"][1]["metadata"]["encoding"] = serde_json::json!(8);
        check(&b, "field \"text\": metadata value");
        let mut b = body();
        b["fields"][2]["item_shape"] = serde_json::json!([1, -2]);
        check(&b, "field \"label\": item_shape has a non-integer");
        let mut b = body();
        b["shards"][0] = serde_json::json!([10, ["data/a", "data/b", "data/c"]]);
        check(&b, "shard 0 has no record count");
        let mut b = body();
        b["shards"][0]["files"][2] = serde_json::json!(null);
        check(&b, "shard 0 has no files list of strings");
        let mut b = body();
        b["format_major"] = serde_json::json!(2);
        check(
            &b,
            "manifest format 2 is not the 1 this zring reads; upgrade zring",
        );
        // Metadata may be left out; keys zring does not know are ignored.
        let mut b = body();
        let field = b["fields"][1].as_object_mut().expect("object");
        field.remove("metadata");
        field.insert("x_later".into(), serde_json::json!({"b": [1.5], "a": null}));
        let m = Manifest::from_json(file_of(&b).as_bytes()).expect("parse");
        assert!(m.fields[1].schema.metadata.is_empty());
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

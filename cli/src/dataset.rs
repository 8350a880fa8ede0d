//! `zring info` and `zring verify` on a dataset directory: the manifest's fields and
//! shards, and every record of every store checked.

use std::path::Path;
use std::time::Instant;

use serde_json::{json, Value};
use zring_engine::dataset::Dataset;
use zring_engine::{Layout, ReadOptions};

use super::output::{self, bytes, count};
use super::progress::{self, Unit};
use super::{CliError, CliResult};

/// Everything `info` reports about a dataset, as JSON.
pub fn describe(ds: &Dataset) -> CliResult<Value> {
    let mut fields = Vec::new();
    for (f, field) in ds.fields().iter().enumerate() {
        let (mut logical, mut stored) = (0u64, 0u64);
        let mut codecs = std::collections::BTreeSet::new();
        for s in 0..ds.shards() {
            if let Some(store) = ds.store(s, f) {
                let st = store.stats()?;
                logical += st.logical_bytes;
                stored += st.stored_bytes;
                codecs.insert(store.codec().name());
            }
        }
        let mut v = json!({
            "name": field.name,
            "dtype": field.schema.dtype.name(),
            "logical_bytes": logical,
            "stored_bytes": stored,
            "codecs": codecs,
            "metadata": field.schema.metadata,
        });
        match &field.schema.layout {
            Layout::Dense { item_shape } => {
                v["layout"] = json!("dense");
                v["item_shape"] = json!(item_shape);
            }
            Layout::Ragged { ndim } => {
                v["layout"] = json!("ragged");
                v["ndim"] = json!(ndim);
            }
        }
        fields.push(v);
    }
    Ok(json!({
        "path": ds.path().display().to_string(),
        "kind": "dataset",
        "version": ds.version(),
        "records": ds.len(),
        "shards": ds.shards(),
        "fields": fields,
    }))
}

/// The text form of [`describe`].
pub fn render(v: &Value) -> String {
    let u = |k: &str| v[k].as_u64().unwrap_or(0);
    let mut out = format!(
        "{:<16}{}\n{:<16}{}\n{:<16}{}\n{:<16}{}\n",
        "dataset",
        v["path"].as_str().unwrap_or(""),
        "version",
        u("version"),
        "records",
        count(u("records")),
        "shards",
        u("shards"),
    );
    for f in v["fields"].as_array().into_iter().flatten() {
        let shape = match f["item_shape"].as_array() {
            Some(d) => {
                let dims: Vec<u64> = d.iter().filter_map(Value::as_u64).collect();
                format!("dense {}", output::shape(&dims))
            }
            None => format!("ragged ndim {}", f["ndim"].as_u64().unwrap_or(0)),
        };
        let codecs: Vec<&str> = f["codecs"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let meta: Vec<String> = f["metadata"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, m)| format!("{k}={}", m.as_str().unwrap_or("")))
            .collect();
        out.push_str(&format!(
            "{:<16}{} {shape}, {} logical, {} stored, {}{}\n",
            format!("field {}", f["name"].as_str().unwrap_or("")),
            f["dtype"].as_str().unwrap_or(""),
            bytes(f["logical_bytes"].as_u64().unwrap_or(0)),
            bytes(f["stored_bytes"].as_u64().unwrap_or(0)),
            codecs.join("/"),
            if meta.is_empty() {
                String::new()
            } else {
                format!(" [{}]", meta.join(", "))
            }
        ));
    }
    out
}

/// `zring info` on a dataset.
pub fn info(path: &Path, as_json: bool, opts: ReadOptions) -> CliResult {
    let ds = Dataset::open(path, opts)?;
    let v = describe(&ds)?;
    let text = if as_json {
        format!("{v:#}\n")
    } else {
        render(&v)
    };
    output::print(&text).map_err(|e| CliError::new(format!("writing to stdout: {e}")))
}

/// `zring verify` on a dataset: opening checks the manifest's checksum and every
/// store against it; then every record of every store is checked.
pub fn verify(path: &Path, opts: ReadOptions) -> CliResult {
    let started = Instant::now();
    let ds = Dataset::open(path, opts)?;
    let bar = progress::bar(ds.len(), "verify", Unit::Records);
    let mut logical = 0u64;
    for s in 0..ds.shards() {
        for f in 0..ds.fields().len() {
            if let Some(store) = ds.store(s, f) {
                store
                    .verify()
                    .map_err(|e| CliError::from(e).context("verify failed"))?;
                logical += store.stats()?.logical_bytes;
            }
        }
        bar.inc(ds.manifest().shards[s].records);
    }
    bar.finish_and_clear();
    output::print(&format!(
        "ok: {}: version {}, {} records x {} fields in {} shards verified ({}) in {:.2} s\n",
        path.display(),
        ds.version(),
        count(ds.len()),
        ds.fields().len(),
        ds.shards(),
        bytes(logical),
        started.elapsed().as_secs_f64()
    ))
    .map_err(|e| CliError::new(format!("writing to stdout: {e}")))
}

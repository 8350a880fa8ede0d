//! `zring info`: what a store holds and how it is stored, as text or JSON.

use std::path::PathBuf;

use clap::Args;
use serde_json::{json, Value};
use zring_engine::{Codec, Layout, Store};

use super::output::{self, bytes, count};
use super::{CliError, CliResult};

#[derive(Debug, Args)]
pub struct InfoArgs {
    /// The store (or dataset directory) to describe.
    pub store: PathBuf,
    /// Print one machine-readable JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub read: super::settings::ReadArgs,
}

/// Runs `zring info`.
pub fn run(args: &InfoArgs) -> CliResult {
    let opts = args.read.options()?;
    if zring_engine::dataset::is_dataset(&args.store) {
        return super::dataset::info(&args.store, args.json, opts);
    }
    let store = Store::open(&args.store, opts)?;
    let info = describe(&store)?;
    let text = if args.json {
        format!("{info:#}\n")
    } else {
        render(&info)
    };
    output::print(&text).map_err(|e| CliError::new(format!("writing to stdout: {e}")))
}

/// Everything `info` reports, as JSON (also embedded in `bench --json`).
pub fn describe(store: &Store) -> CliResult<Value> {
    let stats = store.stats()?;
    let stored = store.stored_schema();
    let schema = store.schema();
    let (major, minor) = store.format_version();
    let mut v = json!({
        "path": store.path().display().to_string(),
        "layout": if schema.is_ragged() { "ragged" } else { "dense" },
        "dtype": schema.dtype.name(),
        "ndim": schema.ndim(),
        "records": stats.records,
        "codec": store.codec().name(),
        "level": (store.codec() != Codec::Raw).then_some(stored.level),
        "dict_bytes": store.dictionary().len(),
        "dict_id": stored.dict_id,
        "align": store.align(),
        "format_version": format!("{major}.{minor}"),
        "writer_version": store.writer_version(),
        "file_bytes": stats.file_bytes,
        "logical_bytes": stats.logical_bytes,
        "stored_bytes": stats.stored_bytes,
        "compression_ratio": (stats.stored_bytes > 0)
            .then(|| stats.logical_bytes as f64 / stats.stored_bytes as f64),
        "raw_records": stats.raw_records,
        "metadata": schema.metadata,
    });
    if let Layout::Dense { item_shape } = &schema.layout {
        v["item_shape"] = json!(item_shape);
        v["item_bytes"] = json!(store.item_bytes());
    }
    Ok(v)
}

/// The text form: one aligned `name  value` line per figure.
fn render(v: &Value) -> String {
    let u = |k: &str| v[k].as_u64().unwrap_or(0);
    let s = |k: &str| v[k].as_str().unwrap_or("").to_string();
    let mut lines: Vec<(&str, String)> = vec![("store", s("path")), ("layout", s("layout"))];
    lines.push(("dtype", s("dtype")));
    if let Some(dims) = v["item_shape"].as_array() {
        let dims: Vec<u64> = dims.iter().filter_map(Value::as_u64).collect();
        lines.push((
            "item shape",
            format!(
                "{}  ({} per record)",
                output::shape(&dims),
                bytes(u("item_bytes"))
            ),
        ));
    } else {
        lines.push(("ndim", u("ndim").to_string()));
    }
    lines.push(("records", count(u("records"))));
    let codec = match v["level"].as_i64() {
        Some(level) => format!("{} (level {level})", s("codec")),
        None => s("codec"),
    };
    lines.push(("codec", codec));
    let dict = match u("dict_bytes") {
        0 => "none".to_string(),
        n => format!(
            "{} bytes (id {})",
            count(n),
            v["dict_id"]
                .as_u64()
                .map_or("none".into(), |id| id.to_string())
        ),
    };
    lines.push(("dictionary", dict));
    lines.push(("align", format!("{} bytes", u("align"))));
    lines.push(("format version", s("format_version")));
    lines.push(("writer version", s("writer_version")));
    let sized = |k: &str| format!("{} ({} bytes)", bytes(u(k)), count(u(k)));
    lines.push(("file size", sized("file_bytes")));
    lines.push(("logical bytes", sized("logical_bytes")));
    lines.push(("stored bytes", sized("stored_bytes")));
    let ratio = v["compression_ratio"]
        .as_f64()
        .map_or("n/a".into(), |r| format!("{r:.2}x"));
    lines.push(("compression", ratio));
    lines.push((
        "raw records",
        format!("{} of {}", count(u("raw_records")), count(u("records"))),
    ));
    let meta: Vec<String> = v["metadata"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, val)| format!("{k} = {}", val.as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    if meta.is_empty() {
        lines.push(("metadata", "none".into()));
    }
    for (k, m) in meta.into_iter().enumerate() {
        lines.push((if k == 0 { "metadata" } else { "" }, m));
    }
    lines
        .into_iter()
        .map(|(k, val)| format!("{k:<16}{val}\n"))
        .collect()
}

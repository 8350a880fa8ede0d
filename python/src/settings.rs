//! The read settings of every Python open (`zring.open`, `DenseStore`,
//! `RaggedStore`, `Dataset`), parsed here, once: each keyword argument goes, as
//! text, to the engine's `ReadOptions::set`, the rule set Rust and the CLI's
//! `--read` use, so a bad value raises `InvalidArgumentError` with the engine's
//! message. `remote={"in_flight": 8}` is the engine's `remote.in_flight`. A pickle
//! carries the engine's serialised settings, given back as `_settings=`.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyString};
use zring_engine::ReadOptions;

use crate::errors;

/// The keyword argument that carries pickled settings (the engine's JSON); the
/// others change them.
const PICKLED: &str = "_settings";

/// The engine's read options from an open's keyword arguments (`None`: defaults).
pub(crate) fn read_options(
    py: Python<'_>,
    settings: Option<&Bound<'_, PyDict>>,
) -> PyResult<ReadOptions> {
    let mut o = ReadOptions::default();
    let Some(settings) = settings else {
        return Ok(o);
    };
    if let Some(json) = settings.get_item(PICKLED)? {
        o = ReadOptions::from_json(&json.extract::<String>()?)
            .map_err(|e| errors::engine(py, e))?;
    }
    for (k, v) in settings.iter() {
        let key: String = k.extract()?;
        match key.as_str() {
            PICKLED => {}
            "remote" => remote(py, &mut o, &v)?,
            _ => set(py, &mut o, &key, &v)?,
        }
    }
    o.validate().map_err(|e| errors::engine(py, e))?;
    Ok(o)
}

/// The remote options of a writer's `remote={...}` (how a store written to a URL is
/// uploaded), by the same rules as a read's.
pub(crate) fn remote_options(
    py: Python<'_>,
    v: Option<&Bound<'_, PyAny>>,
) -> PyResult<zring_engine::remote::RemoteOptions> {
    let mut o = ReadOptions::default();
    if let Some(v) = v {
        remote(py, &mut o, v)?;
    }
    o.validate().map_err(|e| errors::engine(py, e))?;
    Ok(o.remote)
}

/// `remote={...}`: each key is the engine's `remote.KEY`, `config`'s keys its
/// `remote.config.KEY`; a `None` value keeps the default (`cache_dir=None`: the
/// environment's or the default location).
fn remote(py: Python<'_>, o: &mut ReadOptions, v: &Bound<'_, PyAny>) -> PyResult<()> {
    if v.is_none() {
        return Ok(());
    }
    let dict = v
        .cast::<PyDict>()
        .map_err(|_| PyTypeError::new_err("remote= takes a dict of remote read options"))?;
    for (k, v) in dict.iter() {
        let key: String = k.extract()?;
        if v.is_none() {
            continue;
        }
        if key == "config" {
            let config = v.cast::<PyDict>().map_err(|_| {
                PyTypeError::new_err("remote[\"config\"] takes a dict of str to str")
            })?;
            for (ck, cv) in config.iter() {
                let ck: String = ck.extract()?;
                set(py, o, &format!("remote.config.{ck}"), &cv)?;
            }
        } else {
            set(py, o, &format!("remote.{key}"), &v)?;
        }
    }
    Ok(())
}

fn set(py: Python<'_>, o: &mut ReadOptions, key: &str, v: &Bound<'_, PyAny>) -> PyResult<()> {
    let text = text(v).map_err(|_| {
        PyTypeError::new_err(format!(
            "read setting {key} takes a str, int, float, bool or path, not {}",
            v.get_type()
                .name()
                .map_or_else(|_| "?".to_string(), |n| n.to_string())
        ))
    })?;
    o.set(key, &text).map_err(|e| errors::engine(py, e))
}

/// A value as the text the engine parses: `true`/`false`, the digits of an int
/// (NumPy's too) or a float, a str, a path-like's path.
fn text(v: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Ok(b) = v.cast::<PyBool>() {
        return Ok(if b.is_true() { "true" } else { "false" }.to_string());
    }
    if let Ok(s) = v.cast::<PyString>() {
        return Ok(s.to_str()?.to_string());
    }
    if v.cast::<PyInt>().is_ok() || v.cast::<PyFloat>().is_ok() {
        return Ok(v.str()?.to_str()?.to_string());
    }
    if v.hasattr("__index__")? {
        return Ok(v.call_method0("__index__")?.str()?.to_str()?.to_string());
    }
    let path = v.py().import("os")?.call_method1("fspath", (v,))?;
    let path: std::path::PathBuf = path.extract()?;
    Ok(path.to_string_lossy().into_owned())
}

/// A size argument (`lookahead_bytes=`, `shard_bytes=`, ...): a non-negative int,
/// or text with units read by the engine's one rule (`"64M"`, `"4KiB"`: binary
/// units, as the CLI and the environment variables take them).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Size(pub u64);

impl<'a, 'py> FromPyObject<'a, 'py> for Size {
    type Error = PyErr;

    fn extract(v: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        let py = v.py();
        if let Ok(s) = v.cast::<PyString>() {
            let text = s.to_str()?;
            return zring_engine::parse_size(text)
                .map(Size)
                .map_err(|e| errors::INVALID.err(py, e.to_string()));
        }
        if v.cast::<PyBool>().is_err() && v.hasattr("__index__")? {
            let n = v.call_method0("__index__")?;
            return n.extract::<u64>().map(Size).map_err(|_| {
                errors::INVALID.err(py, format!("a size must be at least 0 bytes, not {n}"))
            });
        }
        Err(PyTypeError::new_err(format!(
            "a size is an int of bytes or a str with units (\"64M\"), not {}",
            v.get_type()
                .name()
                .map_or_else(|_| "?".to_string(), |n| n.to_string())
        )))
    }
}

/// `_zring.parse_size(value)`: a size argument as a count of bytes, for the
/// package's pure-Python functions (`shard_bytes=`, `dict_bytes=`).
#[pyfunction]
pub(crate) fn parse_size(value: Size) -> u64 {
    value.0
}

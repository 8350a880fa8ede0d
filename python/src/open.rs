//! `zring.open` and unpickling: a store file opened as the class its layout needs.
//!
//! Apart from `store` because it builds `DenseStore` and `RaggedStore`, which stand on
//! `store`'s `StoreBase`: `store` imports neither of them, and nothing imports this.

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::dense::dense_init;
use crate::ragged::ragged_init;
use crate::store::{open, unpickled, StoreBase};

/// Opens the store at `path` as a `DenseStore` or a `RaggedStore`, whichever the
/// file holds.
///
/// `open(path, *, backend="auto", verify_checksums=True, threads=0, queue_depth=64, direct=False, remote=None)`
/// takes the arguments of `DenseStore` (`path` may be a URL such as
/// `s3://bucket/key`, read with the `remote` options) and raises its errors (but
/// never `SchemaError` for the layout).
///
/// >>> import os, tempfile, numpy as np, zring
/// >>> path = os.path.join(tempfile.mkdtemp(), "labels.zr")
/// >>> with zring.DenseWriter(path, "int64", ()) as w:
/// ...     w.append(np.array([3, 1, 4]))
/// range(0, 3)
/// >>> with zring.open(path) as store:
/// ...     print(type(store).__name__, store[1], store.codec)
/// DenseStore 1 zstd
#[pyfunction]
#[pyo3(name = "open", signature = (path, **settings), text_signature = "(path, *, backend='auto', verify_checksums=True, threads=0, queue_depth=64, direct=False, remote=None)")]
pub fn open_store(
    py: Python<'_>,
    path: PathBuf,
    settings: Option<&Bound<'_, PyDict>>,
) -> PyResult<Py<PyAny>> {
    let base = open(py, path, settings, None)?;
    typed(py, base)
}

/// What `pickle` calls to rebuild a store: the same path and read settings (the
/// engine's JSON), opened lazily by the first read in the receiving process, which
/// also checks that the file is still the one that was pickled
/// (`StoreChangedError` otherwise).
#[pyfunction]
#[pyo3(name = "_unpickle_store")]
pub fn unpickle_store(
    py: Python<'_>,
    path: PathBuf,
    settings: &str,
    identity: (u64, u64, u64, i128),
    schema_json: &str,
    len: u64,
) -> PyResult<Py<PyAny>> {
    let base = unpickled(py, path, settings, identity, schema_json, len)?;
    typed(py, base)
}

/// `base` as the class of its layout.
fn typed(py: Python<'_>, base: StoreBase) -> PyResult<Py<PyAny>> {
    if base.is_ragged() {
        Ok(Bound::new(py, ragged_init(base))?.into_any().unbind())
    } else {
        Ok(Bound::new(py, dense_init(base))?.into_any().unbind())
    }
}

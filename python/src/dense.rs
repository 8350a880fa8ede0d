//! `DenseStore`: fixed-shape records read with NumPy indexing.

use std::path::PathBuf;

use numpy::PyUntypedArray;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PySlice, PyTuple};

use zring_engine::Store;

use crate::buffer::{self, array_over};
use crate::index::{self, Selection};
use crate::interrupt;
use crate::pin::Pinned;
use crate::store::{check_out, open, StoreBase};

/// A store of fixed-shape records, opened for reading.
///
/// `DenseStore(path, *, backend="auto", verify_checksums=True, threads=0, queue_depth=64, direct=False, remote=None)`
///
/// - `path`: the store file (`str` or `os.PathLike`), or a URL (`s3://bucket/key`,
///   `gs://`, `az://`, `http(s)://`, `file://`) read through the remote path.
/// - `backend`: how records are read: `"auto"` (zring chooses per store), `"mmap"`,
///   `"pread"` or `"uring"` (io_uring; falls back to `pread` where unavailable).
/// - `verify_checksums`: check each record's checksum as it is read (on by
///   default; `False` skips the check for speed).
/// - `threads`: threads a large gather is split over (`0`: zring's default).
/// - `remote`: for a URL, a dict of remote read options (credentials, region,
///   endpoint, cache; docs/remote.md lists them); `None` takes them from the
///   environment.
///
/// The settings are checked by the engine's rules, the ones Rust's `ReadOptions` and
/// the CLI's `--read KEY=VALUE` follow: a value zring does not take (an unknown
/// backend, `threads=-1`, `remote={"in_flight": 0}`) raises `InvalidArgumentError`
/// (a `ValueError`) with the engine's message.
///
/// `store[i]` is one record (shape `item_shape`; negative `i` counts from the end),
/// `store[idx]` a batch `(len(idx), *item_shape)` for a slice, list, integer array
/// (any shape) or boolean mask; both are NumPy arrays over engine-owned memory
/// (no copy). `store[i, ...]` indexes further into the records as NumPy does.
///
/// Raises `StoreNotFoundError`/`ZringOSError` when the file (or the URL's object)
/// cannot be opened,
/// `CorruptStoreError` or `UnsupportedFormatError` for a file that is not a valid
/// store, `SchemaError` for a ragged store (open it with `RaggedStore` or
/// `zring.open`), `InvalidArgumentError` for a bad setting. Reads raise `ZringIndexError`
/// for records outside the store and `ClosedError` after `close()`.
///
/// >>> import os, tempfile, numpy as np, zring
/// >>> path = os.path.join(tempfile.mkdtemp(), "points.zr")
/// >>> with zring.DenseWriter(path, "float32", (2,)) as w:
/// ...     w.append(np.arange(8, dtype=np.float32).reshape(4, 2))
/// range(0, 4)
/// >>> with zring.DenseStore(path) as store:
/// ...     print(len(store), store.item_shape, store[-1], store[[2, 0]].shape)
/// 4 (2,) [6. 7.] (2, 2)
#[pyclass(extends = StoreBase, frozen, module = "zring._zring")]
pub struct DenseStore {
    item_shape: Vec<usize>,
    item_bytes: usize,
}

#[pymethods]
impl DenseStore {
    #[new]
    #[pyo3(signature = (path, **settings), text_signature = "(path, *, backend='auto', verify_checksums=True, threads=0, queue_depth=64, direct=False, remote=None)")]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        settings: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<PyClassInitializer<Self>> {
        let base = open(py, path, settings, Some(false))?;
        Ok(dense_init(base))
    }

    /// The shape of one record.
    #[getter]
    fn item_shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.item_shape)
    }

    /// Dimensions of one record.
    #[getter]
    fn ndim(&self) -> usize {
        self.item_shape.len()
    }

    /// Bytes of one record.
    #[getter]
    fn item_bytes(&self) -> usize {
        self.item_bytes
    }

    fn __getitem__<'py>(
        slf: &Bound<'py, Self>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if let Ok(t) = key.cast::<PyTuple>() {
            return dense_tuple(slf, t);
        }
        let base = slf.as_super().get();
        let sel = index::select(key, base.len())?;
        slf.get().read(slf.py(), base, &sel)
    }

    /// Gathers records `idx` (anything `store[...]` takes except a tuple) into a new
    /// array, or into `out`, which must be a C-contiguous, writeable array of the
    /// store's dtype and of shape `(len(idx), *item_shape)`; returns the array.
    ///
    /// Raises `ZringIndexError` for an index outside the store, `TypeError` for an
    /// `out` of the wrong dtype, `ValueError` for a wrong shape, a non-contiguous or
    /// read-only `out`.
    #[pyo3(signature = (idx, out = None))]
    fn gather<'py>(
        slf: &Bound<'py, Self>,
        idx: &Bound<'py, PyAny>,
        out: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let base = slf.as_super().get();
        let sel = index::select(idx, base.len())?;
        let me = slf.get();
        let Some(out) = out else {
            return me.read(py, base, &sel);
        };
        let out_arr = out
            .cast::<PyUntypedArray>()
            .map_err(|_| PyTypeError::new_err("out must be a NumPy array"))?;
        let mut shape = match &sel {
            Selection::One(_) => Vec::new(),
            Selection::Many { shape, .. } => shape.clone(),
        };
        shape.extend_from_slice(&me.item_shape);
        check_out(out_arr, &base.descr(py)?, &shape)?;
        // Pinned until the gather returns: its memory cannot be reallocated or freed
        // while the engine writes it without the GIL (see `pin`).
        let mut pinned = Pinned::for_writing(out_arr, "out")?;
        let store = base.handle(py)?;
        gather_into(py, &store, sel.ids(), pinned.bytes_mut())?;
        drop(pinned);
        Ok(out.clone())
    }
}

pub(crate) fn dense_init(base: StoreBase) -> PyClassInitializer<DenseStore> {
    let item_shape = base.item_shape();
    let item_bytes = base.engine_schema().item_bytes().unwrap_or(0) as usize;
    PyClassInitializer::from(base).add_subclass(DenseStore {
        item_shape,
        item_bytes,
    })
}

impl DenseStore {
    /// A new array holding the selected records.
    fn read<'py>(
        &self,
        py: Python<'py>,
        base: &StoreBase,
        sel: &Selection,
    ) -> PyResult<Bound<'py, PyAny>> {
        let descr = base.descr(py)?;
        let store = base.handle(py)?;
        let ids = sel.ids();
        let len = ids
            .len()
            .checked_mul(self.item_bytes)
            .ok_or_else(|| PyValueError::new_err("selection larger than the address space"))?;
        let mut buf = py.detach(|| buffer::acquire(len)).map_err(|e| {
            let what = buffer::records_of(&store.path().display(), ids, None);
            buffer::alloc_error(len, &what, e)
        })?;
        gather_into(py, &store, ids, &mut buf)?;
        let mut shape = match sel {
            Selection::One(_) => Vec::with_capacity(self.item_shape.len()),
            Selection::Many { shape, .. } => shape.clone(),
        };
        shape.extend_from_slice(&self.item_shape);
        array_over(py, buf, &descr, &shape)
    }
}

/// Gathers the records `ids` into `dest`; Ctrl-C stops it (see `interrupt`). On an
/// error `dest` holds a partial result.
fn gather_into(py: Python<'_>, store: &Store, ids: &[u64], dest: &mut [u8]) -> PyResult<()> {
    interrupt::read(py, |stop| store.gather_until(ids, dest, stop)).map_err(|h| h.into_py(py))
}

/// `store[i, ...]`: select records with the first element, then index the result
/// with the rest (NumPy's multi-axis semantics).
fn dense_tuple<'py>(
    slf: &Bound<'py, DenseStore>,
    key: &Bound<'py, PyTuple>,
) -> PyResult<Bound<'py, PyAny>> {
    let py = slf.py();
    let first = key
        .get_item(0)
        .map_err(|_| PyTypeError::new_err("store[()] is not a record selection"))?;
    let base = slf.as_super().get();
    let sel = index::select(&first, base.len())?;
    let records = slf.get().read(py, base, &sel)?;
    let rest = key.get_slice(1, key.len());
    match sel {
        Selection::One(_) => records.get_item(rest),
        Selection::Many { shape, .. } => {
            let mut parts: Vec<Bound<'py, PyAny>> = (0..shape.len())
                .map(|_| PySlice::full(py).into_any())
                .collect();
            parts.extend(rest.iter());
            records.get_item(PyTuple::new(py, parts)?)
        }
    }
}

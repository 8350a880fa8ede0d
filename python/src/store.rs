//! What `DenseStore` and `RaggedStore` share: `_Store` (open/close, len, dtype,
//! schema, verify, stats, iteration), the read helpers, and `zring.open`.
//!
//! Every read releases the GIL for the whole engine call, fills a pooled aligned
//! buffer and returns NumPy arrays over it (see `buffer`), or fills a caller's array
//! (`out=`). The layouts' own indexing lives in `dense` and `ragged`.

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::{Mutex, PoisonError};

use numpy::{PyArrayDescr, PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PySlice};
use zring_engine::{Backend, DType, Layout, ReadOptions, Store, StoreSchema};
use zring_platform::PooledBuf;

use crate::buffer::{self, is_writeable};
use crate::dense::dense_init;
use crate::errors;
use crate::ragged::ragged_init;

/// An engine error or a failed buffer allocation, raised once the GIL is back.
pub enum ReadError {
    Engine(zring_engine::Error),
    Alloc(usize, std::io::Error),
}

impl ReadError {
    pub fn into_py(self, py: Python<'_>) -> PyErr {
        match self {
            ReadError::Engine(e) => errors::engine(py, e),
            ReadError::Alloc(len, e) => buffer::alloc_error(len, e),
        }
    }
}

impl From<zring_engine::Error> for ReadError {
    fn from(e: zring_engine::Error) -> Self {
        ReadError::Engine(e)
    }
}

/// A pooled buffer of `len` bytes filled by `fill` (called without the GIL).
pub(crate) fn filled(
    len: usize,
    fill: impl FnOnce(&mut [u8]) -> zring_engine::Result<()>,
) -> Result<PooledBuf, ReadError> {
    let mut buf = buffer::acquire(len).map_err(|e| ReadError::Alloc(len, e))?;
    fill(&mut buf)?;
    Ok(buf)
}

/// What `DenseStore` and `RaggedStore` share: the open engine store and its schema.
#[pyclass(subclass, frozen, module = "zring._zring", name = "_Store")]
pub struct StoreBase {
    /// `None` once closed. Reads clone the handle (an `Arc`), so closing while another
    /// thread reads is safe: the file is released when the last read finishes.
    store: Mutex<Option<Store>>,
    path: PathBuf,
    stored: StoreSchema,
    len: u64,
    descr: PyOnceLock<Py<PyArrayDescr>>,
}

impl StoreBase {
    /// The engine store, or `ClosedError`.
    pub fn handle(&self, py: Python<'_>) -> PyResult<Store> {
        self.store
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .ok_or_else(|| errors::closed(py, &format!("store {}", self.path.display())))
    }

    pub fn dtype_enum(&self) -> DType {
        self.stored.schema.dtype
    }

    /// The store's NumPy dtype (resolved once; bfloat16/float8 need ml_dtypes).
    pub fn descr<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArrayDescr>> {
        let d = self.descr.get_or_try_init(py, || {
            crate::dtype::to_numpy(py, self.dtype_enum()).map(Bound::unbind)
        })?;
        Ok(d.bind(py).clone())
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    /// The store's schema (layout, dtype, metadata).
    pub(crate) fn engine_schema(&self) -> &zring_engine::Schema {
        &self.stored.schema
    }

    pub fn is_ragged(&self) -> bool {
        self.stored.schema.is_ragged()
    }

    pub(crate) fn item_shape(&self) -> Vec<usize> {
        match &self.stored.schema.layout {
            Layout::Dense { item_shape } => item_shape.iter().map(|&d| d as usize).collect(),
            Layout::Ragged { .. } => Vec::new(),
        }
    }
}

/// Opens `path` and checks its layout is the one the caller wants.
pub(crate) fn open(
    py: Python<'_>,
    path: PathBuf,
    backend: &str,
    verify_checksums: bool,
    threads: usize,
    want_ragged: Option<bool>,
) -> PyResult<StoreBase> {
    let backend = Backend::from_str(backend).map_err(PyValueError::new_err)?;
    let opts = ReadOptions {
        backend,
        verify_checksums,
        threads,
        ..ReadOptions::default()
    };
    let store = py
        .detach(|| Store::open(&path, opts))
        .map_err(|e| errors::engine(py, e))?;
    let stored = store.stored_schema().clone();
    if let Some(ragged) = want_ragged {
        if stored.schema.is_ragged() != ragged {
            let (is, other) = if ragged {
                ("dense", "DenseStore")
            } else {
                ("ragged", "RaggedStore")
            };
            return Err(errors::SCHEMA.err(
                py,
                format!(
                    "{} is a {is} store; open it with {other} (or zring.open)",
                    path.display()
                ),
            ));
        }
    }
    Ok(StoreBase {
        len: store.len(),
        store: Mutex::new(Some(store)),
        path,
        stored,
        descr: PyOnceLock::new(),
    })
}

#[pymethods]
impl StoreBase {
    fn __len__(&self) -> usize {
        self.len as usize
    }

    /// The NumPy dtype of the elements.
    #[getter]
    fn dtype<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArrayDescr>> {
        self.descr(py)
    }

    /// The path the store was opened from.
    #[getter]
    fn path(&self) -> String {
        self.path.display().to_string()
    }

    /// `"raw"`, `"zstd"` or `"zstd-dict"`.
    #[getter]
    fn codec(&self) -> &'static str {
        self.stored.codec.name()
    }

    /// The read backend in use (`"mmap"`, `"pread"`, ...).
    #[getter]
    fn backend(&self, py: Python<'_>) -> PyResult<&'static str> {
        Ok(self.handle(py)?.backend().name())
    }

    /// Everything the store's schema section says, as a dict (layout, dtype,
    /// item_shape or ndim, codec, level, dict_id, record_count, metadata).
    #[getter]
    fn schema<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        py.import("json")?
            .call_method1("loads", (self.stored.to_json(),))
    }

    /// The user metadata (string to string) stored with the records.
    #[getter]
    fn metadata<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (k, v) in &self.stored.schema.metadata {
            d.set_item(k, v)?;
        }
        Ok(d)
    }

    /// Whether `close()` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.store
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_none()
    }

    /// Checks every record: table entries, checksums, and that compressed records
    /// decode. Raises `CorruptStoreError` naming the first bad record.
    fn verify(&self, py: Python<'_>) -> PyResult<()> {
        let store = self.handle(py)?;
        py.detach(|| store.verify())
            .map_err(|e| errors::engine(py, e))
    }

    /// Record count, logical and stored payload bytes, raw records, file size.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let store = self.handle(py)?;
        let s = py
            .detach(|| store.stats())
            .map_err(|e| errors::engine(py, e))?;
        let d = PyDict::new(py);
        d.set_item("records", s.records)?;
        d.set_item("logical_bytes", s.logical_bytes)?;
        d.set_item("stored_bytes", s.stored_bytes)?;
        d.set_item("raw_records", s.raw_records)?;
        d.set_item("file_bytes", s.file_bytes)?;
        Ok(d)
    }

    /// Releases the file (after reads in flight on other threads finish). Idempotent.
    fn close(&self) {
        let taken = self
            .store
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        drop(taken);
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    fn __exit__(
        &self,
        _exc_type: Option<Bound<'_, PyAny>>,
        _exc: Option<Bound<'_, PyAny>>,
        _tb: Option<Bound<'_, PyAny>>,
    ) -> bool {
        self.close();
        false
    }

    fn __iter__(slf: Bound<'_, Self>) -> StoreIter {
        let base = slf.get();
        let chunk = if base.is_ragged() {
            RAGGED_ITER_CHUNK
        } else {
            let width = base.stored.schema.item_bytes().unwrap_or(1).max(1);
            (ITER_CHUNK_BYTES / width).clamp(1, ITER_CHUNK_MAX)
        };
        StoreIter {
            len: base.len,
            store: slf.into_any().unbind(),
            next: 0,
            chunk_len: chunk,
            current: None,
        }
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let me = slf.get();
        let shape = match &me.stored.schema.layout {
            Layout::Dense { item_shape } => format!("item_shape={item_shape:?}"),
            Layout::Ragged { ndim } => format!("ndim={ndim}"),
        };
        Ok(format!(
            "{}({:?}, len={}, dtype={}, {shape}, codec={}{})",
            slf.get_type().name()?,
            me.path.display().to_string(),
            me.len,
            me.dtype_enum(),
            me.stored.codec,
            if me.closed() { ", closed" } else { "" }
        ))
    }
}

/// Iteration reads this many bytes of dense records per gather.
const ITER_CHUNK_BYTES: u64 = 4 << 20;
const ITER_CHUNK_MAX: u64 = 4096;
/// Iteration reads this many ragged records per gather.
const RAGGED_ITER_CHUNK: u64 = 256;

/// Iterates a store record by record, reading chunks of records per gather; each
/// record is a view into its chunk.
#[pyclass(module = "zring._zring")]
pub struct StoreIter {
    store: Py<PyAny>,
    len: u64,
    next: u64,
    chunk_len: u64,
    /// The chunk being handed out and the id of its first record.
    current: Option<(u64, Py<PyAny>)>,
}

#[pymethods]
impl StoreIter {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&mut self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        if self.next >= self.len {
            self.current = None;
            return Ok(None);
        }
        let i = self.next;
        let (start, chunk) = match &self.current {
            Some((start, chunk)) if i < start + self.chunk_len => (*start, chunk.bind(py).clone()),
            _ => {
                let end = (i + self.chunk_len).min(self.len);
                let slice = PySlice::new(py, i as isize, end as isize, 1);
                let chunk = self.store.bind(py).get_item(slice)?;
                self.current = Some((i, chunk.clone().unbind()));
                (i, chunk)
            }
        };
        self.next += 1;
        Ok(Some(chunk.get_item(i - start)?.unbind()))
    }
}

/// Checks a caller's output array: dtype, shape, C-contiguity, writeability.
pub(crate) fn check_out(
    out: &Bound<'_, PyUntypedArray>,
    descr: &Bound<'_, PyArrayDescr>,
    shape: &[usize],
) -> PyResult<()> {
    if !out.dtype().is_equiv_to(descr) {
        return Err(PyTypeError::new_err(format!(
            "out has dtype {} but the store holds {descr}",
            out.dtype()
        )));
    }
    if out.shape() != shape {
        return Err(PyValueError::new_err(format!(
            "out has shape {:?}, expected {shape:?}",
            out.shape()
        )));
    }
    if !out.is_c_contiguous() {
        return Err(PyValueError::new_err(
            "out must be C-contiguous (use np.empty(shape, dtype) or np.ascontiguousarray)",
        ));
    }
    if !is_writeable(out) {
        return Err(PyValueError::new_err("out is read-only"));
    }
    Ok(())
}

/// `zring.open(path, ...)`: a `DenseStore` or a `RaggedStore`, whichever the file is.
#[pyfunction]
#[pyo3(name = "open", signature = (path, *, backend = "auto", verify_checksums = false, threads = 0))]
pub fn open_store(
    py: Python<'_>,
    path: PathBuf,
    backend: &str,
    verify_checksums: bool,
    threads: usize,
) -> PyResult<Py<PyAny>> {
    let base = open(py, path, backend, verify_checksums, threads, None)?;
    if base.is_ragged() {
        Ok(Bound::new(py, ragged_init(base))?.into_any().unbind())
    } else {
        Ok(Bound::new(py, dense_init(base))?.into_any().unbind())
    }
}

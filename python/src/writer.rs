//! `DenseWriter` and `RaggedWriter`: build a store from NumPy batches.
//!
//! Appends release the GIL while the engine compresses (on all cores) and writes.
//! `close()` publishes the store atomically; an exception inside `with` (or `abort()`,
//! or a writer that is garbage-collected unclosed) publishes nothing.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use numpy::{PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyRange, PyTuple};
use zring_engine::{Codec, DType, Schema, WriteOptions, Writer};

use crate::buffer::data_ptr;
use crate::errors;
use crate::input::{as_array, bytes_at, contiguous_bytes};

/// Where a writer is in its life.
enum State {
    /// Boxed: a writer is large, the other states are a word.
    Open(Box<Writer>),
    /// `close()` published this many records.
    Published(u64),
    Aborted,
    /// `close()` failed with this message; nothing was published.
    Failed(String),
}

/// The engine writer behind both Python writers.
struct Core {
    state: Mutex<State>,
    /// Records appended (readable without waiting for an append in flight).
    count: AtomicU64,
    dtype: DType,
    path: PathBuf,
}

/// Options shared by both writers' constructors.
struct Options {
    codec: String,
    level: i32,
    dict_bytes: Option<Vec<u8>>,
    overwrite: bool,
    align: u32,
    threads: usize,
    metadata: Option<BTreeMap<String, String>>,
}

impl Core {
    fn create(py: Python<'_>, path: PathBuf, mut schema: Schema, o: Options) -> PyResult<Self> {
        let codec = Codec::from_str(&o.codec).map_err(|e| errors::engine(py, e))?;
        if let Some(m) = o.metadata {
            schema.metadata = m;
        }
        let dtype = schema.dtype;
        let opts = WriteOptions {
            codec,
            level: o.level,
            dictionary: o.dict_bytes,
            align: o.align,
            overwrite: o.overwrite,
            threads: o.threads,
            ..WriteOptions::default()
        };
        let writer = py
            .detach(|| Writer::create(&path, schema, opts))
            .map_err(|e| errors::engine(py, e))?;
        Ok(Self {
            state: Mutex::new(State::Open(Box::new(writer))),
            count: AtomicU64::new(0),
            dtype,
            path,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `f` on the open writer without the GIL; returns the ids appended.
    fn append<'py>(
        &self,
        py: Python<'py>,
        f: impl FnOnce(&mut Writer) -> zring_engine::Result<std::ops::Range<u64>> + Send,
    ) -> PyResult<Bound<'py, PyRange>> {
        // The lock is taken and released without the GIL, so no thread ever waits for
        // the GIL while holding it.
        let ids = py.detach(|| match &mut *self.lock() {
            State::Open(w) => {
                let r = f(w);
                self.count.store(w.len(), Ordering::Relaxed);
                Some(r)
            }
            _ => None,
        });
        match ids {
            None => Err(self.closed(py)),
            Some(Err(e)) => Err(errors::engine(py, e)),
            Some(Ok(r)) => PyRange::new(py, r.start as isize, r.end as isize),
        }
    }

    fn closed(&self, py: Python<'_>) -> PyErr {
        let how = match &*self.lock() {
            State::Aborted => "was aborted",
            State::Failed(_) => "failed to publish",
            _ => "is closed",
        };
        errors::CLOSED.err(py, format!("writer of {} {how}", self.path.display()))
    }

    /// Publishes the store and returns its record count. Calling it again returns the
    /// same count; after `abort()` it raises `ClosedError`, after a failed close the
    /// first error again.
    fn close(&self, py: Python<'_>) -> PyResult<u64> {
        let result = py.detach(|| {
            let mut state = self.lock();
            match std::mem::replace(&mut *state, State::Aborted) {
                State::Open(w) => {
                    let r = (*w).close();
                    *state = match &r {
                        Ok(n) => State::Published(*n),
                        Err(e) => State::Failed(e.to_string()),
                    };
                    Some(r)
                }
                other => {
                    *state = other;
                    None
                }
            }
        });
        match result {
            Some(r) => r.map_err(|e| errors::engine(py, e)),
            None => {
                // Read the state, then release the lock before building the error
                // (`closed` takes it again).
                let (published, failed) = match &*self.lock() {
                    State::Published(n) => (Some(*n), None),
                    State::Failed(msg) => (None, Some(msg.clone())),
                    _ => (None, None),
                };
                match (published, failed) {
                    (Some(n), _) => Ok(n),
                    (_, Some(msg)) => Err(errors::POISONED.err(
                        py,
                        format!("{}: closing failed earlier: {msg}", self.path.display()),
                    )),
                    _ => Err(self.closed(py)),
                }
            }
        }
    }

    /// Discards everything written; nothing is published. Idempotent, and a no-op
    /// after a successful `close()`.
    fn abort(&self, py: Python<'_>) {
        py.detach(|| {
            let mut state = self.lock();
            if matches!(*state, State::Open(_)) {
                if let State::Open(w) = std::mem::replace(&mut *state, State::Aborted) {
                    (*w).abort();
                }
            }
        });
    }

    fn is_closed(&self) -> bool {
        !matches!(*self.lock(), State::Open(_))
    }

    fn exit(&self, py: Python<'_>, exc_type: Option<&Bound<'_, PyAny>>) -> PyResult<bool> {
        match exc_type {
            Some(t) if !t.is_none() => self.abort(py),
            _ => {
                self.close(py)?;
            }
        }
        Ok(false)
    }
}

fn parse_item_shape(obj: &Bound<'_, PyAny>) -> PyResult<Vec<u64>> {
    if let Ok(n) = obj.extract::<u64>() {
        return Ok(vec![n]);
    }
    obj.extract::<Vec<u64>>().map_err(|_| {
        PyTypeError::new_err("item_shape must be a tuple of non-negative ints (or one int)")
    })
}

/// Builds a dense store: `append` batches of shape `(n, *item_shape)`.
#[pyclass(frozen, module = "zring._zring")]
pub struct DenseWriter {
    core: Core,
    item_shape: Vec<usize>,
}

#[pymethods]
impl DenseWriter {
    #[new]
    #[pyo3(signature = (path, dtype, item_shape, codec = "zstd".to_string(), level = 3, dict_bytes = None, overwrite = false, *, align = 8, threads = 0, metadata = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        dtype: &Bound<'_, PyAny>,
        item_shape: &Bound<'_, PyAny>,
        codec: String,
        level: i32,
        dict_bytes: Option<Vec<u8>>,
        overwrite: bool,
        align: u32,
        threads: usize,
        metadata: Option<BTreeMap<String, String>>,
    ) -> PyResult<Self> {
        let dtype = crate::dtype::from_py(dtype)?;
        let shape = parse_item_shape(item_shape)?;
        let opts = Options {
            codec,
            level,
            dict_bytes,
            overwrite,
            align,
            threads,
            metadata,
        };
        let core = Core::create(py, path, Schema::dense(dtype, &shape), opts)?;
        Ok(Self {
            core,
            item_shape: shape.iter().map(|&d| d as usize).collect(),
        })
    }

    /// Appends a batch of shape `(n, *item_shape)` of the store's dtype, C-contiguous:
    /// a NumPy array, a DLPack CPU tensor or a buffer. Returns the new records' ids.
    fn append<'py>(
        &self,
        py: Python<'py>,
        batch: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyRange>> {
        let arr = as_array(batch, "batch")?;
        let want = &self.item_shape;
        let shape = arr.shape();
        if shape.len() != want.len() + 1 || shape[1..] != want[..] {
            let hint = if shape == &want[..] {
                " (one record? append batch[None])"
            } else {
                ""
            };
            return Err(PyValueError::new_err(format!(
                "batch has shape {shape:?}, expected (n, {}){hint}",
                want.iter()
                    .map(|d| d.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        let bytes = contiguous_bytes(&arr, self.core.dtype, "batch")?;
        self.core.append(py, |w| {
            // SAFETY: `arr` (bound in this frame) keeps the array alive during the call.
            w.append_dense(unsafe { bytes_at(bytes) })
        })
    }

    /// Publishes the store and returns its record count (idempotent).
    fn close(&self, py: Python<'_>) -> PyResult<u64> {
        self.core.close(py)
    }

    /// Discards the store being written; nothing is published.
    fn abort(&self, py: Python<'_>) {
        self.core.abort(py)
    }

    #[getter]
    fn closed(&self) -> bool {
        self.core.is_closed()
    }

    #[getter]
    fn path(&self) -> String {
        self.core.path.display().to_string()
    }

    #[getter]
    fn item_shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.item_shape)
    }

    #[getter]
    fn dtype<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(crate::dtype::to_numpy(py, self.core.dtype)?.into_any())
    }

    fn __len__(&self) -> usize {
        self.core.count.load(Ordering::Relaxed) as usize
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    #[pyo3(signature = (exc_type = None, _exc = None, _tb = None))]
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        self.core.exit(py, exc_type)
    }
}

/// Builds a ragged store of `ndim`-dimensional records: `append` a `RaggedBatch` or a
/// list of arrays.
#[pyclass(frozen, module = "zring._zring")]
pub struct RaggedWriter {
    core: Core,
    ndim: usize,
}

#[pymethods]
impl RaggedWriter {
    #[new]
    #[pyo3(signature = (path, dtype, ndim = 1, codec = "zstd".to_string(), level = 3, dict_bytes = None, overwrite = false, *, align = 8, threads = 0, metadata = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        dtype: &Bound<'_, PyAny>,
        ndim: usize,
        codec: String,
        level: i32,
        dict_bytes: Option<Vec<u8>>,
        overwrite: bool,
        align: u32,
        threads: usize,
        metadata: Option<BTreeMap<String, String>>,
    ) -> PyResult<Self> {
        let dtype = crate::dtype::from_py(dtype)?;
        let opts = Options {
            codec,
            level,
            dict_bytes,
            overwrite,
            align,
            threads,
            metadata,
        };
        let core = Core::create(py, path, Schema::ragged(dtype, ndim), opts)?;
        Ok(Self { core, ndim })
    }

    /// Appends records: a `RaggedBatch` (values, cu_seqlens, shapes) or a list of
    /// arrays of the store's dtype and ndim (each non-empty). Returns their ids.
    fn append<'py>(
        &self,
        py: Python<'py>,
        batch: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyRange>> {
        if batch.cast::<PyList>().is_ok() || batch.cast::<PyTuple>().is_ok() {
            return self.append_records(py, batch);
        }
        if batch.hasattr("cu_seqlens")? && batch.hasattr("values")? && batch.hasattr("shapes")? {
            return self.append_parts(py, batch);
        }
        Err(PyTypeError::new_err(format!(
            "a ragged batch is a RaggedBatch or a list of arrays, got {}",
            batch.get_type().name()?
        )))
    }

    fn close(&self, py: Python<'_>) -> PyResult<u64> {
        self.core.close(py)
    }

    fn abort(&self, py: Python<'_>) {
        self.core.abort(py)
    }

    #[getter]
    fn closed(&self) -> bool {
        self.core.is_closed()
    }

    #[getter]
    fn path(&self) -> String {
        self.core.path.display().to_string()
    }

    #[getter]
    fn ndim(&self) -> usize {
        self.ndim
    }

    #[getter]
    fn dtype<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(crate::dtype::to_numpy(py, self.core.dtype)?.into_any())
    }

    fn __len__(&self) -> usize {
        self.core.count.load(Ordering::Relaxed) as usize
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    #[pyo3(signature = (exc_type = None, _exc = None, _tb = None))]
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        self.core.exit(py, exc_type)
    }
}

impl RaggedWriter {
    /// Appends a RaggedBatch-like object without copying its values.
    fn append_parts<'py>(
        &self,
        py: Python<'py>,
        batch: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyRange>> {
        let values = as_array(&batch.getattr("values")?, "values")?;
        let bytes = contiguous_bytes(&values, self.core.dtype, "values")?;
        let cu = int64_values(&batch.getattr("cu_seqlens")?)?;
        if let Some(bad) = cu.iter().find(|&&c| c < 0) {
            return Err(PyValueError::new_err(format!(
                "cu_seqlens holds a negative offset ({bad})"
            )));
        }
        let cu: Vec<u64> = cu.into_iter().map(|c| c as u64).collect();
        let shapes = int64_values(&batch.getattr("shapes")?)?
            .into_iter()
            .map(u32::try_from)
            .collect::<Result<Vec<u32>, _>>()
            .map_err(|_| PyValueError::new_err("shapes must hold dims between 0 and 2^32 - 1"))?;
        self.core.append(py, |w| {
            // SAFETY: `values` (bound in this frame) keeps the array alive.
            w.append_ragged(unsafe { bytes_at(bytes) }, &cu, &shapes)
        })
    }

    /// Packs a list of arrays into one values buffer and appends it.
    fn append_records<'py>(
        &self,
        py: Python<'py>,
        list: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyRange>> {
        let np = py.import("numpy")?;
        let mut arrays = Vec::new();
        let mut parts = Vec::new();
        let mut cu = vec![0u64];
        let mut shapes = Vec::new();
        for (k, item) in list.try_iter()?.enumerate() {
            let mut a = as_array(&item?, "record")?;
            if a.ndim() != self.ndim {
                return Err(PyValueError::new_err(format!(
                    "record {k} has {} dimensions (shape {:?}); the store's records have {}",
                    a.ndim(),
                    a.shape(),
                    self.ndim
                )));
            }
            if a.is_empty() {
                return Err(PyValueError::new_err(format!(
                    "record {k} is empty (shape {:?}); ragged records hold at least one element",
                    a.shape()
                )));
            }
            if !a.is_c_contiguous() {
                a = np
                    .call_method1("ascontiguousarray", (&a,))?
                    .cast_into::<PyUntypedArray>()?;
            }
            let part = contiguous_bytes(&a, self.core.dtype, "record")?;
            for &d in a.shape() {
                shapes.push(u32::try_from(d).map_err(|_| {
                    PyValueError::new_err(format!("record {k} has a dimension above 2^32 - 1"))
                })?);
            }
            let last = cu.last().copied().unwrap_or(0);
            cu.push(last + a.len() as u64);
            parts.push(part);
            arrays.push(a);
        }
        self.core.append(py, |w| {
            let total: usize = parts.iter().map(|p| p.1).sum();
            let mut values = Vec::with_capacity(total);
            for &p in &parts {
                // SAFETY: `arrays` (alive in the enclosing frame) keeps every record alive.
                values.extend_from_slice(unsafe { bytes_at(p) });
            }
            w.append_ragged(&values, &cu, &shapes)
        })
    }
}

/// The elements of an integer array-like, flattened, as int64.
fn int64_values(obj: &Bound<'_, PyAny>) -> PyResult<Vec<i64>> {
    let np = obj.py().import("numpy")?;
    let a = np
        .call_method1("asarray", (obj,))?
        .cast_into::<PyUntypedArray>()?;
    if !matches!(a.dtype().kind(), b'i' | b'u') {
        return Err(PyTypeError::new_err(format!(
            "cu_seqlens and shapes must be integer arrays, got dtype {}",
            a.dtype()
        )));
    }
    let a = np
        .call_method1("ascontiguousarray", (a, "int64"))?
        .cast_into::<PyUntypedArray>()?;
    let ptr = data_ptr(&a).cast::<i64>();
    // SAFETY: `a` is a live C-contiguous int64 array of a.len() elements.
    Ok((0..a.len())
        .map(|k| unsafe { std::ptr::read_unaligned(ptr.add(k)) })
        .collect())
}

//! What `DenseStore` and `RaggedStore` share: `_Store` (open/close, len, dtype,
//! schema, verify, stats, iteration) and the read helpers. They build on it, so it
//! imports neither; `open` (`zring.open`, unpickling) picks between them.
//!
//! Every read releases the GIL for the whole engine call, fills a pooled aligned
//! buffer and returns NumPy arrays over it (see `buffer`), or fills a caller's array
//! (`out=`). The layouts' own indexing lives in `dense` and `ragged`.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use numpy::{PyArrayDescr, PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PySlice, PyType};
use zring_engine::{DType, Layout, ReadOptions, Store, StoreSchema};

use crate::buffer::{self, is_writeable};
use crate::errors;
use crate::interrupt;

/// An engine error or a failed buffer allocation, raised once the GIL is back.
pub enum ReadError {
    Engine(zring_engine::Error),
    /// A buffer of this many bytes, for what the string names (see
    /// `buffer::records_of`), could not be allocated.
    Alloc(usize, String, std::io::Error),
}

impl ReadError {
    pub fn into_py(self, py: Python<'_>) -> PyErr {
        match self {
            ReadError::Engine(e) => errors::engine(py, e),
            ReadError::Alloc(len, what, e) => buffer::alloc_error(len, &what, e),
        }
    }
}

impl From<zring_engine::Error> for ReadError {
    fn from(e: zring_engine::Error) -> Self {
        ReadError::Engine(e)
    }
}

/// The base class of `DenseStore` and `RaggedStore` (exported as `zring.Store`):
/// length, dtype, schema, metadata, `verify`, `stats`, `close`, `with` and
/// iteration record by record. Open stores with `zring.open`, `DenseStore` or
/// `RaggedStore`; this class is not constructed directly.
#[pyclass(subclass, frozen, module = "zring._zring", name = "_Store")]
pub struct StoreBase {
    /// Reads clone the open handle (an `Arc`), so closing while another thread reads
    /// is safe: the file is released when the last read finishes.
    store: Mutex<Slot>,
    path: PathBuf,
    /// The settings the store was opened with (what a pickle carries).
    options: ReadOptions,
    /// The file the records come from, as first opened; a reopen must find it again.
    identity: Identity,
    stored: StoreSchema,
    len: u64,
    descr: PyOnceLock<Py<PyArrayDescr>>,
}

/// Whether the engine store is open.
enum Slot {
    Open(Store),
    /// Unpickled and not read yet: opened (and checked) by the first read.
    Pending,
    Closed,
}

/// Which file a store is: device, inode, size and modification time. Publishing a
/// store renames a new file into place, so a replaced store has another inode.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Identity {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i128,
}

/// `Identity::dev` of a remote object (whose `ino` is a hash of its ETag and
/// modification time).
const REMOTE_DEV: u64 = u64::MAX;

impl std::fmt::Display for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.dev == REMOTE_DEV {
            return write!(f, "object version {:016x}, {} bytes", self.ino, self.size);
        }
        write!(
            f,
            "inode {} on device {}, {} bytes, modified at {} ns",
            self.ino, self.dev, self.size, self.mtime_ns
        )
    }
}

impl Identity {
    /// The identity of the store `store` opened from `path`: a remote object's
    /// version, else the file's.
    fn of_store(py: Python<'_>, path: &Path, store: &Store) -> PyResult<Self> {
        match store.remote_version() {
            Some((size, e_tag, modified)) => {
                use std::hash::{Hash, Hasher};
                // DefaultHasher::new() has fixed keys: the same in every process.
                let mut h = std::collections::hash_map::DefaultHasher::new();
                (e_tag, modified).hash(&mut h);
                Ok(Self {
                    dev: REMOTE_DEV,
                    ino: h.finish(),
                    size,
                    mtime_ns: 0,
                })
            }
            None => Self::of(py, path),
        }
    }

    fn of(py: Python<'_>, path: &Path) -> PyResult<Self> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(path).map_err(|e| {
            let msg = format!("{}: reading the store's identity: {e}", path.display());
            errors::os_error(py, &e, msg)
        })?;
        Ok(Self {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
        })
    }
}

impl StoreBase {
    /// The engine store (opening it on first use after unpickling), or `ClosedError`.
    pub fn handle(&self, py: Python<'_>) -> PyResult<Store> {
        match &*self.slot() {
            Slot::Open(s) => return Ok(s.clone()),
            Slot::Closed => return Err(self.closed_error(py)),
            Slot::Pending => {}
        }
        // Opened without holding the lock: the open releases the GIL, and another
        // thread waiting on the lock with the GIL held would deadlock it.
        let opened = self.reopen(py)?;
        match &mut *self.slot() {
            Slot::Open(s) => Ok(s.clone()),
            Slot::Closed => Err(self.closed_error(py)),
            slot @ Slot::Pending => {
                *slot = Slot::Open(opened.clone());
                Ok(opened)
            }
        }
    }

    fn slot(&self) -> std::sync::MutexGuard<'_, Slot> {
        self.store.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn closed_error(&self, py: Python<'_>) -> PyErr {
        errors::closed(py, &format!("store {}", self.path.display()))
    }

    /// Opens the store again in this process and checks that it is the same file
    /// with the same schema as when it was pickled.
    fn reopen(&self, py: Python<'_>) -> PyResult<Store> {
        let store = open_engine(py, &self.path, &self.options)?;
        let now = Identity::of_store(py, &self.path, &store)?;
        if now != self.identity || store.stored_schema() != &self.stored || store.len() != self.len
        {
            return Err(errors::CHANGED.err(
                py,
                format!(
                    "{} is not the store that was pickled: it was replaced or changed since \
                     (then {}; now {}); open it again to read the new file",
                    self.path.display(),
                    self.identity,
                    now
                ),
            ));
        }
        Ok(store)
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

/// Opens the engine store at `path`.
fn open_engine(py: Python<'_>, path: &Path, options: &ReadOptions) -> PyResult<Store> {
    let opts = options.clone();
    py.detach(|| Store::open(path, opts))
        .map_err(|e| errors::engine(py, e))
}

/// Opens `path` and checks its layout is the one the caller wants.
pub(crate) fn open(
    py: Python<'_>,
    path: PathBuf,
    settings: Option<&Bound<'_, PyDict>>,
    want_ragged: Option<bool>,
) -> PyResult<StoreBase> {
    let options = crate::settings::read_options(py, settings)?;
    let store = open_engine(py, &path, &options)?;
    let identity = Identity::of_store(py, &path, &store)?;
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
        store: Mutex::new(Slot::Open(store)),
        path,
        options,
        identity,
        descr: resolved_descr(py, &stored),
        stored,
    })
}

/// The store's NumPy dtype, resolved now, while the store is built by one thread with
/// the GIL held. Left to the first read, a thread resolving it can release the GIL
/// midway (it calls into NumPy); a fork then would leave the child's copy of the
/// cell "being initialised" forever, and its first read would wait for it (a child
/// forked while another thread made the first read hung). A dtype that cannot be
/// resolved now (ml_dtypes missing) is left to the first read, which raises why.
fn resolved_descr(py: Python<'_>, stored: &StoreSchema) -> PyOnceLock<Py<PyArrayDescr>> {
    let cell = PyOnceLock::new();
    if let Ok(d) = crate::dtype::to_numpy(py, stored.schema.dtype) {
        let _ = cell.set(py, d.unbind());
    }
    if stored.schema.is_ragged() {
        // The same for the class ragged reads return (an import error surfaces there).
        let _ = batch_class(py);
    }
    cell
}

/// The Python `RaggedBatch` class, imported once. Ragged stores look it up when they
/// are built (see `resolved_descr` for why not at the first read: a fork while
/// another thread fills the cell would leave the child waiting on it).
pub(crate) fn batch_class(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    static CLASS: PyOnceLock<Py<PyType>> = PyOnceLock::new();
    CLASS.import(py, "zring._internal.ragged", "RaggedBatch")
}

/// A store rebuilt from what `__reduce__` pickled (see `open::unpickle_store`): the
/// same path and options, opened lazily by the first read, which also checks that
/// the file is still the one that was pickled.
pub(crate) fn unpickled(
    py: Python<'_>,
    path: PathBuf,
    settings: &str,
    identity: (u64, u64, u64, i128),
    schema_json: &str,
    len: u64,
) -> PyResult<StoreBase> {
    let options = ReadOptions::from_json(settings).map_err(|e| errors::engine(py, e))?;
    let stored = StoreSchema::from_json(schema_json.as_bytes())
        .map_err(|e| errors::INVALID.err(py, format!("unpickling {}: {e}", path.display())))?;
    let (dev, ino, size, mtime_ns) = identity;
    Ok(StoreBase {
        store: Mutex::new(Slot::Pending),
        path,
        options,
        identity: Identity {
            dev,
            ino,
            size,
            mtime_ns,
        },
        descr: resolved_descr(py, &stored),
        stored,
        len,
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

    /// For a store opened from a URL: what its remote reads cost so far, as a dict
    /// with the keys `requests` (ranged GETs), `bytes`, `cache_hits` and
    /// `cache_misses` (chunks of the local cache), `whole_fetches` and `whole_hits`
    /// (1 when the store was opened on a whole-object cache entry it downloaded, or
    /// found); `None` for a local store.
    #[getter]
    fn remote_stats<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let Some(s) = self.handle(py)?.remote_stats() else {
            return Ok(None);
        };
        let d = PyDict::new(py);
        d.set_item("requests", s.requests)?;
        d.set_item("bytes", s.bytes)?;
        d.set_item("cache_hits", s.cache_hits)?;
        d.set_item("cache_misses", s.cache_misses)?;
        d.set_item("whole_fetches", s.whole_fetches)?;
        d.set_item("whole_hits", s.whole_hits)?;
        Ok(Some(d))
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
        matches!(*self.slot(), Slot::Closed)
    }

    /// Pickles the store by what defines it (path, open options, the file's
    /// identity and schema), not its open file: the receiving process reopens it on
    /// first use, so stores cross to `spawn` and `forkserver` workers.
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let me = slf.get();
        let id = me.identity;
        let args = (
            // A str, not a pathlib.Path (which would fold a URL's `//`).
            me.path.as_os_str().to_os_string(),
            me.options.to_json(),
            (id.dev, id.ino, id.size, id.mtime_ns),
            me.stored.to_json(),
            me.len,
        );
        let f = py.import("zring._zring")?.getattr("_unpickle_store")?;
        (f, args).into_pyobject(py).map(Bound::into_any)
    }

    /// Checks every record: table entries, checksums, and that compressed records
    /// decode. Raises `CorruptStoreError` naming the first bad record.
    fn verify(&self, py: Python<'_>) -> PyResult<()> {
        let store = self.handle(py)?;
        // A whole-store check can take minutes: Ctrl-C stops it (see `interrupt`).
        interrupt::read(py, |stop| store.verify_range_until(0..store.len(), stop))
            .map_err(|h| h.into_py(py))
    }

    /// Record count, logical and stored payload bytes, raw records, file size, as a
    /// dict with the keys `records`, `logical_bytes`, `stored_bytes`, `raw_records`,
    /// `file_bytes`. Raises `ClosedError` after `close()`.
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
        let taken = std::mem::replace(&mut *self.slot(), Slot::Closed);
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
/// record is a view into its chunk. Once the store is closed, `next` raises
/// `ClosedError` (even for records of a chunk already read).
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
        // A chunk read before `close()` is still in memory, but the docs promise that
        // every read after `close()` raises: ask the store, not the chunk.
        let store = self.store.bind(py);
        store.cast::<StoreBase>()?.get().handle(py)?;
        let i = self.next;
        let (start, chunk) = match &self.current {
            Some((start, chunk)) if i < start + self.chunk_len => (*start, chunk.bind(py).clone()),
            _ => {
                let end = (i + self.chunk_len).min(self.len);
                let slice = PySlice::new(py, i as isize, end as isize, 1);
                let chunk = store.get_item(slice)?;
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

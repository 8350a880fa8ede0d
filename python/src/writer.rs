//! `DenseWriter` and `RaggedWriter`: build a store from NumPy batches.
//!
//! Appends release the GIL while the engine compresses (on all cores) and writes.
//! `close()` publishes the store atomically; an exception inside `with` (or `abort()`,
//! or a writer that is garbage-collected unclosed) publishes nothing.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use numpy::{PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyRange, PyTuple};
use zring_engine::{Codec, DType, Schema, WriteOptions, Writer};

use crate::buffer::data_ptr;
use crate::errors;
use crate::input::{as_array, pinned_as};
use crate::interrupt::{self, Halt, Plan};

/// Where a writer is in its life.
enum State {
    /// Boxed: a writer is large, the other states are a word.
    Open(Box<Writer>),
    /// `close()` published this many records.
    Published(u64),
    Aborted,
    /// `close()` failed with this error (kept whole, so that a later `close()`
    /// raises the same exception class); nothing was published.
    Failed(Arc<zring_engine::Error>),
    /// A signal handler raised during an append, which aborted the writer.
    Interrupted,
    /// `close()` was interrupted while publishing: the publish goes on, on a thread
    /// of its own, which sets `Published` or `Failed` when it ends.
    Closing,
}

/// What an append costs per record on top of its bytes (its table entry).
const APPEND_RECORD_COST: u64 = 64;

/// A number unique to the calling thread among live threads, never 0.
fn thread_token() -> usize {
    thread_local!(static TOKEN: u8 = const { 0 });
    TOKEN.with(|t| t as *const u8 as usize)
}

/// What one append call did.
enum Appended {
    Ids(std::ops::Range<u64>),
    Closed,
    Failed(zring_engine::Error),
    Interrupted(PyErr),
}

/// The `#[pymethods]` block of a writer class: the class's own methods, then those
/// every writer shares through its `core` (close, abort, closed, path, dtype, len and
/// the context manager), written once here. `close`'s docstring is the caller's.
macro_rules! writer_pymethods {
    ($ty:ident, $(#[$close_doc:meta])* close; { $($own:tt)* }) => {
        #[pymethods]
        impl $ty {
            $($own)*

            $(#[$close_doc])*
            fn close(&self, py: Python<'_>) -> PyResult<u64> {
                self.core.close(py)
            }

            /// Discards the store being written; nothing is published.
            fn abort(&self, py: Python<'_>) -> PyResult<()> {
                self.core.abort(py)
            }

            /// Whether the writer was closed or aborted.
            #[getter]
            fn closed(&self, py: Python<'_>) -> bool {
                self.core.is_closed(py)
            }

            /// The path the store is published at.
            #[getter]
            fn path(&self) -> String {
                self.core.path.display().to_string()
            }

            /// The NumPy dtype of the elements.
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
    };
}

/// The engine writer behind both Python writers.
struct Core {
    /// Shared with the thread that publishes (see `close`).
    state: Arc<Mutex<State>>,
    /// Records appended (readable without waiting for an append in flight).
    count: AtomicU64,
    /// The `thread_token` of the thread inside a sliced append, or 0.
    appender: AtomicUsize,
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
    /// How a store written to a URL is uploaded.
    remote: zring_engine::remote::RemoteOptions,
}

impl Core {
    fn create(py: Python<'_>, path: PathBuf, mut schema: Schema, o: Options) -> PyResult<Self> {
        let codec = Codec::from_str(&o.codec).map_err(|e| errors::engine(py, e))?;
        if let Some(m) = o.metadata {
            schema.metadata = m;
        }
        let dtype = schema.dtype;
        let opts = WriteOptions::with_codec(codec)
            .level(o.level)
            .dictionary(o.dict_bytes)
            .align(o.align)
            .overwrite(o.overwrite)
            .threads(o.threads)
            .remote(o.remote);
        let writer = py
            .detach(|| Writer::create(&path, schema, opts))
            .map_err(|e| errors::engine(py, e))?;
        Ok(Self {
            state: Arc::new(Mutex::new(State::Open(Box::new(writer)))),
            count: AtomicU64::new(0),
            appender: AtomicUsize::new(0),
            dtype,
            path,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A `RuntimeError` when this thread is inside this writer's sliced append: a
    /// signal handler run between slices calling the writer would otherwise wait
    /// forever for the lock its own append holds.
    fn check_not_reentered(&self, what: &str) -> PyResult<()> {
        if self.appender.load(Ordering::Relaxed) == thread_token() {
            return Err(PyRuntimeError::new_err(format!(
                "{what} called from a signal handler while this writer's append runs on \
                 the same thread; raise an exception instead (it aborts the writer)"
            )));
        }
        Ok(())
    }

    /// Appends items `0..n` by calling `f` on the open writer without the GIL, in
    /// slices that Ctrl-C can stop between (see `interrupt`; `cost(k)` is the cost of
    /// items `0..k`). `check` runs first on the whole batch, so that a bad tail
    /// cannot leave its head appended. Returns the ids appended. A signal handler's
    /// exception aborts the writer (its temporary file is removed) and is raised.
    fn append<'py>(
        &self,
        py: Python<'py>,
        n: usize,
        cost: impl Fn(usize) -> u64 + Sync,
        check: impl FnOnce(&Writer) -> zring_engine::Result<()> + Send,
        mut f: impl FnMut(&mut Writer, Range<usize>) -> zring_engine::Result<()> + Send,
    ) -> PyResult<Bound<'py, PyRange>> {
        self.check_not_reentered("append()")?;
        let plan = Plan::append(WriteOptions::default().chunk_bytes as u64);
        let sliced = interrupt::slicing(py, cost(n), plan);
        // The state lock is held across the slices (no other call may interleave
        // records) and only ever taken without the GIL, so the GIL taken between
        // slices to run signal handlers cannot deadlock with it.
        let done = py.detach(|| {
            let mut state = self.lock();
            let State::Open(w) = &mut *state else {
                return Appended::Closed;
            };
            let first = w.len();
            if let Err(e) = check(w) {
                return Appended::Failed(e);
            }
            self.appender.store(thread_token(), Ordering::Relaxed);
            let r = interrupt::slices(sliced, n, &cost, plan, |r| f(w, r));
            self.appender.store(0, Ordering::Relaxed);
            self.count.store(w.len(), Ordering::Relaxed);
            match r {
                Ok(()) => Appended::Ids(first..w.len()),
                Err(Halt::Failed(e)) => Appended::Failed(e),
                Err(Halt::Signal(e)) => {
                    if let State::Open(w) = std::mem::replace(&mut *state, State::Interrupted) {
                        (*w).abort();
                    }
                    Appended::Interrupted(e)
                }
            }
        });
        match done {
            Appended::Ids(r) => PyRange::new(py, r.start as isize, r.end as isize),
            Appended::Closed => Err(self.closed(py)),
            Appended::Failed(e) => Err(errors::engine(py, e)),
            Appended::Interrupted(e) => Err(e),
        }
    }

    /// The `ClosedError` for a call on a writer that is no longer open.
    fn closed(&self, py: Python<'_>) -> PyErr {
        let how = py.detach(|| match &*self.lock() {
            State::Aborted => "was aborted",
            State::Interrupted => "was aborted by an interrupted append",
            State::Failed(_) => "failed to publish",
            _ => "is closed",
        });
        errors::CLOSED.err(py, format!("writer of {} {how}", self.path.display()))
    }

    /// Publishes the store and returns its record count. Calling it again returns the
    /// same count; after `abort()` it raises `ClosedError`, after a failed close the
    /// first error again.
    ///
    /// The publish (its fsyncs) runs on a thread of its own that Ctrl-C does not wait
    /// for: `KeyboardInterrupt` arrives at once, the publish completes in the
    /// background, and a later `close()` waits for it and returns its count (or
    /// raises its error).
    fn close(&self, py: Python<'_>) -> PyResult<u64> {
        self.check_not_reentered("close()")?;
        let taken = py.detach(|| {
            let mut state = self.lock();
            match std::mem::replace(&mut *state, State::Closing) {
                State::Open(w) => Some(w),
                other => {
                    *state = other;
                    None
                }
            }
        });
        match taken {
            Some(w) => {
                let state = Arc::clone(&self.state);
                let r = interrupt::wait_for_thread(py, "wclose", move || {
                    let r = (*w).close().map_err(Arc::new);
                    *state.lock().unwrap_or_else(PoisonError::into_inner) = match &r {
                        Ok(n) => State::Published(*n),
                        Err(e) => State::Failed(Arc::clone(e)),
                    };
                    r
                })?;
                r.map_err(|e| errors::engine_with(py, &e, e.to_string()))
            }
            None => {
                // An interrupted close may still be publishing: wait for it.
                interrupt::wait(py, |limit| {
                    let end = std::time::Instant::now() + limit;
                    loop {
                        if !matches!(*self.lock(), State::Closing) {
                            return Some(());
                        }
                        if std::time::Instant::now() >= end {
                            return None;
                        }
                        std::thread::sleep(std::time::Duration::from_millis(2));
                    }
                })?;
                // Read the state (without the GIL, like every use of the lock), then
                // release the lock before building the error (`closed` takes it again).
                let (published, failed) = py.detach(|| match &*self.lock() {
                    State::Published(n) => (Some(*n), None),
                    State::Failed(e) => (None, Some(Arc::clone(e))),
                    _ => (None, None),
                });
                match (published, failed) {
                    (Some(n), _) => Ok(n),
                    // The same class as the failure itself (an interrupted close
                    // never raised it; a repeated one raises it again).
                    (_, Some(e)) => Err(errors::engine_with(
                        py,
                        &e,
                        format!("{}: closing failed earlier: {e}", self.path.display()),
                    )),
                    _ => Err(self.closed(py)),
                }
            }
        }
    }

    /// Discards everything written; nothing is published. Idempotent, and a no-op
    /// after a successful `close()`.
    fn abort(&self, py: Python<'_>) -> PyResult<()> {
        self.check_not_reentered("abort()")?;
        py.detach(|| {
            let mut state = self.lock();
            if matches!(*state, State::Open(_)) {
                if let State::Open(w) = std::mem::replace(&mut *state, State::Aborted) {
                    (*w).abort();
                }
            }
        });
        Ok(())
    }

    fn is_closed(&self, py: Python<'_>) -> bool {
        // Inside its own append (a signal handler) the writer is open.
        if self.appender.load(Ordering::Relaxed) == thread_token() {
            return false;
        }
        py.detach(|| !matches!(*self.lock(), State::Open(_)))
    }

    fn exit(&self, py: Python<'_>, exc_type: Option<&Bound<'_, PyAny>>) -> PyResult<bool> {
        match exc_type {
            Some(t) if !t.is_none() => self.abort(py)?,
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

/// Builds a dense store: `append` batches of shape `(n, *item_shape)`, then
/// `close()` publishes the file atomically.
///
/// `DenseWriter(path, dtype, item_shape, codec="zstd", level=3, dict_bytes=None,
/// overwrite=False, *, align=8, threads=0, metadata=None, remote=None)`
///
/// - `dtype`: the element type (a NumPy dtype or name; `"bfloat16"` and the float8
///   names work without ml_dtypes). `item_shape`: one record's shape (`()` for
///   scalars, or one int).
/// - `codec`: `"raw"`, `"zstd"` or `"zstd-dict"` (with `dict_bytes` from
///   `train_dict`); `level`: the zstd level.
/// - `overwrite`: replace an existing file (otherwise `StoreExistsError`).
/// - `align`: byte alignment of every record in the file; `threads`: compression
///   threads (`0`: all cores); `metadata`: string pairs stored with the schema.
///
/// Used in `with`, the store is published when the block ends normally and
/// discarded when it raises. Nothing exists at `path` until `close()` returns.
/// Raises `TypeError` for a dtype zring cannot store, `ZringError` subclasses for
/// bad options (`InvalidArgumentError`, `CodecError`) and I/O failures.
///
/// >>> import os, tempfile, numpy as np, zring
/// >>> path = os.path.join(tempfile.mkdtemp(), "images.zr")
/// >>> with zring.DenseWriter(path, "uint8", (2, 2), codec="zstd") as w:
/// ...     print(w.append(np.zeros((5, 2, 2), np.uint8)), len(w))
/// range(0, 5) 5
/// >>> len(zring.DenseStore(path))
/// 5
#[pyclass(frozen, module = "zring._zring")]
pub struct DenseWriter {
    core: Core,
    item_shape: Vec<usize>,
}

writer_pymethods! {
    DenseWriter,
    /// Publishes the store and returns its record count (idempotent). Raises
    /// `ClosedError` after `abort()`, `WriterPoisonedError` if publishing failed
    /// earlier, and the I/O error if publishing fails now.
    close;
    {
    #[new]
    #[pyo3(signature = (path, dtype, item_shape, codec = "zstd".to_string(), level = 3, dict_bytes = None, overwrite = false, *, align = 8, threads = 0, metadata = None, remote = None), text_signature = "(path, dtype, item_shape, codec='zstd', level=3, dict_bytes=None, overwrite=False, *, align=8, threads=0, metadata=None, remote=None)")]
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
        remote: Option<&Bound<'_, PyAny>>,
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
            remote: crate::settings::remote_options(py, remote)?,
        };
        let core = Core::create(py, path, Schema::dense(dtype, &shape), opts)?;
        Ok(Self {
            core,
            item_shape: shape.iter().map(|&d| d as usize).collect(),
        })
    }

    /// Appends a batch of shape `(n, *item_shape)` of the store's dtype, C-contiguous:
    /// a NumPy array, a DLPack CPU tensor or a buffer. Returns the new records' ids
    /// (a `range`). Raises `ValueError` for a wrong shape, `TypeError` for a wrong
    /// dtype, `ClosedError` once closed or aborted.
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
        // Pinned until the append returns: its memory cannot be reallocated or freed
        // while the engine reads it without the GIL.
        let pinned = pinned_as(&arr, self.core.dtype, "batch")?;
        let bytes = pinned.bytes();
        let width: usize = want.iter().product::<usize>() * self.core.dtype.itemsize();
        let n = shape[0];
        if width == 0 {
            return self.core.append(
                py,
                n,
                |_| 0,
                |_| Ok(()),
                |w, _| w.append_dense(bytes).map(drop),
            );
        }
        let cost = |k: usize| (k * width) as u64 + k as u64 * APPEND_RECORD_COST;
        self.core.append(
            py,
            n,
            cost,
            |_| Ok(()),
            |w, r| {
                w.append_dense(&bytes[r.start * width..r.end * width])
                    .map(drop)
            },
        )
    }

    /// The shape of one record.
    #[getter]
    fn item_shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.item_shape)
    }

    }
}

/// Builds a ragged store of `ndim`-dimensional records: `append` a `RaggedBatch` or a
/// list of arrays, then `close()` publishes the file atomically.
///
/// `RaggedWriter(path, dtype, ndim=1, codec="zstd", level=3, dict_bytes=None,
/// overwrite=False, *, align=8, threads=0, metadata=None, remote=None)` takes the options of
/// `DenseWriter`, with `ndim` (the dimensions of every record) for `item_shape`.
///
/// >>> import os, tempfile, numpy as np, zring
/// >>> path = os.path.join(tempfile.mkdtemp(), "tokens.zr")
/// >>> with zring.RaggedWriter(path, np.int32, 1, codec="raw") as w:
/// ...     w.append([np.arange(3, dtype=np.int32), np.arange(5, dtype=np.int32)])
/// range(0, 2)
#[pyclass(frozen, module = "zring._zring")]
pub struct RaggedWriter {
    core: Core,
    ndim: usize,
}

writer_pymethods! {
    RaggedWriter,
    /// Publishes the store and returns its record count (idempotent); raises as
    /// `DenseWriter.close` does.
    close;
    {
    #[new]
    #[pyo3(signature = (path, dtype, ndim = 1, codec = "zstd".to_string(), level = 3, dict_bytes = None, overwrite = false, *, align = 8, threads = 0, metadata = None, remote = None), text_signature = "(path, dtype, ndim=1, codec='zstd', level=3, dict_bytes=None, overwrite=False, *, align=8, threads=0, metadata=None, remote=None)")]
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
        remote: Option<&Bound<'_, PyAny>>,
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
            remote: crate::settings::remote_options(py, remote)?,
        };
        let core = Core::create(py, path, Schema::ragged(dtype, ndim), opts)?;
        Ok(Self { core, ndim })
    }

    /// Appends records: a `RaggedBatch` (values, cu_seqlens, shapes) or a list of
    /// arrays of the store's dtype and ndim (empty ones too: a 0 dim). Returns their
    /// ids (a `range`). Raises `ValueError` for a record of the wrong ndim,
    /// `TypeError` for a wrong dtype, `ClosedError` once closed or aborted.
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

    /// Dimensions of every record.
    #[getter]
    fn ndim(&self) -> usize {
        self.ndim
    }

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
        // Pinned until the append returns (see `pin`).
        let pinned = pinned_as(&values, self.core.dtype, "values")?;
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
        let values = pinned.bytes();
        let n = cu.len().saturating_sub(1);
        let itemsize = self.core.dtype.itemsize();
        let ndim = self.ndim;
        // Offsets are only trusted for slicing once `check` has accepted them.
        let cost = |k: usize| {
            let elems = cu.get(k).copied().unwrap_or(0);
            elems.saturating_mul(itemsize as u64) + k as u64 * APPEND_RECORD_COST
        };
        let mut part_cu = Vec::new();
        self.core.append(
            py,
            n,
            cost,
            |w| w.check_ragged(values.len(), &cu, &shapes),
            |w, r| {
                let (a, b) = (cu[r.start] as usize, cu[r.end] as usize);
                part_cu.clear();
                part_cu.extend(cu[r.start..=r.end].iter().map(|&c| c - cu[r.start]));
                let dims = &shapes[r.start * ndim..r.end * ndim];
                w.append_ragged(&values[a * itemsize..b * itemsize], &part_cu, dims)
                    .map(drop)
            },
        )
    }

    /// Packs a list of arrays into one values buffer and appends it.
    fn append_records<'py>(
        &self,
        py: Python<'py>,
        list: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyRange>> {
        let np = py.import("numpy")?;
        let mut pinned = Vec::new();
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
            if !a.is_c_contiguous() {
                a = np
                    .call_method1("ascontiguousarray", (&a,))?
                    .cast_into::<PyUntypedArray>()?;
            }
            // Pinned until the append returns (see `pin`).
            let part = pinned_as(&a, self.core.dtype, "record")?;
            for &d in a.shape() {
                shapes.push(u32::try_from(d).map_err(|_| {
                    PyValueError::new_err(format!("record {k} has a dimension above 2^32 - 1"))
                })?);
            }
            let last = cu.last().copied().unwrap_or(0);
            cu.push(last + a.len() as u64);
            pinned.push(part);
        }
        let parts: Vec<&[u8]> = pinned.iter().map(|p| p.bytes()).collect();
        let n = parts.len();
        let ndim = self.ndim;
        let itemsize = self.core.dtype.itemsize() as u64;
        let cost = |k: usize| cu[k] * itemsize + k as u64 * APPEND_RECORD_COST;
        // Each slice packs its own records into one values buffer, so memory beyond
        // the records themselves is one slice, not the whole batch.
        let mut values: Vec<u8> = Vec::new();
        let mut part_cu = Vec::new();
        self.core.append(
            py,
            n,
            cost,
            |_| Ok(()),
            |w, r| {
                let bytes = (cu[r.end] - cu[r.start]) * itemsize;
                values.clear();
                values
                    .try_reserve_exact(usize::try_from(bytes).unwrap_or(usize::MAX))
                    .map_err(|e| out_of_memory(bytes, e))?;
                for p in &parts[r.clone()] {
                    values.extend_from_slice(p);
                }
                part_cu.clear();
                part_cu.extend(cu[r.start..=r.end].iter().map(|&c| c - cu[r.start]));
                w.append_ragged(&values, &part_cu, &shapes[r.start * ndim..r.end * ndim])
                    .map(drop)
            },
        )
    }
}

/// The engine error for a values buffer of `bytes` that cannot be allocated
/// (raised as `MemoryError`).
fn out_of_memory(bytes: u64, refusal: std::collections::TryReserveError) -> zring_engine::Error {
    zring_engine::Error::OutOfMemory {
        what: zring_engine::Allocation::AppendValues,
        bytes,
        path: None,
        source: Some(zring_engine::AllocFailure::Reserve(refusal)),
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
    // SAFETY: `a` is a live C-contiguous int64 array of a.len() elements, read with
    // the GIL held and no Python code run in between, so nothing can resize or free
    // it meanwhile; read_unaligned tolerates any start. (A NumPy loop in another
    // thread could still write it: the values are then torn, and the engine checks
    // offsets and shapes against the values before using them.)
    Ok((0..a.len())
        .map(|k| unsafe { std::ptr::read_unaligned(ptr.add(k)) })
        .collect())
}

//! Engine-owned memory behind the NumPy arrays that reads return.
//!
//! A read fills a [`PooledBuf`] (an aligned `AlignedBuf` on loan from one
//! process-wide [`BufPool`]) with the GIL released, then wraps it in an
//! [`EngineBuffer`] object and makes a NumPy array whose data pointer is the
//! buffer and whose `base` is that object. No copy is made; when the last array (or
//! view, or DLPack capsule) over the buffer dies, the buffer goes back to the pool, so
//! a steady gather loop allocates and page-faults nothing.

use std::ffi::c_void;

use numpy::npyffi::{self, NpyTypes, NPY_ARRAY_CARRAY, PY_ARRAY_API};
use numpy::{PyArrayDescr, PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::{PyMemoryError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use zring_platform::{BufPool, BufPoolOptions, ForkOnce, InChild, PooledBuf};

/// Idle bytes the pool keeps for reuse (a few large batches); more is freed.
const POOL_MAX_FREE_BYTES: usize = 512 << 20;
/// Idle buffers the pool keeps.
const POOL_MAX_FREE: usize = 64;

/// The process-wide pool that read buffers come from. A `ForkOnce`, not a
/// `OnceLock`: a child forked while another thread was creating the pool (PyTorch's
/// DataLoader forks while the parent may be doing its first read) would otherwise
/// wait forever for a creator it does not have. Each forked child gets a pool of its
/// own.
pub fn pool() -> &'static BufPool {
    static POOL: ForkOnce<BufPool> = ForkOnce::new(InChild::Recreate);
    POOL.get_or_init(|| {
        let opts = BufPoolOptions {
            max_free: POOL_MAX_FREE,
            max_free_bytes: POOL_MAX_FREE_BYTES,
            ..BufPoolOptions::default()
        };
        // The default alignment is a power of two, so this cannot fail; fall back to
        // the platform defaults if it ever did.
        BufPool::new(opts).unwrap_or_else(|_| {
            BufPool::new(BufPoolOptions::default()).expect("default pool options are valid")
        })
    })
}

/// A buffer of `len` bytes from the pool (GIL not needed).
pub fn acquire(len: usize) -> std::io::Result<PooledBuf> {
    pool().get(len)
}

/// The memory error for a failed buffer allocation; `what` names what the buffer was
/// for (see [`records_of`]).
pub fn alloc_error(len: usize, what: &str, e: std::io::Error) -> PyErr {
    PyMemoryError::new_err(format!(
        "cannot allocate a {len}-byte read buffer for {what}: {e}"
    ))
}

/// Names the records a read buffer is for: `record 7 of PATH`, or `3 records of
/// PATH` with the largest of them where sizes differ (`largest`: its id and bytes),
/// so that a record whose size is out of reach is found without a debugger.
pub fn records_of(
    source: &dyn std::fmt::Display,
    ids: &[u64],
    largest: Option<(u64, u64)>,
) -> String {
    match (ids, largest) {
        ([id], _) => format!("record {id} of {source}"),
        (_, Some((id, bytes))) => format!(
            "{} records of {source} (the largest, record {id}, has {bytes} bytes)",
            ids.len()
        ),
        (_, None) => format!("{} records of {source}", ids.len()),
    }
}

/// The largest record of a ragged layout over `ids` of `itemsize`-byte elements: its
/// id and bytes.
pub fn largest_ragged(ids: &[u64], cu_seqlens: &[u64], itemsize: usize) -> Option<(u64, u64)> {
    let (j, elems) = cu_seqlens
        .windows(2)
        .map(|w| w[1].saturating_sub(w[0]))
        .enumerate()
        .max_by_key(|&(_, n)| n)?;
    Some((*ids.get(j)?, elems.saturating_mul(itemsize as u64)))
}

/// Engine-owned memory (an aligned buffer from zring's pool) that NumPy arrays
/// returned by reads point into; it is the arrays' `base`.
#[pyclass(frozen, module = "zring._zring")]
pub struct EngineBuffer {
    buf: PooledBuf,
    /// The buffer's start, taken from a unique borrow when it was made; NumPy writes
    /// through it and Rust never forms a reference to the bytes afterwards.
    address: usize,
}

#[pymethods]
impl EngineBuffer {
    /// Bytes visible to the arrays over this buffer.
    #[getter]
    fn nbytes(&self) -> usize {
        self.buf.len()
    }

    /// Bytes actually allocated (the pool's size class).
    #[getter]
    fn capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// The address of the first byte.
    #[getter]
    fn address(&self) -> usize {
        self.address
    }

    /// The alignment of the start, in bytes.
    #[getter]
    fn align(&self) -> usize {
        self.buf.align()
    }

    /// Whether the buffer is page-locked.
    #[getter]
    fn pinned(&self) -> bool {
        self.buf.is_pinned()
    }

    fn __repr__(&self) -> String {
        format!(
            "EngineBuffer(nbytes={}, address=0x{:x}, align={})",
            self.buf.len(),
            self.address,
            self.buf.align()
        )
    }
}

/// A C-contiguous, writeable array of `descr` and `shape` over all of `buf`, whose
/// base is a new [`EngineBuffer`] owning `buf`.
pub fn array_over<'py>(
    py: Python<'py>,
    mut buf: PooledBuf,
    descr: &Bound<'py, PyArrayDescr>,
    shape: &[usize],
) -> PyResult<Bound<'py, PyAny>> {
    let want = shape
        .iter()
        .try_fold(descr.itemsize(), |acc, &d| acc.checked_mul(d));
    if want != Some(buf.len()) {
        return Err(PyValueError::new_err(format!(
            "internal: {}-byte buffer for shape {shape:?} of {descr}",
            buf.len()
        )));
    }
    let address = buf.as_mut_ptr() as usize;
    let owner = Bound::new(py, EngineBuffer { buf, address })?;
    let mut dims: Vec<npyffi::npy_intp> = shape.iter().map(|&d| d as npyffi::npy_intp).collect();
    // SAFETY: the data pointer is valid for `want` bytes (checked above) for as long as
    // `owner` lives, and the array holds `owner` as its base from SetBaseObject on.
    // NewFromDescr steals the descriptor reference that into_dtype_ptr gives it;
    // SetBaseObject steals the owner reference (also on failure). The buffer is
    // aligned to at least 64 bytes, so NPY_ARRAY_ALIGNED holds for every dtype.
    unsafe {
        let raw = PY_ARRAY_API.PyArray_NewFromDescr(
            py,
            npyffi::get_type_object(py, NpyTypes::PyArray_Type),
            descr.clone().into_dtype_ptr(),
            dims.len() as i32,
            dims.as_mut_ptr(),
            std::ptr::null_mut(),
            address as *mut c_void,
            NPY_ARRAY_CARRAY,
            std::ptr::null_mut(),
        );
        let array = Bound::from_owned_ptr_or_err(py, raw)?;
        if PY_ARRAY_API.PyArray_SetBaseObject(py, raw.cast(), owner.into_ptr()) < 0 {
            return Err(PyErr::fetch(py));
        }
        Ok(array)
    }
}

/// The data pointer of an array.
pub fn data_ptr(array: &Bound<'_, PyUntypedArray>) -> *mut u8 {
    // SAFETY: the object is a live ndarray (type-checked by the cast that produced the
    // Bound), and the GIL is held, so its fields can be read.
    unsafe {
        (*npyffi::_PyArray_GET_ITEM_DATA(array.as_array_ptr()))
            .data
            .cast()
    }
}

/// Whether an array's memory may be written.
pub fn is_writeable(array: &Bound<'_, PyUntypedArray>) -> bool {
    // SAFETY: as in data_ptr.
    let flags = unsafe { (*npyffi::_PyArray_GET_ITEM_DATA(array.as_array_ptr())).flags };
    flags & npyffi::NPY_ARRAY_WRITEABLE != 0
}

/// Bytes of an array's elements (itemsize x element count).
pub fn nbytes(array: &Bound<'_, PyUntypedArray>) -> usize {
    array
        .shape()
        .iter()
        .fold(array.dtype().itemsize(), |acc, &d| acc.saturating_mul(d))
}

/// The read-buffer pool's counters, for tests and leak hunting.
#[pyfunction]
pub fn _buffer_pool_stats(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let s = pool().stats();
    let d = PyDict::new(py);
    d.set_item("allocations", s.allocations)?;
    d.set_item("reuses", s.reuses)?;
    d.set_item("released", s.released)?;
    d.set_item("live", s.live)?;
    d.set_item("free", s.free)?;
    d.set_item("free_bytes", s.free_bytes)?;
    Ok(d)
}

/// Frees the idle read buffers zring keeps for reuse (arrays in use are unaffected).
#[pyfunction]
pub fn trim_buffers() {
    pool().trim();
}

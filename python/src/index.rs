//! Turning a Python index (int, slice, list, NumPy array, mask) into record ids.
//!
//! The semantics are NumPy's for axis 0: an integer selects one record (no batch
//! axis), negative integers count from the end, slices follow Python's rules
//! (including negative steps), integer arrays and lists select records in their
//! order with duplicates allowed and give the result the index array's shape,
//! a boolean array of the store's length is a mask. Anything outside the store is
//! an `IndexError` raised before any I/O.
//!
//! Integer arrays of every width, signedness and byte order are converted to the
//! native 64-bit values NumPy means by them; float, complex, object and other
//! arrays are refused. The index vectors are as long as the caller asks, so they are
//! allocated fallibly: a selection too large for memory is a `MemoryError`.

use numpy::{PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::{PyIndexError, PyMemoryError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyInt, PyList, PySlice, PySliceMethods};

use crate::buffer::data_ptr;
use crate::errors;

/// What an index selects.
#[derive(Debug)]
pub enum Selection {
    /// One record; the result has no batch axis.
    One(u64),
    /// Records in this order; the result's leading axes are `shape`
    /// (`[indices.len()]` except for multi-dimensional index arrays).
    Many {
        indices: Vec<u64>,
        shape: Vec<usize>,
    },
}

impl Selection {
    /// The record ids, one or many.
    pub fn ids(&self) -> &[u64] {
        match self {
            Selection::One(i) => std::slice::from_ref(i),
            Selection::Many { indices, .. } => indices,
        }
    }
}

/// Parses `obj` as a record selection of a store of `len` records.
pub fn select(obj: &Bound<'_, PyAny>, len: u64) -> PyResult<Selection> {
    let py = obj.py();
    if obj.is_instance_of::<PyBool>() {
        return Err(PyTypeError::new_err(
            "a bool is not a record index; use an integer or a boolean array mask",
        ));
    }
    if let Ok(i) = obj.cast::<PyInt>() {
        return Ok(Selection::One(one(py, i, len)?));
    }
    if let Ok(s) = obj.cast::<PySlice>() {
        let isize_len =
            isize::try_from(len).map_err(|_| PyIndexError::new_err("store too large to slice"))?;
        let r = s.indices(isize_len)?;
        let mut indices = index_vec(r.slicelength)?;
        indices.extend((0..r.slicelength).map(|k| (r.start + k as isize * r.step) as u64));
        let n = indices.len();
        return Ok(Selection::Many {
            indices,
            shape: vec![n],
        });
    }
    if let Ok(a) = obj.cast::<PyUntypedArray>() {
        return from_array(a, len);
    }
    if let Ok(list) = obj.cast::<PyList>() {
        if list.is_empty() {
            return Ok(Selection::Many {
                indices: Vec::new(),
                shape: vec![0],
            });
        }
    }
    let np = py.import("numpy")?;
    // Python objects with __index__ (not NumPy scalars: they go through asarray so
    // that NumPy bools are refused like Python bools).
    if obj.hasattr("__index__")? && !obj.is_instance(&np.getattr("generic")?)? {
        let i = obj.call_method0("__index__")?;
        return Ok(Selection::One(one(py, i.cast::<PyInt>()?, len)?));
    }
    // Lists, ranges, NumPy scalars, torch/jax CPU tensors...: whatever NumPy makes
    // an integer or bool array of. Anything else becomes an object, float or string
    // array and is refused by from_array.
    let arr = np.call_method1("asarray", (obj,)).map_err(|_| {
        PyTypeError::new_err(format!(
            "record indices must be an int, a slice, a list or an array of ints, or a boolean mask; got {}",
            obj.get_type().name().map(|n| n.to_string()).unwrap_or_default()
        ))
    })?;
    from_array(arr.cast::<PyUntypedArray>()?, len)
}

fn out_of_range(py: Python<'_>, index: impl std::fmt::Display, len: u64) -> PyErr {
    errors::INDEX.err(
        py,
        format!("record index {index} is out of range for a store of {len} records"),
    )
}

fn one(py: Python<'_>, i: &Bound<'_, PyInt>, len: u64) -> PyResult<u64> {
    match i.extract::<i64>() {
        Ok(v) => normalize(py, v, len),
        Err(_) => Err(out_of_range(py, i, len)),
    }
}

/// A possibly negative index as a record id.
fn normalize(py: Python<'_>, v: i64, len: u64) -> PyResult<u64> {
    let id = if v < 0 {
        len.checked_sub(v.unsigned_abs())
    } else {
        Some(v as u64).filter(|&u| u < len)
    };
    id.ok_or_else(|| out_of_range(py, v, len))
}

fn from_array(a: &Bound<'_, PyUntypedArray>, len: u64) -> PyResult<Selection> {
    let py = a.py();
    let kind = a.dtype().kind();
    if kind == b'f' && a.ndim() >= 1 && a.is_empty() {
        // np.asarray([]) and np.asarray(range(0)) are float64: an empty selection.
        return Ok(Selection::Many {
            indices: Vec::new(),
            shape: a.shape().to_vec(),
        });
    }
    match kind {
        b'b' => mask(a, len),
        b'i' | b'u' => {
            let dtype = if kind == b'i' { "int64" } else { "uint64" };
            // ascontiguousarray makes 0-d arrays 1-D, so look first.
            let scalar = a.ndim() == 0;
            // Only native 8-byte elements are read in place; everything else (narrower
            // ints, big-endian on a little-endian machine, strided) is converted by
            // NumPy, which knows every byte order. `None` means "no byte order".
            let native = a.dtype().is_native_byteorder() != Some(false);
            let owned;
            let a = if a.dtype().itemsize() == 8 && native && a.is_c_contiguous() {
                a
            } else {
                let np = py.import("numpy")?;
                owned = np
                    .call_method1("ascontiguousarray", (a, dtype))?
                    .cast_into::<PyUntypedArray>()?;
                &owned
            };
            let n = a.len();
            let ptr = data_ptr(a);
            let mut indices = index_vec(n)?;
            for k in 0..n {
                // SAFETY: the array is C-contiguous with n 8-byte elements and stays
                // alive (borrowed) for this loop; read_unaligned tolerates any start.
                // Its buffer is not resized or freed meanwhile: that takes the GIL,
                // which this thread holds for the whole loop, and the loop runs no
                // Python code while it reads (only building an out-of-range error may
                // import zring._internal.errors, and that error ends the loop). A NumPy
                // operation that released the GIL in another thread could still write
                // elements; that yields other indices, each still bounds-checked here.
                let raw = unsafe { std::ptr::read_unaligned(ptr.cast::<u64>().add(k)) };
                let id = if kind == b'i' {
                    normalize(py, raw as i64, len)?
                } else if raw < len {
                    raw
                } else {
                    return Err(out_of_range(py, raw, len));
                };
                indices.push(id);
            }
            if scalar {
                return Ok(Selection::One(indices.first().copied().unwrap_or(0)));
            }
            Ok(Selection::Many {
                indices,
                shape: a.shape().to_vec(),
            })
        }
        _ => Err(PyTypeError::new_err(format!(
            "record indices must be integers or a boolean mask, got an array of dtype {}",
            a.dtype()
        ))),
    }
}

fn mask(a: &Bound<'_, PyUntypedArray>, len: u64) -> PyResult<Selection> {
    if a.ndim() == 0 {
        return Err(PyTypeError::new_err(
            "a bool is not a record index; use an integer or a boolean array mask",
        ));
    }
    if a.ndim() != 1 || a.len() as u64 != len {
        return Err(PyIndexError::new_err(format!(
            "a boolean mask must be 1-D with one entry per record ({len}), got shape {:?}",
            a.shape()
        )));
    }
    let np = a.py().import("numpy")?;
    let a = np
        .call_method1("ascontiguousarray", (a, "bool"))?
        .cast_into::<PyUntypedArray>()?;
    // SAFETY: a C-contiguous bool array of a.len() one-byte elements, alive while
    // `a` is, which outlives `flags`.
    let flags = unsafe { std::slice::from_raw_parts(data_ptr(&a), a.len()) };
    let mut indices = index_vec(flags.iter().filter(|&&f| f != 0).count())?;
    indices.extend(
        flags
            .iter()
            .enumerate()
            .filter(|(_, &f)| f != 0)
            .map(|(k, _)| k as u64),
    );
    let n = indices.len();
    Ok(Selection::Many {
        indices,
        shape: vec![n],
    })
}

/// An empty vector with room for `n` record ids, or `MemoryError`: `n` is whatever
/// the caller's index asks for.
fn index_vec(n: usize) -> PyResult<Vec<u64>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| {
        PyMemoryError::new_err(format!(
            "cannot allocate {} bytes for the {n} record ids of this selection",
            n.saturating_mul(std::mem::size_of::<u64>())
        ))
    })?;
    Ok(v)
}

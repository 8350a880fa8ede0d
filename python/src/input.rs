//! Accepting caller data: NumPy arrays, DLPack CPU tensors and buffer objects.

use numpy::{PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyMemoryView;
use zring_engine::DType;

use crate::buffer::{data_ptr, nbytes};
use crate::dtype;

/// `obj` as a NumPy array without copying: an ndarray as is, a DLPack tensor through
/// `numpy.from_dlpack` (CPU only; NumPy refuses other devices with its own message),
/// a buffer-protocol object through `numpy.asarray(memoryview(obj))`. Lists and other
/// sequences are refused: converting them would guess a dtype.
pub fn as_array<'py>(obj: &Bound<'py, PyAny>, what: &str) -> PyResult<Bound<'py, PyUntypedArray>> {
    if let Ok(a) = obj.cast::<PyUntypedArray>() {
        return Ok(a.clone());
    }
    let py = obj.py();
    let np = py.import("numpy")?;
    let converted = if obj.hasattr("__dlpack__")? {
        np.call_method1("from_dlpack", (obj,))?
    } else if let Ok(view) = PyMemoryView::from(obj) {
        np.call_method1("asarray", (view,))?
    } else {
        return Err(PyTypeError::new_err(format!(
            "{what} must be a NumPy array, a DLPack CPU tensor or a buffer, got {}",
            obj.get_type().name()?
        )));
    };
    Ok(converted.cast_into::<PyUntypedArray>()?)
}

/// Checks that `a` holds elements of `want` laid out C-contiguously and returns its
/// bytes as (address, length); the caller keeps `a` alive while it uses them.
pub fn contiguous_bytes(
    a: &Bound<'_, PyUntypedArray>,
    want: DType,
    what: &str,
) -> PyResult<(usize, usize)> {
    let got = dtype::from_numpy(&a.dtype())?;
    if got != want {
        return Err(PyTypeError::new_err(format!(
            "{what} has dtype {got} but the store holds {want} (convert with .astype(\"{want}\"))"
        )));
    }
    if !a.is_c_contiguous() {
        return Err(PyValueError::new_err(format!(
            "{what} is not C-contiguous; pass numpy.ascontiguousarray({what})"
        )));
    }
    Ok((data_ptr(a) as usize, nbytes(a)))
}

/// The bytes at (address, length) from `contiguous_bytes`.
///
/// # Safety
/// The array they came from must stay alive and unresized for the lifetime `'a`.
pub unsafe fn bytes_at<'a>((address, len): (usize, usize)) -> &'a [u8] {
    if len == 0 {
        return &[];
    }
    // SAFETY: guaranteed by the caller (see above); len > 0 so address is non-null.
    unsafe { std::slice::from_raw_parts(address as *const u8, len) }
}

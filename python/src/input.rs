//! Accepting caller data: NumPy arrays, DLPack CPU tensors and buffer objects.

use numpy::{PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyMemoryView;
use zring_engine::DType;

use crate::dtype;
use crate::pin::Pinned;

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

/// Checks that `a` holds elements of `want` laid out C-contiguously and pins it for
/// an engine call made without the GIL (see `pin`).
pub fn pinned_as<'py>(
    a: &Bound<'py, PyUntypedArray>,
    want: DType,
    what: &str,
) -> PyResult<Pinned<'py>> {
    let got = dtype::from_numpy(&a.dtype())?;
    if got != want {
        return Err(PyTypeError::new_err(format!(
            "{what} has dtype {got} but the store holds {want} (convert with .astype(\"{want}\"))"
        )));
    }
    Pinned::new(a, what)
}

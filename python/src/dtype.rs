//! Engine dtypes and NumPy dtypes, both ways.
//!
//! Names are NumPy's (`float32`, `uint8`, ...). bfloat16 and the float8 types
//! (`float8_e4m3fn`, `float8_e5m2`, `float8_e4m3fnuz`, `float8_e5m2fnuz`,
//! `float8_e8m0fnu`) have no NumPy built-in: they map to the ml_dtypes types when that
//! package is installed and raise an `ImportError` that says how to get it otherwise.

use std::str::FromStr;

use numpy::{PyArrayDescr, PyArrayDescrMethods};
use pyo3::exceptions::{PyImportError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::PyString;
use zring_engine::DType;

/// Whether `d` needs ml_dtypes to exist as a NumPy dtype.
fn needs_ml_dtypes(d: DType) -> bool {
    matches!(
        d,
        DType::BF16
            | DType::F8E4M3FN
            | DType::F8E5M2
            | DType::F8E4M3FNUZ
            | DType::F8E5M2FNUZ
            | DType::F8E8M0FNU
    )
}

/// The NumPy dtype of engine dtype `d`.
pub fn to_numpy(py: Python<'_>, d: DType) -> PyResult<Bound<'_, PyArrayDescr>> {
    if needs_ml_dtypes(d) {
        let module = py.import("ml_dtypes").map_err(|e| {
            PyImportError::new_err(format!(
                "dtype {d} needs the ml_dtypes package (pip install ml_dtypes): {e}"
            ))
        })?;
        let ty = module.getattr(d.name())?;
        return PyArrayDescr::new(py, ty);
    }
    PyArrayDescr::new(py, d.name())
}

/// The engine dtype of a NumPy dtype; refuses what a store cannot hold (big-endian,
/// structured, strings, objects, datetimes, float128, ...).
pub fn from_numpy(descr: &Bound<'_, PyArrayDescr>) -> PyResult<DType> {
    if descr.has_fields() || descr.has_subarray() {
        return Err(PyTypeError::new_err(format!(
            "structured or subarray dtype {descr} cannot be stored; store each field separately"
        )));
    }
    if descr.is_native_byteorder() == Some(false) {
        return Err(PyTypeError::new_err(format!(
            "non-native byte order dtype {descr} is not supported; convert with arr.astype(arr.dtype.newbyteorder('='))"
        )));
    }
    let name = descr.getattr("name")?;
    let name = name.cast::<PyString>()?.to_str()?;
    DType::from_str(name).map_err(|_| unsupported(name))
}

/// The engine dtype named by a Python object: an engine name (`"bfloat16"` works
/// without ml_dtypes), or anything `numpy.dtype()` accepts (`np.float32`, `"<f4"`).
pub fn from_py(obj: &Bound<'_, PyAny>) -> PyResult<DType> {
    if let Ok(s) = obj.cast::<PyString>() {
        if let Ok(d) = DType::from_str(s.to_str()?) {
            return Ok(d);
        }
    }
    let descr = PyArrayDescr::new(obj.py(), obj)
        .map_err(|e| PyTypeError::new_err(format!("{obj} is not a dtype zring knows: {e}")))?;
    from_numpy(&descr)
}

fn unsupported(name: &str) -> PyErr {
    let names: Vec<&str> = DType::ALL.iter().map(|d| d.name()).collect();
    PyTypeError::new_err(format!(
        "dtype {name} cannot be stored; zring stores {}",
        names.join(", ")
    ))
}

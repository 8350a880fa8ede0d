//! `train_dict`: a zstd dictionary for codec `"zstd-dict"`, from a store or arrays.

use numpy::{PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::errors;
use crate::input::as_array;
use crate::store::StoreBase;

/// Trains a zstd dictionary of at most `size` bytes from records spread over the
/// whole input: an open store, an array (one record per row), or a list of arrays.
/// Pass the result as `dict_bytes=` with `codec="zstd-dict"`.
#[pyfunction]
#[pyo3(signature = (source, size = 32768))]
pub fn train_dict<'py>(
    py: Python<'py>,
    source: &Bound<'py, PyAny>,
    size: usize,
) -> PyResult<Bound<'py, PyBytes>> {
    if let Ok(store) = source.cast::<StoreBase>() {
        let store = store.get().handle(py)?;
        let dict = py
            .detach(|| zring_engine::train_dict_from_store(&store, size))
            .map_err(|e| errors::engine(py, e))?;
        return Ok(PyBytes::new(py, &dict));
    }
    let np = py.import("numpy")?;
    let contiguous = |a: Bound<'py, PyUntypedArray>| -> PyResult<Bound<'py, PyUntypedArray>> {
        if a.is_c_contiguous() {
            return Ok(a);
        }
        Ok(np
            .call_method1("ascontiguousarray", (a,))?
            .cast_into::<PyUntypedArray>()?)
    };
    // Each record as (address, length) into arrays kept alive in `keep`.
    let mut keep = Vec::new();
    let mut records: Vec<(usize, usize)> = Vec::new();
    if let Ok(a) = source.cast::<PyUntypedArray>() {
        let a = contiguous(a.clone())?;
        if a.ndim() == 0 {
            return Err(PyValueError::new_err(
                "train_dict needs records: an array of shape (n, ...), a list of arrays or a store",
            ));
        }
        let total = crate::buffer::nbytes(&a);
        let n = a.shape()[0];
        let width = total.checked_div(n).unwrap_or(0);
        let base = crate::buffer::data_ptr(&a) as usize;
        records.extend((0..n).map(|k| (base + k * width, width)));
        keep.push(a);
    } else {
        for item in source.try_iter()? {
            let a = contiguous(as_array(&item?, "record")?)?;
            records.push((
                crate::buffer::data_ptr(&a) as usize,
                crate::buffer::nbytes(&a),
            ));
            keep.push(a);
        }
    }
    let dict = py
        .detach(|| {
            let slices: Vec<&[u8]> = records
                .iter()
                // SAFETY: every record lies inside an array held by `keep` until this
                // function returns.
                .map(|&r| unsafe { crate::input::bytes_at(r) })
                .collect();
            zring_engine::train_dict(&slices, size)
        })
        .map_err(|e| errors::engine(py, e))?;
    drop(keep);
    Ok(PyBytes::new(py, &dict))
}

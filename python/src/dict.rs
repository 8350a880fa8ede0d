//! `train_dict`: a zstd dictionary for codec `"zstd-dict"`, from a store or arrays.

use numpy::{PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::errors;
use crate::input::as_array;
use crate::pin::Pinned;
use crate::store::StoreBase;

/// Trains a zstd dictionary of at most `size` bytes from records spread over the
/// whole input: an open store, an array (one record per row), or a list of arrays.
/// Pass the result as `dict_bytes=` with `codec="zstd-dict"`.
///
/// Raises `CodecError` when zstd cannot train on the input (too few or too small
/// records), `ValueError` for a 0-d array, `ClosedError` for a closed store.
///
/// >>> import numpy as np, zring
/// >>> rng = np.random.default_rng(0)
/// >>> records = [rng.integers(0, 50, 200, dtype=np.int32) for _ in range(500)]
/// >>> d = zring.train_dict(records, size=4096)
/// >>> isinstance(d, bytes) and 0 < len(d) <= 4096
/// True
#[pyfunction]
#[pyo3(signature = (source, size = 32768))]
pub fn train_dict<'py>(
    py: Python<'py>,
    source: &Bound<'py, PyAny>,
    size: usize,
) -> PyResult<Bound<'py, PyBytes>> {
    if let Ok(store) = source.cast::<StoreBase>() {
        let store = store.get().handle(py)?;
        // On a thread of its own: Ctrl-C interrupts the wait, not the training.
        let dict = crate::interrupt::wait_for_thread(py, "train-dict", move || {
            zring_engine::train_dict_from_store(&store, size)
        })?
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
    // Each record as (array, byte range): the arrays are pinned while their records
    // are copied without the GIL (see `pin`).
    let mut pinned = Vec::new();
    let mut records: Vec<(usize, std::ops::Range<usize>)> = Vec::new();
    if let Ok(a) = source.cast::<PyUntypedArray>() {
        let a = contiguous(a.clone())?;
        if a.ndim() == 0 {
            return Err(PyValueError::new_err(
                "train_dict needs records: an array of shape (n, ...), a list of arrays or a store",
            ));
        }
        let n = a.shape()[0];
        let p = Pinned::new(&a, "record")?;
        let width = p.bytes().len().checked_div(n).unwrap_or(0);
        records.extend((0..n).map(|k| (0, k * width..(k + 1) * width)));
        pinned.push(p);
    } else {
        for item in source.try_iter()? {
            let a = contiguous(as_array(&item?, "record")?)?;
            let p = Pinned::new(&a, "record")?;
            records.push((pinned.len(), 0..p.bytes().len()));
            pinned.push(p);
        }
    }
    // The records are copied (zstd concatenates them anyway), so that the training
    // can run on a thread of its own which Ctrl-C does not have to wait for: it may
    // outlive this call, and the arrays.
    let arrays: Vec<&[u8]> = pinned.iter().map(|p| p.bytes()).collect();
    let (joined, lens) = py
        .detach(|| {
            let total = records.iter().map(|(_, r)| r.len()).sum::<usize>();
            let mut joined = Vec::new();
            joined.try_reserve_exact(total).map_err(|_| total)?;
            for (array, range) in &records {
                joined.extend_from_slice(&arrays[*array][range.clone()]);
            }
            let lens = records.iter().map(|(_, r)| r.len()).collect::<Vec<_>>();
            Ok::<_, usize>((joined, lens))
        })
        .map_err(|total| {
            pyo3::exceptions::PyMemoryError::new_err(format!(
                "cannot copy {total} bytes of training records"
            ))
        })?;
    drop(arrays);
    drop(pinned);
    let dict = crate::interrupt::wait_for_thread(py, "train-dict", move || {
        let mut slices: Vec<&[u8]> = Vec::with_capacity(lens.len());
        let mut rest: &[u8] = &joined;
        for n in lens {
            let (head, tail) = rest.split_at(n);
            slices.push(head);
            rest = tail;
        }
        zring_engine::train_dict(&slices, size)
    })?
    .map_err(|e| errors::engine(py, e))?;
    Ok(PyBytes::new(py, &dict))
}

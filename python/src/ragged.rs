//! `RaggedStore`: variable-shape records; batches come back as `RaggedBatch`.

use std::path::PathBuf;

use numpy::{
    PyArray1, PyArrayDescr, PyArrayDescrMethods, PyArrayMethods, PyUntypedArray,
    PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PySlice, PyTuple, PyType};
use zring_engine::RaggedLayout;

use crate::buffer::{array_over, data_ptr};
use crate::errors;
use crate::index::{self, Selection};
use crate::store::{check_out, filled, open, ReadError, StoreBase};

/// A store of variable-shape records of `ndim` dimensions. `store[i]` is one record
/// (an array of its own shape); `store[idx]` is a `RaggedBatch` (values packed back
/// to back, `cu_seqlens`, `shapes`).
#[pyclass(extends = StoreBase, frozen, module = "zring._zring")]
pub struct RaggedStore {
    ndim: usize,
}

#[pymethods]
impl RaggedStore {
    #[new]
    #[pyo3(signature = (path, *, backend = "auto", verify_checksums = false, threads = 0))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        backend: &str,
        verify_checksums: bool,
        threads: usize,
    ) -> PyResult<PyClassInitializer<Self>> {
        let base = open(py, path, backend, verify_checksums, threads, Some(true))?;
        Ok(ragged_init(base))
    }

    /// Dimensions of every record.
    #[getter]
    fn ndim(&self) -> usize {
        self.ndim
    }

    /// The shape of record `i` (negative counts from the end), from the table alone.
    fn shape<'py>(slf: &Bound<'py, Self>, i: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyTuple>> {
        let py = slf.py();
        let base = slf.as_super().get();
        let Selection::One(i) = index::select(i, base.len())? else {
            return Err(PyTypeError::new_err("shape() takes one record index"));
        };
        let dims = base
            .handle(py)?
            .shape(i)
            .map_err(|e| errors::engine(py, e))?;
        PyTuple::new(py, dims)
    }

    fn __getitem__<'py>(
        slf: &Bound<'py, Self>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if key.cast::<PyTuple>().is_ok() {
            return Err(PyTypeError::new_err(
                "ragged stores take one index (int, slice, list, array or mask), not a tuple",
            ));
        }
        let base = slf.as_super().get();
        let sel = index::select(key, base.len())?;
        read_ragged(slf.py(), base, &sel, None)
    }

    /// Gathers records `idx` into a `RaggedBatch`. With `out` (a 1-D, C-contiguous,
    /// writeable array of the store's dtype with at least as many elements as the
    /// records hold), the values are written into `out` and the batch's `values` is
    /// a view of its head.
    #[pyo3(signature = (idx, out = None))]
    fn gather<'py>(
        slf: &Bound<'py, Self>,
        idx: &Bound<'py, PyAny>,
        out: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let base = slf.as_super().get();
        let sel = match index::select(idx, base.len())? {
            Selection::One(i) => Selection::Many {
                indices: vec![i],
                shape: vec![1],
            },
            many => many,
        };
        read_ragged(slf.py(), base, &sel, out)
    }
}

pub(crate) fn ragged_init(base: StoreBase) -> PyClassInitializer<RaggedStore> {
    let ndim = base.engine_schema().ndim();
    PyClassInitializer::from(base).add_subclass(RaggedStore { ndim })
}

/// Reads ragged records: one record as an array, many as a `RaggedBatch`.
fn read_ragged<'py>(
    py: Python<'py>,
    base: &StoreBase,
    sel: &Selection,
    out: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let descr = base.descr(py)?;
    let itemsize = descr.itemsize();
    let store = base.handle(py)?;
    let ids = sel.ids();
    if let Selection::Many { shape, .. } = sel {
        if shape.len() != 1 {
            return Err(PyValueError::new_err(format!(
                "ragged stores take 1-D index arrays, got shape {shape:?}"
            )));
        }
    }
    if let Some(out) = out {
        let layout = py
            .detach(|| store.ragged_layout(ids))
            .map_err(|e| errors::engine(py, e))?;
        let values = ragged_out(out, &descr, &layout)?;
        let ptr = data_ptr(&values) as usize;
        py.detach(|| {
            // SAFETY: `values` is a live, writeable, C-contiguous view of exactly
            // `values_bytes` bytes of `out` (checked by ragged_out), referenced until
            // this call returns.
            let dest =
                unsafe { std::slice::from_raw_parts_mut(ptr as *mut u8, layout.values_bytes) };
            store.gather_ragged_into(ids, &layout, dest)
        })
        .map_err(|e| errors::engine(py, e))?;
        let ndim = base.engine_schema().ndim();
        return ragged_batch(
            py,
            values.into_any(),
            &layout.cu_seqlens,
            &layout.shapes,
            ndim,
        );
    }
    let (layout, buf) = py
        .detach(|| -> Result<_, ReadError> {
            let layout = store.ragged_layout(ids)?;
            let buf = filled(layout.values_bytes, |dest| {
                store.gather_ragged_into(ids, &layout, dest)
            })?;
            Ok((layout, buf))
        })
        .map_err(|e| e.into_py(py))?;
    match sel {
        Selection::One(_) => {
            let shape: Vec<usize> = layout.shapes.iter().map(|&d| d as usize).collect();
            array_over(py, buf, &descr, &shape)
        }
        Selection::Many { .. } => {
            let elems = layout.values_bytes / itemsize.max(1);
            let values = array_over(py, buf, &descr, &[elems])?;
            let ndim = base.engine_schema().ndim();
            ragged_batch(py, values, &layout.cu_seqlens, &layout.shapes, ndim)
        }
    }
}

/// Checks a ragged `out` array and returns the view its values go to.
fn ragged_out<'py>(
    out: &Bound<'py, PyAny>,
    descr: &Bound<'py, PyArrayDescr>,
    layout: &RaggedLayout,
) -> PyResult<Bound<'py, PyUntypedArray>> {
    let arr = out
        .cast::<PyUntypedArray>()
        .map_err(|_| PyTypeError::new_err("out must be a NumPy array"))?;
    if arr.ndim() != 1 {
        return Err(PyValueError::new_err(format!(
            "out for a ragged gather must be 1-D, got shape {:?}",
            arr.shape()
        )));
    }
    let elems = layout.values_bytes / descr.itemsize().max(1);
    if arr.len() < elems {
        return Err(PyValueError::new_err(format!(
            "out holds {} elements but the records hold {elems}",
            arr.len()
        )));
    }
    let view = out
        .get_item(PySlice::new(out.py(), 0, elems as isize, 1))?
        .cast_into::<PyUntypedArray>()?;
    check_out(&view, descr, &[elems])?;
    Ok(view)
}

/// Builds a `RaggedBatch` from engine-validated parts (cu_seqlens and shapes become
/// int64 arrays).
pub fn ragged_batch<'py>(
    py: Python<'py>,
    values: Bound<'py, PyAny>,
    cu_seqlens: &[u64],
    shapes: &[u32],
    ndim: usize,
) -> PyResult<Bound<'py, PyAny>> {
    static CLASS: PyOnceLock<Py<PyType>> = PyOnceLock::new();
    let class = CLASS.import(py, "zring._ragged", "RaggedBatch")?;
    let cu = PyArray1::from_iter(py, cu_seqlens.iter().map(|&c| c as i64));
    let n = cu_seqlens.len().saturating_sub(1);
    let shapes: Vec<i64> = shapes.iter().map(|&d| i64::from(d)).collect();
    let shapes = PyArray1::from_vec(py, shapes).reshape([n, ndim])?;
    class.call_method1("_from_parts", (values, cu, shapes))
}

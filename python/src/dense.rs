//! `DenseStore`: fixed-shape records read with NumPy indexing.

use std::path::PathBuf;

use numpy::PyUntypedArray;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PySlice, PyTuple};

use crate::buffer::{array_over, data_ptr, nbytes};
use crate::errors;
use crate::index::{self, Selection};
use crate::store::{check_out, filled, open, StoreBase};

/// A store of fixed-shape records. `store[i]` is one record (shape `item_shape`),
/// `store[idx]` a batch `(len(idx), *item_shape)`; both are NumPy arrays over
/// engine-owned memory.
#[pyclass(extends = StoreBase, frozen, module = "zring._zring")]
pub struct DenseStore {
    item_shape: Vec<usize>,
    item_bytes: usize,
}

#[pymethods]
impl DenseStore {
    #[new]
    #[pyo3(signature = (path, *, backend = "auto", verify_checksums = false, threads = 0))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        backend: &str,
        verify_checksums: bool,
        threads: usize,
    ) -> PyResult<PyClassInitializer<Self>> {
        let base = open(py, path, backend, verify_checksums, threads, Some(false))?;
        Ok(dense_init(base))
    }

    /// The shape of one record.
    #[getter]
    fn item_shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.item_shape)
    }

    /// Dimensions of one record.
    #[getter]
    fn ndim(&self) -> usize {
        self.item_shape.len()
    }

    /// Bytes of one record.
    #[getter]
    fn item_bytes(&self) -> usize {
        self.item_bytes
    }

    fn __getitem__<'py>(
        slf: &Bound<'py, Self>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if let Ok(t) = key.cast::<PyTuple>() {
            return dense_tuple(slf, t);
        }
        let base = slf.as_super().get();
        let sel = index::select(key, base.len())?;
        slf.get().read(slf.py(), base, &sel)
    }

    /// Gathers records `idx` (anything `store[...]` takes except a tuple) into a new
    /// array, or into `out`, which must be a C-contiguous, writeable array of the
    /// store's dtype and of shape `(len(idx), *item_shape)`; returns the array.
    #[pyo3(signature = (idx, out = None))]
    fn gather<'py>(
        slf: &Bound<'py, Self>,
        idx: &Bound<'py, PyAny>,
        out: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let base = slf.as_super().get();
        let sel = index::select(idx, base.len())?;
        let me = slf.get();
        let Some(out) = out else {
            return me.read(py, base, &sel);
        };
        let out_arr = out
            .cast::<PyUntypedArray>()
            .map_err(|_| PyTypeError::new_err("out must be a NumPy array"))?;
        let mut shape = match &sel {
            Selection::One(_) => Vec::new(),
            Selection::Many { shape, .. } => shape.clone(),
        };
        shape.extend_from_slice(&me.item_shape);
        check_out(out_arr, &base.descr(py)?, &shape)?;
        let store = base.handle(py)?;
        let ptr = data_ptr(out_arr) as usize;
        let len = nbytes(out_arr);
        let ids = sel.ids();
        py.detach(|| {
            // SAFETY: `out` is a live, writeable, C-contiguous array of exactly `len`
            // bytes (checked above) that this call keeps referenced until it returns.
            let dest = unsafe { std::slice::from_raw_parts_mut(ptr as *mut u8, len) };
            store.gather(ids, dest)
        })
        .map_err(|e| errors::engine(py, e))?;
        Ok(out.clone())
    }
}

pub(crate) fn dense_init(base: StoreBase) -> PyClassInitializer<DenseStore> {
    let item_shape = base.item_shape();
    let item_bytes = base.engine_schema().item_bytes().unwrap_or(0) as usize;
    PyClassInitializer::from(base).add_subclass(DenseStore {
        item_shape,
        item_bytes,
    })
}

impl DenseStore {
    /// A new array holding the selected records.
    fn read<'py>(
        &self,
        py: Python<'py>,
        base: &StoreBase,
        sel: &Selection,
    ) -> PyResult<Bound<'py, PyAny>> {
        let descr = base.descr(py)?;
        let store = base.handle(py)?;
        let ids = sel.ids();
        let len = ids
            .len()
            .checked_mul(self.item_bytes)
            .ok_or_else(|| PyValueError::new_err("selection larger than the address space"))?;
        let buf = py
            .detach(|| filled(len, |dest| store.gather(ids, dest)))
            .map_err(|e| e.into_py(py))?;
        let mut shape = match sel {
            Selection::One(_) => Vec::with_capacity(self.item_shape.len()),
            Selection::Many { shape, .. } => shape.clone(),
        };
        shape.extend_from_slice(&self.item_shape);
        array_over(py, buf, &descr, &shape)
    }
}

/// `store[i, ...]`: select records with the first element, then index the result
/// with the rest (NumPy's multi-axis semantics).
fn dense_tuple<'py>(
    slf: &Bound<'py, DenseStore>,
    key: &Bound<'py, PyTuple>,
) -> PyResult<Bound<'py, PyAny>> {
    let py = slf.py();
    let first = key
        .get_item(0)
        .map_err(|_| PyTypeError::new_err("store[()] is not a record selection"))?;
    let base = slf.as_super().get();
    let sel = index::select(&first, base.len())?;
    let records = slf.get().read(py, base, &sel)?;
    let rest = key.get_slice(1, key.len());
    match sel {
        Selection::One(_) => records.get_item(rest),
        Selection::Many { shape, .. } => {
            let mut parts: Vec<Bound<'py, PyAny>> = (0..shape.len())
                .map(|_| PySlice::full(py).into_any())
                .collect();
            parts.extend(rest.iter());
            records.get_item(PyTuple::new(py, parts)?)
        }
    }
}

//! `RaggedStore`: variable-shape records; batches come back as `RaggedBatch`.

use std::path::PathBuf;

use numpy::{
    PyArray1, PyArrayDescr, PyArrayDescrMethods, PyArrayMethods, PyUntypedArray,
    PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PySlice, PyTuple};
use zring_engine::{RaggedLayout, Store};

use crate::buffer::{self, array_over};
use crate::errors;
use crate::index::{self, Selection};
use crate::interrupt;
use crate::pin::{Pinned, PinnedMut};
use crate::store::{batch_class, check_out, open, StoreBase};

/// A store of variable-shape records of `ndim` dimensions, opened for reading.
///
/// `RaggedStore(path, *, backend="auto", verify_checksums=True, threads=0,
/// remote=None)` takes the same arguments as `DenseStore` (`path` may be a URL, read
/// with the `remote` options) and raises the same errors (`SchemaError` for a dense
/// store).
///
/// `store[i]` is one record (an array of its own shape; negative `i` counts from
/// the end); `store[idx]` for a slice, list, 1-D integer array or boolean mask is a
/// `RaggedBatch` (values packed back to back, `cu_seqlens`, `shapes`), whose values
/// are engine-owned memory (no copy).
///
/// >>> import os, tempfile, numpy as np, zring
/// >>> path = os.path.join(tempfile.mkdtemp(), "tokens.zr")
/// >>> with zring.RaggedWriter(path, "int32", 1) as w:
/// ...     w.append([np.array([1, 2, 3], np.int32), np.array([4], np.int32)])
/// range(0, 2)
/// >>> with zring.RaggedStore(path) as store:
/// ...     print(store[0], store.shape(1), store[:2].cu_seqlens)
/// [1 2 3] (1,) [0 3 4]
#[pyclass(extends = StoreBase, frozen, module = "zring._zring")]
pub struct RaggedStore {
    ndim: usize,
}

#[pymethods]
impl RaggedStore {
    #[new]
    #[pyo3(signature = (path, **settings), text_signature = "(path, *, backend='auto', verify_checksums=True, threads=0, queue_depth=64, direct=False, remote=None)")]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        settings: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<PyClassInitializer<Self>> {
        let base = open(py, path, settings, Some(true))?;
        Ok(ragged_init(base))
    }

    /// Dimensions of every record.
    #[getter]
    fn ndim(&self) -> usize {
        self.ndim
    }

    /// The shape of record `i` (negative counts from the end), from the table alone
    /// (nothing is read or decoded). Raises `ZringIndexError` outside the store and
    /// `TypeError` for anything but one index.
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
    /// a view of its head. An integer `idx` gives a one-record batch.
    ///
    /// Raises `ZringIndexError` for an index outside the store, `ValueError` for a
    /// multi-dimensional index array or an `out` that is too small, not 1-D,
    /// non-contiguous or read-only, `TypeError` for an `out` of the wrong dtype.
    ///
    /// `decode=zring.decode.Image(...)` decodes records of encoded images (JPEG or
    /// PNG bytes in a `uint8` store) into a `uint8` pixel array `(n, *shape)` with
    /// `epoch`'s random crops; a bad record raises (`Dataset.gather` offers skip
    /// and substitute, which need the other fields).
    #[pyo3(signature = (idx, out = None, *, decode = None, epoch = 0))]
    fn gather<'py>(
        slf: &Bound<'py, Self>,
        idx: &Bound<'py, PyAny>,
        out: Option<&Bound<'py, PyAny>>,
        decode: Option<&Bound<'py, PyAny>>,
        epoch: u64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let base = slf.as_super().get();
        let sel = match index::select(idx, base.len())? {
            Selection::One(i) => Selection::Many {
                indices: vec![i],
                shape: vec![1],
            },
            many => many,
        };
        let Some(decode) = decode else {
            return read_ragged(py, base, &sel, out);
        };
        if out.is_some() {
            return Err(errors::INVALID.err(py, "gather takes out= or decode=, not both"));
        }
        let spec = decode.call_method0("_spec")?;
        let image = crate::decode::image_decode(&spec, "records")?;
        if image.on_error() != zring_loader::OnError::Raise {
            return Err(errors::INVALID.err(
                py,
                "a store's gather decodes with on_error=\"raise\"; skip and substitute \
                 belong to Dataset.gather, which keeps the other fields aligned",
            ));
        }
        let records: zring_loader::Source = std::sync::Arc::new(base.handle(py)?);
        image
            .check_source(&*records, "records")
            .map_err(|e| crate::decode::decode_error(py, e))?;
        let (mut arrays, _) =
            crate::decode::decode_arrays(py, &[(records, image)], sel.ids(), epoch)?;
        arrays
            .pop()
            .ok_or_else(|| errors::INVALID.err(py, "internal: no decoded array"))
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
        let layout = layout_of(py, &store, ids)?;
        // `out` is pinned until the gather returns: its memory cannot be reallocated
        // or freed while the engine writes it without the GIL (see `pin`).
        let (mut pinned, values) = ragged_out(out, &descr, &layout)?;
        let want = layout.values_bytes;
        let dest = pinned.bytes_mut().get_mut(..want).ok_or_else(|| {
            PyValueError::new_err(format!("internal: out is shorter than {want} bytes"))
        })?;
        gather_ragged_into(py, &store, ids, &layout, dest)?;
        drop(pinned);
        let ndim = base.engine_schema().ndim();
        return ragged_batch(
            py,
            values.into_any(),
            &layout.cu_seqlens,
            &layout.shapes,
            ndim,
        );
    }
    let layout = layout_of(py, &store, ids)?;
    let len = layout.values_bytes;
    let mut buf = py.detach(|| buffer::acquire(len)).map_err(|e| {
        let largest = buffer::largest_ragged(ids, &layout.cu_seqlens, itemsize);
        let what = buffer::records_of(&store.path().display(), ids, largest);
        buffer::alloc_error(len, &what, e)
    })?;
    gather_ragged_into(py, &store, ids, &layout, &mut buf)?;
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

/// Selections of more ids than this have their layout built on a thread of its own,
/// so that Ctrl-C does not wait for it (at tens of ns per id, this many take about
/// 10 ms).
pub(crate) const LAYOUT_ON_A_THREAD: usize = 1 << 18;

/// The output layout of a ragged gather of `ids`; Ctrl-C interrupts the wait for a
/// large one (the layout, built from copied ids, is then dropped unseen).
fn layout_of(py: Python<'_>, store: &Store, ids: &[u64]) -> PyResult<RaggedLayout> {
    let layout = if ids.len() > LAYOUT_ON_A_THREAD {
        let (store, ids) = (store.clone(), ids.to_vec());
        interrupt::wait_for_thread(py, "ragged-layout", move || store.ragged_layout(&ids))?
    } else {
        py.detach(|| store.ragged_layout(ids))
    };
    layout.map_err(|e| errors::engine(py, e))
}

/// Gathers the ragged records `ids` laid out by `layout` into `dest`; Ctrl-C stops
/// it (see `interrupt`).
fn gather_ragged_into(
    py: Python<'_>,
    store: &Store,
    ids: &[u64],
    layout: &RaggedLayout,
    dest: &mut [u8],
) -> PyResult<()> {
    interrupt::read(py, |stop| {
        store.gather_ragged_until(ids, layout, dest, stop)
    })
    .map_err(|h| h.into_py(py))
}

/// Checks a ragged `out` array, pins it for writing and returns the pin and the view
/// of its head that the values go to.
fn ragged_out<'py>(
    out: &Bound<'py, PyAny>,
    descr: &Bound<'py, PyArrayDescr>,
    layout: &RaggedLayout,
) -> PyResult<(PinnedMut<'py>, Bound<'py, PyUntypedArray>)> {
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
    check_out(arr, descr, &[arr.len()])?;
    // Pinned before the view is made, so that the view is over pinned memory.
    let pinned = Pinned::for_writing(arr, "out")?;
    let view = out
        .get_item(PySlice::new(out.py(), 0, elems as isize, 1))?
        .cast_into::<PyUntypedArray>()?;
    Ok((pinned, view))
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
    let class = batch_class(py)?;
    let cu = PyArray1::from_iter(py, cu_seqlens.iter().map(|&c| c as i64));
    let n = cu_seqlens.len().saturating_sub(1);
    let shapes: Vec<i64> = shapes.iter().map(|&d| i64::from(d)).collect();
    let shapes = PyArray1::from_vec(py, shapes).reshape([n, ndim])?;
    class.call_method1("_from_parts", (values, cu, shapes))
}

//! `_Dataset`: a zring dataset (named fields x shards) read with one parallel gather,
//! and `_DatasetBuilder`, which publishes a new manifest version from stores the
//! Python writers made. `zring/_internal/dataset.py` builds the friendly API on top.

use std::path::PathBuf;
use std::sync::Mutex;

use numpy::{PyArrayDescr, PyArrayDescrMethods};
use pyo3::exceptions::{PyKeyError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};
use zring_engine::dataset::{Dataset, DatasetBuilder, DatasetField, FieldDest};
use zring_engine::{DType, Layout, RaggedLayout, Schema};
use zring_loader::{decode_images, ImageDecode, ImageField};
use zring_platform::{Pool, PooledBuf};

use crate::buffer::{self, array_over};
use crate::decode;
use crate::dtype;
use crate::errors;
use crate::index::{self, Selection};
use crate::interrupt;
use crate::ragged::{ragged_batch, LAYOUT_ON_A_THREAD};
use crate::store::{ReadError, StoreBase};

/// An open dataset at one manifest version.
#[pyclass(frozen, module = "zring._zring", name = "_Dataset", subclass)]
pub struct PyDataset {
    ds: Dataset,
}

/// One field of a dataset, accepted by the loader wherever a store is.
#[pyclass(frozen, module = "zring._zring", name = "_DatasetField")]
pub struct PyDatasetField {
    pub(crate) field: DatasetField,
}

/// One field's gathered output before it becomes Python objects.
enum Out {
    Dense(PooledBuf),
    Ragged(RaggedLayout, PooledBuf),
}

fn schema_dict<'py>(py: Python<'py>, name: &str, s: &Schema) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("name", name)?;
    d.set_item("dtype", s.dtype.name())?;
    match &s.layout {
        Layout::Dense { item_shape } => {
            d.set_item("layout", "dense")?;
            let shape: Vec<u64> = item_shape.clone();
            d.set_item("item_shape", pyo3::types::PyTuple::new(py, shape)?)?;
        }
        Layout::Ragged { ndim } => {
            d.set_item("layout", "ragged")?;
            d.set_item("ndim", ndim)?;
        }
    }
    d.set_item("metadata", s.metadata.clone())?;
    Ok(d)
}

/// `idx` as a selection of `len` records: datasets take an index, a slice or a 1-D
/// index array.
pub(crate) fn select_1d(idx: &Bound<'_, PyAny>, len: u64) -> PyResult<Selection> {
    let sel = index::select(idx, len)?;
    if let Selection::Many { shape, .. } = &sel {
        if shape.len() != 1 {
            return Err(PyValueError::new_err(format!(
                "datasets take 1-D index arrays, got shape {shape:?}"
            )));
        }
    }
    Ok(sel)
}

impl PyDataset {
    /// `_parts=[...]`: datasets (or `(name, store)` pairs, a store as a dataset of
    /// one field) read as one, numbered one after another (what `zring.mix` reads
    /// through; see `Dataset::join`).
    fn join(py: Python<'_>, parts: &[Bound<'_, PyAny>]) -> PyResult<Self> {
        let mut datasets = Vec::with_capacity(parts.len());
        for part in parts {
            if let Ok(ds) = part.cast::<PyDataset>() {
                datasets.push(ds.get().ds.clone());
            } else if let Ok((name, store)) = part.extract::<(String, Bound<'_, StoreBase>)>() {
                let store = store.get().handle(py)?;
                datasets
                    .push(Dataset::from_store(&name, store).map_err(|e| errors::engine(py, e))?);
            } else {
                return Err(PyTypeError::new_err(format!(
                    "a joined part must be a zring.Dataset or a (name, store) pair, got {}",
                    part.get_type()
                        .name()
                        .map(|n| n.to_string())
                        .unwrap_or_default()
                )));
            }
        }
        let ds = Dataset::join(&datasets).map_err(|e| errors::engine(py, e))?;
        Ok(Self { ds })
    }

    /// Field `f`'s gathered output as a Python value: an array, or a `RaggedBatch`
    /// (`one`: a single record's array, without the batch axis).
    fn value<'py>(
        &self,
        py: Python<'py>,
        f: usize,
        out: Out,
        one: bool,
        n: usize,
    ) -> PyResult<Bound<'py, PyAny>> {
        let field = &self.ds.fields()[f];
        let descr = dtype::to_numpy(py, field.schema.dtype)?;
        match out {
            Out::Dense(buf) => {
                let mut shape: Vec<usize> = if one { vec![] } else { vec![n] };
                if let Layout::Dense { item_shape } = &field.schema.layout {
                    shape.extend(item_shape.iter().map(|&d| d as usize));
                }
                array_over(py, buf, &descr, &shape)
            }
            Out::Ragged(layout, buf) if one => {
                let shape: Vec<usize> = layout.shapes.iter().map(|&d| d as usize).collect();
                array_over(py, buf, &descr, &shape)
            }
            Out::Ragged(layout, buf) => {
                let elems = layout.values_bytes / descr.itemsize().max(1);
                let values = array_over(py, buf, &descr, &[elems])?;
                ragged_batch(
                    py,
                    values,
                    &layout.cu_seqlens,
                    &layout.shapes,
                    field.schema.ndim(),
                )
            }
        }
    }

    /// Field positions for `fields` (`None`: all).
    fn positions(&self, fields: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<usize>> {
        let Some(fields) = fields else {
            return Ok((0..self.ds.fields().len()).collect());
        };
        let names: Vec<String> = match fields.cast::<PyString>() {
            Ok(s) => vec![s.to_str()?.to_string()],
            Err(_) => fields.extract()?,
        };
        names
            .iter()
            .map(|n| {
                self.ds.manifest().field_index(n).ok_or_else(|| {
                    PyKeyError::new_err(self.ds.field_index(n).err().map(|e| e.to_string()))
                })
            })
            .collect()
    }

    /// Gathers `ids` of `fields`, in slices that Ctrl-C can stop between (see
    /// `interrupt`, as for a store's gather); an interrupted read drops its buffers.
    fn read(&self, py: Python<'_>, ids: &[u64], fields: &[usize]) -> PyResult<Vec<Out>> {
        let ds = &self.ds;
        let layouts = self.layouts(py, ids, fields)?;
        let mut bufs = py
            .detach(|| -> Result<Vec<PooledBuf>, ReadError> {
                let mut bufs = Vec::with_capacity(fields.len());
                for (&f, layout) in fields.iter().zip(&layouts) {
                    let schema = &ds.fields()[f].schema;
                    let buf = match (layout, schema.item_bytes()) {
                        (Some(layout), _) => {
                            let n = layout.values_bytes;
                            buffer::acquire(n).map_err(|e| {
                                let itemsize = schema.dtype.itemsize();
                                let largest =
                                    buffer::largest_ragged(ids, &layout.cu_seqlens, itemsize);
                                ReadError::Alloc(n, field_records(ds, f, ids, largest), e)
                            })?
                        }
                        (None, w) => {
                            let n = ids.len().saturating_mul(w.unwrap_or(0) as usize);
                            buffer::acquire(n).map_err(|e| {
                                ReadError::Alloc(n, field_records(ds, f, ids, None), e)
                            })?
                        }
                    };
                    bufs.push(buf);
                }
                Ok(bufs)
            })
            .map_err(|e| e.into_py(py))?;
        gather_into(py, ds, ids, fields, &layouts, &mut bufs)?;
        Ok(layouts
            .into_iter()
            .zip(bufs)
            .map(|(layout, buf)| match layout {
                Some(layout) => Out::Ragged(layout, buf),
                None => Out::Dense(buf),
            })
            .collect())
    }

    /// The output layout of each ragged field of `fields` for `ids` (`None` for a
    /// dense field); Ctrl-C interrupts the wait for a large selection's (the layouts,
    /// built from copied ids, are then dropped unseen).
    fn layouts(
        &self,
        py: Python<'_>,
        ids: &[u64],
        fields: &[usize],
    ) -> PyResult<Vec<Option<RaggedLayout>>> {
        fn build(
            ds: &Dataset,
            ids: &[u64],
            fields: &[usize],
        ) -> zring_engine::Result<Vec<Option<RaggedLayout>>> {
            fields
                .iter()
                .map(|&f| match ds.fields()[f].schema.item_bytes() {
                    Some(_) => Ok(None),
                    None => ds.ragged_layout(f, ids).map(Some),
                })
                .collect()
        }
        let any_ragged = fields
            .iter()
            .any(|&f| self.ds.fields()[f].schema.item_bytes().is_none());
        let layouts = if any_ragged && ids.len() > LAYOUT_ON_A_THREAD {
            let (ds, ids, fields) = (self.ds.clone(), ids.to_vec(), fields.to_vec());
            interrupt::wait_for_thread(py, "dataset-layout", move || build(&ds, &ids, &fields))?
        } else {
            py.detach(|| build(&self.ds, ids, fields))
        };
        layouts.map_err(|e| errors::engine(py, e))
    }
}

/// Gathers records `ids` of `fields` into `bufs` (one per field; ragged ones laid out
/// by their `layouts`); Ctrl-C stops it (see `interrupt`). On an error `bufs` hold a
/// partial result.
fn gather_into(
    py: Python<'_>,
    ds: &Dataset,
    ids: &[u64],
    fields: &[usize],
    layouts: &[Option<RaggedLayout>],
    bufs: &mut [PooledBuf],
) -> PyResult<()> {
    let mut dests: Vec<FieldDest<'_>> = bufs
        .iter_mut()
        .zip(layouts)
        .zip(fields)
        .map(|((buf, layout), &f)| match layout {
            Some(layout) => FieldDest::Ragged {
                layout,
                values: &mut buf[..layout.values_bytes],
            },
            None => {
                let width = ds.fields()[f].schema.item_bytes().unwrap_or(0) as usize;
                FieldDest::Dense(&mut buf[..ids.len() * width])
            }
        })
        .collect();
    interrupt::read(py, |stop| ds.gather_until(ids, fields, &mut dests, stop))
        .map_err(|h| h.into_py(py))
}

#[pymethods]
impl PyDataset {
    #[new]
    #[pyo3(signature = (path, *, version = None, _parts = None, **settings), text_signature = "(path, *, version=None, backend='auto', verify_checksums=True, threads=0, queue_depth=64, direct=False, follow_links_out=False, remote=None, _settings=None, _parts=None)")]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        version: Option<u64>,
        _parts: Option<Vec<Bound<'_, PyAny>>>,
        settings: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        if let Some(parts) = _parts {
            return Self::join(py, &parts);
        }
        let opts = crate::settings::read_options(py, settings)?;
        let ds = py
            .detach(|| match version {
                Some(v) => Dataset::open_version(&path, v, opts),
                None => Dataset::open(&path, opts),
            })
            .map_err(|e| errors::engine(py, e))?;
        Ok(Self { ds })
    }

    fn __len__(&self) -> usize {
        self.ds.len() as usize
    }

    /// The dataset directory.
    #[getter]
    fn path(&self) -> String {
        self.ds.path().to_string_lossy().into_owned()
    }

    /// The manifest version this object reads.
    #[getter]
    fn version(&self) -> u64 {
        self.ds.version()
    }

    /// The read settings the dataset was opened with, as the engine serialises them
    /// (what a pickle carries; `_settings=` opens with them again).
    #[getter]
    fn _settings(&self) -> String {
        self.ds.read_options().to_json()
    }

    /// Field names, in manifest order.
    #[getter]
    fn fields(&self) -> Vec<String> {
        self.ds.fields().iter().map(|f| f.name.clone()).collect()
    }

    /// Number of shards.
    #[getter]
    fn shards(&self) -> usize {
        self.ds.shards()
    }

    /// Global index of each shard's first record, and the total at the end.
    #[getter]
    fn shard_starts(&self) -> Vec<u64> {
        self.ds.shard_starts().to_vec()
    }

    /// Each field's schema: `{name, dtype, layout, item_shape | ndim, metadata}`.
    #[getter]
    fn schema<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let items = self
            .ds
            .fields()
            .iter()
            .map(|f| schema_dict(py, &f.name, &f.schema))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, items)
    }

    /// The NumPy dtype of field `name`.
    fn dtype<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyArrayDescr>> {
        let f = self
            .ds
            .field_index(name)
            .map_err(|e| errors::engine(py, e))?;
        dtype::to_numpy(py, self.ds.fields()[f].schema.dtype)
    }

    /// The stores' files, shard by shard, field by field.
    fn store_paths(&self) -> Vec<String> {
        self.ds
            .store_paths()
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect()
    }

    /// Gathers records `idx` (int, slice, list, array or mask; 1-D) of `fields`
    /// (a name, a list of names, or None for all) in one parallel call: `{name:
    /// ndarray | RaggedBatch}`. A single int gives one record per field (ragged
    /// fields as arrays of their own shape).
    #[pyo3(signature = (idx, fields = None))]
    fn gather<'py>(
        &self,
        py: Python<'py>,
        idx: &Bound<'py, PyAny>,
        fields: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let positions = self.positions(fields)?;
        let sel = select_1d(idx, self.ds.len())?;
        let one = matches!(sel, Selection::One(_));
        let ids = sel.ids();
        let outs = self.read(py, ids, &positions)?;
        let result = PyDict::new(py);
        for (&f, out) in positions.iter().zip(outs) {
            let field = &self.ds.fields()[f];
            result.set_item(&field.name, self.value(py, f, out, one, ids.len())?)?;
        }
        Ok(result)
    }

    /// `gather` with the fields named in `decode` (`{name: spec}`, see
    /// `zring/decode.py`) decoded into dense `uint8` pixels, with `epoch`'s random
    /// crops; the other fields are read for the records the decode kept. Returns
    /// `(fields, kept ids, skipped ids, [(bad, substitute)])`.
    #[pyo3(signature = (idx, fields, decode, epoch = 0))]
    #[allow(clippy::type_complexity)]
    fn _gather_decoded<'py>(
        &self,
        py: Python<'py>,
        idx: &Bound<'py, PyAny>,
        fields: Option<&Bound<'py, PyAny>>,
        decode: &Bound<'py, PyDict>,
        epoch: u64,
    ) -> PyResult<(Bound<'py, PyDict>, Vec<u64>, Vec<u64>, Vec<(u64, u64)>)> {
        let positions = self.positions(fields)?;
        let sel = select_1d(idx, self.ds.len())?;
        let one = matches!(sel, Selection::One(_));
        let ids = sel.ids();
        let mut images: Vec<(usize, DatasetField, ImageDecode)> = Vec::new();
        for (name, spec) in decode.iter() {
            let name: String = name.extract()?;
            let f = self.ds.manifest().field_index(&name).ok_or_else(|| {
                PyKeyError::new_err(self.ds.field_index(&name).err().map(|e| e.to_string()))
            })?;
            if !positions.contains(&f) {
                return Err(errors::INVALID.err(
                    py,
                    format!("decode names field {name:?}, which this gather does not read"),
                ));
            }
            let image = decode::image_decode(&spec, &name)?;
            let field = self.ds.field(f).map_err(|e| errors::engine(py, e))?;
            image
                .check_source(&field, &name)
                .map_err(|e| decode::decode_error(py, e))?;
            images.push((f, field, image));
        }
        let mut bufs = Vec::with_capacity(images.len());
        for (f, _, image) in &images {
            let n = ids.len().saturating_mul(image.out_bytes());
            let buf = buffer::acquire(n)
                .map_err(|e| ReadError::Alloc(n, field_records(&self.ds, *f, ids, None), e))
                .map_err(|e| e.into_py(py))?;
            bufs.push(buf);
        }
        // Ctrl-C stops the decode between records (see `interrupt::read`).
        let mut decoded = None;
        interrupt::read(py, |stop| {
            let mut dests: Vec<ImageField<'_>> = images
                .iter()
                .zip(bufs.iter_mut())
                .map(|((_, field, image), buf)| ImageField {
                    records: field,
                    decode: image,
                    out: &mut buf[..],
                })
                .collect();
            decoded = Some(decode_images(&mut dests, ids, epoch, Pool::global(), stop)?);
            Ok(())
        })
        .map_err(|halt| match halt {
            interrupt::Halt::Failed(e) => decode::decode_error(py, e),
            interrupt::Halt::Signal(e) => e,
        })?;
        let decoded = decoded
            .ok_or_else(|| errors::INVALID.err(py, "internal: the decode returned nothing"))?;
        let kept = &decoded.indices;
        if one && kept.is_empty() {
            return Err(errors::IMAGE.err(
                py,
                format!("record {} was skipped: its image cannot be decoded", ids[0]),
            ));
        }
        let others: Vec<usize> = positions
            .iter()
            .copied()
            .filter(|f| !images.iter().any(|(i, _, _)| i == f))
            .collect();
        let mut outs = self.read(py, kept, &others)?.into_iter();
        // By the decoded field's place in `images` (the order `decode` named them,
        // not the fields' order).
        let mut pixels: Vec<Option<PooledBuf>> = bufs.into_iter().map(Some).collect();
        let result = PyDict::new(py);
        for &f in &positions {
            let field = &self.ds.fields()[f];
            let value = match images.iter().position(|(i, _, _)| *i == f) {
                Some(k) => {
                    let (_, _, image) = &images[k];
                    let Some(mut buf) = pixels[k].take() else {
                        return Err(errors::INVALID.err(py, "internal: a decoded field is missing"));
                    };
                    buf.truncate(kept.len() * image.out_bytes());
                    let descr = dtype::to_numpy(py, DType::U8)?;
                    let mut shape: Vec<usize> = if one { vec![] } else { vec![kept.len()] };
                    shape.extend(image.item_shape());
                    array_over(py, buf, &descr, &shape)?
                }
                None => {
                    let Some(out) = outs.next() else {
                        return Err(
                            errors::INVALID.err(py, "internal: a gathered field is missing")
                        );
                    };
                    self.value(py, f, out, one, kept.len())?
                }
            };
            result.set_item(&field.name, value)?;
        }
        Ok((
            result,
            decoded.indices,
            decoded.skipped,
            decoded.substituted,
        ))
    }

    /// Checks every record of every store; raises the first problem. Sliced by
    /// records over all the stores (see `interrupt`, as for a store's verify): a
    /// whole dataset's check can take minutes, and Ctrl-C stops it between slices.
    fn verify(&self, py: Python<'_>) -> PyResult<()> {
        let ds = &self.ds;
        interrupt::read(py, |stop| ds.verify_until(stop)).map_err(|h| h.into_py(py))
    }

    /// Field `name` as an object the loader accepts wherever it accepts a store.
    fn field(&self, py: Python<'_>, name: &str) -> PyResult<PyDatasetField> {
        let f = self
            .ds
            .field_index(name)
            .map_err(|e| errors::engine(py, e))?;
        let field = self.ds.field(f).map_err(|e| errors::engine(py, e))?;
        Ok(PyDatasetField { field })
    }
}

#[pymethods]
impl PyDatasetField {
    fn __len__(&self) -> usize {
        self.field.len() as usize
    }

    #[getter]
    fn name(&self) -> String {
        self.field.name().to_string()
    }

    fn __repr__(&self) -> String {
        format!(
            "DatasetField({:?} of {})",
            self.field.name(),
            self.field.dataset().path().display()
        )
    }
}

/// Publishes a dataset version from stores written at the paths it names.
#[pyclass(frozen, module = "zring._zring", name = "_DatasetBuilder")]
pub struct PyDatasetBuilder {
    builder: Mutex<Option<DatasetBuilder>>,
}

impl PyDatasetBuilder {
    /// Runs `add` (which opens and checks a shard's stores) on a thread of its own,
    /// so that Ctrl-C need not wait for it. The builder leaves its slot meanwhile (no
    /// lock is held while waiting with the GIL released and retaken); after an
    /// interrupt it is dropped with that work, and the builder is closed: an
    /// interrupted write publishes nothing.
    fn adding(
        &self,
        py: Python<'_>,
        add: impl FnOnce(&mut DatasetBuilder) -> zring_engine::Result<()> + Send + 'static,
    ) -> PyResult<()> {
        let builder = self
            .builder
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
            .ok_or_else(|| errors::closed(py, "the dataset builder"))?;
        let (builder, result) = interrupt::wait_for_thread(py, "dataset-shard", move || {
            let mut builder = builder;
            let result = add(&mut builder);
            (builder, result)
        })?;
        *self
            .builder
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(builder);
        result.map_err(|e| errors::engine(py, e))
    }

    fn with<T>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut DatasetBuilder) -> zring_engine::Result<T>,
    ) -> PyResult<T> {
        let mut guard = self
            .builder
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let b = guard
            .as_mut()
            .ok_or_else(|| errors::closed(py, "the dataset builder"))?;
        f(b).map_err(|e| errors::engine(py, e))
    }
}

#[pymethods]
impl PyDatasetBuilder {
    /// `fields`: a list of `(name, dtype, layout, shape_or_ndim, metadata)`; `append`
    /// continues the existing dataset (fields from its manifest, `fields` ignored),
    /// refusing one whose stores are linked in from outside it unless
    /// `follow_links_out` (`DatasetBuilder::check_links_stay_inside`).
    #[new]
    #[pyo3(signature = (path, fields, *, append = false, overwrite = false, follow_links_out = false))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        fields: &Bound<'_, PyList>,
        append: bool,
        overwrite: bool,
        follow_links_out: bool,
    ) -> PyResult<Self> {
        let mut parsed = Vec::new();
        for item in fields.iter() {
            let (name, dt, layout, dims, metadata): (
                String,
                Bound<'_, PyAny>,
                String,
                Bound<'_, PyAny>,
                std::collections::BTreeMap<String, String>,
            ) = item.extract()?;
            let dt = dtype::from_py(&dt)?;
            let mut schema = match layout.as_str() {
                "dense" => Schema::dense(dt, &dims.extract::<Vec<u64>>()?),
                "ragged" => Schema::ragged(dt, dims.extract::<usize>()?),
                other => {
                    return Err(PyTypeError::new_err(format!(
                        "layout {other:?} is not 'dense' or 'ragged'"
                    )))
                }
            };
            schema.metadata = metadata;
            parsed.push((name, schema));
        }
        // On a thread of its own, so that Ctrl-C need not wait for it (it reads the
        // current manifest and creates directories; an interrupted one is dropped).
        let builder = interrupt::wait_for_thread(py, "dataset-builder", move || match append {
            true => DatasetBuilder::append(&path).and_then(|b| match follow_links_out {
                true => Ok(b),
                false => b.check_links_stay_inside().map(|()| b),
            }),
            false => DatasetBuilder::create(&path, parsed, overwrite),
        })?
        .map_err(|e| errors::engine(py, e))?;
        Ok(Self {
            builder: Mutex::new(Some(builder)),
        })
    }

    /// The version `publish()` writes.
    #[getter]
    fn version(&self, py: Python<'_>) -> PyResult<u64> {
        self.with(py, |b| Ok(b.version()))
    }

    /// The dataset's fields: one schema dict each (its `"name"` included).
    #[getter]
    fn fields<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let fields = self.with(py, |b| Ok(b.fields().to_vec()))?;
        let items = fields
            .iter()
            .map(|f| schema_dict(py, &f.name, &f.schema))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, items)
    }

    /// The NumPy dtype of each field, in field order (an append converts new records
    /// to them without opening the dataset's stores).
    #[getter]
    fn dtypes<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyArrayDescr>>> {
        let fields = self.with(py, |b| Ok(b.fields().to_vec()))?;
        fields
            .iter()
            .map(|f| dtype::to_numpy(py, f.schema.dtype))
            .collect()
    }

    /// The store paths (one per field, in field order) of new shard `shard`.
    fn shard_paths(&self, py: Python<'_>, shard: usize) -> PyResult<Vec<String>> {
        self.with(py, |b| {
            Ok(b.shard_paths(shard)
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect())
        })
    }

    /// Adds the next new shard, whose stores hold `records` records each.
    fn add_shard(&self, py: Python<'_>, records: u64) -> PyResult<()> {
        self.adding(py, move |b| b.add_shard(records))
    }

    /// Adds the next new shards, `records[i]` records each, their stores checked
    /// side by side (at a URL, each check is a round trip or two).
    fn add_shards(&self, py: Python<'_>, records: Vec<u64>) -> PyResult<()> {
        self.adding(py, move |b| b.add_shards(&records))
    }

    /// Adds the next new shard from stores already written under `files` (one per
    /// field, relative to the dataset, under its `data/` directory; names of the
    /// caller's own), holding `records` records each.
    fn add_shard_files(&self, py: Python<'_>, records: u64, files: Vec<String>) -> PyResult<()> {
        self.adding(py, move |b| b.add_shard_files(records, files))
    }

    /// Publishes the new version atomically; returns its number.
    fn publish(&self, py: Python<'_>) -> PyResult<u64> {
        let b = self
            .builder
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
            .ok_or_else(|| errors::closed(py, "the dataset builder"))?;
        py.detach(|| b.publish())
            .map(|m| m.version)
            .map_err(|e| errors::engine(py, e))
    }
}

/// Removes the dataset's old versions (`zring gc`): manifests older than the newest
/// `keep`, stores none of those versions name, temporary files of dead writers.
/// Returns `{"current", "kept_versions", "manifests", "stores", "temps", "bytes"}`
/// (removed paths; with `dry_run`, what would be removed).
#[pyfunction]
#[pyo3(signature = (path, keep = 1, dry_run = false))]
pub fn _collect_garbage<'py>(
    py: Python<'py>,
    path: PathBuf,
    keep: u64,
    dry_run: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let r = py
        .detach(|| zring_engine::dataset::collect_garbage(&path, keep, dry_run))
        .map_err(|e| errors::engine(py, e))?;
    let paths = |v: &[PathBuf]| -> Vec<String> {
        v.iter().map(|p| p.to_string_lossy().into_owned()).collect()
    };
    let out = PyDict::new(py);
    out.set_item("current", r.current)?;
    out.set_item("kept_versions", r.kept_versions)?;
    out.set_item("manifests", paths(&r.manifests))?;
    out.set_item("stores", paths(&r.stores))?;
    out.set_item("temps", paths(&r.temps))?;
    out.set_item("bytes", r.bytes)?;
    Ok(out)
}

/// Names the records of field `f` a read buffer is for: `record 7 of field "image"
/// of dataset PATH`, as `buffer::records_of` does for a store.
fn field_records(ds: &Dataset, f: usize, ids: &[u64], largest: Option<(u64, u64)>) -> String {
    let name = ds.fields().get(f).map_or("?", |field| field.name.as_str());
    let source = format!("field {name:?} of dataset {}", ds.path().display());
    buffer::records_of(&source, ids, largest)
}

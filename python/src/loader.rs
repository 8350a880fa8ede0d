//! `Loader`: the zring-loader crate's endless prefetching loader, from Python.
//!
//! The Rust workers draw, gather (no GIL, no lock) and order the steps. Each step
//! reaches Python as a list with one dict per shard, `{name: ndarray | RaggedBatch}`,
//! whose arrays are zero-copy views of the loader's pooled buffers.
//!
//! Without a transform, the consumer's thread turns a step into Python objects (a
//! few array headers). With a transform, each worker does that itself and calls the
//! transform on every shard dict, holding the GIL only for that, so the transform
//! runs ahead of the consumer like the gathers do; NumPy and torch code that
//! releases the GIL runs in parallel across workers. Every wait for a step, `seek`
//! and `close` release the GIL (a worker may need it to finish a transform).

use std::sync::{Arc, Mutex, PoisonError};

use numpy::PyArrayDescr;
use pyo3::exceptions::{PyMemoryError, PyRuntimeError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};
use zring_loader::{
    Batch, Delivery, Loader as RustLoader, LoaderError, LoaderOptions, Lookahead, Schedule, Source,
    Step, Tensor, View,
};
use zring_sampler::MixturePlan;

use crate::buffer::array_over;
use crate::dataset::PyDatasetField;
use crate::dtype;
use crate::epochs::EpochPlan;
use crate::errors;
use crate::interrupt;
use crate::mixture::PyMixture;
use crate::ragged::ragged_batch;
use crate::sampler::Sampler;
use crate::settings::Size;
use crate::store::StoreBase;

/// How to turn one stream's tensors into Python objects.
struct StreamInfo {
    name: Py<PyString>,
    descr: Py<PyArrayDescr>,
}

/// The loader with or without a Python transform.
enum Inner {
    Plain(RustLoader<Batch>),
    Mapped(RustLoader<Py<PyAny>>),
}

impl Inner {
    fn step(&self) -> u64 {
        match self {
            Inner::Plain(l) => l.step(),
            Inner::Mapped(l) => l.step(),
        }
    }

    fn seek(&mut self, step: u64) -> Result<(), LoaderError> {
        match self {
            Inner::Plain(l) => l.seek(step),
            Inner::Mapped(l) => l.seek(step),
        }
    }

    fn close(&mut self) {
        match self {
            Inner::Plain(l) => l.close(),
            Inner::Mapped(l) => l.close(),
        }
    }
}

/// What one wait for a step produced.
enum Next {
    Plain(Step<Batch>),
    Mapped(Step<Py<PyAny>>),
    Failed(LoaderError),
    /// Iteration ended after a failed step.
    End,
    Closed,
}

/// The native loader behind `zring.Loader` (see its documentation).
///
/// Every step draws one global batch from the sampler (endless) or one step of an
/// `_EpochPlan` (finite or endless; an epoch's last step may be shorter), splits it
/// into one equal contiguous shard per view, gathers every stream of a shard with
/// the same indices, and yields a list of shard dicts `{name: ndarray | RaggedBatch}`.
/// A finite plan's loader raises `StopIteration` after its last step.
#[pyclass(subclass, weakref, module = "zring._zring", name = "_Loader")]
pub struct Loader {
    inner: Arc<Mutex<Option<Inner>>>,
    streams: Arc<Vec<StreamInfo>>,
    shards: usize,
}

/// `lookahead_bytes` by default: the Rust loader's default budget (512 MiB; the
/// text signature spells it out).
const DEFAULT_LOOKAHEAD_BYTES: u64 = match Lookahead::DEFAULT {
    Lookahead::Budget { bytes } => bytes,
    Lookahead::Fixed => 0,
};

#[pymethods]
impl Loader {
    #[new]
    #[pyo3(signature = (streams, sampler, workers = 2, prefetch = 4, transform = None, ordered = true, *, pinned = false, lookahead_bytes = Some(Size(DEFAULT_LOOKAHEAD_BYTES)), decode = None, mixture = None), text_signature = "(streams, sampler, workers=2, prefetch=4, transform=None, ordered=True, *, pinned=False, lookahead_bytes=536870912, decode=None, mixture=None)")]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        streams: &Bound<'_, PyDict>,
        sampler: &Bound<'_, PyAny>,
        workers: usize,
        prefetch: usize,
        transform: Option<Py<PyAny>>,
        ordered: bool,
        pinned: bool,
        lookahead_bytes: Option<Size>,
        decode: Option<&Bound<'_, PyDict>>,
        mixture: Option<&Bound<'_, PyMixture>>,
    ) -> PyResult<Self> {
        // `{stream: spec}` of the streams whose encoded images are decoded.
        let mut decodes = Vec::new();
        if let Some(decode) = decode {
            for (name, spec) in decode.iter() {
                let name: String = name.extract()?;
                if !streams.contains(&name)? {
                    return Err(errors::INVALID.err(
                        py,
                        format!("decode names stream {name:?}, which the loader does not have"),
                    ));
                }
                let image = crate::decode::image_decode(&spec, &name)?;
                decodes.push((name, image));
            }
        }
        let mut rust_streams: Vec<(String, Vec<View>)> = Vec::new();
        let mut infos = Vec::new();
        for (name, views) in streams.iter() {
            let name = name
                .cast::<PyString>()
                .map_err(|_| PyTypeError::new_err("stream names must be strings"))?
                .clone();
            let one = views.cast::<StoreBase>().is_ok() || views.cast::<PyDatasetField>().is_ok();
            let list: Vec<Bound<'_, PyAny>> = if one {
                vec![views]
            } else {
                views.try_iter()?.collect::<PyResult<_>>()?
            };
            let mut rust_views = Vec::with_capacity(list.len());
            let mut descr = None;
            let image = decodes
                .iter()
                .find(|(n, _)| n.as_str() == name.to_str().unwrap_or_default())
                .map(|(_, image)| image);
            for v in &list {
                let (source, d) = view_source(py, &name, v)?;
                descr.get_or_insert(d);
                let view = View::shared(source, pinned);
                rust_views.push(match image {
                    Some(image) => view.decoded(image.clone()),
                    None => view,
                });
            }
            let descr = descr.ok_or_else(|| {
                errors::INVALID.err(
                    py,
                    format!("stream {name} has no views (give one store per placement)"),
                )
            })?;
            infos.push(StreamInfo {
                name: name.clone().unbind(),
                descr,
            });
            rust_streams.push((name.to_str()?.to_string(), rust_views));
        }
        let sampler: Schedule = if let Some(mixture) = mixture {
            // The plan's positions read the mixture, through views of the sources'
            // concatenation (the streams `zring.Loader` passes for a mixture).
            let plan = sampler.cast::<EpochPlan>().map_err(|_| {
                PyTypeError::new_err("a mixture's loader takes an epoch plan as its schedule")
            })?;
            MixturePlan::new(plan.get().snapshot(), mixture.get().mixture.clone()).into()
        } else if let Ok(s) = sampler.cast::<Sampler>() {
            s.get().snapshot().into()
        } else if let Ok(p) = sampler.cast::<EpochPlan>() {
            p.get().snapshot().into()
        } else {
            return Err(PyTypeError::new_err(format!(
                "sampler must be a zring.Sampler or an epoch plan, got {}",
                sampler
                    .get_type()
                    .name()
                    .map(|n| n.to_string())
                    .unwrap_or_default()
            )));
        };
        let delivery = if ordered {
            Delivery::StepOrder
        } else {
            Delivery::CompletionOrder
        };
        let mut options = LoaderOptions::new(workers, prefetch).with_delivery(delivery);
        if let Some(Size(bytes)) = lookahead_bytes {
            // Sized from the device's queue within `bytes`; workers and prefetch are
            // floors (see LoaderOptions::lookahead). The default, as in Rust.
            options = options.with_lookahead(Lookahead::Budget { bytes });
        }
        let streams = Arc::new(infos);
        let built = match transform {
            None => py
                .detach(|| RustLoader::new(rust_streams, sampler, options))
                .map(Inner::Plain),
            Some(f) => {
                let infos = Arc::clone(&streams);
                let run =
                    move |step: Step<Batch>| -> Result<Py<PyAny>, zring_loader::TransformError> {
                        Python::attach(|py| {
                            let shards = to_python(py, step.data, &infos)?;
                            let out = PyList::empty(py);
                            for shard in shards.iter() {
                                out.append(f.bind(py).call1((shard,))?)?;
                            }
                            Ok(out.into_any().unbind())
                        })
                        .map_err(|e: PyErr| Box::new(e) as zring_loader::TransformError)
                    };
                py.detach(|| RustLoader::with_transform(rust_streams, sampler, options, run))
                    .map(Inner::Mapped)
            }
        };
        let inner = built.map_err(|e| loader_error(py, e))?;
        let shards = match &inner {
            Inner::Plain(l) => l.shards(),
            Inner::Mapped(l) => l.shards(),
        };
        Ok(Self {
            inner: Arc::new(Mutex::new(Some(inner))),
            streams,
            shards,
        })
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// The next step (waiting for it without the GIL, and for Ctrl-C: a
    /// `KeyboardInterrupt` while waiting consumes no step); `StopIteration` after a
    /// finite plan's last step or after a failed step was raised, `ClosedError` once
    /// closed.
    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        let inner = Arc::clone(&self.inner);
        let next = interrupt::wait(py, move |limit| {
            let mut guard = inner.lock().unwrap_or_else(PoisonError::into_inner);
            let r = match guard.as_mut() {
                None => return Some(Next::Closed),
                Some(Inner::Plain(l)) => l.next_within(limit).ok()?.map(|r| r.map(Next::Plain)),
                Some(Inner::Mapped(l)) => l.next_within(limit).ok()?.map(|r| r.map(Next::Mapped)),
            };
            Some(match r {
                None => Next::End,
                Some(Ok(n)) => n,
                Some(Err(e)) => Next::Failed(e),
            })
        })?;
        match next {
            Next::End => Ok(None),
            Next::Closed => Err(errors::closed(py, "loader")),
            Next::Failed(e) => Err(loader_error(py, e)),
            Next::Mapped(step) => Ok(Some(step.data)),
            Next::Plain(step) => Ok(Some(
                to_python(py, step.data, &self.streams)?.into_any().unbind(),
            )),
        }
    }

    /// The step the next delivery carries: the step to `seek` to when resuming after
    /// the steps delivered so far.
    #[getter]
    fn step(&self, py: Python<'_>) -> PyResult<u64> {
        let inner = Arc::clone(&self.inner);
        py.detach(move || {
            inner
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .as_ref()
                .map(Inner::step)
        })
        .ok_or_else(|| errors::closed(py, "loader"))
    }

    /// Moves to `step`: the steps delivered next are `step`, `step + 1`, ... exactly
    /// as in an uninterrupted run. Steps made ahead are dropped.
    fn seek(&self, py: Python<'_>, step: u64) -> PyResult<()> {
        let inner = Arc::clone(&self.inner);
        let r = py.detach(move || {
            let mut guard = inner.lock().unwrap_or_else(PoisonError::into_inner);
            guard.as_mut().map(|l| l.seek(step))
        });
        match r {
            None => Err(errors::closed(py, "loader")),
            Some(r) => r.map_err(|e| loader_error(py, e)),
        }
    }

    /// Stops and joins the workers and drops the steps made ahead; iteration then
    /// ends. Arrays already delivered stay valid. Idempotent. Ctrl-C while waiting
    /// for the workers raises `KeyboardInterrupt` at once; the loader is closed
    /// anyway (its workers finish stopping in the background).
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let inner = Arc::clone(&self.inner);
        let taken = py.detach(move || inner.lock().unwrap_or_else(PoisonError::into_inner).take());
        if let Some(mut l) = taken {
            interrupt::wait_for_thread(py, "lclose", move || l.close())?;
        }
        Ok(())
    }

    /// Whether `close()` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_none()
    }

    /// Shards per step (views per stream).
    #[getter]
    fn shards(&self) -> usize {
        self.shards
    }

    /// The options the loader runs with: `workers` and `prefetch` as chosen (with
    /// `lookahead_bytes`, sized from the device's queue within that budget),
    /// `lookahead_bytes` (None when they are fixed) and `ordered`.
    #[getter]
    fn options<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let inner = Arc::clone(&self.inner);
        let options = py.detach(move || {
            let guard = inner.lock().unwrap_or_else(PoisonError::into_inner);
            match guard.as_ref() {
                Some(Inner::Plain(l)) => Some(l.options().clone()),
                Some(Inner::Mapped(l)) => Some(l.options().clone()),
                None => None,
            }
        });
        let options = options.ok_or_else(|| errors::closed(py, "loader"))?;
        let d = PyDict::new(py);
        d.set_item("workers", options.workers)?;
        d.set_item("prefetch", options.prefetch)?;
        let budget = match options.lookahead {
            Lookahead::Budget { bytes } => Some(bytes),
            _ => None,
        };
        d.set_item("lookahead_bytes", budget)?;
        d.set_item("ordered", options.delivery == Delivery::StepOrder)?;
        Ok(d)
    }

    /// Stream names, in the order of the dicts' keys.
    #[getter]
    fn stream_names(&self, py: Python<'_>) -> Vec<Py<PyString>> {
        self.streams.iter().map(|s| s.name.clone_ref(py)).collect()
    }

    /// Buffer counters (a dict of `allocations`, `reuses`, `live`,
    /// `live_high_water`, `vecs_created`, `images_skipped`, `images_substituted`:
    /// bad images left out or replaced in the steps delivered so far, not counting
    /// steps the workers made ahead): `allocations` stops growing once the run
    /// is steady and `live_high_water` shows the memory bound at work. Raises
    /// `ClosedError` after `close()`.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let inner = Arc::clone(&self.inner);
        let stats = py.detach(move || {
            inner
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .as_ref()
                .map(|l| match l {
                    Inner::Plain(l) => l.stats(),
                    Inner::Mapped(l) => l.stats(),
                })
        });
        let s = stats.ok_or_else(|| errors::closed(py, "loader"))?;
        let d = PyDict::new(py);
        d.set_item("allocations", s.buffers.allocations)?;
        d.set_item("reuses", s.buffers.reuses)?;
        d.set_item("live", s.buffers.live)?;
        d.set_item("live_high_water", s.buffers.live_high_water)?;
        d.set_item("vecs_created", s.vecs_created)?;
        d.set_item("images_skipped", s.images_skipped)?;
        d.set_item("images_substituted", s.images_substituted)?;
        Ok(d)
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    #[pyo3(signature = (_exc_type = None, _exc = None, _tb = None))]
    fn __exit__(
        &self,
        py: Python<'_>,
        _exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        // A KeyboardInterrupt while closing replaces the block's exception, if any.
        self.close(py)?;
        Ok(false)
    }
}

impl Drop for Loader {
    fn drop(&mut self) {
        // Workers may be waiting for the GIL (to run a transform), so they must be
        // joined with it released; the pyclass is dropped with the GIL held.
        let inner = Arc::clone(&self.inner);
        Python::attach(|py| {
            py.detach(move || {
                let taken = inner.lock().unwrap_or_else(PoisonError::into_inner).take();
                drop(taken);
            })
        });
    }
}

/// One step's tensors as a list of shard dicts (arrays over the loader's buffers).
fn to_python<'py>(
    py: Python<'py>,
    batch: Batch,
    streams: &[StreamInfo],
) -> PyResult<Bound<'py, PyList>> {
    let shards: Vec<Bound<'py, PyDict>> = (0..batch.shards()).map(|_| PyDict::new(py)).collect();
    for ((_, tensors), info) in batch.into_streams().into_iter().zip(streams) {
        let descr = info.descr.bind(py);
        let name = info.name.bind(py);
        for (tensor, dict) in tensors.into_iter().zip(&shards) {
            let obj = match tensor {
                Tensor::Dense { data, shape, .. } => array_over(py, data, descr, &shape)?,
                Tensor::Ragged {
                    values,
                    cu_seqlens,
                    shapes,
                    ndim,
                    dtype,
                } => {
                    let elems = values.len() / dtype.itemsize().max(1);
                    let values = array_over(py, values, descr, &[elems])?;
                    ragged_batch(py, values, &cu_seqlens, &shapes, ndim)?
                }
                // The loader's tensor enum may grow; refuse what this binding does
                // not know instead of guessing.
                #[allow(unreachable_patterns)]
                _ => {
                    return Err(PyRuntimeError::new_err(
                        "the loader produced a tensor kind this zring build does not know",
                    ))
                }
            };
            dict.set_item(name, obj)?;
        }
    }
    PyList::new(py, shards)
}

/// The Python exception for a loader error: a transform's own exception is re-raised
/// as is; engine failures keep their class with the loader's step/stream prefix.
fn loader_error(py: Python<'_>, e: LoaderError) -> PyErr {
    let msg = e.to_string();
    match e {
        LoaderError::Transform { source, .. } => match source.downcast::<PyErr>() {
            Ok(err) => *err,
            Err(other) => PyRuntimeError::new_err(format!("{msg} ({other})")),
        },
        LoaderError::Gather { source, .. } => errors::engine_with(py, &source, msg),
        LoaderError::Decode { source, .. } | LoaderError::InvalidDecode { source, .. } => {
            crate::decode::decode_error_with(py, &source, msg)
        }
        LoaderError::Buffer { .. } => PyMemoryError::new_err(msg),
        LoaderError::Spawn(source) => errors::os_error(py, &source, msg),
        LoaderError::Panicked { .. } => PyRuntimeError::new_err(msg),
        _ => errors::INVALID.err(py, msg),
    }
}

/// The source and NumPy dtype of one view: a store, or a dataset's field.
pub(crate) fn view_source(
    py: Python<'_>,
    name: &Bound<'_, PyString>,
    v: &Bound<'_, PyAny>,
) -> PyResult<(Source, Py<PyArrayDescr>)> {
    if let Ok(store) = v.cast::<StoreBase>() {
        let base = store.get();
        let store: Source = Arc::new(base.handle(py)?);
        return Ok((store, base.descr(py)?.unbind()));
    }
    if let Ok(field) = v.cast::<PyDatasetField>() {
        let field = field.get().field.clone();
        let descr = dtype::to_numpy(py, field.schema().dtype)?.unbind();
        return Ok((Arc::new(field), descr));
    }
    Err(PyTypeError::new_err(format!(
        "stream {name} must be a list of DenseStore / RaggedStore objects or dataset fields, got {}",
        v.get_type().name().map(|n| n.to_string()).unwrap_or_default()
    )))
}

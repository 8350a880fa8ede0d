//! `Sampler`: zring_sampler's counter-based batch indices as NumPy uint64 arrays.

use std::str::FromStr;
use std::sync::{Mutex, PoisonError};

use numpy::{PyArray1, PyArrayDescrMethods, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyInt, PyString, PyType};
use zring_sampler::Mode;

use crate::buffer::{data_ptr, is_writeable};
use crate::errors;

/// Batches at least this large are filled with the GIL released.
const DETACH_BATCH: usize = 1 << 16;

/// How a `Sampler` draws indices (also reachable as `Sampler.Mode`).
#[pyclass(eq, eq_int, frozen, module = "zring._zring", name = "Mode")]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[allow(clippy::upper_case_acronyms)]
pub enum PyMode {
    /// `(step * batch + i) mod length`.
    SEQUENTIAL = 0,
    /// Uniform with replacement.
    IID = 1,
    /// Without replacement: a fresh permutation per cycle of `length` positions.
    CYCLIC = 2,
}

impl From<PyMode> for Mode {
    fn from(m: PyMode) -> Self {
        match m {
            PyMode::SEQUENTIAL => Mode::Sequential,
            PyMode::IID => Mode::Iid,
            PyMode::CYCLIC => Mode::Cyclic,
        }
    }
}

impl From<Mode> for PyMode {
    fn from(m: Mode) -> Self {
        match m {
            Mode::Sequential => PyMode::SEQUENTIAL,
            Mode::Iid => PyMode::IID,
            Mode::Cyclic => PyMode::CYCLIC,
        }
    }
}

pub(crate) fn parse_mode(obj: &Bound<'_, PyAny>) -> PyResult<Mode> {
    if let Ok(m) = obj.cast::<PyMode>() {
        return Ok((*m.get()).into());
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Mode::from_str(s.to_str()?).map_err(|e| errors::sampler(obj.py(), e));
    }
    if let Ok(i) = obj.cast::<PyInt>() {
        return match i.extract::<u8>() {
            Ok(0) => Ok(Mode::Sequential),
            Ok(1) => Ok(Mode::Iid),
            Ok(2) => Ok(Mode::Cyclic),
            _ => Err(PyValueError::new_err(format!(
                "mode {i} is not 0 (SEQUENTIAL), 1 (IID) or 2 (CYCLIC)"
            ))),
        };
    }
    Err(PyTypeError::new_err(
        "mode must be a Sampler.Mode, \"sequential\", \"iid\" or \"cyclic\"",
    ))
}

/// Stateless, counter-based batch indices: batch `t` is a pure function of
/// `(seed, t)`, so `seek(t)` is O(1) and a resumed run repeats the original.
/// With `rank`/`world_size`, each rank gets its contiguous slice of every global
/// batch.
///
/// `Sampler(length, batch, mode, seed=0, rank=0, world_size=1)`
///
/// - `length`: the number of records indices are drawn from; `batch`: the global
///   batch size (divisible by `world_size`).
/// - `mode`: `Sampler.Mode.SEQUENTIAL`, `IID` (with replacement) or `CYCLIC`
///   (without replacement, a fresh permutation per cycle), or the names
///   `"sequential"`, `"iid"`, `"cyclic"`, or 0, 1, 2.
/// - `seed`: the stream's seed (0 by default, as everywhere in zring); `rank`,
///   `world_size`: this process's shard of each batch, spelled as PyTorch spells
///   them. (`world=` is the deprecated old name of `world_size=`.)
///
/// Iterating (or `next()`) yields uint64 arrays of `batch_size` indices, endlessly.
/// Raises `InvalidArgumentError` for a zero length or batch, a batch not divisible
/// by `world_size` or `rank >= world_size`; `TypeError`/`ValueError` for an
/// unknown mode.
///
/// >>> import zring
/// >>> s = zring.Sampler(10, 4, "sequential")
/// >>> s.next(), s.next(), s.step
/// (array([0, 1, 2, 3], dtype=uint64), array([4, 5, 6, 7], dtype=uint64), 2)
/// >>> s.batch(0)
/// array([0, 1, 2, 3], dtype=uint64)
#[pyclass(frozen, module = "zring._zring")]
pub struct Sampler {
    inner: Mutex<zring_sampler::Sampler>,
}

impl Sampler {
    fn lock(&self) -> std::sync::MutexGuard<'_, zring_sampler::Sampler> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A copy of the engine sampler (configuration and step), for the loader.
    pub fn snapshot(&self) -> zring_sampler::Sampler {
        self.lock().clone()
    }

    /// The sampler to fill batch `step` with (`None`: the current step, which is
    /// then advanced) and that step. The lock is released before any filling, so no
    /// thread ever waits for the GIL while holding it.
    fn claim(&self, step: Option<u64>) -> (zring_sampler::Sampler, u64) {
        let mut s = self.lock();
        let t = step.unwrap_or_else(|| s.step());
        if step.is_none() {
            s.seek(t.wrapping_add(1));
        }
        (s.clone(), t)
    }

    /// A new array holding batch `step` (`None`: the current step, then advances).
    fn draw<'py>(&self, py: Python<'py>, step: Option<u64>) -> Bound<'py, PyArray1<u64>> {
        let (s, t) = self.claim(step);
        let n = s.batch_size();
        // SAFETY: every element is written by fill below before the array is returned.
        let arr = unsafe { PyArray1::<u64>::new(py, [n], false) };
        // SAFETY: a fresh, contiguous, unshared array of n u64.
        let out = unsafe { std::slice::from_raw_parts_mut(arr.data(), n) };
        if n >= DETACH_BATCH {
            py.detach(|| fill(&s, t, out));
        } else {
            fill(&s, t, out);
        }
        arr
    }
}

fn fill(s: &zring_sampler::Sampler, step: u64, out: &mut [u64]) {
    // The length always equals batch_size here, so fill cannot fail.
    let _ = s.fill(step, out);
}

#[pymethods]
impl Sampler {
    #[classattr]
    #[pyo3(name = "Mode")]
    fn mode_class(py: Python<'_>) -> Py<PyType> {
        py.get_type::<PyMode>().unbind()
    }

    #[new]
    #[pyo3(signature = (length, batch, mode, seed = 0, rank = 0, world_size = 1, *, world = None), text_signature = "(length, batch, mode, seed=0, rank=0, world_size=1)")]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        length: u64,
        batch: usize,
        mode: &Bound<'_, PyAny>,
        seed: u64,
        rank: usize,
        world_size: usize,
        world: Option<usize>,
    ) -> PyResult<Self> {
        let world = match world {
            Some(w) => {
                deprecated(py, c"Sampler(world=...) is now Sampler(world_size=...)")?;
                w
            }
            None => world_size,
        };
        let mode = parse_mode(mode)?;
        let s = zring_sampler::Sampler::new(length, batch, mode, seed)
            .and_then(|s| s.shard(rank, world))
            .map_err(|e| errors::sampler(py, e))?;
        Ok(Self {
            inner: Mutex::new(s),
        })
    }

    /// The indices of the current step (a new uint64 array of `batch_size`), then
    /// advances the step. With `out` (a writeable, C-contiguous uint64 array of
    /// `batch_size`), fills it instead and returns it.
    #[pyo3(signature = (out = None))]
    fn next<'py>(
        &self,
        py: Python<'py>,
        out: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let Some(out) = out else {
            return Ok(self.draw(py, None).into_any());
        };
        let arr = out
            .cast::<PyUntypedArray>()
            .map_err(|_| PyTypeError::new_err("out must be a NumPy uint64 array"))?;
        let n = self.lock().batch_size();
        let d = arr.dtype();
        if d.kind() != b'u' || d.itemsize() != 8 || d.is_native_byteorder() == Some(false) {
            return Err(PyTypeError::new_err(format!(
                "out has dtype {d}, expected uint64"
            )));
        }
        if arr.shape() != [n] || !arr.is_c_contiguous() || !is_writeable(arr) {
            return Err(PyValueError::new_err(format!(
                "out must be a writeable, C-contiguous array of shape ({n},), got shape {:?}",
                arr.shape()
            )));
        }
        // SAFETY: checked above: a live, writeable, contiguous array of n u64.
        let dest = unsafe { std::slice::from_raw_parts_mut(data_ptr(arr).cast::<u64>(), n) };
        let (s, t) = self.claim(None);
        fill(&s, t, dest);
        Ok(out.clone())
    }

    fn __next__<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u64>> {
        self.draw(py, None)
    }

    fn __iter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    /// The indices of batch `step` (a new uint64 array of `batch_size`) without
    /// moving the step counter.
    fn batch<'py>(&self, py: Python<'py>, step: u64) -> Bound<'py, PyArray1<u64>> {
        self.draw(py, Some(step))
    }

    /// The indices at positions `start, start + 1, ..., start + count - 1` of the
    /// sequence the batches are cut from (batch `t` of rank `r` holds positions
    /// `t * global_batch_size + r * batch_size ..`), as a new uint64 array; for
    /// cutting the same sequence another way (epochs, a last partial batch).
    fn positions<'py>(
        &self,
        py: Python<'py>,
        start: u128,
        count: usize,
    ) -> Bound<'py, PyArray1<u64>> {
        let s = self.snapshot();
        // SAFETY: every element is written by fill_positions below before the
        // array is returned.
        let arr = unsafe { PyArray1::<u64>::new(py, [count], false) };
        // SAFETY: a fresh, contiguous, unshared array of `count` u64.
        let out = unsafe { std::slice::from_raw_parts_mut(arr.data(), count) };
        if count >= DETACH_BATCH {
            py.detach(|| s.fill_positions(start, out));
        } else {
            s.fill_positions(start, out);
        }
        arr
    }

    /// Pickles the configuration and the step: the copy draws the same batches.
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let s = slf.get().snapshot();
        let args = (
            s.len(),
            s.global_batch_size(),
            PyMode::from(s.mode()) as u8,
            s.seed(),
            s.rank(),
            s.world(),
        );
        (slf.get_type(), args, s.step())
            .into_pyobject(py)
            .map(Bound::into_any)
    }

    /// The step part of a pickle (see `__reduce__`).
    fn __setstate__(&self, step: u64) {
        self.lock().seek(step);
    }

    /// Moves to `step` in O(1); the next `next()` returns batch `step`.
    fn seek(&self, step: u64) {
        self.lock().seek(step);
    }

    /// The step the next `next()` returns.
    #[getter]
    fn step(&self) -> u64 {
        self.lock().step()
    }

    /// The number of records indices are drawn from.
    #[getter]
    fn length(&self) -> u64 {
        self.lock().len()
    }

    /// Indices per `next()` on this rank (`global_batch_size / world`).
    #[getter]
    fn batch_size(&self) -> usize {
        self.lock().batch_size()
    }

    /// Indices per step over all ranks (the `batch` given to the constructor).
    #[getter]
    fn global_batch_size(&self) -> usize {
        self.lock().global_batch_size()
    }

    /// The sampling mode, a `Sampler.Mode`.
    #[getter]
    fn mode(&self) -> PyMode {
        self.lock().mode().into()
    }

    /// The seed of the index stream.
    #[getter]
    fn seed(&self) -> u64 {
        self.lock().seed()
    }

    /// This process's shard of every global batch (`0 <= rank < world_size`).
    #[getter]
    fn rank(&self) -> usize {
        self.lock().rank()
    }

    /// The number of shards every global batch is split into.
    #[getter]
    fn world_size(&self) -> usize {
        self.lock().world()
    }

    /// `world_size`, by its old name (kept for existing callers).
    #[getter]
    fn world(&self) -> usize {
        self.lock().world()
    }

    fn __repr__(&self) -> String {
        let s = self.lock();
        format!(
            "Sampler(length={}, batch={}, mode={}, seed={}, rank={}, world_size={}, step={})",
            s.len(),
            s.global_batch_size(),
            s.mode(),
            s.seed(),
            s.rank(),
            s.world(),
            s.step()
        )
    }
}

/// Warns, as Python's own deprecations do, that a name is on its way out.
fn deprecated(py: Python<'_>, msg: &std::ffi::CStr) -> PyResult<()> {
    let category = py.get_type::<pyo3::exceptions::PyDeprecationWarning>();
    PyErr::warn(py, category.as_any(), msg, 1)
}

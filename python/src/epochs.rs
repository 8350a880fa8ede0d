//! `_EpochPlan`: zring_sampler's `EpochPlan` (epochs of steps for one rank and one
//! worker, finite or endless) for `zring._internal.frameworks.Plan` and as a `_Loader` schedule.

use std::sync::{Mutex, PoisonError};

use numpy::PyArray1;
use pyo3::exceptions::PyIndexError;
use pyo3::prelude::*;
use zring_sampler::EpochPlan as RustPlan;

use crate::errors;
use crate::sampler::{parse_mode, PyMode};

/// The epoch plan behind `zring._internal.frameworks.Plan` (private; see that class).
///
/// `_EpochPlan(length, batch, mode, seed=0, epochs=None, drop_last=False, rank=0,
/// world=1, offset=0, stride=1)`: epoch `e` is positions `[e*length,
/// (e+1)*length)` of the stream `Sampler(length, 1, mode, seed)`, cut into global
/// steps of `batch * world`; rank `rank` takes slice `rank`; an epoch's last,
/// partial global step is dropped (`drop_last`) or split evenly across the ranks.
/// Step `s` of this plan is plan step `offset + s * stride` (a worker's share).
/// Given to `zring.Loader` in place of a `Sampler`, the loader delivers its steps
/// from `step` on, and ends after the last one when `epochs` is set.
#[pyclass(frozen, module = "zring._zring", name = "_EpochPlan")]
pub struct EpochPlan {
    inner: Mutex<RustPlan>,
}

impl EpochPlan {
    fn lock(&self) -> std::sync::MutexGuard<'_, RustPlan> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A copy of the engine plan (configuration and step), for the loader.
    pub fn snapshot(&self) -> RustPlan {
        self.lock().clone()
    }
}

#[pymethods]
impl EpochPlan {
    #[new]
    #[pyo3(signature = (length, batch, mode, seed = 0, epochs = None, drop_last = false, rank = 0, world = 1, offset = 0, stride = 1), text_signature = "(length, batch, mode, seed=0, epochs=None, drop_last=False, rank=0, world=1, offset=0, stride=1)")]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        length: u64,
        batch: usize,
        mode: &Bound<'_, PyAny>,
        seed: u64,
        epochs: Option<u64>,
        drop_last: bool,
        rank: usize,
        world: usize,
        offset: u64,
        stride: u64,
    ) -> PyResult<Self> {
        let mode = parse_mode(mode)?;
        let plan = RustPlan::new(length, batch, mode, seed)
            .and_then(|p| p.shard(rank, world))
            .and_then(|p| p.with_drop_last(drop_last))
            .map(|p| p.with_epochs(epochs))
            .and_then(|p| p.strided(offset, stride))
            .map_err(|e| errors::sampler(py, e))?;
        Ok(Self {
            inner: Mutex::new(plan),
        })
    }

    /// This plan's record ids at `step` (a new uint64 array; an epoch's last step
    /// may be shorter). `IndexError` past the end of a finite plan.
    fn indices<'py>(&self, py: Python<'py>, step: u64) -> PyResult<Bound<'py, PyArray1<u64>>> {
        let ids = self.lock().batch(step).ok_or_else(|| {
            PyIndexError::new_err(format!("step {step} is past the end of the plan"))
        })?;
        Ok(PyArray1::from_vec(py, ids))
    }

    /// The same plan seen by one of `stride` workers: its step `s` is plan step
    /// `offset + s * stride` (of the unstrided plan), from step 0.
    fn strided(&self, py: Python<'_>, offset: u64, stride: u64) -> PyResult<Self> {
        let plan = self
            .snapshot()
            .strided(offset, stride)
            .map_err(|e| errors::sampler(py, e))?;
        Ok(Self {
            inner: Mutex::new(plan),
        })
    }

    /// Pickles the configuration and the step.
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let p = slf.get().snapshot();
        let (rank, world) = p.rank_and_world();
        let (offset, stride) = p.stride();
        let args = (
            p.len(),
            p.batch_size(),
            PyMode::from(p.stream().mode()) as u8,
            p.stream().seed(),
            p.epochs(),
            p.drop_last(),
            rank,
            world,
            offset,
            stride,
        );
        (slf.get_type(), args, p.step())
            .into_pyobject(py)
            .map(Bound::into_any)
    }

    /// The step part of a pickle (see `__reduce__`).
    fn __setstate__(&self, step: u64) {
        self.lock().seek(step);
    }

    /// Moves the counter a loader starts from to `step`.
    fn seek(&self, step: u64) {
        self.lock().seek(step);
    }

    /// The step a loader built over this plan starts from.
    #[getter]
    fn step(&self) -> u64 {
        self.lock().step()
    }

    /// This plan's steps in all (after the stride); `None` when endless.
    #[getter]
    fn steps(&self) -> Option<u64> {
        self.lock().steps()
    }

    /// Steps per epoch of the unstrided plan (every rank has the same number).
    #[getter]
    fn steps_per_epoch(&self) -> u64 {
        self.lock().steps_per_epoch()
    }

    /// The number of records (`length`).
    #[getter]
    fn length(&self) -> u64 {
        self.lock().len()
    }

    /// Records of a full step on this rank (`batch`).
    #[getter]
    fn batch_size(&self) -> usize {
        self.lock().batch_size()
    }

    fn __repr__(&self) -> String {
        let p = self.lock();
        let (rank, world) = p.rank_and_world();
        let (offset, stride) = p.stride();
        format!(
            "_EpochPlan(length={}, batch={}, mode={}, seed={}, epochs={}, drop_last={}, \
             rank={rank}, world={world}, offset={offset}, stride={stride}, step={})",
            p.len(),
            p.batch_size(),
            p.stream().mode(),
            p.stream().seed(),
            p.epochs()
                .map_or_else(|| "None".to_string(), |e| e.to_string()),
            p.drop_last(),
            p.step()
        )
    }
}

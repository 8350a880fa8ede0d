//! `_Mixture`: zring_sampler's `Mixture` (which source and record each position of
//! a weighted mixture reads) for `zring.mix`, and as what a `_Loader` maps an epoch
//! plan's positions through.

use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use zring_sampler::{Mixture, Mode};

use crate::dataset::select_1d;
use crate::errors;
use crate::index::Selection;

/// The mixture behind `zring.Mixture` (private; see `zring/_internal/mixture.py`).
///
/// `_Mixture(lens, weights, seed)`: sources of `lens[s]` records drawn in
/// proportion to `weights`, each through its own permutations (one per pass).
/// Positions map to indices into the sources' concatenation (source `s`'s record
/// `r` is `r` plus the lengths of the sources before it).
#[pyclass(frozen, module = "zring._zring", name = "_Mixture")]
pub struct PyMixture {
    pub(crate) mixture: Mixture,
}

/// Positions as `u64`: negative ones are refused by NumPy's cast check below.
fn positions(py: Python<'_>, p: &Bound<'_, PyAny>) -> PyResult<Vec<u64>> {
    let array: PyReadonlyArray1<'_, u64> = p
        .extract()
        .map_err(|_| errors::INVALID.err(py, "mixture positions must be a 1-D uint64 array"))?;
    Ok(array.as_slice()?.to_vec())
}

#[pymethods]
impl PyMixture {
    #[new]
    fn new(py: Python<'_>, lens: Vec<u64>, weights: Vec<f64>, seed: u64) -> PyResult<Self> {
        let mixture = Mixture::new(&lens, &weights, Mode::Cyclic, seed)
            .map_err(|e| errors::sampler(py, e))?;
        Ok(Self { mixture })
    }

    /// The same sources continued from position `at` with new `weights`: each
    /// source resumes where it was at `at`; only the interleave restarts there.
    fn reweighted(&self, py: Python<'_>, at: u64, weights: Vec<f64>) -> PyResult<Self> {
        let mixture = self
            .mixture
            .reweighted(at, &weights)
            .map_err(|e| errors::sampler(py, e))?;
        Ok(Self { mixture })
    }

    /// `(positions, one)`: the stream positions of records `idx` of epoch `epoch`
    /// of a mixture of `length` positions an epoch, `idx` read as a dataset's
    /// gather reads it (int, slice, list, 1-D array or mask; `one` for an int).
    fn positions<'py>(
        &self,
        py: Python<'py>,
        idx: &Bound<'py, PyAny>,
        length: u64,
        epoch: u64,
    ) -> PyResult<(Bound<'py, PyArray1<u64>>, bool)> {
        let sel = select_1d(idx, length)?;
        // Positions stay below 2^63, so that NumPy's signed views of them are exact.
        let first = epoch
            .checked_mul(length)
            .filter(|f| {
                f.checked_add(length)
                    .is_some_and(|end| end <= i64::MAX as u64)
            })
            .ok_or_else(|| {
                errors::INDEX.err(
                    py,
                    format!("epoch {epoch} is outside the mixture's stream (2^63 positions)"),
                )
            })?;
        let out: Vec<u64> = sel.ids().iter().map(|&i| first + i).collect();
        Ok((
            PyArray1::from_vec(py, out),
            matches!(sel, Selection::One(_)),
        ))
    }

    /// Indices into the concatenation of the sources for `positions` (uint64).
    fn indices<'py>(
        &self,
        py: Python<'py>,
        positions_: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArray1<u64>>> {
        let ps = positions(py, positions_)?;
        let mut out = vec![0u64; ps.len()];
        self.mixture
            .fill_indices(&ps, &mut out)
            .map_err(|e| errors::sampler(py, e))?;
        Ok(PyArray1::from_vec(py, out))
    }

    /// `(sources, records)` for `positions`: each position's source (int64) and
    /// its record in that source (uint64).
    #[allow(clippy::type_complexity)]
    fn picks<'py>(
        &self,
        py: Python<'py>,
        positions_: &Bound<'py, PyAny>,
    ) -> PyResult<(Bound<'py, PyArray1<i64>>, Bound<'py, PyArray1<u64>>)> {
        let ps = positions(py, positions_)?;
        let mut sources = Vec::with_capacity(ps.len());
        let mut records = Vec::with_capacity(ps.len());
        for &p in &ps {
            let pick = self.mixture.pick(p).map_err(|e| errors::sampler(py, e))?;
            sources.push(pick.source as i64);
            records.push(pick.record);
        }
        Ok((
            PyArray1::from_vec(py, sources),
            PyArray1::from_vec(py, records),
        ))
    }

    /// How many positions before `at` each source served (since the first weights).
    fn consumed(&self, py: Python<'_>, at: u64) -> PyResult<Vec<u64>> {
        self.mixture
            .consumed(at)
            .map_err(|e| errors::sampler(py, e))
    }

    /// The integer quotas of one period, in source order.
    #[getter]
    fn quotas(&self) -> Vec<u32> {
        self.mixture.quotas().to_vec()
    }

    /// The first position this mixture answers for (0 unless reweighted).
    #[getter]
    fn start(&self) -> u64 {
        self.mixture.start()
    }

    /// Each source's position at `start` (what a reweighting kept).
    #[getter]
    fn base(&self, py: Python<'_>) -> PyResult<Vec<u64>> {
        self.consumed(py, self.mixture.start())
    }
}

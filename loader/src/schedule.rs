//! What a loader's steps are drawn from: an endless [`Sampler`] (a full batch every
//! step) or an [`EpochPlan`] (epochs with a smaller last step, finite or endless).

use zring_sampler::{EpochPlan, MixturePlan, MixtureSampler, Sampler, SamplerError};

/// The step schedule of a loader. Both kinds are pure functions of the step
/// number, so workers make steps independently and `seek` is exact.
///
/// - [`Schedule::Sampler`]: every step is a full batch, forever.
/// - [`Schedule::Epochs`]: a step may hold fewer records than the nominal batch
///   (an epoch's last step); with `epochs` the schedule is *finite*: the loader
///   delivers its steps, then ends (`next()` returns `None`).
/// - [`Schedule::Mixture`]: full batches of a weighted mixture of sources, forever;
///   its indices number the sources' records one after another, as an
///   `engine::Concat` of them does (the views to read them through).
/// - [`Schedule::MixedEpochs`]: an epoch plan over a mixture's positions (epoch
///   `e` reads positions `[e * len, (e + 1) * len)`), with the plan's short last
///   steps and end; its indices number the sources' records as `Mixture` does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Schedule {
    Sampler(Sampler),
    Epochs(EpochPlan),
    Mixture(MixtureSampler),
    MixedEpochs(MixturePlan),
}

impl From<MixturePlan> for Schedule {
    fn from(m: MixturePlan) -> Self {
        Schedule::MixedEpochs(m)
    }
}

impl From<MixtureSampler> for Schedule {
    fn from(m: MixtureSampler) -> Self {
        Schedule::Mixture(m)
    }
}

impl From<Sampler> for Schedule {
    fn from(s: Sampler) -> Self {
        Schedule::Sampler(s)
    }
}

impl From<EpochPlan> for Schedule {
    fn from(p: EpochPlan) -> Self {
        Schedule::Epochs(p)
    }
}

impl Schedule {
    /// The step the loader starts at (the schedule's own counter).
    pub fn start(&self) -> u64 {
        match self {
            Schedule::Sampler(s) => s.step(),
            Schedule::Epochs(p) => p.step(),
            Schedule::Mixture(m) => m.step(),
            Schedule::MixedEpochs(m) => m.plan().step(),
        }
    }

    /// Records the schedule draws from.
    #[allow(clippy::len_without_is_empty)] // never empty: len >= 1
    pub fn len(&self) -> u64 {
        match self {
            Schedule::Sampler(s) => s.len(),
            Schedule::Epochs(p) => p.len(),
            Schedule::Mixture(m) => m.len(),
            Schedule::MixedEpochs(m) => m.mixture().total_len(),
        }
    }

    /// The largest number of records of a step (the nominal batch).
    pub fn batch_size(&self) -> usize {
        match self {
            Schedule::Sampler(s) => s.batch_size(),
            Schedule::Epochs(p) => p.batch_size(),
            Schedule::Mixture(m) => m.batch_size(),
            Schedule::MixedEpochs(m) => m.plan().batch_size(),
        }
    }

    /// Every size a step can have.
    pub fn batch_lens(&self) -> Vec<usize> {
        match self {
            Schedule::Sampler(s) => vec![s.batch_size()],
            Schedule::Epochs(p) => p.batch_lens(),
            Schedule::Mixture(m) => vec![m.batch_size()],
            Schedule::MixedEpochs(m) => m.plan().batch_lens(),
        }
    }

    /// The step after the last one, `None` if endless.
    pub fn end(&self) -> Option<u64> {
        match self {
            Schedule::Sampler(_) | Schedule::Mixture(_) => None,
            Schedule::Epochs(p) => p.steps(),
            Schedule::MixedEpochs(m) => m.plan().steps(),
        }
    }

    /// The epoch `step` belongs to: its first stream position over the records
    /// drawn from (an epoch plan's own epochs; for an endless sampler or mixture,
    /// how many times the stream has gone round). A pure function of the step, as
    /// decoded images' random crops need.
    pub fn epoch(&self, step: u64) -> u64 {
        let round = |position: u128, len: u64| (position / u128::from(len.max(1))) as u64;
        match self {
            Schedule::Sampler(s) => {
                round(u128::from(step) * s.global_batch_size() as u128, s.len())
            }
            Schedule::Epochs(p) => p
                .plan_step(step)
                .map_or(u64::MAX, |k| k / p.steps_per_epoch().max(1)),
            Schedule::Mixture(m) => round(u128::from(step) * m.batch_size() as u128, m.len()),
            Schedule::MixedEpochs(m) => m.epoch(step).unwrap_or(u64::MAX),
        }
    }

    /// Whether `step` is past the end.
    pub(crate) fn is_past_end(&self, step: u64) -> bool {
        self.end().is_some_and(|end| step >= end)
    }

    /// Sets `out` to the record ids of `step` (resizing it: a step may be short).
    pub fn fill(&self, step: u64, out: &mut Vec<u64>) -> Result<(), SamplerError> {
        match self {
            Schedule::Sampler(s) => {
                out.resize(s.batch_size(), 0);
                s.fill(step, out)
            }
            Schedule::Epochs(p) => {
                let n = p.batch_len(step).ok_or(SamplerError::PastEnd { step })?;
                out.resize(n, 0);
                p.fill(step, out)
            }
            Schedule::Mixture(m) => {
                out.resize(m.batch_size(), 0);
                m.fill(step, out)
            }
            Schedule::MixedEpochs(m) => {
                let n = m
                    .plan()
                    .batch_len(step)
                    .ok_or(SamplerError::PastEnd { step })?;
                out.resize(n, 0);
                m.fill(step, out)
            }
        }
    }

    /// The record ids of `step` (empty past the end).
    pub fn indices(&self, step: u64) -> Vec<u64> {
        let mut out = Vec::new();
        if self.fill(step, &mut out).is_err() {
            out.clear();
        }
        out
    }
}

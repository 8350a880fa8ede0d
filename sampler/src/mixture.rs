//! Weighted mixtures of several sources: which source, and which of its
//! records, sits at each position of one endless stream. The rule is documented on [`Mixture`].

use std::sync::Arc;

use crate::error::BadValue;
use crate::hash::{derive, TAG_MIXTURE};
use crate::sampler::check_shard;
use crate::{EpochPlan, Mode, Sampler, SamplerError};

/// The largest period: quotas are exact to `1 / MAX_PERIOD` of the total.
pub const MAX_PERIOD: u32 = 1 << 16;

/// Where one position of a mixture reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pick {
    /// The source's index in the list the mixture was built from.
    pub source: usize,
    /// The record of that source.
    pub record: u64,
    /// The source's own position (how many earlier positions read it since
    /// the mixture's first weights).
    pub source_position: u64,
}

/// A deterministic, stateless weighted mixture of several sources.
///
/// # The rule
///
/// Weights are turned into integer quotas `q_s` that sum to a period `P`
/// (the weights themselves when they are whole numbers summing to at most
/// [`MAX_PERIOD`], else the weights scaled to `P = MAX_PERIOD` by largest
/// remainders, so each proportion is exact to `1 / 65536`). One period is a
/// fixed interleave of the sources, built once by smooth weighted round robin:
/// every prefix of it holds each source within one position of its share, so
/// any window of `n` positions holds source `s` between `n q_s / P - 2` and
/// `n q_s / P + 2` times.
///
/// Position `p` (after the mixture's `start`, see below) lies in period
/// `b = p / P` at offset `o = p mod P`; it reads source `s = pattern[o]` at
/// that source's own position `c = base_s + b q_s + rank[o]`, where `rank[o]`
/// counts the earlier offsets of the period that belong to `s`. Each source
/// maps its own positions to records with its own [`Sampler`] stream (cyclic
/// by default: one fresh permutation per pass over the source). So every
/// position is computed in O(1), with no state, and the `c`-th position of
/// source `s` is reached exactly once.
///
/// # Sources of different sizes
///
/// Each source runs through its own passes independently. A small source with
/// a large weight wraps into its next pass (a new permutation) while a large
/// one is still in its first: it is upsampled, as the weights ask. Nothing
/// waits for the largest source to finish.
///
/// # Changing the weights on resume
///
/// [`Mixture::reweighted`] keeps everything that was read: from a global
/// position `at`, each source continues from the position it had reached under
/// the old weights (`consumed(at)`), and only the interleave (the quotas and
/// the pattern) restarts there. The new mixture answers positions from `at`
/// on.
///
#[derive(Debug, Clone)]
pub struct Mixture {
    weights: Vec<f64>,
    samplers: Vec<Sampler>,
    quotas: Vec<u32>,
    /// For each offset of a period, its source and how many earlier offsets of
    /// the period read that source (together: one memory access per position).
    pattern: Arc<[(u32, u32)]>,
    /// The first global position this mixture answers for.
    start: u64,
    /// Each source's position at `start`.
    base: Vec<u64>,
    /// Each source's first index in the concatenation of the sources; one more
    /// entry holds the total.
    starts: Arc<[u64]>,
}

impl Mixture {
    /// A mixture of sources with `lens[s]` records each, drawn in proportion to
    /// `weights[s]`; each source is read in `mode` with a seed derived from
    /// `(seed, s)`.
    ///
    /// Fails when there is no source, a source is empty, the lengths differ,
    /// a weight is negative, NaN or infinite, or every weight is zero. A
    /// source whose weight is zero is never read.
    pub fn new(lens: &[u64], weights: &[f64], mode: Mode, seed: u64) -> Result<Self, SamplerError> {
        if lens.is_empty() {
            return Err(SamplerError::NoSources);
        }
        if lens.len() != weights.len() {
            return Err(SamplerError::WeightCount {
                sources: lens.len(),
                weights: weights.len(),
            });
        }
        let samplers = lens
            .iter()
            .enumerate()
            .map(|(s, &len)| {
                // Per-source seeds, so two sources of equal length never
                // share a permutation.
                Sampler::new(len, 1, mode, derive(seed, TAG_MIXTURE, s as u64, 0))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let (quotas, pattern) = interleave(weights)?;
        let mut starts = Vec::with_capacity(lens.len() + 1);
        let mut total = 0u64;
        starts.push(0);
        for &len in lens {
            total = total.checked_add(len).ok_or(SamplerError::TooManyRecords)?;
            starts.push(total);
        }
        Ok(Self {
            weights: weights.to_vec(),
            samplers,
            quotas,
            pattern,
            start: 0,
            base: vec![0; lens.len()],
            starts: starts.into(),
        })
    }

    /// The same sources continued from global position `at` with new weights:
    /// each source resumes where it was at `at`, only the interleave restarts.
    ///
    /// `at` must not be before this mixture's own start.
    pub fn reweighted(&self, at: u64, weights: &[f64]) -> Result<Self, SamplerError> {
        if weights.len() != self.samplers.len() {
            return Err(SamplerError::WeightCount {
                sources: self.samplers.len(),
                weights: weights.len(),
            });
        }
        let base = self.consumed(at)?;
        let (quotas, pattern) = interleave(weights)?;
        Ok(Self {
            weights: weights.to_vec(),
            samplers: self.samplers.clone(),
            quotas,
            pattern,
            start: at,
            base,
            starts: Arc::clone(&self.starts),
        })
    }

    /// The source global position `position` reads, and that source's own
    /// position there.
    fn locate(&self, position: u64) -> Result<(usize, u128), SamplerError> {
        let q = self.offset(position)?;
        let period = self.pattern.len() as u64;
        // Scaled weights make the period 2^16: a shift and a mask, not a division
        // (this runs once per record).
        let (block, offset) = if period.is_power_of_two() {
            (q >> period.trailing_zeros(), (q & (period - 1)) as usize)
        } else {
            (q / period, (q % period) as usize)
        };
        let (source, rank) = self.pattern[offset];
        let source = source as usize;
        // u128: `block * quota` can pass 2^64 only past 2^64 positions, but
        // a wrapped source position must never alias an earlier one.
        let c = u128::from(self.base[source])
            + u128::from(block) * u128::from(self.quotas[source])
            + u128::from(rank);
        Ok((source, c))
    }

    /// [`index`](Self::index) of every position of `positions` (in any order),
    /// into `out`, which must be as long. Each source's records are computed
    /// together ([`Sampler::fill_at`]), which is what makes a batch of positions
    /// cheap: one position at a time derives a permutation per position.
    pub fn fill_indices(&self, positions: &[u64], out: &mut [u64]) -> Result<(), SamplerError> {
        if positions.len() != out.len() {
            return Err(SamplerError::OutLength {
                expected: positions.len(),
                actual: out.len(),
            });
        }
        // The positions grouped by source (a counting sort: one pass, no branch
        // per source, whose outcome is random and mispredicted), each group then
        // mapped to records at once.
        let sources = self.samplers.len();
        let mut located = Vec::with_capacity(positions.len());
        let mut group_start = vec![0usize; sources + 1];
        for &p in positions {
            let (source, c) = self.locate(p)?;
            group_start[source + 1] += 1;
            located.push((source, c));
        }
        for s in 0..sources {
            group_start[s + 1] += group_start[s];
        }
        let mut next = group_start.clone();
        let mut slots = vec![0usize; positions.len()];
        let mut at = vec![0u128; positions.len()];
        for (k, &(source, c)) in located.iter().enumerate() {
            let i = next[source];
            next[source] += 1;
            slots[i] = k;
            at[i] = c;
        }
        let mut records = vec![0u64; positions.len()];
        for (s, sampler) in self.samplers.iter().enumerate() {
            let group = group_start[s]..group_start[s + 1];
            if group.is_empty() {
                continue;
            }
            sampler.fill_at(&at[group.clone()], &mut records[group.clone()]);
            for i in group {
                out[slots[i]] = self.starts[s] + records[i];
            }
        }
        Ok(())
    }

    /// Where global position `position` reads.
    pub fn pick(&self, position: u64) -> Result<Pick, SamplerError> {
        let (source, c) = self.locate(position)?;
        let mut record = [0u64];
        self.samplers[source].fill_positions(c, &mut record);
        Ok(Pick {
            source,
            record: record[0],
            source_position: c as u64,
        })
    }

    /// Where global position `position` reads, as an index into the
    /// concatenation of the sources (source `s`'s record `r` is `r` plus the
    /// lengths of the sources before `s`): what a loader reading the sources
    /// through one `Concat` gathers.
    pub fn index(&self, position: u64) -> Result<u64, SamplerError> {
        let pick = self.pick(position)?;
        Ok(self.starts[pick.source] + pick.record)
    }

    /// The records of all sources together (the concatenation's length).
    pub fn total_len(&self) -> u64 {
        self.starts.last().copied().unwrap_or(0)
    }

    /// [`pick`](Self::pick) for positions `start, start + 1, ...`, one per
    /// element of `sources` and `records` (which must have the same length).
    pub fn fill(
        &self,
        start: u64,
        sources: &mut [u32],
        records: &mut [u64],
    ) -> Result<(), SamplerError> {
        if sources.len() != records.len() {
            return Err(SamplerError::OutLength {
                expected: records.len(),
                actual: sources.len(),
            });
        }
        for (i, (s, r)) in sources.iter_mut().zip(records.iter_mut()).enumerate() {
            let pick = self.pick(start.wrapping_add(i as u64))?;
            *s = pick.source as u32;
            *r = pick.record;
        }
        Ok(())
    }

    /// How many positions before global position `at` each source has served
    /// (since the first weights): the per-source progress a checkpoint keeps.
    pub fn consumed(&self, at: u64) -> Result<Vec<u64>, SamplerError> {
        let q = self.offset(at)?;
        let period = self.pattern.len() as u64;
        let (block, offset) = (q / period, (q % period) as usize);
        let mut counts: Vec<u64> = self
            .base
            .iter()
            .zip(&self.quotas)
            .map(|(&base, &quota)| base + block * u64::from(quota))
            .collect();
        for &(s, _) in &self.pattern[..offset] {
            counts[s as usize] += 1;
        }
        Ok(counts)
    }

    /// The number of sources.
    #[allow(clippy::len_without_is_empty)] // a mixture always has a source
    pub fn len(&self) -> usize {
        self.samplers.len()
    }

    /// How many records source `index` holds (0 for an index past the last).
    pub fn source_len(&self, index: usize) -> u64 {
        self.samplers.get(index).map_or(0, Sampler::len)
    }

    /// The weights this mixture was built (or last reweighted) with.
    pub fn weights(&self) -> &[f64] {
        &self.weights
    }

    /// The integer quotas of one period, in source order.
    pub fn quotas(&self) -> &[u32] {
        &self.quotas
    }

    /// The period `P`: the interleave repeats every `P` positions.
    pub fn period(&self) -> u64 {
        self.pattern.len() as u64
    }

    /// The first global position this mixture answers for (0 unless it was
    /// [`reweighted`](Self::reweighted)).
    pub fn start(&self) -> u64 {
        self.start
    }

    fn offset(&self, position: u64) -> Result<u64, SamplerError> {
        position
            .checked_sub(self.start)
            .ok_or(SamplerError::BeforeStart {
                position,
                start: self.start,
            })
    }
}

/// Weights compare by their bits, so that a mixture (and a loader's schedule
/// holding one) is `Eq`; everything else derives from the compared fields.
impl PartialEq for Mixture {
    fn eq(&self, other: &Self) -> bool {
        self.weights.len() == other.weights.len()
            && self
                .weights
                .iter()
                .zip(&other.weights)
                .all(|(a, b)| a.to_bits() == b.to_bits())
            && self.samplers == other.samplers
            && self.quotas == other.quotas
            && self.start == other.start
            && self.base == other.base
    }
}

impl Eq for Mixture {}

/// Global batches of a [`Mixture`] over the concatenation of its sources: the
/// record of source `s` at index `r` is index `start_s + r`, where `start_s` is the
/// sum of the earlier sources' lengths (how a concatenation of the sources numbers
/// them). Steps, batches and sharding work as a [`Sampler`]'s: global batch `t` is
/// positions `[t B, (t + 1) B)`, and rank `r` of `world` takes the `r`-th slice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MixtureSampler {
    mixture: Mixture,
    batch: usize,
    rank: usize,
    world: usize,
    step: u64,
}

impl MixtureSampler {
    /// Global batches of `batch` positions of `mixture`, unsharded, at step 0.
    pub fn new(mixture: Mixture, batch: usize) -> Result<Self, SamplerError> {
        if batch == 0 {
            return Err(SamplerError::ZeroBatch);
        }
        Ok(Self {
            mixture,
            batch,
            rank: 0,
            world: 1,
            step: 0,
        })
    }

    /// The same stream restricted to `rank`'s slice of every global batch (as
    /// [`Sampler::shard`]).
    pub fn shard(self, rank: usize, world: usize) -> Result<Self, SamplerError> {
        check_shard(self.batch, rank, world)?;
        Ok(Self {
            rank,
            world,
            ..self
        })
    }

    /// Writes this rank's indices (into the concatenation) of global batch `step`.
    pub fn fill(&self, step: u64, out: &mut [u64]) -> Result<(), SamplerError> {
        let local = self.batch / self.world;
        if out.len() != local {
            return Err(SamplerError::OutLength {
                expected: local,
                actual: out.len(),
            });
        }
        let p0 = step
            .checked_mul(self.batch as u64)
            .and_then(|p| p.checked_add((self.rank * local) as u64))
            .ok_or(SamplerError::PastEnd { step })?;
        let positions = (0..local as u64)
            .map(|k| p0.checked_add(k).ok_or(SamplerError::PastEnd { step }))
            .collect::<Result<Vec<u64>, _>>()?;
        self.mixture.fill_indices(&positions, out)
    }

    /// The records of all sources together.
    #[allow(clippy::len_without_is_empty)] // sources are never empty
    pub fn len(&self) -> u64 {
        self.mixture.total_len()
    }

    /// Indices per `fill` on this rank.
    pub fn batch_size(&self) -> usize {
        self.batch / self.world
    }

    /// The step counter (where a loader starts).
    pub fn step(&self) -> u64 {
        self.step
    }

    /// Moves the step counter.
    pub fn seek(&mut self, step: u64) {
        self.step = step;
    }

    /// The mixture.
    pub fn mixture(&self) -> &Mixture {
        &self.mixture
    }
}

/// An [`EpochPlan`] that reads a [`Mixture`]: the plan's records are positions
/// of the mixture's stream, epoch by epoch. Index `k` of the plan's epoch `e`
/// (over `length` positions) is position `e * length + k`, read at its index
/// in the concatenation of the sources ([`Mixture::index`]).
///
/// So every plan (shuffled or in order, sharded across ranks, strided across
/// workers, finite or endless) reads a mixture, and each epoch reads new
/// positions: a source's later passes, not the first epoch's records again.
/// Resuming a plan resumes the mixture with it, since both are pure functions
/// of the step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MixturePlan {
    plan: EpochPlan,
    mixture: Mixture,
}

impl MixturePlan {
    /// `plan` over `mixture`'s positions; the plan's length is the number of
    /// positions in one epoch.
    pub fn new(plan: EpochPlan, mixture: Mixture) -> Self {
        Self { plan, mixture }
    }

    /// The plan of positions.
    pub fn plan(&self) -> &EpochPlan {
        &self.plan
    }

    /// The mixture the positions read.
    pub fn mixture(&self) -> &Mixture {
        &self.mixture
    }

    /// The plan's epoch of its step `step` (`None` past the end).
    pub fn epoch(&self, step: u64) -> Option<u64> {
        let k = self.plan.plan_step(step)?;
        Some(k / self.plan.steps_per_epoch().max(1))
    }

    /// Writes the concatenation's indices of step `step` into `out`, whose length
    /// must be the plan's [`EpochPlan::batch_len`] of that step.
    pub fn fill(&self, step: u64, out: &mut [u64]) -> Result<(), SamplerError> {
        self.plan.fill(step, out)?;
        let epoch = self.epoch(step).ok_or(SamplerError::PastEnd { step })?;
        let first = epoch
            .checked_mul(self.plan.len())
            .ok_or(SamplerError::PastEnd { step })?;
        let positions = out
            .iter()
            .map(|&k| first.checked_add(k).ok_or(SamplerError::PastEnd { step }))
            .collect::<Result<Vec<u64>, _>>()?;
        self.mixture.fill_indices(&positions, out)
    }
}

type Interleave = (Vec<u32>, Arc<[(u32, u32)]>);

/// The quotas, the pattern of one period and each offset's rank within its
/// source.
fn interleave(weights: &[f64]) -> Result<Interleave, SamplerError> {
    for (index, &value) in weights.iter().enumerate() {
        if !value.is_finite() || value < 0.0 {
            return Err(SamplerError::BadWeight {
                index,
                value: BadValue(value),
            });
        }
    }
    let quotas = quotas(weights)?;
    let period: u32 = quotas.iter().sum();
    // Smooth weighted round robin: every step each source gains its quota, the
    // one with the most credit is served and pays the period. Ties go to the
    // lower index, so the pattern depends on the quotas alone.
    let mut credit = vec![0i64; quotas.len()];
    let mut served = vec![0u32; quotas.len()];
    let mut pattern = Vec::with_capacity(period as usize);
    for _ in 0..period {
        let mut best = 0;
        for (s, &quota) in quotas.iter().enumerate() {
            credit[s] += i64::from(quota);
            if credit[s] > credit[best] {
                best = s;
            }
        }
        credit[best] -= i64::from(period);
        pattern.push((best as u32, served[best]));
        served[best] += 1;
    }
    Ok((quotas, pattern.into()))
}

/// Integer quotas: whole-number weights as they are when they sum to at most
/// [`MAX_PERIOD`], else the weights scaled to `MAX_PERIOD` by largest remainders
/// (a positive weight never rounds to zero).
fn quotas(weights: &[f64]) -> Result<Vec<u32>, SamplerError> {
    let total: f64 = weights.iter().sum();
    if total <= 0.0 {
        return Err(SamplerError::ZeroWeights);
    }
    let whole = weights.iter().all(|w| w.fract() == 0.0);
    if whole && total <= f64::from(MAX_PERIOD) {
        return Ok(weights.iter().map(|&w| w as u32).collect());
    }
    if weights.iter().filter(|&&w| w > 0.0).count() > MAX_PERIOD as usize {
        return Err(SamplerError::TooManySources {
            sources: weights.len(),
            max: MAX_PERIOD as usize,
        });
    }
    let scale = f64::from(MAX_PERIOD) / total;
    let exact: Vec<f64> = weights.iter().map(|w| w * scale).collect();
    // A positive weight gets at least one slot, so no source silently vanishes.
    let mut quotas: Vec<u32> = exact
        .iter()
        .map(|&x| {
            if x > 0.0 {
                (x.floor() as u32).max(1)
            } else {
                0
            }
        })
        .collect();
    let mut sum: u32 = quotas.iter().sum();
    // Hand out (or take back) the slots by largest (smallest) remainder.
    let mut order: Vec<usize> = (0..weights.len()).filter(|&s| weights[s] > 0.0).collect();
    order.sort_by(|&a, &b| {
        let (ra, rb) = (
            exact[a] - f64::from(quotas[a]),
            exact[b] - f64::from(quotas[b]),
        );
        rb.total_cmp(&ra).then(a.cmp(&b))
    });
    let mut i = 0;
    while sum < MAX_PERIOD {
        quotas[order[i % order.len()]] += 1;
        sum += 1;
        i += 1;
    }
    let mut i = order.len();
    while sum > MAX_PERIOD {
        i = if i == 0 { order.len() - 1 } else { i - 1 };
        let s = order[i];
        if quotas[s] > 1 {
            quotas[s] -= 1;
            sum -= 1;
        }
    }
    Ok(quotas)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batched_indices_are_each_positions_index_in_any_order() {
        for mode in [Mode::Cyclic, Mode::Sequential, Mode::Iid] {
            // A small source (12 bits' domain at most), a large one, one of a
            // single record; reweighted, so `base` and `start` count too.
            let m = Mixture::new(&[7, 100_003, 1], &[2.0, 5.0, 1.0], mode, 3)
                .expect("mixture")
                .reweighted(1_000, &[1.0, 3.0, 1.0])
                .expect("reweighted");
            let mut positions: Vec<u64> = (1_000..1_700).collect();
            // Scattered too: a stride that crosses many passes of the small source.
            positions.extend((0..300u64).map(|k| 1_000 + (k * 7_919) % 1_000_000));
            let mut out = vec![0u64; positions.len()];
            m.fill_indices(&positions, &mut out).expect("fill");
            for (&p, &got) in positions.iter().zip(&out) {
                assert_eq!(got, m.index(p).expect("index"), "{mode:?} position {p}");
            }
            assert!(
                m.fill_indices(&[999], &mut [0]).is_err(),
                "before the start"
            );
            assert!(
                m.fill_indices(&[1_000, 1_001], &mut [0]).is_err(),
                "out length"
            );
        }
    }

    #[test]
    fn whole_weights_are_the_quotas() {
        let m =
            Mixture::new(&[10, 10, 10], &[3.0, 1.0, 1.0], Mode::Cyclic, 1).expect("valid mixture");
        assert_eq!(m.quotas(), &[3, 1, 1]);
        assert_eq!(m.period(), 5);
    }

    #[test]
    fn fractional_weights_scale_to_the_largest_period() {
        let m = Mixture::new(&[10, 10, 10], &[0.5, 0.25, 0.25], Mode::Cyclic, 1)
            .expect("valid mixture");
        assert_eq!(m.quotas(), &[32768, 16384, 16384]);
        let m = Mixture::new(&[10, 10], &[1.0, 1e-9], Mode::Cyclic, 1).expect("valid mixture");
        assert_eq!(m.quotas(), &[MAX_PERIOD - 1, 1]);
    }

    #[test]
    fn a_period_reads_each_source_its_quota_with_consecutive_ranks() {
        let m = Mixture::new(&[7, 5, 3], &[5.0, 3.0, 2.0], Mode::Cyclic, 9).expect("valid mixture");
        let mut next = [0u64; 3];
        for p in 0..m.period() * 3 {
            let pick = m.pick(p).expect("position after start");
            assert_eq!(pick.source_position, next[pick.source]);
            next[pick.source] += 1;
        }
        assert_eq!(next, [15, 9, 6]);
    }
}

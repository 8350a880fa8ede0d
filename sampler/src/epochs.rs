//! `EpochPlan`: the stream cut into epochs, steps, ranks and workers, with a
//! last partial step per epoch and an optional end.
//!
//! A [`Sampler`] cuts the stream into equal batches forever. Training frameworks
//! want epochs instead: epoch `e` is the positions `[e*N, (e+1)*N)` (in cyclic mode
//! exactly one permutation), cut into global steps of `G = batch * world`
//! positions, the last one partial when `G` does not divide `N`. That partial
//! step is dropped (`drop_last`) or split as evenly as possible across the ranks:
//! rank `r` takes `[size*r/world, size*(r+1)/world)` of its `size` positions, so
//! every rank has the same number of steps and a rank's last step of an epoch may
//! be smaller (empty only when `size < world`). With `epochs` the plan ends after
//! that many epochs; without, it is endless.
//!
//! The plan's own steps are `k = 0, 1, ...` (epoch `k / steps_per_epoch`). A
//! worker stride lets several independent consumers share them: with
//! [`EpochPlan::strided`]`(offset, stride)`, step `s` of this plan is plan step
//! `offset + s * stride`, so `stride` plans with offsets `start + w` (`w <
//! stride`) make every step from `start` on exactly once, and delivered
//! round-robin they are `start, start + 1, ...`.

use crate::{Mode, Sampler, SamplerError};

/// The stream cut into epochs of steps for one rank (and one worker); see the
/// [module docs](self). Everything but the step counter is configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EpochPlan {
    /// The stream, read by position (its own batch and step are not used).
    stream: Sampler,
    batch: usize,
    rank: usize,
    world: usize,
    /// `batch * world`.
    global: u64,
    epochs: Option<u64>,
    drop_last: bool,
    steps_per_epoch: u64,
    offset: u64,
    stride: u64,
    step: u64,
}

impl EpochPlan {
    /// Epochs of `len` records in global steps of `batch`, unsharded, endless, the
    /// last partial step of each epoch kept, no stride, at step 0.
    ///
    /// Fails with [`SamplerError::EmptyDataset`] for `len = 0` and
    /// [`SamplerError::ZeroBatch`] for `batch = 0`.
    pub fn new(len: u64, batch: usize, mode: Mode, seed: u64) -> Result<Self, SamplerError> {
        let stream = Sampler::new(len, 1, mode, seed)?;
        if batch == 0 {
            return Err(SamplerError::ZeroBatch);
        }
        let mut plan = Self {
            stream,
            batch,
            rank: 0,
            world: 1,
            global: batch as u64,
            epochs: None,
            drop_last: false,
            steps_per_epoch: 0,
            offset: 0,
            stride: 1,
            step: 0,
        };
        plan.recount()?;
        Ok(plan)
    }

    /// The same plan for `rank` of `world` ranks: each global step holds
    /// `batch * world` positions and `rank` takes slice `rank` of it.
    pub fn shard(self, rank: usize, world: usize) -> Result<Self, SamplerError> {
        if world == 0 {
            return Err(SamplerError::ZeroWorld);
        }
        if rank >= world {
            return Err(SamplerError::RankOutOfRange { rank, world });
        }
        let global = (self.batch as u64).checked_mul(world as u64).ok_or(
            SamplerError::GlobalBatchTooLarge {
                batch: self.batch,
                world,
            },
        )?;
        let mut plan = Self {
            rank,
            world,
            global,
            ..self
        };
        plan.recount()?;
        Ok(plan)
    }

    /// The same plan ending after `epochs` epochs (`None`: endless).
    pub fn with_epochs(self, epochs: Option<u64>) -> Self {
        Self { epochs, ..self }
    }

    /// The same plan dropping (`true`) or splitting (`false`) each epoch's last,
    /// partial global step. Fails with [`SamplerError::NoStep`] if dropping it
    /// leaves no step (fewer records than one global step).
    pub fn with_drop_last(self, drop_last: bool) -> Result<Self, SamplerError> {
        let mut plan = Self { drop_last, ..self };
        plan.recount()?;
        Ok(plan)
    }

    /// The same plan seen by one of `stride` workers: its step `s` is plan step
    /// `offset + s * stride`. The counter is reset to 0.
    pub fn strided(self, offset: u64, stride: u64) -> Result<Self, SamplerError> {
        if stride == 0 {
            return Err(SamplerError::ZeroStride);
        }
        Ok(Self {
            offset,
            stride,
            step: 0,
            ..self
        })
    }

    fn recount(&mut self) -> Result<(), SamplerError> {
        let n = self.stream.len();
        let (full, rest) = (n / self.global, n % self.global);
        self.steps_per_epoch = full + u64::from(rest != 0 && !self.drop_last);
        if self.steps_per_epoch == 0 {
            return Err(SamplerError::NoStep {
                len: n,
                global_batch: self.global,
            });
        }
        Ok(())
    }

    /// Plan steps (unstrided) in all: `epochs * steps_per_epoch`, `None` if endless.
    pub fn total_plan_steps(&self) -> Option<u64> {
        self.epochs.map(|e| e.saturating_mul(self.steps_per_epoch))
    }

    /// This plan's steps in all (after the stride), `None` if endless.
    pub fn steps(&self) -> Option<u64> {
        self.total_plan_steps().map(|total| {
            total
                .checked_sub(self.offset)
                .map_or(0, |left| left.div_ceil(self.stride))
        })
    }

    /// The plan step that this plan's step `step` is (before the end check).
    pub fn plan_step(&self, step: u64) -> Option<u64> {
        step.checked_mul(self.stride)?.checked_add(self.offset)
    }

    /// The first stream position and the number of positions of plan step `k`
    /// (unstrided) for this rank, `None` past the end.
    pub fn positions_of(&self, k: u64) -> Option<(u128, usize)> {
        if self.total_plan_steps().is_some_and(|t| k >= t) {
            return None;
        }
        let (epoch, j) = (k / self.steps_per_epoch, k % self.steps_per_epoch);
        let n = u128::from(self.stream.len());
        let global = u128::from(self.global);
        let start = j as u128 * global;
        let base = epoch as u128 * n + start;
        let size = global.min(n - start);
        let (rank, world) = (self.rank as u128, self.world as u128);
        let (lo, hi) = if size == global {
            (rank * self.batch as u128, (rank + 1) * self.batch as u128)
        } else {
            (size * rank / world, size * (rank + 1) / world)
        };
        // hi - lo <= batch, a usize.
        Some((base + lo, (hi - lo) as usize))
    }

    /// The number of records of this plan's step `step`, `None` past the end.
    pub fn batch_len(&self, step: u64) -> Option<usize> {
        self.positions_of(self.plan_step(step)?).map(|(_, n)| n)
    }

    /// Writes the record ids of this plan's step `step` into `out`, whose length
    /// must be [`batch_len`](Self::batch_len)`(step)`
    /// ([`SamplerError::OutLength`] otherwise, [`SamplerError::PastEnd`] past
    /// the end).
    pub fn fill(&self, step: u64, out: &mut [u64]) -> Result<(), SamplerError> {
        let (p0, n) = self
            .plan_step(step)
            .and_then(|k| self.positions_of(k))
            .ok_or(SamplerError::PastEnd { step })?;
        if out.len() != n {
            return Err(SamplerError::OutLength {
                expected: n,
                actual: out.len(),
            });
        }
        self.stream.fill_positions(p0, out);
        Ok(())
    }

    /// The record ids of this plan's step `step`, `None` past the end.
    pub fn batch(&self, step: u64) -> Option<Vec<u64>> {
        let mut out = vec![0; self.batch_len(step)?];
        self.fill(step, &mut out).ok()?;
        Some(out)
    }

    /// The sizes this rank's steps can have: the full `batch`, and the share of
    /// an epoch's last, partial global step when there is one (and is kept).
    pub fn batch_lens(&self) -> Vec<usize> {
        let mut lens = vec![self.batch];
        if let Some((_, n)) = self.positions_of(self.steps_per_epoch - 1) {
            if n != self.batch {
                lens.push(n);
            }
        }
        lens
    }

    /// The step the loader starts from (a counter, like [`Sampler::step`]).
    pub fn step(&self) -> u64 {
        self.step
    }

    /// Moves the counter to `step`.
    pub fn seek(&mut self, step: u64) {
        self.step = step;
    }

    /// Records the stream draws from (`N`).
    #[allow(clippy::len_without_is_empty)] // never empty: len >= 1
    pub fn len(&self) -> u64 {
        self.stream.len()
    }

    /// Records of a full step on this rank.
    pub fn batch_size(&self) -> usize {
        self.batch
    }

    /// Records of a full global step (`batch * world`).
    pub fn global_batch_size(&self) -> u64 {
        self.global
    }

    /// Steps per epoch (each rank has the same number).
    pub fn steps_per_epoch(&self) -> u64 {
        self.steps_per_epoch
    }

    /// Epochs before the end, `None` if endless.
    pub fn epochs(&self) -> Option<u64> {
        self.epochs
    }

    /// Whether each epoch's last, partial global step is dropped.
    pub fn drop_last(&self) -> bool {
        self.drop_last
    }

    /// This plan's rank and the number of ranks.
    pub fn rank_and_world(&self) -> (usize, usize) {
        (self.rank, self.world)
    }

    /// The worker stride: (offset, stride).
    pub fn stride(&self) -> (u64, u64) {
        (self.offset, self.stride)
    }

    /// The stream the positions are read from (batch 1; its step is not used).
    pub fn stream(&self) -> &Sampler {
        &self.stream
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seq(len: u64, batch: usize) -> EpochPlan {
        EpochPlan::new(len, batch, Mode::Sequential, 0).expect("plan")
    }

    #[test]
    fn sequential_epochs_by_hand() {
        // 10 records, batch 4: steps [0..4), [4..8), [8, 9]; then the next epoch.
        let p = seq(10, 4).with_epochs(Some(2));
        assert_eq!(p.steps_per_epoch(), 3);
        assert_eq!(p.steps(), Some(6));
        let got: Vec<Vec<u64>> = (0..6).map(|s| p.batch(s).expect("step")).collect();
        assert_eq!(
            got,
            vec![
                vec![0, 1, 2, 3],
                vec![4, 5, 6, 7],
                vec![8, 9],
                vec![0, 1, 2, 3],
                vec![4, 5, 6, 7],
                vec![8, 9],
            ]
        );
        assert_eq!(p.batch(6), None);
        assert_eq!(p.batch_len(6), None);
        assert_eq!(p.batch_lens(), vec![4, 2]);
    }

    #[test]
    fn drop_last_drops_the_partial_step() {
        let p = seq(10, 4).with_drop_last(true).expect("plan");
        assert_eq!(p.steps_per_epoch(), 2);
        assert_eq!(p.steps(), None);
        assert_eq!(p.batch(2), Some(vec![0, 1, 2, 3]));
        assert_eq!(p.batch_lens(), vec![4]);
        assert_eq!(
            seq(3, 4).with_drop_last(true),
            Err(SamplerError::NoStep {
                len: 3,
                global_batch: 4
            })
        );
    }

    #[test]
    fn ranks_take_their_slice_and_split_the_partial_step() {
        // 11 records, batch 2, world 3: global steps of 6; [0..6), then 5 left,
        // split 5*r/3: [0, 1), [1, 3), [3, 5) of positions 6..11.
        let ranks: Vec<EpochPlan> = (0..3)
            .map(|r| seq(11, 2).shard(r, 3).expect("shard").with_epochs(Some(1)))
            .collect();
        let all: Vec<Vec<Vec<u64>>> = ranks
            .iter()
            .map(|p| (0..2).map(|s| p.batch(s).expect("step")).collect())
            .collect();
        assert_eq!(all[0], vec![vec![0, 1], vec![6]]);
        assert_eq!(all[1], vec![vec![2, 3], vec![7, 8]]);
        assert_eq!(all[2], vec![vec![4, 5], vec![9, 10]]);
        assert!(ranks.iter().all(|p| p.batch(2).is_none()));
        assert_eq!(ranks[0].batch_lens(), vec![2, 1]);
        // A remainder smaller than the world: some ranks get an empty last step.
        let p = seq(7, 2).shard(0, 3).expect("shard");
        assert_eq!(p.batch(1), Some(vec![]));
        let p = seq(7, 2).shard(2, 3).expect("shard");
        assert_eq!(p.batch(1), Some(vec![6]));
    }

    #[test]
    fn positions_continue_the_stream_across_epochs() {
        // Epoch e is positions [e*N, (e+1)*N) of the stream, whatever the batch.
        let n = 37;
        let p = EpochPlan::new(n, 8, Mode::Cyclic, 9)
            .expect("plan")
            .with_epochs(Some(3));
        let stream = Sampler::new(n, 1, Mode::Cyclic, 9).expect("sampler");
        let got: Vec<u64> = (0..p.steps().expect("finite"))
            .flat_map(|s| p.batch(s).expect("step"))
            .collect();
        let mut want = vec![0; 3 * n as usize];
        stream.fill_positions(0, &mut want);
        assert_eq!(got, want);
    }

    #[test]
    fn worker_strides_cover_every_step_once_in_round_robin_order() {
        let base = EpochPlan::new(50, 4, Mode::Cyclic, 1)
            .expect("plan")
            .shard(1, 2)
            .expect("shard")
            .with_epochs(Some(3));
        let total = base.steps().expect("finite");
        assert_eq!(total, 21);
        for workers in 1..=5u64 {
            for start in [0, 1, 7, 20, 21, 25] {
                let plans: Vec<EpochPlan> = (0..workers)
                    .map(|w| base.clone().strided(start + w, workers).expect("stride"))
                    .collect();
                // Round-robin over the workers until every one has ended.
                let mut merged = Vec::new();
                let mut s = 0;
                while let Some(batch) = plans[(s % workers) as usize].batch(s / workers) {
                    merged.push(batch);
                    s += 1;
                }
                let want: Vec<Vec<u64>> = (start..total)
                    .map(|k| base.batch(k).expect("step"))
                    .collect();
                assert_eq!(merged, want, "{workers} workers from {start}");
                let counted: u64 = plans.iter().map(|p| p.steps().expect("finite")).sum();
                assert_eq!(counted, total.saturating_sub(start));
            }
        }
    }

    #[test]
    fn fill_checks_the_length_and_the_end() {
        let p = seq(10, 4).with_epochs(Some(1));
        let mut out = [0; 4];
        assert_eq!(
            p.fill(2, &mut out),
            Err(SamplerError::OutLength {
                expected: 2,
                actual: 4
            })
        );
        assert_eq!(p.fill(3, &mut out), Err(SamplerError::PastEnd { step: 3 }));
        assert_eq!(p.fill(1, &mut out), Ok(()));
        assert_eq!(out, [4, 5, 6, 7]);
        assert_eq!(p.clone().strided(0, 0), Err(SamplerError::ZeroStride));
        assert_eq!(
            seq(10, 4).shard(3, 3),
            Err(SamplerError::RankOutOfRange { rank: 3, world: 3 })
        );
    }
}

//! The `Sampler` value: configuration, validation, sharding and the step counter.

use crate::{cyclic, iid, sequential, Mode, SamplerError};

/// Stateless batch index generator; see the [crate docs](crate).
///
/// Everything but the step counter is configuration, and [`fill`](Self::fill)
/// reads only configuration, so a `Sampler` can be cloned, shared or
/// rebuilt on another process and give the same batches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sampler {
    len: u64,
    batch: usize,
    mode: Mode,
    seed: u64,
    rank: usize,
    world: usize,
    /// `batch / world`, kept to spare the division on every call.
    local: usize,
    step: u64,
}

impl Sampler {
    /// A sampler over records `[0, len)` producing global batches of `batch`
    /// indices, unsharded (`rank = 0`, `world = 1`) and at step 0.
    ///
    /// Fails with [`SamplerError::EmptyDataset`] for `len = 0` and
    /// [`SamplerError::ZeroBatch`] for `batch = 0`.
    pub fn new(len: u64, batch: usize, mode: Mode, seed: u64) -> Result<Self, SamplerError> {
        if len == 0 {
            return Err(SamplerError::EmptyDataset);
        }
        if batch == 0 {
            return Err(SamplerError::ZeroBatch);
        }
        Ok(Self {
            len,
            batch,
            mode,
            seed,
            rank: 0,
            world: 1,
            local: batch,
            step: 0,
        })
    }

    /// The same stream restricted to `rank`'s slice
    /// `[rank * B / world, (rank + 1) * B / world)` of every global batch.
    ///
    /// Sharding is always relative to the global batch: calling it on a
    /// sharded sampler replaces the old shard. The step counter is kept.
    pub fn shard(self, rank: usize, world: usize) -> Result<Self, SamplerError> {
        check_shard(self.batch, rank, world)?;
        Ok(Self {
            rank,
            world,
            local: self.batch / world,
            ..self
        })
    }

    /// Writes this rank's indices of global batch `step` into `out`.
    ///
    /// A pure function of the configuration and `step`, in O(1) for every
    /// `step` (one `u128` division, then work proportional to `out.len()`).
    /// `out.len()` must equal [`batch_size`](Self::batch_size), else
    /// [`SamplerError::OutLength`].
    pub fn fill(&self, step: u64, out: &mut [u64]) -> Result<(), SamplerError> {
        if out.len() != self.local {
            return Err(SamplerError::OutLength {
                expected: self.local,
                actual: out.len(),
            });
        }
        self.fill_exact(step, out);
        Ok(())
    }

    /// [`fill`](Self::fill) into a new vector.
    pub fn batch(&self, step: u64) -> Vec<u64> {
        let mut out = vec![0; self.local];
        self.fill_exact(step, &mut out);
        out
    }

    /// Fills batch [`step`](Self::step) and advances the counter.
    ///
    /// On error (wrong `out` length) the counter does not move.
    pub fn next_into(&mut self, out: &mut [u64]) -> Result<(), SamplerError> {
        self.fill(self.step, out)?;
        self.advance();
        Ok(())
    }

    /// Returns batch [`step`](Self::step) and advances the counter.
    pub fn next_batch(&mut self) -> Vec<u64> {
        let out = self.batch(self.step);
        self.advance();
        out
    }

    /// The step the next `next_*` call will produce.
    pub fn step(&self) -> u64 {
        self.step
    }

    /// Moves the counter to `step` in O(1); nothing is replayed.
    pub fn seek(&mut self, step: u64) {
        self.step = step;
    }

    /// The number of records `N`.
    #[allow(clippy::len_without_is_empty)] // a sampler is never empty: len >= 1
    pub fn len(&self) -> u64 {
        self.len
    }

    /// The local batch size: indices per `fill` on this rank (`B / world`).
    pub fn batch_size(&self) -> usize {
        self.local
    }

    /// The global batch size `B`, summed over all ranks.
    pub fn global_batch_size(&self) -> usize {
        self.batch
    }

    /// The sampling mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The seed (ignored by [`Mode::Sequential`]).
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// This sampler's rank, 0 when unsharded.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of ranks sharing each global batch, 1 when unsharded.
    pub fn world(&self) -> usize {
        self.world
    }

    /// Writes the indices at positions `p0, p0 + 1, ...` of the sequence every
    /// batch is cut from (batch `t` of rank `r` holds positions
    /// `t * B + r * B / world ..`), whatever the batch size, rank or step: for
    /// callers that cut the same sequence differently (epochs of `len` positions,
    /// a last partial batch).
    pub fn fill_positions(&self, p0: u128, out: &mut [u64]) {
        match self.mode {
            Mode::Sequential => sequential::fill(self.len, p0, out),
            Mode::Iid => iid::fill(self.len, self.seed, p0, out),
            Mode::Cyclic => cyclic::fill(self.len, self.seed, p0, out),
        }
    }

    /// The records at stream positions `positions` (in any order), one per slot
    /// of `out` (which must be as long): [`fill_positions`](Self::fill_positions)
    /// of each, computed for scattered positions without deriving a cycle's keys
    /// once per position.
    pub fn fill_at(&self, positions: &[u128], out: &mut [u64]) {
        match self.mode {
            Mode::Cyclic => cyclic::fill_at(self.len, self.seed, positions, out),
            _ => {
                for (&p, slot) in positions.iter().zip(out.iter_mut()) {
                    self.fill_positions(p, std::slice::from_mut(slot));
                }
            }
        }
    }

    /// `fill` without the length check, for callers that sized `out` themselves.
    fn fill_exact(&self, step: u64, out: &mut [u64]) {
        // Positions are u128: the largest, (2^64 - 1) * B + B - 1, is below
        // 2^128, so no step can overflow or alias another.
        let p0 = u128::from(step) * self.batch as u128 + (self.rank * self.local) as u128;
        self.fill_positions(p0, out);
    }

    /// The counter wraps after step 2^64 - 1 instead of panicking, which
    /// keeps the endless iterator endless.
    fn advance(&mut self) {
        self.step = self.step.wrapping_add(1);
    }
}

/// Whether `rank` of `world` can take an equal slice of a global batch of
/// `batch`: the one rule every sharded stream of the crate follows.
pub(crate) fn check_shard(batch: usize, rank: usize, world: usize) -> Result<(), SamplerError> {
    if world == 0 {
        return Err(SamplerError::ZeroWorld);
    }
    if rank >= world {
        return Err(SamplerError::RankOutOfRange { rank, world });
    }
    if batch % world != 0 {
        return Err(SamplerError::BatchNotDivisible { batch, world });
    }
    Ok(())
}

/// An endless stream of this rank's batches, starting at [`Sampler::step`].
impl Iterator for Sampler {
    type Item = Vec<u64>;

    fn next(&mut self) -> Option<Vec<u64>> {
        Some(self.next_batch())
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (usize::MAX, None)
    }
}

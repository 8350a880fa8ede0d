//! Fresh IID indices for every timed batch, drawn outside the timed region.

use zring_sampler::{Mode, Sampler, SamplerError};

/// Endless IID batches (uniform, with replacement) over `[0, len)`.
pub struct IidBatches {
    sampler: Sampler,
    indices: Vec<u64>,
}

impl IidBatches {
    /// Batches of `batch` indices below `len`, from `seed`.
    pub fn new(len: u64, batch: usize, seed: u64) -> Result<Self, SamplerError> {
        let sampler = Sampler::new(len, batch, Mode::Iid, seed)?;
        Ok(Self {
            indices: vec![0; sampler.batch_size()],
            sampler,
        })
    }

    /// The next batch (a new step of the sampler every call).
    pub fn next_batch(&mut self) -> &[u64] {
        // The buffer was sized by the sampler itself, so fill cannot fail.
        if self.sampler.next_into(&mut self.indices).is_err() {
            unreachable!("the index buffer has the sampler's batch size");
        }
        &self.indices
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_batch_is_fresh_and_in_range() {
        let mut b = IidBatches::new(1000, 256, 1).expect("sampler");
        let first = b.next_batch().to_vec();
        let second = b.next_batch().to_vec();
        assert_eq!(first.len(), 256);
        assert_ne!(first, second);
        assert!(first.iter().chain(&second).all(|&i| i < 1000));
    }
}

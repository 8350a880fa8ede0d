//! Training zstd dictionaries from samples spread over the whole input.

use crate::error::{ArgumentError, CodecError, Error, Result};
use crate::store::Store;

/// zstd wants roughly 100x the dictionary size in samples; more only slows training.
const SAMPLE_BUDGET_FACTOR: usize = 100;
/// Never feed the trainer more than this, however large the input.
const SAMPLE_BUDGET_MAX: usize = 128 << 20;

/// Trains a dictionary of at most `dict_bytes` from `records`, choosing samples at an
/// even stride over the whole slice (not its head) when there are more than the
/// trainer needs.
pub fn train_dict(records: &[&[u8]], dict_bytes: usize) -> Result<Vec<u8>> {
    if dict_bytes < 256 {
        return Err(Error::InvalidArgument(ArgumentError::DictTooSmall {
            bytes: dict_bytes,
            min: 256,
        }));
    }
    if records.is_empty() {
        return Err(Error::InvalidArgument(ArgumentError::NothingToTrain));
    }
    let total: usize = records.iter().map(|r| r.len()).sum();
    let budget = dict_bytes
        .saturating_mul(SAMPLE_BUDGET_FACTOR)
        .min(SAMPLE_BUDGET_MAX);
    let stride = total.div_ceil(budget.max(1)).max(1);
    let samples: Vec<&[u8]> = records.iter().step_by(stride).copied().collect();
    zstd::dict::from_samples(&samples, dict_bytes).map_err(|source| {
        Error::Codec(CodecError::DictTraining {
            samples: samples.len(),
            bytes: samples.iter().map(|s| s.len()).sum(),
            source,
        })
    })
}

/// Trains a dictionary from records spread evenly over an existing store.
pub fn train_dict_from_store(store: &Store, dict_bytes: usize) -> Result<Vec<u8>> {
    let n = store.len();
    if n == 0 {
        return Err(Error::InvalidArgument(ArgumentError::NothingToTrain));
    }
    let avg = store.stats()?.logical_bytes / n;
    let budget = dict_bytes
        .saturating_mul(SAMPLE_BUDGET_FACTOR)
        .min(SAMPLE_BUDGET_MAX) as u64;
    let want = (budget / avg.max(1)).clamp(1, n);
    let records: Vec<Vec<u8>> = (0..want)
        .map(|k| store.get(k * n / want))
        .collect::<Result<_>>()?;
    let refs: Vec<&[u8]> = records.iter().map(Vec::as_slice).collect();
    train_dict(&refs, dict_bytes)
}

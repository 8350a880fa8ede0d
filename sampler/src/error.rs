//! The one error type of the crate.

use std::fmt;

/// Why a [`Sampler`](crate::Sampler) could not be built, sharded or filled.
///
/// Every variant carries the offending values so the message can be shown
/// to a user as is.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SamplerError {
    /// The dataset length was 0: there is no index to draw.
    EmptyDataset,
    /// The global batch size was 0.
    ZeroBatch,
    /// The shard count (`world`) was 0.
    ZeroWorld,
    /// `rank` was not below `world`.
    RankOutOfRange {
        /// The rank asked for.
        rank: usize,
        /// The number of ranks.
        world: usize,
    },
    /// The global batch cannot be split evenly between the ranks.
    BatchNotDivisible {
        /// The global batch size.
        batch: usize,
        /// The number of ranks.
        world: usize,
    },
    /// The output slice given to `fill` does not have the local batch length.
    OutLength {
        /// The local batch size of the sampler.
        expected: usize,
        /// The length of the slice that was passed.
        actual: usize,
    },
    /// A mode name that is not `sequential`, `iid` or `cyclic`.
    UnknownMode(String),
    /// An [`EpochPlan`](crate::EpochPlan) that drops its last partial step has no
    /// step left: fewer records than one global step.
    NoStep {
        /// The number of records.
        len: u64,
        /// The global step size (`batch * world`).
        global_batch: u64,
    },
    /// A step past the end of a finite [`EpochPlan`](crate::EpochPlan).
    PastEnd {
        /// The step asked for.
        step: u64,
    },
    /// `batch * world` does not fit in 64 bits.
    GlobalBatchTooLarge {
        /// The per-rank batch size.
        batch: usize,
        /// The number of ranks.
        world: usize,
    },
    /// A worker stride of 0.
    ZeroStride,
}

impl fmt::Display for SamplerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::EmptyDataset => write!(f, "dataset length must be at least 1 (got len = 0)"),
            Self::ZeroBatch => write!(f, "batch size must be at least 1 (got batch = 0)"),
            Self::ZeroWorld => write!(f, "world size must be at least 1 (got world = 0)"),
            Self::RankOutOfRange { rank, world } => {
                write!(
                    f,
                    "rank {rank} is out of range for world size {world} (need rank < world)"
                )
            }
            Self::BatchNotDivisible { batch, world } => write!(
                f,
                "global batch size {batch} is not divisible by world size {world} \
                 (remainder {})",
                batch % world
            ),
            Self::OutLength { expected, actual } => write!(
                f,
                "output slice has length {actual} but the local batch size is {expected}"
            ),
            Self::UnknownMode(name) => write!(
                f,
                "unknown sampling mode {name:?} (expected \"sequential\", \"iid\" or \"cyclic\")"
            ),
            Self::NoStep { len, global_batch } => write!(
                f,
                "drop_last with {len} records and a global batch of {global_batch} leaves no step"
            ),
            Self::PastEnd { step } => write!(f, "step {step} is past the end of the plan"),
            Self::GlobalBatchTooLarge { batch, world } => write!(
                f,
                "the global batch ({batch} per rank x {world} ranks) is too large"
            ),
            Self::ZeroStride => write!(f, "a worker stride must be at least 1 (got 0)"),
        }
    }
}

impl std::error::Error for SamplerError {}

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
    /// A [`Mixture`](crate::Mixture) of no sources.
    NoSources,
    /// A mixture's weights do not match its sources one for one.
    WeightCount {
        /// The number of sources.
        sources: usize,
        /// The number of weights given.
        weights: usize,
    },
    /// A mixture weight that is negative, NaN or infinite.
    BadWeight {
        /// The source the weight belongs to.
        index: usize,
        /// The weight given.
        value: BadValue,
    },
    /// Every mixture weight is zero: no source could ever be read.
    ZeroWeights,
    /// More sources with a positive weight than a mixture's period has slots.
    TooManySources {
        /// The number of sources.
        sources: usize,
        /// The most a mixture takes.
        max: usize,
    },
    /// A mixture's sources hold more than `u64::MAX` records together.
    TooManyRecords,
    /// A position before the first one a reweighted mixture answers for.
    BeforeStart {
        /// The position asked for.
        position: u64,
        /// The mixture's first position.
        start: u64,
    },
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
            Self::NoSources => write!(f, "a mixture needs at least one source (got none)"),
            Self::WeightCount { sources, weights } => write!(
                f,
                "a mixture of {sources} sources needs {sources} weights (got {weights})"
            ),
            Self::BadWeight { index, value } => write!(
                f,
                "mixture weight {index} is {value}; weights must be finite and >= 0"
            ),
            Self::ZeroWeights => write!(
                f,
                "every mixture weight is 0; at least one must be positive"
            ),
            Self::TooManySources { sources, max } => write!(
                f,
                "a mixture takes at most {max} sources with a positive weight (got {sources})"
            ),
            Self::TooManyRecords => write!(
                f,
                "a mixture's sources hold more than 2^64 - 1 records together"
            ),
            Self::BeforeStart { position, start } => write!(
                f,
                "position {position} is before this mixture's start {start} \
                 (it was reweighted there)"
            ),
        }
    }
}

impl std::error::Error for SamplerError {}

/// A rejected floating-point input, compared by its bits so that errors stay
/// `Eq` (a NaN equals the same NaN).
#[derive(Debug, Clone, Copy)]
pub struct BadValue(pub f64);

impl PartialEq for BadValue {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}

impl Eq for BadValue {}

impl fmt::Display for BadValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

//! Sequence packing: variable-length token sequences into fixed `[rows, seq_len]`
//! batches, the input of variable-length attention.
//!
//! Packing is split in two so that each half is plain and testable:
//!
//! - [`Packer`] (`plan`) decides, from sequence lengths alone, which tokens of which
//!   stream positions fill each row of the next batch: a [`PackPlan`] of
//!   [`Piece`]s. It reads no data, and its whole state is a small
//!   [`PackState`] value, so a run resumes exactly mid-row from a checkpoint.
//! - [`PackedReader`] (`reader`) reads a mixture of ragged token stores batch by
//!   batch, and [`PackedLoader`] (`prefetch`) makes its batches ahead on a thread.
//! - [`assemble`] (`assemble`) turns a plan and the ragged gather of its
//!   positions (values and `cu_seqlens`, as the engine returns them) into a
//!   [`PackedBatch`]: `tokens`, `position_ids`, `cu_seqlens` and `max_seqlen`.
//!
//! Stream positions are what the caller's sampler or mixture produces, in order;
//! `len_of(position)` gives the length of the sequence there (the store's table
//! knows it without reading the tokens).
//!
//! # Strategies
//!
//! - [`PackStrategy::Concat`]: rows are filled in stream order, and a sequence
//!   that does not fit is split at the row's end; its rest starts the next row
//!   (and the next batch). No padding, no token dropped.
//! - [`PackStrategy::FirstFit`]: a sequence is never split. One longer than
//!   `seq_len` is truncated to `seq_len` (counted in
//!   [`PackState::truncated`]). Each sequence, in stream order, goes to the
//!   fullest row it still fits in; one that fits nowhere is held over to the next
//!   batch, where held-over sequences are placed first, oldest first. A batch is
//!   closed when every row is full or `window` sequences are held over, so at most
//!   `window` sequences wait, and none waits forever (the oldest is always placed
//!   first into empty rows). The rest of each row is padding.
//!
//! Sequences of length 0 hold no token and are skipped.

mod assemble;
mod plan;
mod prefetch;
mod reader;

use std::fmt;

use zring_engine::{DType, Error as EngineError, Layout};
use zring_sampler::SamplerError;

pub use assemble::{assemble, PackedBatch};
pub use plan::{PackPlan, Packer, Piece};
pub use prefetch::PackedLoader;
pub use reader::{PackedReader, Token};

/// How rows are filled; see the notes of the packing module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PackStrategy {
    /// Split sequences at row ends; rows are always full.
    Concat,
    /// Never split; truncate what is longer than a row; pad the rest.
    FirstFit,
}

impl std::str::FromStr for PackStrategy {
    type Err = PackError;

    fn from_str(name: &str) -> Result<Self, PackError> {
        match name {
            "concat" => Ok(Self::Concat),
            "first_fit" => Ok(Self::FirstFit),
            other => Err(PackError::UnknownStrategy(other.to_owned())),
        }
    }
}

/// Where a packer stands: everything needed to continue exactly, mid-row
/// included. Positions, not tokens, so it stays small.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PackState {
    /// The next stream position not yet looked at.
    pub next: u64,
    /// Concat: how many tokens of the sequence at `next` earlier rows took.
    pub offset: u64,
    /// First fit: the held-over positions, oldest first.
    pub pending: Vec<u64>,
    /// First fit: how many sequences were truncated to `seq_len` so far.
    pub truncated: u64,
    /// How many batches were planned so far.
    pub batches: u64,
}

/// Why packing could not go on.
#[derive(Debug)]
#[non_exhaustive]
pub enum PackError {
    /// `seq_len` was 0.
    ZeroSeqLen,
    /// `rows` was 0.
    ZeroRows,
    /// A first-fit window of 0 could hold nothing over.
    ZeroWindow,
    /// `rows * seq_len` tokens do not fit the int32 offsets of `cu_seqlens`.
    BatchTooLarge {
        /// Rows per batch.
        rows: usize,
        /// Tokens per row.
        seq_len: usize,
    },
    /// A strategy name other than `concat` or `first_fit`.
    UnknownStrategy(String),
    /// The stream gave only empty sequences for this many positions in a row, so
    /// no row could ever be filled.
    NoTokens {
        /// The first of the empty positions.
        from: u64,
        /// How many empty positions were seen.
        positions: u64,
    },
    /// The state given to resume from does not belong to this strategy.
    ForeignState {
        /// What does not fit.
        reason: &'static str,
    },
    /// The gathered values do not match the plan they are to be assembled with.
    GatherMismatch {
        /// The position whose gathered length differs from its planned pieces.
        position: u64,
        /// The tokens the plan needs of it (its piece's end).
        needed: u64,
        /// The tokens gathered.
        gathered: u64,
    },
    /// A reader was given a different number of sources than its mixture has.
    SourceCount {
        /// Sources given.
        sources: usize,
        /// Sources in the mixture.
        mixture: usize,
    },
    /// A reader's source does not hold tokens of the reader's type.
    NotTokens {
        /// The source's index.
        index: usize,
        /// Its layout.
        layout: Layout,
        /// Its dtype.
        dtype: DType,
        /// The token dtype the reader packs (in ragged records of one dimension).
        expected: DType,
    },
    /// A reader's source holds a different number of records than its mixture
    /// draws from.
    SourceLength {
        /// The source's index.
        index: usize,
        /// Records it holds.
        records: u64,
        /// Records the mixture draws from.
        mixture: u64,
    },
    /// A shard that does not take an equal share of every batch's rows.
    Shard {
        /// The shard's rank.
        rank: usize,
        /// The number of shards.
        world: usize,
        /// Rows per (global) batch.
        rows: usize,
    },
    /// The mixture refused a position.
    Mixture(SamplerError),
    /// Reading the sequences failed.
    Read(EngineError),
    /// The thread that makes packed batches could not be started.
    Spawn(std::io::Error),
    /// The thread that made packed batches ended without delivering an error (it
    /// panicked).
    Stopped,
    /// Looking up a sequence's length failed.
    Length {
        /// The stream position asked about.
        position: u64,
        /// Why.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl fmt::Display for PackError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ZeroSeqLen => write!(f, "seq_len must be at least 1 (got 0)"),
            Self::ZeroRows => write!(f, "rows must be at least 1 (got 0)"),
            Self::ZeroWindow => write!(f, "the first-fit window must be at least 1 (got 0)"),
            Self::BatchTooLarge { rows, seq_len } => write!(
                f,
                "{rows} rows of {seq_len} tokens exceed the 2^31 - 1 tokens int32 \
                 cu_seqlens can address"
            ),
            Self::UnknownStrategy(name) => write!(
                f,
                "unknown packing strategy {name:?} (expected \"concat\" or \"first_fit\")"
            ),
            Self::NoTokens { from, positions } => write!(
                f,
                "{positions} sequences in a row from stream position {from} are empty; \
                 packing needs tokens"
            ),
            Self::ForeignState { reason } => {
                write!(
                    f,
                    "the packing state does not belong to this packer: {reason}"
                )
            }
            Self::GatherMismatch {
                position,
                needed,
                gathered,
            } => write!(
                f,
                "the sequence at stream position {position} was gathered with {gathered} \
                 tokens, but the plan needs {needed}"
            ),
            Self::SourceCount { sources, mixture } => {
                write!(f, "{sources} sources were given for a mixture of {mixture}")
            }
            Self::NotTokens {
                index,
                layout,
                dtype,
                expected,
            } => write!(
                f,
                "source {index} holds {dtype:?} records laid out as {layout:?}; packing \
                 takes ragged {expected:?} records of one dimension"
            ),
            Self::SourceLength {
                index,
                records,
                mixture,
            } => write!(
                f,
                "source {index} holds {records} records but the mixture draws from {mixture}"
            ),
            Self::Shard { rank, world, rows } => write!(
                f,
                "rank {rank} of {world} cannot take an equal share of {rows} rows \
                 (rows must be a multiple of the world size, and rank < world)"
            ),
            Self::Mixture(e) => write!(f, "the mixture failed: {e}"),
            Self::Read(e) => write!(f, "reading the sequences to pack failed: {e}"),
            Self::Spawn(e) => write!(f, "cannot start the packing thread: {e}"),
            Self::Stopped => write!(f, "the packing thread stopped unexpectedly"),
            Self::Length { position, source } => write!(
                f,
                "could not read the length of the sequence at stream position {position}: {source}"
            ),
        }
    }
}

impl From<SamplerError> for PackError {
    fn from(e: SamplerError) -> Self {
        Self::Mixture(e)
    }
}

impl From<EngineError> for PackError {
    fn from(e: EngineError) -> Self {
        Self::Read(e)
    }
}

impl std::error::Error for PackError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Length { source, .. } => Some(source.as_ref()),
            Self::Mixture(e) => Some(e),
            Self::Read(e) => Some(e),
            Self::Spawn(e) => Some(e),
            _ => None,
        }
    }
}

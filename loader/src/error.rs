//! The loader's one error type: construction mistakes, and failures of one step.

use std::fmt;
use std::io;

use zring_engine::Error as EngineError;
use zring_sampler::SamplerError;

use crate::decode::DecodeError;

/// The error a transform may return; it is delivered at its step.
pub type TransformError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Result with the loader's [`LoaderError`].
pub type Result<T, E = LoaderError> = std::result::Result<T, E>;

/// What went wrong: either the loader cannot be built (the first group), or one step
/// failed (the second group, each naming its step). A step error is delivered to the
/// consumer in place of that step, and iteration ends after it.
#[derive(Debug)]
#[non_exhaustive]
pub enum LoaderError {
    /// No stream was given.
    NoStreams,
    /// Two streams have the same name.
    DuplicateStream { name: String },
    /// A stream has an empty list of views.
    NoViews { stream: String },
    /// A stream's list of views is not as long as the first stream's.
    UnequalViews {
        stream: String,
        views: usize,
        first_stream: String,
        expected: usize,
    },
    /// A view's store does not hold as many records as the first stream's first view.
    RecordCountMismatch {
        stream: String,
        view: usize,
        records: u64,
        expected: u64,
    },
    /// The views of one stream do not share one schema (their tensors would differ
    /// from shard to shard).
    SchemaMismatch { stream: String, view: usize },
    /// The sampler draws from more records than the stores hold.
    SamplerTooLong { sampler_len: u64, records: u64 },
    /// The sampler's batch cannot be cut into one equal shard per view.
    BatchNotDivisible { batch: usize, views: usize },
    /// An epoch plan's short step (an epoch's last) cannot be cut into one equal
    /// shard per view.
    StepNotDivisible { records: usize, views: usize },
    /// The views of one stream decode their images differently (or some not at all).
    DecodeMismatch { stream: String, view: usize },
    /// A stream's decode cannot work on its records (not encoded images).
    InvalidDecode {
        stream: String,
        source: Box<DecodeError>,
    },
    /// An option value that cannot work (which, and why).
    InvalidOptions(OptionsError),
    /// A worker thread could not be started.
    Spawn(io::Error),

    /// The sampler refused to fill the indices of a step.
    Sampler { step: u64, source: SamplerError },
    /// A batch buffer could not be allocated (or pinned).
    Buffer {
        step: u64,
        stream: String,
        shard: usize,
        source: io::Error,
    },
    /// The engine failed to gather a shard of a stream.
    Gather {
        step: u64,
        stream: String,
        shard: usize,
        source: EngineError,
    },
    /// Decoding the images of a shard of a stream failed (the source names the
    /// records and the record).
    Decode {
        step: u64,
        stream: String,
        shard: usize,
        source: Box<DecodeError>,
    },
    /// The transform returned an error.
    Transform { step: u64, source: TransformError },
    /// The transform (or, by a bug, the loader) panicked while making the step.
    Panicked { step: u64, message: String },
}

impl LoaderError {
    /// The step this error belongs to (`None` for construction errors).
    pub fn step(&self) -> Option<u64> {
        match self {
            LoaderError::Sampler { step, .. }
            | LoaderError::Buffer { step, .. }
            | LoaderError::Gather { step, .. }
            | LoaderError::Decode { step, .. }
            | LoaderError::Transform { step, .. }
            | LoaderError::Panicked { step, .. } => Some(*step),
            _ => None,
        }
    }
}

impl fmt::Display for LoaderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoaderError::NoStreams => write!(f, "a loader needs at least one stream"),
            LoaderError::DuplicateStream { name } => {
                write!(f, "stream {name:?} is given twice")
            }
            LoaderError::NoViews { stream } => write!(
                f,
                "stream {stream:?} has no views (give one view per placement)"
            ),
            LoaderError::UnequalViews {
                stream,
                views,
                first_stream,
                expected,
            } => write!(
                f,
                "stream {stream:?} has {views} views but stream {first_stream:?} has \
                 {expected}; every stream needs one view per placement"
            ),
            LoaderError::RecordCountMismatch {
                stream,
                view,
                records,
                expected,
            } => write!(
                f,
                "view {view} of stream {stream:?} holds {records} records but the first \
                 stream holds {expected}; records of all streams must align one to one"
            ),
            LoaderError::SchemaMismatch { stream, view } => write!(
                f,
                "view {view} of stream {stream:?} has a different schema from its view 0"
            ),
            LoaderError::SamplerTooLong {
                sampler_len,
                records,
            } => write!(
                f,
                "the sampler draws from {sampler_len} records but the stores hold {records}"
            ),
            LoaderError::BatchNotDivisible { batch, views } => write!(
                f,
                "the sampler's batch of {batch} cannot be split into {views} equal shards \
                 (one per view); use a batch divisible by {views}"
            ),
            LoaderError::StepNotDivisible { records, views } => write!(
                f,
                "an epoch's last step holds {records} records, which cannot be split into \
                 {views} equal shards (one per view); use drop_last or one view per stream"
            ),
            LoaderError::DecodeMismatch { stream, view } => write!(
                f,
                "view {view} of stream {stream:?} decodes its images differently from its view 0"
            ),
            LoaderError::InvalidDecode { stream, source } => {
                write!(f, "stream {stream:?} cannot be decoded: {source}")
            }
            LoaderError::InvalidOptions(why) => write!(f, "invalid loader options: {why}"),
            LoaderError::Spawn(e) => write!(f, "cannot start a loader worker thread: {e}"),
            LoaderError::Sampler { step, source } => {
                write!(f, "step {step}: the sampler failed: {source}")
            }
            LoaderError::Buffer {
                step,
                stream,
                shard,
                source,
            } => write!(
                f,
                "step {step}: cannot allocate the buffer of stream {stream:?} shard {shard}: {source}"
            ),
            LoaderError::Gather {
                step,
                stream,
                shard,
                source,
            } => write!(
                f,
                "step {step}: gathering stream {stream:?} shard {shard} failed: {source}"
            ),
            LoaderError::Decode {
                step,
                stream,
                shard,
                source,
            } => write!(
                f,
                "step {step}: decoding stream {stream:?} shard {shard} failed: {source}"
            ),
            LoaderError::Transform { step, source } => {
                write!(f, "step {step}: the transform failed: {source}")
            }
            LoaderError::Panicked { step, message } => {
                write!(f, "step {step}: the transform panicked: {message}")
            }
        }
    }
}

impl std::error::Error for LoaderError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LoaderError::Spawn(e) | LoaderError::Buffer { source: e, .. } => Some(e),
            LoaderError::Sampler { source, .. } => Some(source),
            LoaderError::Gather { source, .. } => Some(source),
            LoaderError::Decode { source, .. } | LoaderError::InvalidDecode { source, .. } => {
                Some(&**source)
            }
            LoaderError::Transform { source, .. } => Some(&**source),
            // The detail's text is part of this error's: its own source follows.
            LoaderError::InvalidOptions(why) => why.source(),
            _ => None,
        }
    }
}

/// Which loader option cannot work, and why ([`LoaderError::InvalidOptions`]).
#[derive(Debug)]
#[non_exhaustive]
pub enum OptionsError {
    /// `prefetch` is 0 while `workers` is not: a finished step has nowhere to wait.
    ZeroPrefetch { workers: usize },
    /// The buffer pool refused its options (the platform's reason is the source).
    BufferPool { pinned: bool, source: io::Error },
    /// One shard of a dense stream is larger than memory can be addressed.
    ShardTooLarge {
        stream: String,
        records: usize,
        record_bytes: u64,
    },
}

impl fmt::Display for OptionsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OptionsError::ZeroPrefetch { workers } => write!(
                f,
                "prefetch must be at least 1 when workers > 0 (here {workers}): a finished \
                 step needs a place to wait for the consumer"
            ),
            OptionsError::BufferPool { pinned, source } => write!(
                f,
                "the {} buffer pool cannot be made: {source}",
                if *pinned { "pinned" } else { "pageable" }
            ),
            OptionsError::ShardTooLarge {
                stream,
                records,
                record_bytes,
            } => write!(
                f,
                "a shard of stream {stream:?} ({records} records of {record_bytes} bytes) \
                 does not fit in memory"
            ),
        }
    }
}

impl std::error::Error for OptionsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            OptionsError::BufferPool { source, .. } => Some(source),
            _ => None,
        }
    }
}

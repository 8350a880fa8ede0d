//! What memory could not be had, and why ([`super::Error::OutOfMemory`]).

use std::io;

use crate::format::SectionKind;

/// What memory was being allocated when it could not be had
/// ([`Error::OutOfMemory`](super::Error::OutOfMemory)).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Allocation {
    /// A thread's io_uring read scratch.
    #[error("the io_uring read scratch")]
    UringScratch,
    /// A buffer for O_DIRECT reads.
    #[error("the direct-read scratch")]
    DirectScratch,
    /// A metadata section read into memory.
    #[error("the {section} section")]
    Section { section: SectionKind },
    /// The writer's table entries of `records` new records.
    #[error("the table entries of {records} records")]
    TableEntries { records: u64 },
    /// The writer's kept metadata (`what`: table entries, record shapes).
    #[error("the writer's {what}")]
    WriterMetadata { what: &'static str },
    /// A writer thread's staging buffer for the records it compresses or aligns.
    #[error("a staging buffer")]
    StagingBuffer,
    /// The buffer that packs the records of one append (Python's writer).
    #[error("packing the records of an append")]
    AppendValues,
    /// One part of a store's upload to object storage, read from the staged file.
    #[error("a part of the store's upload")]
    UploadPart,
}

/// The allocator's or operating system's refusal behind an
/// [`Error::OutOfMemory`](super::Error::OutOfMemory).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AllocFailure {
    /// `Vec::try_reserve` refused.
    #[error(transparent)]
    Reserve(std::collections::TryReserveError),
    /// The operating system refused (`mmap`, an aligned allocation).
    #[error(transparent)]
    Os(io::Error),
}

impl AllocFailure {
    /// The refusal itself (what [`Error::OutOfMemory`](super::Error::OutOfMemory)'s
    /// `source()` returns).
    pub fn error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        match self {
            AllocFailure::Reserve(e) => e,
            AllocFailure::Os(e) => e,
        }
    }
}

//! What zstd failed to do ([`super::Error::Codec`]).

use std::io;

/// What zstd failed to do ([`Error::Codec`](super::Error::Codec)); zstd's own error is
/// the `source`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CodecError {
    /// A compressor could not be created (at this level).
    #[error("cannot create a compressor at level {level}: {source}")]
    Compressor { level: i32, source: io::Error },
    /// A decompressor could not be created (`dict`: with the store's dictionary).
    #[error(
        "cannot create a decompressor{}: {source}",
        if *dict { " with the store's dictionary" } else { "" }
    )]
    Decompressor { dict: bool, source: io::Error },
    /// Dictionary training failed on these samples.
    #[error(
        "dictionary training failed on {samples} samples ({bytes} bytes): {source}; use more or larger records, or codec zstd"
    )]
    DictTraining {
        samples: usize,
        bytes: usize,
        source: io::Error,
    },
}

impl CodecError {
    /// zstd's error.
    pub fn zstd_error(&self) -> &io::Error {
        match self {
            CodecError::Compressor { source, .. }
            | CodecError::Decompressor { source, .. }
            | CodecError::DictTraining { source, .. } => source,
        }
    }
}

//! The engine's one error type. Every variant carries the context a person needs to
//! act on it: the path, the record, what was expected and what was found.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// Result with the engine's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong in the engine.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system I/O error while doing `what` on `path`.
    Io {
        path: PathBuf,
        what: &'static str,
        source: io::Error,
    },
    /// The file is not a zring store, or its metadata is damaged.
    Corrupt { path: PathBuf, detail: String },
    /// One record's table entry or payload is damaged.
    CorruptRecord {
        path: PathBuf,
        index: u64,
        detail: String,
    },
    /// The store was written by a newer, incompatible format version.
    UnsupportedVersion {
        path: PathBuf,
        found_major: u16,
        found_minor: u16,
    },
    /// A record index is not below the record count.
    IndexOutOfRange { path: PathBuf, index: u64, len: u64 },
    /// A caller-supplied buffer or argument has the wrong size or value.
    InvalidArgument(String),
    /// The schema or a dtype is invalid or does not match the operation.
    Schema(String),
    /// The destination path exists and overwrite was not asked for.
    AlreadyExists { path: PathBuf },
    /// A writer failed earlier (or was closed); it accepts nothing more.
    WriterPoisoned { path: PathBuf, first_error: String },
    /// zstd (compression, decompression or dictionary training) failed.
    Codec(String),
    /// Memory for a buffer could not be had.
    OutOfMemory(String),
    /// A zring thread failed in a way that is a bug, not a property of the input
    /// (a panicked worker, a poisoned lock). Please report it.
    Internal(String),
}

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, what: &'static str, source: io::Error) -> Self {
        Error::Io {
            path: path.into(),
            what,
            source,
        }
    }

    pub(crate) fn corrupt(path: impl Into<PathBuf>, detail: impl Into<String>) -> Self {
        Error::Corrupt {
            path: path.into(),
            detail: detail.into(),
        }
    }

    pub(crate) fn record(path: impl Into<PathBuf>, index: u64, detail: impl Into<String>) -> Self {
        Error::CorruptRecord {
            path: path.into(),
            index,
            detail: detail.into(),
        }
    }

    pub(crate) fn arg(detail: impl Into<String>) -> Self {
        Error::InvalidArgument(detail.into())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { path, what, source } => {
                write!(f, "{}: {what} failed: {source}", path.display())
            }
            Error::Corrupt { path, detail } => {
                write!(f, "{}: not a valid zring store: {detail}", path.display())
            }
            Error::CorruptRecord {
                path,
                index,
                detail,
            } => write!(f, "{}: record {index} is corrupt: {detail}", path.display()),
            Error::UnsupportedVersion {
                path,
                found_major,
                found_minor,
            } => write!(
                f,
                "{}: store format v{found_major}.{found_minor} is newer than this zring, which reads format v{}.x; upgrade zring to read it",
                path.display(),
                crate::format::FORMAT_MAJOR
            ),
            Error::IndexOutOfRange { path, index, len } => write!(
                f,
                "{}: record index {index} is out of range for a store of {len} records",
                path.display()
            ),
            Error::InvalidArgument(detail) => write!(f, "invalid argument: {detail}"),
            Error::Schema(detail) => write!(f, "schema: {detail}"),
            Error::AlreadyExists { path } => write!(
                f,
                "{}: a file already exists there (ask for overwrite to replace it)",
                path.display()
            ),
            Error::WriterPoisoned { path, first_error } => write!(
                f,
                "{}: the writer failed earlier and accepts nothing more (first error: {first_error}); abort it and start again",
                path.display()
            ),
            Error::Codec(detail) => write!(f, "zstd: {detail}"),
            Error::OutOfMemory(detail) => write!(f, "out of memory: {detail}"),
            Error::Internal(detail) => write!(f, "internal error (a zring bug): {detail}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<Error> for io::Error {
    fn from(e: Error) -> Self {
        let kind = match &e {
            Error::Io { source, .. } => source.kind(),
            Error::AlreadyExists { .. } => io::ErrorKind::AlreadyExists,
            Error::OutOfMemory(_) => io::ErrorKind::OutOfMemory,
            Error::Internal(_) => io::ErrorKind::Other,
            Error::InvalidArgument(_) | Error::IndexOutOfRange { .. } | Error::Schema(_) => {
                io::ErrorKind::InvalidInput
            }
            _ => io::ErrorKind::InvalidData,
        };
        io::Error::new(kind, e)
    }
}

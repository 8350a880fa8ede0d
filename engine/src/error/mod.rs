//! The engine's one error type. Every variant carries the context a person needs to
//! act on it: the path, the record, what was expected and what was found.
//!
//! Why one [`Error`] and not an error enum per operation (open, read, write): the
//! operations share most of their failures. A gather can meet what an open reports
//! (an on-demand table lookup finds damaged metadata, a remote object changes under
//! the reader), a write's `close` and a dataset publish share the
//! publish failures, and the loader, the CLI and Python map errors by kind, not by
//! the call that raised them. Split enums would repeat those variants in each (or
//! nest one in another), and every caller that does two kinds of operation would
//! need a union of them again. What a caller matches on is the kind, so that is
//! typed: each variant is a kind (`Io`, `Corrupt`, `IndexOutOfRange`, ...), with its
//! details in a per-kind enum (`StoreProblem`, `ArgumentError`, `SchemaError`, ...),
//! and both the top enum and the details are `#[non_exhaustive]`, so a new case is
//! not a breaking change. Causes are kept as `source()`, never folded into text.

//!
//! The details live in one module per area and are re-exported here: [`argument`]
//! (caller arguments and URLs), [`schema`], [`codec`] (zstd), [`internal`] (zring
//! bugs), [`store`] (a store's metadata and records), [`manifest`] (datasets),
//! [`remote`] (object stores), [`alloc`] (memory) and [`shared`] ([`SharedError`]).
//! Their messages are derived with `thiserror` where its format strings can say them;
//! each hand-written one says why it is.

mod alloc;
mod argument;
mod codec;
mod internal;
mod manifest;
mod remote;
mod schema;
mod shared;
mod store;
#[cfg(test)]
mod tests;

use std::fmt;
use std::io;
use std::path::PathBuf;

use crate::entry::EntryError;
use crate::format::FORMAT_MAJOR;

pub use alloc::{AllocFailure, Allocation};
pub use argument::{ArgumentError, UrlProblem};
pub use codec::CodecError;
pub use internal::InternalError;
pub use manifest::{ManifestProblem, ShardMismatch, StoreMismatch};
pub use remote::{NoCredentials, ObjectChange};
pub use schema::{SchemaError, SchemaJsonError};
pub use shared::SharedError;
pub use store::{RecordProblem, StoreProblem};

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
    Corrupt {
        path: PathBuf,
        problem: StoreProblem,
    },
    /// One record's table entry or payload is damaged.
    CorruptRecord {
        path: PathBuf,
        index: u64,
        problem: RecordProblem,
    },
    /// One record's table entry does not decode.
    CorruptEntry {
        path: PathBuf,
        index: u64,
        source: EntryError,
    },
    /// The store's file changed size while the store was open (truncated by another
    /// process, a failing disk or a network file system): the reads that need the
    /// missing bytes fail with this instead of returning wrong data.
    FileChanged {
        path: PathBuf,
        /// The file's length now.
        len: u64,
        /// The length it had when the store was opened (the footer's).
        expected: u64,
    },
    /// A worker thread stopped because another one failed first; the other's error
    /// is the one to report.
    WorkerStopped,
    /// A batch was stopped by its stop signal ([`crate::Interrupt`]) before it
    /// finished; its destination holds no result.
    Interrupted,
    /// The store was written by a newer, incompatible format version.
    UnsupportedVersion {
        path: PathBuf,
        found_major: u16,
        found_minor: u16,
    },
    /// A dataset's manifest is missing a part, damaged, or disagrees with its stores.
    Manifest {
        path: PathBuf,
        problem: ManifestProblem,
    },
    /// A record index is not below the record count.
    IndexOutOfRange { path: PathBuf, index: u64, len: u64 },
    /// A caller-supplied buffer or argument has the wrong size or value.
    InvalidArgument(ArgumentError),
    /// The schema or a dtype is invalid or does not match the operation.
    Schema(SchemaError),
    /// The destination path exists and overwrite was not asked for.
    AlreadyExists { path: PathBuf },
    /// A writer failed earlier (or was closed); it accepts nothing more. The first
    /// error is kept whole (and is this error's `source()`).
    WriterPoisoned {
        path: PathBuf,
        first_error: Option<std::sync::Arc<Error>>,
    },
    /// zstd (compression, decompression or dictionary training) failed.
    Codec(CodecError),
    /// Memory for a buffer could not be had: `bytes` of it for `what`,
    /// for the store or writer at `path` (when known).
    OutOfMemory {
        what: Allocation,
        bytes: u64,
        path: Option<PathBuf>,
        /// The allocator's or operating system's refusal, when it gave one.
        source: Option<AllocFailure>,
    },
    /// A zring thread failed in a way that is a bug, not a property of the input
    /// (a panicked worker, a poisoned lock). Please report it.
    Internal(InternalError),
    /// A request to an object store (`s3://`, `gs://`, `az://`, `http(s)://`,
    /// `file://`) failed for good (after its retries) while doing `what` on `url`.
    Remote {
        url: PathBuf,
        what: &'static str,
        /// `NotFound` (no such object or bucket), `PermissionDenied` (credentials
        /// refused), `TimedOut`, or `Other`.
        kind: io::ErrorKind,
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The remote object changed (replaced, resized) since the store was opened: its
    /// version (size, ETag) is no longer the one the store's table describes.
    ObjectChanged { url: PathBuf, change: ObjectChange },
    /// The operating system failed the read of record `index` of `path` (EIO from a
    /// failing disk, for example).
    RecordIo {
        path: PathBuf,
        index: u64,
        source: io::Error,
    },
    /// Memory for record `index` of `path` (the `bytes` its table entry claims)
    /// could not be had: a damaged or hostile entry, or a record too large for this
    /// process.
    RecordOutOfMemory {
        path: PathBuf,
        index: u64,
        bytes: u64,
    },
    /// A store of a local dataset, at `path` (the dataset directory joined with the
    /// manifest's name for it), is `target` once its symbolic links are followed:
    /// outside `dataset`, the dataset directory (its links followed too). Refused
    /// unless the read setting `follow_links_out` is on
    /// ([`ReadOptions::follow_links_out`](crate::ReadOptions)).
    LinkOutOfDataset {
        path: PathBuf,
        target: PathBuf,
        dataset: PathBuf,
    },
}

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, what: &'static str, source: io::Error) -> Self {
        Error::Io {
            path: path.into(),
            what,
            source,
        }
    }

    pub(crate) fn corrupt(path: impl Into<PathBuf>, problem: StoreProblem) -> Self {
        Error::Corrupt {
            path: path.into(),
            problem,
        }
    }

    pub(crate) fn record(path: impl Into<PathBuf>, index: u64, problem: RecordProblem) -> Self {
        Error::CorruptRecord {
            path: path.into(),
            index,
            problem,
        }
    }

    pub(crate) fn manifest(path: impl Into<PathBuf>, problem: ManifestProblem) -> Self {
        Error::Manifest {
            path: path.into(),
            problem,
        }
    }

    /// Out of memory for `bytes` of `what`.
    pub(crate) fn out_of_memory(
        what: Allocation,
        bytes: u64,
        path: Option<&std::path::Path>,
        source: Option<AllocFailure>,
    ) -> Self {
        Error::OutOfMemory {
            what,
            bytes,
            path: path.map(std::path::Path::to_path_buf),
            source,
        }
    }

    /// The store file the error is about, when it is about one.
    pub fn path(&self) -> Option<&std::path::Path> {
        match self {
            Error::Io { path, .. }
            | Error::Corrupt { path, .. }
            | Error::CorruptRecord { path, .. }
            | Error::CorruptEntry { path, .. }
            | Error::FileChanged { path, .. }
            | Error::UnsupportedVersion { path, .. }
            | Error::IndexOutOfRange { path, .. }
            | Error::Manifest { path, .. }
            | Error::AlreadyExists { path }
            | Error::WriterPoisoned { path, .. }
            | Error::Remote { url: path, .. }
            | Error::ObjectChanged { url: path, .. }
            | Error::RecordIo { path, .. }
            | Error::RecordOutOfMemory { path, .. }
            | Error::LinkOutOfDataset { path, .. } => Some(path),
            Error::OutOfMemory { path, .. } => path.as_deref(),
            _ => None,
        }
    }

    /// The record the error is about, when it is about one.
    pub fn record_index(&self) -> Option<u64> {
        match self {
            Error::CorruptRecord { index, .. }
            | Error::CorruptEntry { index, .. }
            | Error::IndexOutOfRange { index, .. }
            | Error::RecordIo { index, .. }
            | Error::RecordOutOfMemory { index, .. } => Some(*index),
            _ => None,
        }
    }
}

// Error's Display and source() are written out, not derived: its detail variants
// (`Corrupt`, `CorruptRecord`, `Manifest`, `InvalidArgument`, `Schema`, `Codec`,
// `Internal`, `ObjectChanged`) put the detail's text in their own message and return
// the detail's own source() (the detail is not a cause), `OutOfMemory` returns the
// refusal inside its `AllocFailure`, and `WriterPoisoned` its first error inside an
// `Arc`; thiserror's source() can only return a field itself.
impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { path, what, source } => {
                write!(f, "{}: {what} failed: {source}", path.display())
            }
            Error::Corrupt { path, problem } => {
                write!(f, "{}: not a valid zring store: {problem}", path.display())
            }
            Error::CorruptRecord {
                path,
                index,
                problem,
            } => write!(f, "{}: record {index} is corrupt: {problem}", path.display()),
            Error::CorruptEntry {
                path,
                index,
                source,
            } => write!(
                f,
                "{}: record {index} is corrupt: {source}",
                path.display()
            ),
            Error::FileChanged {
                path,
                len,
                expected,
            } => {
                let how = if len < expected { "truncated" } else { "resized" };
                write!(
                    f,
                    "{}: the file changed while the store was open: {how}: {len} bytes, expected {expected}",
                    path.display()
                )
            }
            Error::WorkerStopped => {
                f.write_str("a zring worker stopped because another one failed")
            }
            Error::Interrupted => f.write_str("the batch was stopped before it finished"),
            Error::UnsupportedVersion {
                path,
                found_major,
                found_minor,
            } => write!(
                f,
                "{}: store format v{found_major}.{found_minor} is newer than this zring, which reads format v{}.x; upgrade zring to read it",
                path.display(),
                FORMAT_MAJOR
            ),
            Error::Manifest { path, problem } => {
                write!(f, "{}: not a valid zring dataset: {problem}", path.display())
            }
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
            Error::WriterPoisoned {
                path,
                first_error: Some(first),
            } => write!(
                f,
                "{}: the writer failed earlier and accepts nothing more (first error: {first}); abort it and start again",
                path.display()
            ),
            Error::WriterPoisoned {
                path,
                first_error: None,
            } => write!(f, "{}: the writer is closed", path.display()),
            Error::Codec(detail) => write!(f, "zstd: {detail}"),
            Error::OutOfMemory {
                what,
                bytes,
                path,
                source,
            } => {
                if let Some(p) = path {
                    write!(f, "{}: ", p.display())?;
                }
                write!(f, "out of memory for {what} ({bytes} bytes)")?;
                match source {
                    Some(s) => write!(f, ": {s}"),
                    None => Ok(()),
                }
            }
            Error::Internal(detail) => write!(f, "internal error (a zring bug): {detail}"),
            Error::Remote {
                url, what, source, ..
            } => {
                write!(f, "{}: {what} failed: {source}", url.display())
            }
            Error::ObjectChanged { url, change } => write!(
                f,
                "{}: the object changed while the store was open: {change}",
                url.display()
            ),
            Error::RecordIo {
                path,
                index,
                source,
            } => write!(
                f,
                "{}: reading record {index} failed: {source}",
                path.display()
            ),
            Error::RecordOutOfMemory { path, index, bytes } => write!(
                f,
                "{}: out of memory for record {index}: its table entry claims {bytes} bytes",
                path.display()
            ),
            Error::LinkOutOfDataset {
                path,
                target,
                dataset,
            } => write!(
                f,
                "{}: a symbolic link leads this store out of the dataset {}, to {}; \
                 open the dataset with the read setting follow_links_out=true if its \
                 stores are linked in on purpose",
                path.display(),
                dataset.display(),
                target.display()
            ),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } | Error::RecordIo { source, .. } => Some(source),
            Error::CorruptEntry { source, .. } => Some(source),
            // The problems' text is part of this error's: their own sources follow.
            Error::Corrupt { problem, .. } => problem.source(),
            Error::CorruptRecord { problem, .. } => problem.source(),
            Error::Manifest { problem, .. } => problem.source(),
            Error::OutOfMemory {
                source: Some(s), ..
            } => Some(s.error()),
            // The details' text is part of this error's: their own sources follow.
            Error::InvalidArgument(detail) => detail.source(),
            Error::Schema(detail) => detail.source(),
            Error::Codec(detail) => detail.source(),
            Error::Internal(detail) => detail.source(),
            Error::Remote { source, .. } => Some(source.as_ref()),
            Error::ObjectChanged { change, .. } => change.source(),
            Error::WriterPoisoned {
                first_error: Some(first),
                ..
            } => Some(first.as_ref()),
            _ => None,
        }
    }
}

impl From<Error> for io::Error {
    fn from(e: Error) -> Self {
        let kind = match &e {
            Error::Io { source, .. } | Error::RecordIo { source, .. } => source.kind(),
            Error::AlreadyExists { .. } => io::ErrorKind::AlreadyExists,
            Error::OutOfMemory { .. } | Error::RecordOutOfMemory { .. } => {
                io::ErrorKind::OutOfMemory
            }
            Error::Internal(_) | Error::WorkerStopped => io::ErrorKind::Other,
            Error::Interrupted => io::ErrorKind::Interrupted,
            Error::FileChanged { .. } | Error::ObjectChanged { .. } => io::ErrorKind::UnexpectedEof,
            Error::Remote { kind, .. } => *kind,
            Error::LinkOutOfDataset { .. } => io::ErrorKind::PermissionDenied,
            Error::InvalidArgument(_) | Error::IndexOutOfRange { .. } | Error::Schema(_) => {
                io::ErrorKind::InvalidInput
            }
            _ => io::ErrorKind::InvalidData,
        };
        io::Error::new(kind, e)
    }
}

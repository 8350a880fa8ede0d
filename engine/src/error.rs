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

use std::fmt;
use std::io;
use std::path::PathBuf;

use crate::dtype::DType;
use crate::entry::EntryError;
use crate::format::{BlockKind, SectionKind, BLOCK, ENTRY_BYTES, FORMAT_MAJOR, MAX_ALIGN};
use crate::types::{Codec, Layout, MAX_NDIM};

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
            | Error::RecordOutOfMemory { path, .. } => Some(path),
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
            Error::InvalidArgument(_) | Error::IndexOutOfRange { .. } | Error::Schema(_) => {
                io::ErrorKind::InvalidInput
            }
            _ => io::ErrorKind::InvalidData,
        };
        io::Error::new(kind, e)
    }
}

/// How a remote object differs from the version a store was opened at
/// ([`Error::ObjectChanged`]).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum ObjectChange {
    /// The object is `found` bytes now; it was `expected` when the store was opened.
    Size { expected: u64, found: u64 },
    /// The object's ETag is `found` now; it was `expected` when the store was opened.
    ETag { expected: String, found: String },
    /// A read of bytes `start..end` returned `got` bytes.
    RangeLength { start: u64, end: u64, got: u64 },
    /// The object store refused `what` because the object is no longer the version
    /// it was asked for (a failed precondition; the object store's error is the
    /// source).
    Precondition {
        what: &'static str,
        source: std::sync::Arc<dyn std::error::Error + Send + Sync>,
    },
}

impl fmt::Display for ObjectChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ObjectChange::Size { expected, found } => {
                write!(f, "it is {found} bytes now, {expected} when opened")
            }
            ObjectChange::ETag { expected, found } => {
                write!(f, "ETag {found}, {expected} when opened")
            }
            ObjectChange::RangeLength { start, end, got } => {
                write!(f, "bytes {start}..{end} came back as {got} bytes")
            }
            ObjectChange::Precondition { what, source } => write!(f, "{what}: {source}"),
        }
    }
}

impl std::error::Error for ObjectChange {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ObjectChange::Precondition { source, .. } => Some(source.as_ref()),
            _ => None,
        }
    }
}

/// An error kept in two places at once: a poisoned writer's first error, which the
/// caller got and the writer re-raises on every later call. Errors made in process
/// (an `io::Error` that is no OS error number, a remote request's error) are not
/// `Clone`, so the writer moves such a source into a `SharedError` and both errors
/// hold it. It reads as the original, and its [`source()`](std::error::Error::source)
/// is the original itself (downcast it, or use [`SharedError::original`]).
#[derive(Clone, Debug)]
pub struct SharedError(std::sync::Arc<dyn std::error::Error + Send + Sync>);

impl SharedError {
    /// Shares `original`.
    pub fn new(original: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self(std::sync::Arc::from(original.into()))
    }

    /// The original error.
    pub fn original(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        self.0.as_ref()
    }

    /// Whether `a` and `b` share the same original error object.
    pub fn same(a: &SharedError, b: &SharedError) -> bool {
        std::sync::Arc::ptr_eq(&a.0, &b.0)
    }
}

impl fmt::Display for SharedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl std::error::Error for SharedError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self.original())
    }
}

/// What was wrong with a caller-supplied argument or buffer
/// ([`Error::InvalidArgument`]).
/// What is wrong with a URL given as a store or dataset location. The `reason`s
/// are the URL or object_store library's own explanations.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum UrlProblem {
    /// Not a URL at all.
    NotAUrl { reason: String },
    /// A URL, but not one of an object store zring reads.
    NotAnObjectStore { reason: String },
    /// The URL names a bucket or server but no object in it.
    NoObject,
    /// An object store scheme zring does not read.
    UnsupportedScheme { scheme: String },
    /// An object path (a dataset's store under its prefix) the store refuses.
    ObjectPath { path: String, reason: String },
    /// A client configuration key that the object store does not know.
    ConfigKey { key: String, reason: String },
}

impl fmt::Display for UrlProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UrlProblem::NotAUrl { reason } => write!(f, "not a URL: {reason}"),
            UrlProblem::NotAnObjectStore { reason } => {
                write!(f, "not an object store URL: {reason}")
            }
            UrlProblem::NoObject => f.write_str("names no object"),
            UrlProblem::UnsupportedScheme { scheme } => {
                write!(f, "the {scheme} scheme is not read by zring")
            }
            UrlProblem::ObjectPath { path, reason } => {
                write!(f, "object path {path:?}: {reason}")
            }
            UrlProblem::ConfigKey { key, reason } => {
                write!(f, "configuration key {key:?}: {reason}")
            }
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ArgumentError {
    /// `url` cannot be read as a remote store or dataset.
    Url { url: String, problem: UrlProblem },
    /// A URL was given to a zring built without the cargo feature `remote`.
    RemoteNotBuilt { url: String },
    /// An environment variable holds a value zring cannot use.
    Environment {
        var: &'static str,
        value: String,
        expected: &'static str,
    },
    /// O_DIRECT was asked for together with the mmap backend.
    DirectNeedsFileBackend { path: PathBuf },
    /// A destination slot is not the size of the record read into it.
    SlotSize {
        index: u64,
        slot: usize,
        record: u64,
    },
    /// A verify range reaches past the store's records.
    VerifyRange { start: u64, end: u64, len: u64 },
    /// The destination of a dense gather is not `records x width` bytes (`field`
    /// names the dataset field, when it is one).
    DestinationSize {
        field: Option<String>,
        len: usize,
        records: usize,
        width: usize,
    },
    /// A ragged layout does not describe this batch and values buffer (`field`
    /// names the dataset field, when it is one).
    RaggedLayoutMismatch {
        field: Option<String>,
        /// The records the layout describes.
        layout_records: usize,
        /// The values bytes the layout describes (`None`: more than a `usize`).
        layout_bytes: Option<usize>,
        indices: usize,
        values: usize,
    },
    /// A ragged layout's cu_seqlens are not non-decreasing offsets into the values.
    RaggedLayoutInvalid,
    /// A batch's total size does not fit the address space.
    BatchTooLarge,
    /// The store would be larger than 2^64 bytes.
    StoreTooLarge,
    /// A dictionary size below the minimum zstd can train.
    DictTooSmall { bytes: usize, min: usize },
    /// Nothing to train a dictionary from (no records, or an empty store).
    NothingToTrain,
    /// A record alignment that is not a power of two up to `max`.
    Align { align: u32, max: u32 },
    /// A zstd level outside `min..=max`.
    Level { level: i32, min: i32, max: i32 },
    /// Codec zstd-dict without a dictionary.
    DictMissing,
    /// An empty zstd dictionary.
    DictEmpty,
    /// A dictionary given with a codec that does not use one.
    DictUnused { codec: Codec },
    /// A dense batch that is not a whole number of records.
    DenseBatchSize { len: usize, width: usize },
    /// cu_seqlens without its leading 0.
    CuSeqlensEmpty,
    /// Garbage collection asked to keep no version (the current one is always kept).
    GcKeepNone,
    /// cu_seqlens not starting at 0.
    CuSeqlensStart { first: u64 },
    /// cu_seqlens decreasing at `record` (equal offsets are an empty record).
    CuSeqlensDecreasing { record: usize, start: u64, end: u64 },
    /// The shapes array is not `records x ndim` long.
    ShapesLen {
        len: usize,
        records: usize,
        ndim: usize,
    },
    /// A record's shape does not hold the elements cu_seqlens gives it.
    ShapeMismatch {
        record: usize,
        shape: Vec<u64>,
        elements: u64,
    },
    /// A ragged record above the per-record size limit.
    RecordTooLarge { record: usize, limit: u64 },
    /// cu_seqlens does not end at the values buffer's length.
    ValuesLen {
        elements: u64,
        bytes: u64,
        values: usize,
    },
    /// A path without a file name (a store path must name a file).
    NotAFileName { path: PathBuf },
    /// A dataset gather with a different number of fields and destinations.
    FieldCount { fields: usize, destinations: usize },
    /// A field position past the dataset's fields.
    FieldPosition { field: usize, fields: usize },
    /// A field name the dataset does not have.
    UnknownField {
        path: PathBuf,
        name: String,
        fields: Vec<String>,
    },
    /// A field name that cannot be used (see [`SchemaError::FieldName`]).
    FieldName { name: String },
}

impl fmt::Display for ArgumentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let field = |f: &mut fmt::Formatter<'_>, field: &Option<String>| match field {
            Some(name) => write!(f, "field {name:?}: "),
            None => Ok(()),
        };
        match self {
            ArgumentError::Url { url, problem } => write!(f, "{url}: {problem}"),
            ArgumentError::Environment {
                var,
                value,
                expected,
            } => write!(f, "{var}={value:?} is not {expected}"),
            ArgumentError::RemoteNotBuilt { url } => write!(
                f,
                "{url}: this zring was built without remote stores (cargo feature `remote`)"
            ),
            ArgumentError::DirectNeedsFileBackend { path } => write!(
                f,
                "{}: O_DIRECT reads need the pread or uring backend, not mmap",
                path.display()
            ),
            ArgumentError::SlotSize {
                index,
                slot,
                record,
            } => write!(
                f,
                "destination slot of {slot} bytes for record {index} of {record} bytes"
            ),
            ArgumentError::VerifyRange { start, end, len } => {
                write!(f, "verify range {start}..{end} is not inside 0..{len}")
            }
            ArgumentError::DestinationSize {
                field: name,
                len,
                records,
                width,
            } => {
                field(f, name)?;
                write!(
                    f,
                    "destination is {len} bytes, expected {records} records x {width} bytes"
                )
            }
            ArgumentError::RaggedLayoutMismatch {
                field: name,
                layout_records,
                layout_bytes,
                indices,
                values,
            } => {
                field(f, name)?;
                write!(f, "the ragged layout (for {layout_records} records / ")?;
                match layout_bytes {
                    Some(b) => write!(f, "{b} bytes")?,
                    None => f.write_str("more bytes than the address space")?,
                }
                write!(
                    f,
                    ") does not match {indices} indices and a values buffer of {values} bytes"
                )
            }
            ArgumentError::RaggedLayoutInvalid => {
                f.write_str("ragged layout is not a valid cu_seqlens for this values buffer")
            }
            ArgumentError::BatchTooLarge => f.write_str("batch larger than the address space"),
            ArgumentError::StoreTooLarge => f.write_str("store larger than 2^64 bytes"),
            ArgumentError::DictTooSmall { bytes, min } => write!(
                f,
                "dictionary size {bytes} is too small (at least {min} bytes)"
            ),
            ArgumentError::NothingToTrain => {
                f.write_str("cannot train a dictionary from zero records (or an empty store)")
            }
            ArgumentError::Align { align, max } => {
                write!(f, "align must be a power of two up to {max}, got {align}")
            }
            ArgumentError::Level { level, min, max } => {
                write!(f, "zstd level {level} is outside {min}..={max}")
            }
            ArgumentError::DictMissing => f.write_str(
                "codec zstd-dict needs a dictionary (train one with train_dict)",
            ),
            ArgumentError::DictEmpty => f.write_str("the zstd dictionary is empty"),
            ArgumentError::DictUnused { codec } => write!(
                f,
                "a dictionary is only used by codec zstd-dict, not {codec}"
            ),
            ArgumentError::DenseBatchSize { len, width } => write!(
                f,
                "dense batch of {len} bytes is not a whole number of {width}-byte records"
            ),
            ArgumentError::CuSeqlensEmpty => {
                f.write_str("cu_seqlens is empty; it needs n + 1 offsets")
            }
            ArgumentError::CuSeqlensStart { first } => {
                write!(f, "cu_seqlens must start at 0, starts at {first}")
            }
            ArgumentError::GcKeepNone => f.write_str(
                "keep must be at least 1 (the current version is always kept)",
            ),
            ArgumentError::CuSeqlensDecreasing { record, start, end } => write!(
                f,
                "cu_seqlens must not decrease: record {record} spans {start}..{end}"
            ),
            ArgumentError::ShapesLen { len, records, ndim } => write!(
                f,
                "shapes holds {len} dims, expected {records} records x ndim {ndim} = {}",
                records.saturating_mul(*ndim)
            ),
            ArgumentError::ShapeMismatch {
                record,
                shape,
                elements,
            } => write!(
                f,
                "record {record} has shape {shape:?} but cu_seqlens gives it {elements} elements"
            ),
            ArgumentError::RecordTooLarge { record, limit } => {
                write!(f, "record {record} is larger than the {limit}-byte record limit")
            }
            ArgumentError::ValuesLen {
                elements,
                bytes,
                values,
            } => write!(
                f,
                "cu_seqlens ends at {elements} elements ({bytes} bytes) but values holds {values} bytes"
            ),
            ArgumentError::NotAFileName { path } => {
                write!(f, "{} does not name a file", path.display())
            }
            ArgumentError::FieldCount {
                fields,
                destinations,
            } => write!(f, "{fields} fields but {destinations} destinations"),
            ArgumentError::FieldPosition { field, fields } => {
                write!(f, "field position {field} is not below the {fields} fields")
            }
            ArgumentError::UnknownField { path, name, fields } => write!(
                f,
                "{}: no field {name:?} (fields: {})",
                path.display(),
                fields.join(", ")
            ),
            ArgumentError::FieldName { name } => write!(f, "{}", FieldNameDisplay(name)),
        }
    }
}

impl std::error::Error for ArgumentError {}

/// The rule a field name breaks, shared by the argument and schema errors.
struct FieldNameDisplay<'a>(&'a str);

impl fmt::Display for FieldNameDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "field name {:?} must be 1-128 letters, digits, '_', '-' or '.', not starting with '.'",
            self.0
        )
    }
}

/// What is wrong with a schema or dtype, or how it does not fit the operation
/// ([`Error::Schema`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SchemaError {
    /// A big-endian NumPy dtype (stores are little-endian).
    BigEndian { descr: String },
    /// A NumPy dtype descr zring has no dtype for.
    UnsupportedDescr { descr: String },
    /// A dtype name zring does not know.
    UnknownDType { name: String },
    /// A codec name zring does not know.
    UnknownCodec { name: String },
    /// A dense item_shape with more than [`MAX_NDIM`] dimensions.
    TooManyDims { ndim: usize },
    /// A dense record larger than the per-record size limit.
    RecordTooLarge {
        shape: Vec<u64>,
        dtype: DType,
        limit: u64,
    },
    /// A ragged ndim of 0 or above [`MAX_NDIM`].
    RaggedNdim { ndim: usize },
    /// Dense records of zero bytes (an item_shape with a 0).
    ZeroSizeRecords,
    /// An operation for the other layout: `operation` on a ragged (or dense) store;
    /// `instead` is the one to use.
    WrongLayout {
        operation: &'static str,
        ragged: bool,
        instead: &'static str,
    },
    /// A dataset field gathered with the destination of the other layout.
    FieldLayout { field: String, ragged: bool },
    /// A dataset without fields.
    NoFields,
    /// A field name that cannot be used as part of a file name.
    FieldName { name: String },
    /// Two fields with one name.
    DuplicateField { name: String },
    /// A field's schema is invalid.
    Field {
        name: String,
        source: Box<SchemaError>,
    },
}

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let layout = |ragged: bool| if ragged { "ragged" } else { "dense" };
        match self {
            SchemaError::BigEndian { descr } => write!(
                f,
                "big-endian dtype {descr:?} is not supported; convert with arr.astype(arr.dtype.newbyteorder('<'))"
            ),
            SchemaError::UnsupportedDescr { descr } => {
                write!(f, "unsupported NumPy dtype descr {descr:?}")
            }
            SchemaError::UnknownDType { name } => {
                write!(f, "unknown dtype {name:?}; expected one of ")?;
                for (k, d) in DType::ALL.iter().enumerate() {
                    if k > 0 {
                        f.write_str(", ")?;
                    }
                    f.write_str(d.name())?;
                }
                Ok(())
            }
            SchemaError::UnknownCodec { name } => write!(
                f,
                "unknown codec {name:?} (expected raw, zstd or zstd-dict)"
            ),
            SchemaError::TooManyDims { ndim } => write!(
                f,
                "item_shape has {ndim} dimensions; at most {} are allowed",
                MAX_NDIM
            ),
            SchemaError::RecordTooLarge {
                shape,
                dtype,
                limit,
            } => write!(
                f,
                "a record of shape {shape:?} and dtype {dtype} is larger than the {limit}-byte record limit"
            ),
            SchemaError::RaggedNdim { ndim } => write!(
                f,
                "ragged ndim must be between 1 and {}, got {ndim}",
                MAX_NDIM
            ),
            SchemaError::ZeroSizeRecords => f.write_str(
                "dense records of zero bytes cannot be stored (item_shape has a 0)",
            ),
            SchemaError::WrongLayout {
                operation,
                ragged,
                instead,
            } => write!(
                f,
                "{operation} on a {} store; use {instead}",
                layout(*ragged)
            ),
            SchemaError::FieldLayout { field, ragged } => write!(
                f,
                "field {field:?} is {}; gather it with FieldDest::{}",
                layout(*ragged),
                if *ragged { "Ragged" } else { "Dense" }
            ),
            SchemaError::NoFields => f.write_str("a dataset needs at least one field"),
            SchemaError::FieldName { name } => write!(f, "{}", FieldNameDisplay(name)),
            SchemaError::DuplicateField { name } => write!(f, "field {name:?} appears twice"),
            SchemaError::Field { name, source } => write!(f, "field {name:?}: {source}"),
        }
    }
}

impl std::error::Error for SchemaError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SchemaError::Field { source, .. } => Some(source.as_ref()),
            _ => None,
        }
    }
}

/// What zstd failed to do ([`Error::Codec`]); zstd's own error is the `source`.
#[derive(Debug)]
#[non_exhaustive]
pub enum CodecError {
    /// A compressor could not be created (at this level).
    Compressor { level: i32, source: io::Error },
    /// A decompressor could not be created (`dict`: with the store's dictionary).
    Decompressor { dict: bool, source: io::Error },
    /// Dictionary training failed on these samples.
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

impl fmt::Display for CodecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CodecError::Compressor { level, source } => {
                write!(f, "cannot create a compressor at level {level}: {source}")
            }
            CodecError::Decompressor { dict, source } => write!(
                f,
                "cannot create a decompressor{}: {source}",
                if *dict { " with the store's dictionary" } else { "" }
            ),
            CodecError::DictTraining {
                samples,
                bytes,
                source,
            } => write!(
                f,
                "dictionary training failed on {samples} samples ({bytes} bytes): {source}; use more or larger records, or codec zstd"
            ),
        }
    }
}

impl std::error::Error for CodecError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self.zstd_error())
    }
}

/// A failure that is a zring bug ([`Error::Internal`]).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum InternalError {
    /// A worker panicked while doing `task`.
    Panicked { task: &'static str },
    /// Something one step hands to the next was not there.
    Missing { what: &'static str },
    /// A lock was poisoned by a panic.
    LockPoisoned { lock: &'static str },
    /// Publishing a store failed in a way the writer does not know (the platform's
    /// error is the source).
    Publish {
        source: std::sync::Arc<zring_platform::PublishError>,
    },
    /// The runtime that runs remote requests could not start (the system's error is
    /// the source).
    RemoteRuntime { source: std::sync::Arc<io::Error> },
    /// A remote read broke its own bookkeeping: `what` happened.
    Remote { what: &'static str },
    /// A cache chunk came back from the object store at another length.
    CacheChunkLen { got: usize, expected: usize },
}

impl fmt::Display for InternalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InternalError::Panicked { task } => write!(f, "{task} panicked"),
            InternalError::Missing { what } => write!(f, "{what} is missing"),
            InternalError::LockPoisoned { lock } => write!(f, "{lock} lock poisoned"),
            InternalError::Publish { source } => write!(f, "publishing failed: {source}"),
            InternalError::RemoteRuntime { source } => {
                write!(f, "cannot start the remote I/O runtime: {source}")
            }
            InternalError::Remote { what } => write!(f, "remote read: {what}"),
            InternalError::CacheChunkLen { got, expected } => {
                write!(f, "cache chunk fetched as {got} bytes, expected {expected}")
            }
        }
    }
}

impl std::error::Error for InternalError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            InternalError::Publish { source } => Some(source.as_ref()),
            InternalError::RemoteRuntime { source } => Some(source.as_ref()),
            _ => None,
        }
    }
}

/// What is wrong with a store's metadata ([`Error::Corrupt`]).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum StoreProblem {
    /// The file (`object`: the remote object) is too small for its two blocks.
    TooSmall { len: u64, object: bool },
    /// A block does not start with its magic bytes.
    BadMagic { block: BlockKind },
    /// A block's checksum does not match its bytes.
    BlockChecksum { block: BlockKind },
    /// A block names a format major version older than the first.
    NoSuchMajor { block: BlockKind, major: u16 },
    /// The superblock's record alignment is not a power of two up to the maximum.
    Alignment { align: u32 },
    /// The footer's table entry size is not the format's.
    EntrySize { size: u32 },
    /// The footer's file length is not the file's.
    FileLength { footer: u64, actual: u64 },
    /// The footer's and the superblock's alignments differ.
    AlignmentMismatch { footer: u32, superblock: u32 },
    /// The data region does not start right after the superblock.
    DataOffset { offset: u64 },
    /// A section overlaps another, is out of order or reaches past the footer.
    SectionOutOfPlace {
        section: SectionKind,
        offset: u64,
        len: u64,
        file_len: u64,
    },
    /// The table or shapes section is not aligned for its integers.
    Misaligned,
    /// A section is larger than this process can hold.
    SectionTooLarge { section: SectionKind },
    /// A section lies outside the file (`object`: the fetched remote object).
    SectionOutside { section: SectionKind, object: bool },
    /// A section's checksum does not match its bytes.
    SectionChecksum {
        section: SectionKind,
        expected: u64,
        actual: u64,
    },
    /// The schema section does not parse.
    Schema(SchemaJsonError),
    /// The schema's record count is not the footer's.
    RecordCount { schema: u64, footer: u64 },
    /// The table is not one entry per record.
    TableLen { len: u64, records: u64 },
    /// The shapes section is not `ndim` u32s per record (`expected` is `None` when
    /// that overflows).
    ShapesLen { len: u64, expected: Option<u64> },
    /// A dictionary without codec zstd-dict, or zstd-dict without one.
    Dictionary { codec: Codec, dict_len: u64 },
    /// The schema declares dense records of zero bytes.
    ZeroSizeRecords,
    /// The file ends inside a record (a read that is about no one record).
    EndsInsideRecord,
}

impl fmt::Display for StoreProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let file = |object: bool| if object { "object" } else { "file" };
        match self {
            StoreProblem::TooSmall { len, object } => write!(
                f,
                "the {} is {len} bytes, too small for a superblock and a footer",
                file(*object)
            ),
            StoreProblem::BadMagic { block } => write!(f, "bad {block} magic"),
            StoreProblem::BlockChecksum { block } => write!(f, "{block} checksum mismatch"),
            StoreProblem::NoSuchMajor { block, major } => write!(
                f,
                "{block}: format major version {major} does not exist (v{FORMAT_MAJOR} is the first)"
            ),
            StoreProblem::Alignment { align } => write!(
                f,
                "superblock alignment {align} is not a power of two up to {MAX_ALIGN}"
            ),
            StoreProblem::EntrySize { size } => {
                write!(f, "footer: table entry size {size}, expected {ENTRY_BYTES}")
            }
            StoreProblem::FileLength { footer, actual } => write!(
                f,
                "the footer says the file is {footer} bytes but it is {actual} (truncated or appended to)"
            ),
            StoreProblem::AlignmentMismatch { footer, superblock } => write!(
                f,
                "footer alignment {footer} differs from superblock alignment {superblock}"
            ),
            StoreProblem::DataOffset { offset } => {
                write!(f, "data region starts at {offset}, expected {BLOCK}")
            }
            StoreProblem::SectionOutOfPlace {
                section,
                offset,
                len,
                file_len,
            } => write!(
                f,
                "{section} section {offset}..+{len} is out of place (file is {file_len} bytes)"
            ),
            StoreProblem::Misaligned => f.write_str("table or shapes section is misaligned"),
            StoreProblem::SectionTooLarge { section } => {
                write!(f, "{section} section too large")
            }
            StoreProblem::SectionOutside { section, object } => {
                write!(f, "{section} section outside the {}", file(*object))
            }
            StoreProblem::SectionChecksum {
                section,
                expected,
                actual,
            } => write!(
                f,
                "{section} section checksum mismatch (stored {expected:016x}, computed {actual:016x})"
            ),
            StoreProblem::Schema(e) => write!(f, "{e}"),
            StoreProblem::RecordCount { schema, footer } => write!(
                f,
                "schema counts {schema} records but the footer {footer}"
            ),
            StoreProblem::TableLen { len, records } => write!(
                f,
                "table is {len} bytes, expected {records} records x {ENTRY_BYTES}"
            ),
            StoreProblem::ShapesLen { len, expected } => match expected {
                Some(e) => write!(f, "shapes section is {len} bytes, expected {e}"),
                None => write!(
                    f,
                    "shapes section is {len} bytes, and the records' shapes cannot fit a file"
                ),
            },
            StoreProblem::Dictionary { codec, dict_len } => {
                write!(f, "codec {codec} with a {dict_len}-byte dictionary")
            }
            StoreProblem::ZeroSizeRecords => {
                f.write_str("the schema declares dense records of zero bytes")
            }
            StoreProblem::EndsInsideRecord => f.write_str("the file ends inside a record"),
        }
    }
}

impl std::error::Error for StoreProblem {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            // The detail's text is part of this one's: its own source follows.
            StoreProblem::Schema(e) => e.source(),
            _ => None,
        }
    }
}

/// What is wrong with a store's schema section (its JSON).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum SchemaJsonError {
    /// Not JSON (serde_json's error is the source).
    Json(std::sync::Arc<serde_json::Error>),
    /// JSON, but not an object.
    NotAnObject,
    /// A field is missing.
    Missing { key: &'static str },
    /// A field holds the wrong kind of value (`expected` says what it should be).
    WrongType {
        key: &'static str,
        expected: &'static str,
    },
    /// The `format` field is not `"zring"`.
    NotZring,
    /// The layout is neither `dense` nor `ragged`.
    UnknownLayout { layout: String },
    /// A metadata value is not a string.
    MetadataValue { key: String },
    /// The dtype, codec or schema is invalid.
    Invalid(SchemaError),
}

impl fmt::Display for SchemaJsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SchemaJsonError::Json(e) => write!(f, "schema JSON: {e}"),
            SchemaJsonError::NotAnObject => f.write_str("schema is not a JSON object"),
            SchemaJsonError::Missing { key } => write!(f, "schema has no {key:?} field"),
            SchemaJsonError::WrongType { key, expected } => {
                write!(f, "schema field {key:?} is not {expected}")
            }
            SchemaJsonError::NotZring => f.write_str("schema format is not \"zring\""),
            SchemaJsonError::UnknownLayout { layout } => write!(f, "unknown layout {layout:?}"),
            SchemaJsonError::MetadataValue { key } => {
                write!(f, "metadata value of {key:?} is not a string")
            }
            SchemaJsonError::Invalid(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for SchemaJsonError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SchemaJsonError::Json(e) => Some(e.as_ref()),
            SchemaJsonError::Invalid(e) => e.source(),
            _ => None,
        }
    }
}

/// What is wrong with one record ([`Error::CorruptRecord`]).
#[derive(Debug)]
#[non_exhaustive]
pub enum RecordProblem {
    /// The stored bytes do not hash to the entry's checksum.
    ChecksumMismatch { expected: u64, actual: u64 },
    /// The file ends inside the record.
    EndsInsideRecord,
    /// The record's bytes lie outside the file.
    OutsideFile,
    /// The entry's stored bytes lie outside the data region.
    OutsideDataRegion {
        offset: u64,
        stored_len: u32,
        data_start: u64,
        data_end: u64,
    },
    /// The entry's stored bytes start before the end of those of `previous`, the
    /// last non-empty record before it in the table (bytes `previous_start ..
    /// previous_end`): inside them (a copied or overlapping entry) or before them
    /// (an entry gone backwards). A writer stores records in table order without
    /// overlap, so such an entry would read another record's bytes.
    OutOfOrder {
        offset: u64,
        stored_len: u32,
        previous: u64,
        previous_start: u64,
        previous_end: u64,
    },
    /// Compressed with a dictionary, in a store without one.
    NoDictionary,
    /// A dense record whose logical length is not the record size.
    LogicalLength { logical: u32, record_bytes: u64 },
    /// A ragged record whose shape implies another size than its entry's
    /// (`shape_bytes` is `None` when the product overflows).
    ShapeBytes {
        shape_bytes: Option<u64>,
        logical: u32,
    },
    /// The zstd frame header declares another size than the entry (`None`: no size).
    FrameSize { declared: Option<u64>, logical: u32 },
    /// Decompression gave another size than the entry's.
    DecompressedSize { got: usize, expected: usize },
    /// zstd refused the stored bytes (its error is the source).
    Zstd(io::Error),
}

impl fmt::Display for RecordProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecordProblem::ChecksumMismatch { expected, actual } => write!(
                f,
                "checksum mismatch (stored {expected:016x}, computed {actual:016x})"
            ),
            RecordProblem::EndsInsideRecord => f.write_str("the file ends inside the record"),
            RecordProblem::OutsideFile => f.write_str("outside the file"),
            RecordProblem::OutsideDataRegion {
                offset,
                stored_len,
                data_start,
                data_end,
            } => write!(
                f,
                "stored bytes {offset}..+{stored_len} lie outside the data region {data_start}..{data_end}"
            ),
            RecordProblem::OutOfOrder {
                offset,
                stored_len,
                previous,
                previous_start,
                previous_end,
            } => {
                let end = offset.saturating_add(u64::from(*stored_len));
                let span = format!("bytes {previous_start}..{previous_end}");
                match offset >= previous_start {
                    true => write!(
                        f,
                        "its stored bytes {offset}..{end} start inside record {previous} \
                         ({span}): records never overlap"
                    ),
                    false => write!(
                        f,
                        "its stored bytes {offset}..{end} start before record {previous} \
                         ({span}), which comes earlier in the table: records are stored \
                         in table order"
                    ),
                }
            }
            RecordProblem::NoDictionary => {
                f.write_str("compressed with a dictionary but the store has none")
            }
            RecordProblem::LogicalLength {
                logical,
                record_bytes,
            } => write!(
                f,
                "logical length {logical} differs from the record size {record_bytes}"
            ),
            RecordProblem::ShapeBytes {
                shape_bytes,
                logical,
            } => match shape_bytes {
                Some(b) => write!(f, "shape implies {b} bytes but the table says {logical}"),
                None => write!(f, "shape implies too many bytes but the table says {logical}"),
            },
            RecordProblem::FrameSize { declared, logical } => match declared {
                Some(d) => write!(
                    f,
                    "decompressed to {d} bytes per its zstd frame header, the table says {logical}"
                ),
                None => write!(
                    f,
                    "decompressed to an unknown number of bytes per its zstd frame header, the table says {logical}"
                ),
            },
            RecordProblem::DecompressedSize { got, expected } => {
                write!(f, "decompressed to {got} bytes, the table says {expected}")
            }
            RecordProblem::Zstd(e) => write!(f, "zstd: {e}"),
        }
    }
}

impl std::error::Error for RecordProblem {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RecordProblem::Zstd(e) => Some(e),
            _ => None,
        }
    }
}

/// What is wrong with a dataset's manifest, or between it and its stores
/// ([`Error::Manifest`]).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum ManifestProblem {
    /// The file is larger than any manifest zring writes.
    TooLarge { bytes: u64 },
    /// Not JSON (serde_json's error is the source).
    Json(std::sync::Arc<serde_json::Error>),
    /// A part of the manifest is missing or of the wrong kind (`what` names it).
    Missing { what: &'static str },
    /// The manifest's checksum does not match its text.
    ChecksumMismatch { stored: String, computed: u64 },
    /// The `format` is not `"zring-dataset"`.
    NotADataset,
    /// A manifest format major version this zring does not read (it reads
    /// `supported`).
    UnsupportedMajor { major: u64, supported: u64 },
    /// A field entry has no `key`, or its name is not a string.
    FieldMissing { key: &'static str },
    /// Field `field`'s `what` is not valid.
    FieldValue { field: String, what: &'static str },
    /// The fields do not form a valid dataset (names, schemas).
    Fields(SchemaError),
    /// Shard `shard` has no `what`, or it is of the wrong kind.
    ShardMissing { shard: usize, what: &'static str },
    /// Shard `shard` names another number of stores than there are fields.
    ShardFiles {
        shard: usize,
        files: usize,
        fields: usize,
    },
    /// A shard's store path leaves the dataset directory.
    StorePath { shard: usize, path: String },
    /// The shards' record counts overflow.
    RecordCountOverflow,
    /// The file of version `asked` holds version `found`.
    VersionMismatch { asked: u64, found: u64 },
    /// A shard's store does not hold what the manifest says.
    Store(Box<ShardMismatch>),
    /// Another writer published `published` while this one built on `base`.
    Conflict { published: u64, base: u64 },
    /// Publishing the manifest failed in a way the protocol does not name (the
    /// platform's error is the source).
    Publish {
        source: std::sync::Arc<zring_platform::PublishError>,
    },
    /// The manifest of version `version` (garbage collection reads old ones) is bad.
    InVersion {
        version: u64,
        problem: Box<ManifestProblem>,
    },
}

impl fmt::Display for ManifestProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ManifestProblem::TooLarge { bytes } => {
                write!(f, "{bytes} bytes is larger than any manifest zring writes")
            }
            ManifestProblem::Json(e) => write!(f, "JSON: {e}"),
            ManifestProblem::Missing { what } => write!(f, "no {what}"),
            ManifestProblem::ChecksumMismatch { stored, computed } => write!(
                f,
                "checksum mismatch (stored {stored}, computed {computed:016x})"
            ),
            ManifestProblem::NotADataset => f.write_str("format is not \"zring-dataset\""),
            ManifestProblem::UnsupportedMajor { major, supported } => write!(
                f,
                "manifest format {major} is not the {supported} this zring reads; upgrade zring"
            ),
            ManifestProblem::FieldMissing { key } => write!(f, "a field has no {key:?} string"),
            ManifestProblem::FieldValue { field, what } => write!(f, "field {field:?}: {what}"),
            ManifestProblem::Fields(e) => write!(f, "{e}"),
            ManifestProblem::ShardMissing { shard, what } => {
                write!(f, "shard {shard} has no {what}")
            }
            ManifestProblem::ShardFiles {
                shard,
                files,
                fields,
            } => write!(f, "shard {shard} names {files} stores for {fields} fields"),
            ManifestProblem::StorePath { shard, path } => write!(
                f,
                "shard {shard}: store path {path:?} is not a relative path inside the dataset"
            ),
            ManifestProblem::RecordCountOverflow => f.write_str("record count overflows"),
            ManifestProblem::VersionMismatch { asked, found } => {
                write!(f, "the file of version {asked} holds version {found}")
            }
            ManifestProblem::Store(m) => {
                let new = if m.new { "new " } else { "" };
                write!(f, "{new}shard {}, field {:?}", m.shard, m.field)?;
                if let Some(rel) = &m.store {
                    write!(f, " ({rel})")?;
                }
                write!(f, ": {}", m.mismatch)
            }
            ManifestProblem::Conflict { published, base } => write!(
                f,
                "version {published} was published while this writer built on version {base}; write again"
            ),
            ManifestProblem::Publish { source } => {
                write!(f, "publishing the manifest failed: {source}")
            }
            ManifestProblem::InVersion { version, problem } => {
                write!(f, "version {version}: {problem}")
            }
        }
    }
}

impl std::error::Error for ManifestProblem {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        // The details' text is part of this one's: their own sources follow.
        match self {
            ManifestProblem::Json(e) => Some(e.as_ref()),
            ManifestProblem::Fields(e) => e.source(),
            ManifestProblem::InVersion { problem, .. } => problem.source(),
            ManifestProblem::Publish { source } => Some(source.as_ref()),
            _ => None,
        }
    }
}

/// A shard's store that does not hold what the manifest says
/// ([`ManifestProblem::Store`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardMismatch {
    /// The shard (a new shard's number when `new`).
    pub shard: usize,
    pub new: bool,
    pub field: String,
    /// The store's path relative to the dataset, when known.
    pub store: Option<String>,
    pub mismatch: StoreMismatch,
}

/// How a shard's store differs from what the manifest says of it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreMismatch {
    /// Another dtype or layout.
    Schema {
        store_dtype: DType,
        store_layout: Layout,
        manifest_dtype: DType,
        manifest_layout: Layout,
    },
    /// Another record count.
    Records { store: u64, manifest: u64 },
}

impl fmt::Display for StoreMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreMismatch::Schema {
                store_dtype,
                store_layout,
                manifest_dtype,
                manifest_layout,
            } => write!(
                f,
                "the store holds {} {store_layout:?}, the manifest says {} {manifest_layout:?}",
                store_dtype.name(),
                manifest_dtype.name()
            ),
            StoreMismatch::Records { store, manifest } => write!(
                f,
                "the store holds {store} records, the manifest says {manifest}"
            ),
        }
    }
}

/// What memory was being allocated when it could not be had ([`Error::OutOfMemory`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Allocation {
    /// A thread's io_uring read scratch.
    UringScratch,
    /// A buffer for O_DIRECT reads.
    DirectScratch,
    /// A metadata section read into memory.
    Section { section: SectionKind },
    /// The writer's table entries of `records` new records.
    TableEntries { records: u64 },
    /// The writer's kept metadata (`what`: table entries, record shapes).
    WriterMetadata { what: &'static str },
    /// A writer thread's staging buffer for the records it compresses or aligns.
    StagingBuffer,
    /// The buffer that packs the records of one append (Python's writer).
    AppendValues,
}

impl fmt::Display for Allocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Allocation::UringScratch => f.write_str("the io_uring read scratch"),
            Allocation::DirectScratch => f.write_str("the direct-read scratch"),
            Allocation::Section { section } => write!(f, "the {section} section"),
            Allocation::TableEntries { records } => {
                write!(f, "the table entries of {records} records")
            }
            Allocation::WriterMetadata { what } => write!(f, "the writer's {what}"),
            Allocation::StagingBuffer => f.write_str("a staging buffer"),
            Allocation::AppendValues => f.write_str("packing the records of an append"),
        }
    }
}

/// The allocator's or operating system's refusal behind an [`Error::OutOfMemory`].
#[derive(Debug)]
#[non_exhaustive]
pub enum AllocFailure {
    /// `Vec::try_reserve` refused.
    Reserve(std::collections::TryReserveError),
    /// The operating system refused (`mmap`, an aligned allocation).
    Os(io::Error),
}

impl fmt::Display for AllocFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AllocFailure::Reserve(e) => write!(f, "{e}"),
            AllocFailure::Os(e) => write!(f, "{e}"),
        }
    }
}

impl AllocFailure {
    /// The refusal itself (what [`Error::OutOfMemory`]'s `source()` returns).
    pub fn error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        match self {
            AllocFailure::Reserve(e) => e,
            AllocFailure::Os(e) => e,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    #[test]
    fn details_read_as_sentences_with_their_context() {
        let e = Error::InvalidArgument(ArgumentError::DestinationSize {
            field: Some("tokens".into()),
            len: 7,
            records: 2,
            width: 4,
        });
        assert_eq!(
            e.to_string(),
            "invalid argument: field \"tokens\": destination is 7 bytes, expected 2 records x 4 bytes"
        );
        let e = Error::Schema(SchemaError::WrongLayout {
            operation: "gather",
            ragged: true,
            instead: "gather_ragged",
        });
        assert_eq!(
            e.to_string(),
            "schema: gather on a ragged store; use gather_ragged"
        );
        let e = Error::Schema(SchemaError::UnknownDType { name: "f5".into() });
        assert!(e.to_string().contains("expected one of bool, "), "{e}");
    }

    #[test]
    fn a_codec_error_keeps_zstd_s_error_as_its_source() {
        let zstd = io::Error::other("Unknown frame descriptor");
        let e = Error::Codec(CodecError::Compressor {
            level: 99,
            source: zstd,
        });
        assert!(e.to_string().contains("level 99"), "{e}");
        assert!(e.to_string().contains("Unknown frame descriptor"), "{e}");
        let source = e.source().expect("zstd's error is the source");
        assert_eq!(source.to_string(), "Unknown frame descriptor");
        let nested = Error::Schema(SchemaError::Field {
            name: "x".into(),
            source: Box::new(SchemaError::RaggedNdim { ndim: 0 }),
        });
        assert!(matches!(
            nested
                .source()
                .and_then(|s| s.downcast_ref::<SchemaError>()),
            Some(SchemaError::RaggedNdim { ndim: 0 })
        ));
    }

    #[test]
    fn an_object_change_says_what_changed_and_keeps_its_fields() {
        let e = Error::ObjectChanged {
            url: "s3://bucket/d.zr".into(),
            change: ObjectChange::Size {
                expected: 8192,
                found: 4096,
            },
        };
        assert_eq!(
            e.to_string(),
            "s3://bucket/d.zr: the object changed while the store was open: it is 4096 bytes now, 8192 when opened"
        );
        let e = Error::ObjectChanged {
            url: "s3://bucket/d.zr".into(),
            change: ObjectChange::Precondition {
                what: "reading a byte range",
                source: std::sync::Arc::new(io::Error::other("precondition failed")),
            },
        };
        let source = e.source().expect("the object store's error is the source");
        assert_eq!(
            source.downcast_ref::<io::Error>().map(|s| s.kind()),
            Some(io::ErrorKind::Other)
        );
    }

    #[test]
    fn a_runtime_that_cannot_start_keeps_the_system_s_error_as_its_source() {
        let e = Error::Internal(InternalError::RemoteRuntime {
            source: std::sync::Arc::new(io::Error::from_raw_os_error(libc_eagain())),
        });
        assert!(e
            .to_string()
            .starts_with("internal error (a zring bug): cannot start the remote I/O runtime: "));
        let io = e
            .source()
            .and_then(|s| s.downcast_ref::<io::Error>())
            .expect("the system's error is the source");
        assert_eq!(io.raw_os_error(), Some(libc_eagain()));
    }

    /// EAGAIN, what a refused thread creation returns on Linux.
    fn libc_eagain() -> i32 {
        11
    }

    #[test]
    fn a_publish_failure_keeps_the_platform_s_error_as_its_source() {
        use zring_platform::PublishError;
        let publish = std::sync::Arc::new(PublishError::Io {
            step: "renaming the new file into place",
            path: "/d/x.zr".into(),
            source: io::Error::other("disk on fire"),
            in_place: false,
        });
        let e = Error::Internal(InternalError::Publish {
            source: std::sync::Arc::clone(&publish),
        });
        assert_eq!(
            e.to_string(),
            "internal error (a zring bug): publishing failed: /d/x.zr: renaming the new file into place failed: disk on fire"
        );
        let source = e.source().expect("the platform's error is the source");
        assert!(matches!(
            source.downcast_ref::<PublishError>(),
            Some(PublishError::Io {
                in_place: false,
                ..
            })
        ));
        let e = Error::manifest("/d", ManifestProblem::Publish { source: publish });
        assert!(e
            .source()
            .and_then(|s| s.downcast_ref::<PublishError>())
            .is_some());
        assert!(
            e.to_string()
                .contains("publishing the manifest failed: /d/x.zr"),
            "{e}"
        );
    }
}

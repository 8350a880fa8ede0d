//! What was wrong with a caller-supplied argument or buffer
//! ([`super::Error::InvalidArgument`]), and with a URL given as a location.

use std::fmt;
use std::path::PathBuf;

use crate::types::Codec;

/// What is wrong with a URL given as a store or dataset location. The `reason`s
/// are the URL or object_store library's own explanations.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UrlProblem {
    /// Not a URL at all.
    #[error("not a URL: {reason}")]
    NotAUrl { reason: String },
    /// A URL, but not one of an object store zring reads.
    #[error("not an object store URL: {reason}")]
    NotAnObjectStore { reason: String },
    /// The URL names a bucket or server but no object in it.
    #[error("names no object")]
    NoObject,
    /// An object store scheme zring does not read.
    #[error("the {scheme} scheme is not read by zring")]
    UnsupportedScheme { scheme: String },
    /// An object path (a dataset's store under its prefix) the store refuses.
    #[error("object path {path:?}: {reason}")]
    ObjectPath { path: String, reason: String },
    /// A client configuration key that the object store does not know.
    #[error("configuration key {key:?}: {reason}")]
    ConfigKey { key: String, reason: String },
}

/// What was wrong with a caller-supplied argument or buffer
/// ([`Error::InvalidArgument`](super::Error::InvalidArgument)).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ArgumentError {
    /// `url` cannot be read as a remote store or dataset.
    #[error("{url}: {problem}")]
    Url { url: String, problem: UrlProblem },
    /// A URL was given to a zring built without the cargo feature `remote`.
    #[error("{url}: this zring was built without remote stores (cargo feature `remote`)")]
    RemoteNotBuilt { url: String },
    /// An environment variable holds a value zring cannot use.
    #[error("{var}={value:?} is not {expected}")]
    Environment {
        var: &'static str,
        value: String,
        expected: &'static str,
    },
    /// A read setting (named as Python's keyword arguments and the CLI's `--read`
    /// name it: `queue_depth`, `remote.in_flight`, ...) has a value zring does not
    /// take; see [`ReadOptions::set`](crate::ReadOptions::set).
    #[error("read setting {key}={value:?}: expected {expected}")]
    Setting {
        key: String,
        value: String,
        expected: &'static str,
    },
    /// No read setting has this name.
    #[error("no read setting {key:?} (settings: {known})")]
    UnknownSetting { key: String, known: &'static str },
    /// Serialised read settings that do not parse.
    #[error("read settings JSON: {reason}")]
    SettingsJson { reason: String },
    /// O_DIRECT was asked for together with the mmap backend.
    #[error(
        "{}: O_DIRECT reads need the pread or uring backend, not mmap",
        path.display()
    )]
    DirectNeedsFileBackend { path: PathBuf },
    /// A destination slot is not the size of the record read into it.
    #[error("destination slot of {slot} bytes for record {index} of {record} bytes")]
    SlotSize {
        index: u64,
        slot: usize,
        record: u64,
    },
    /// A verify range reaches past the store's records.
    #[error("verify range {start}..{end} is not inside 0..{len}")]
    VerifyRange { start: u64, end: u64, len: u64 },
    /// The destination of a dense gather is not `records x width` bytes (`field`
    /// names the dataset field, when it is one).
    #[error(
        "{}destination is {len} bytes, expected {records} records x {width} bytes",
        FieldPrefix(field)
    )]
    DestinationSize {
        field: Option<String>,
        len: usize,
        records: usize,
        width: usize,
    },
    /// A ragged layout does not describe this batch and values buffer (`field`
    /// names the dataset field, when it is one).
    #[error(
        "{}the ragged layout (for {layout_records} records / {}) does not match {indices} indices and a values buffer of {values} bytes",
        FieldPrefix(field),
        LayoutBytes(*layout_bytes)
    )]
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
    #[error("ragged layout is not a valid cu_seqlens for this values buffer")]
    RaggedLayoutInvalid,
    /// A batch's total size does not fit the address space.
    #[error("batch larger than the address space")]
    BatchTooLarge,
    /// A concatenation of no parts.
    #[error("a concatenation needs at least one part")]
    NoParts,
    /// A part of a concatenation whose records differ from the first part's.
    #[error("part {part} holds {found} records, the first part {expected}")]
    PartSchema {
        part: usize,
        found: String,
        expected: String,
    },
    /// A dataset joined to others whose fields differ from the first one's.
    #[error("dataset {part} has fields {found}, the first one {expected}")]
    PartFields {
        part: usize,
        found: String,
        expected: String,
    },
    /// The store would be larger than 2^64 bytes.
    #[error("store larger than 2^64 bytes")]
    StoreTooLarge,
    /// A dictionary size below the minimum zstd can train.
    #[error("dictionary size {bytes} is too small (at least {min} bytes)")]
    DictTooSmall { bytes: usize, min: usize },
    /// Nothing to train a dictionary from (no records, or an empty store).
    #[error("cannot train a dictionary from zero records (or an empty store)")]
    NothingToTrain,
    /// A record alignment that is not a power of two up to `max`.
    #[error("align must be a power of two up to {max}, got {align}")]
    Align { align: u32, max: u32 },
    /// A zstd level outside `min..=max`.
    #[error("zstd level {level} is outside {min}..={max}")]
    Level { level: i32, min: i32, max: i32 },
    /// Codec zstd-dict without a dictionary.
    #[error("codec zstd-dict needs a dictionary (train one with train_dict)")]
    DictMissing,
    /// An empty zstd dictionary.
    #[error("the zstd dictionary is empty")]
    DictEmpty,
    /// A dictionary given with a codec that does not use one.
    #[error("a dictionary is only used by codec zstd-dict, not {codec}")]
    DictUnused { codec: Codec },
    /// A dense batch that is not a whole number of records.
    #[error("dense batch of {len} bytes is not a whole number of {width}-byte records")]
    DenseBatchSize { len: usize, width: usize },
    /// cu_seqlens without its leading 0.
    #[error("cu_seqlens is empty; it needs n + 1 offsets")]
    CuSeqlensEmpty,
    /// Garbage collection asked to keep no version (the current one is always kept).
    #[error("keep must be at least 1 (the current version is always kept)")]
    GcKeepNone,
    /// cu_seqlens not starting at 0.
    #[error("cu_seqlens must start at 0, starts at {first}")]
    CuSeqlensStart { first: u64 },
    /// cu_seqlens decreasing at `record` (equal offsets are an empty record).
    #[error("cu_seqlens must not decrease: record {record} spans {start}..{end}")]
    CuSeqlensDecreasing { record: usize, start: u64, end: u64 },
    /// The shapes array is not `records x ndim` long.
    #[error(
        "shapes holds {len} dims, expected {records} records x ndim {ndim} = {}",
        records.saturating_mul(*ndim)
    )]
    ShapesLen {
        len: usize,
        records: usize,
        ndim: usize,
    },
    /// A record's shape does not hold the elements cu_seqlens gives it.
    #[error("record {record} has shape {shape:?} but cu_seqlens gives it {elements} elements")]
    ShapeMismatch {
        record: usize,
        shape: Vec<u64>,
        elements: u64,
    },
    /// A ragged record above the per-record size limit.
    #[error("record {record} is larger than the {limit}-byte record limit")]
    RecordTooLarge { record: usize, limit: u64 },
    /// cu_seqlens does not end at the values buffer's length.
    #[error(
        "cu_seqlens ends at {elements} elements ({bytes} bytes) but values holds {values} bytes"
    )]
    ValuesLen {
        elements: u64,
        bytes: u64,
        values: usize,
    },
    /// A path without a file name (a store path must name a file).
    #[error("{} does not name a file", path.display())]
    NotAFileName { path: PathBuf },
    /// A dataset gather with a different number of fields and destinations.
    #[error("{fields} fields but {destinations} destinations")]
    FieldCount { fields: usize, destinations: usize },
    /// A field position past the dataset's fields.
    #[error("field position {field} is not below the {fields} fields")]
    FieldPosition { field: usize, fields: usize },
    /// A field name the dataset does not have.
    #[error("{}: no field {name:?} (fields: {})", path.display(), fields.join(", "))]
    UnknownField {
        path: PathBuf,
        name: String,
        fields: Vec<String>,
    },
    /// A field name that cannot be used (see [`SchemaError::FieldName`](super::SchemaError::FieldName)).
    #[error("{}", FieldNameDisplay(name))]
    FieldName { name: String },
}

/// `field "name": ` before a dataset field's message; nothing for a store's.
struct FieldPrefix<'a>(&'a Option<String>);

impl fmt::Display for FieldPrefix<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(name) => write!(f, "field {name:?}: "),
            None => Ok(()),
        }
    }
}

/// A ragged layout's values bytes, or that they exceed the address space.
struct LayoutBytes(Option<usize>);

impl fmt::Display for LayoutBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(b) => write!(f, "{b} bytes"),
            None => f.write_str("more bytes than the address space"),
        }
    }
}

/// The rule a field name breaks, shared by the argument and schema errors.
pub(super) struct FieldNameDisplay<'a>(pub(super) &'a str);

impl fmt::Display for FieldNameDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "field name {:?} must be 1-128 letters, digits, '_', '-' or '.', not starting with '.'",
            self.0
        )
    }
}

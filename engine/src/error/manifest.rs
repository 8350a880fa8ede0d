//! What is wrong with a dataset's manifest ([`super::Error::Manifest`]), or between it
//! and its stores.

use std::fmt;

use crate::dtype::DType;
use crate::types::Layout;

use super::SchemaError;

// ManifestProblem's Display and source() are written out, not derived: `Json` and
// `Publish` hold their causes in an `Arc` (thiserror's source() would return the `Arc`,
// which does not downcast to the cause), and `InVersion` forwards its problem's own
// source(), which thiserror cannot express for a message that adds to the problem's.

/// What is wrong with a dataset's manifest, or between it and its stores
/// ([`Error::Manifest`](super::Error::Manifest)).
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
    /// The store names given for new shard `shard` cannot be added (`why`).
    NewShardFiles { shard: usize, why: String },
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
            ManifestProblem::NewShardFiles { shard, why } => {
                write!(f, "new shard {shard}: {why}")
            }
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
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreMismatch {
    /// Another dtype or layout.
    #[error(
        "the store holds {} {store_layout:?}, the manifest says {} {manifest_layout:?}",
        store_dtype.name(),
        manifest_dtype.name()
    )]
    Schema {
        store_dtype: DType,
        store_layout: Layout,
        manifest_dtype: DType,
        manifest_layout: Layout,
    },
    /// Another record count.
    #[error("the store holds {store} records, the manifest says {manifest}")]
    Records { store: u64, manifest: u64 },
}

//! How a remote object changed under an open store ([`super::Error::ObjectChanged`]).

use std::fmt;

// Display and source() are written out, not derived: `Precondition` holds its cause in
// an `Arc`, and thiserror's derived source() would return the `Arc` itself, which does
// not downcast to the object store's error as callers do.
/// How a remote object differs from the version a store was opened at
/// ([`Error::ObjectChanged`](super::Error::ObjectChanged)).
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

/// Why a request failed when no credentials were configured: object_store then asks
/// the cloud's instance metadata service for them, and off the cloud that request
/// fails with an error about the metadata endpoint, not about credentials. This
/// says what was looked for first (the source of [`Error::Remote`](super::Error::Remote)
/// in that case; the request's own error is its source).
#[derive(Debug, thiserror::Error)]
#[error(
    "no credentials are set (none of {looked_for} in the environment or the remote \
     options), so they were asked of the instance metadata service: {source}"
)]
pub struct NoCredentials {
    /// The settings that would have given credentials, as the user would set them.
    pub looked_for: &'static str,
    #[source]
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

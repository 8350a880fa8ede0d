//! A failure that is a zring bug ([`super::Error::Internal`]).

use std::fmt;
use std::io;

// Display and source() are written out, not derived: the causes are held in an `Arc`,
// and thiserror's derived source() would return the `Arc` itself, which does not
// downcast to the cause (`PublishError`, `io::Error`) as callers do.
/// A failure that is a zring bug ([`Error::Internal`](super::Error::Internal)).
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

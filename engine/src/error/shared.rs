//! [`SharedError`]: one error kept by two owners (a poisoned writer and its caller).

use std::fmt;

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

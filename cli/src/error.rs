//! The CLI's error: a message for the user. `main` prints it as `zring: <message>`
//! and exits with status 1, or 2 for usage errors (as clap does for its own).

use std::fmt;
use std::path::Path;

use crate::npy::NpyError;

/// A failed command, with the message to show.
#[derive(Debug)]
pub struct CliError {
    message: String,
    /// A usage error (a bad combination of flags): exit status 2, like clap's own.
    usage: bool,
}

impl CliError {
    /// An error with this message.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            usage: false,
        }
    }

    /// A usage error: the message names the flag; `main` exits with status 2.
    pub fn usage(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            usage: true,
        }
    }

    /// Whether this is a usage error.
    pub fn is_usage(&self) -> bool {
        self.usage
    }

    /// An I/O error while doing `what` on `path`.
    pub fn io(path: &Path, what: &str, source: std::io::Error) -> Self {
        Self::new(format!("{}: {what} failed: {source}", path.display()))
    }

    /// This error with `context: ` in front of its message.
    pub fn context(self, context: impl fmt::Display) -> Self {
        Self {
            message: format!("{context}: {}", self.message),
            usage: self.usage,
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CliError {}

impl From<zring_engine::Error> for CliError {
    fn from(e: zring_engine::Error) -> Self {
        Self::new(e.to_string())
    }
}

impl From<NpyError> for CliError {
    fn from(e: NpyError) -> Self {
        Self::new(e.to_string())
    }
}

impl From<zring_sampler::SamplerError> for CliError {
    fn from(e: zring_sampler::SamplerError) -> Self {
        Self::new(format!("sampler: {e}"))
    }
}

/// Result with [`CliError`].
pub type CliResult<T = ()> = Result<T, CliError>;

//! `--read KEY=VALUE`: the read settings of `info` and `verify`, parsed and checked
//! by the engine's one rule set ([`ReadOptions::set`]), so a bad value gives the
//! message Rust and Python give.

use clap::Args;
use zring_engine::ReadOptions;

use super::{CliError, CliResult};

/// The read settings a command opens its store or dataset with.
#[derive(Clone, Debug, Args)]
pub struct ReadArgs {
    /// A read setting, KEY=VALUE (repeatable): backend=pread, verify_checksums=false,
    /// threads=4, queue_depth=32, direct=true, remote.in_flight=64,
    /// remote.cache_dir=DIR, remote.cache_bytes=500G, ... (see docs/engine.md)
    #[arg(long = "read", value_name = "KEY=VALUE", value_parser = super::parse_key_value)]
    pub read: Vec<(String, String)>,
}

impl ReadArgs {
    /// The engine's read options from the settings given (a bad one is a usage
    /// error, exit status 2, with the engine's message).
    pub fn options(&self) -> CliResult<ReadOptions> {
        ReadOptions::from_pairs(self.read.iter().map(|(k, v)| (k, v)))
            .map_err(|e| CliError::usage(e.to_string()))
    }
}

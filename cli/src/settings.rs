//! `--read KEY=VALUE`: the read settings of `info`, `verify` and `bench`, parsed
//! and checked by the engine's one rule set ([`ReadOptions::set`]), so a bad value
//! gives the message Rust and Python give. A command's own read flags (`bench
//! --qd`) go through the same rules ([`ReadArgs::options_after`]).

use clap::Args;
use zring_engine::ReadOptions;

use super::{CliError, CliResult};

/// The read settings a command opens its store or dataset with.
#[derive(Clone, Debug, Args)]
pub struct ReadArgs {
    /// A read setting, KEY=VALUE (repeatable): backend=pread, verify_checksums=false,
    /// threads=4, queue_depth=32, direct=true, follow_links_out=true,
    /// remote.in_flight=64, remote.cache_dir=DIR, remote.cache_bytes=500G, ... (see
    /// docs/engine.md)
    #[arg(long = "read", value_name = "KEY=VALUE", value_parser = super::parse_key_value)]
    pub read: Vec<(String, String)>,
}

impl ReadArgs {
    /// The engine's read options from the settings given (a bad one is a usage
    /// error, exit status 2, with the engine's message).
    pub fn options(&self) -> CliResult<ReadOptions> {
        self.options_after(std::iter::empty::<(&str, &str, String)>())
    }

    /// The engine's read options from a command's own read flags, each `(flag, key,
    /// value)` (`("--qd", "queue_depth", "32")`), then the `--read` settings: each
    /// set in turn on the defaults through [`ReadOptions::set`], then all
    /// [validated](ReadOptions::validate) together. A bad value is a usage error
    /// with the engine's message, after the flag's name when a flag gave it, so a
    /// flag takes exactly the values, and is refused with exactly the message, of
    /// the setting it stands for.
    pub fn options_after<'a>(
        &self,
        flags: impl IntoIterator<Item = (&'a str, &'a str, String)>,
    ) -> CliResult<ReadOptions> {
        let mut opts = ReadOptions::default();
        for (flag, key, value) in flags {
            opts.set(key, &value)
                .map_err(|e| CliError::usage(format!("{flag} {value}: {e}")))?;
        }
        for (key, value) in &self.read {
            opts.set(key, value)
                .map_err(|e| CliError::usage(e.to_string()))?;
        }
        opts.validate()
            .map_err(|e| CliError::usage(e.to_string()))?;
        Ok(opts)
    }
}

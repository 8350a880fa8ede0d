//! The `zring` command-line tool: `pack`, `info`, `verify`, `train-dict` and `bench`.
//! The binary (`src/bin/zring.rs`) only calls [`main`].

pub mod bench;
pub mod bench_report;
pub mod error;
pub mod histogram;
pub mod info;
pub mod measure;
pub mod output;
pub mod pack;
pub mod progress;
pub mod synth;
pub mod train_dict;
pub mod verify;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub use error::{CliError, CliResult};

/// zring: typed record stores read by random batched gathers.
#[derive(Debug, Parser)]
#[command(name = "zring", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Build a store from a .npy array (dense) or values/offsets .npy files (ragged).
    Pack(pack::PackArgs),
    /// Show a store's layout, dtype, codec, sizes and metadata.
    Info(info::InfoArgs),
    /// Check every record of a store (checksums, decoding); exit 1 on damage.
    Verify(verify::VerifyArgs),
    /// Train a zstd dictionary from a store's or a .npy file's records.
    TrainDict(train_dict::TrainDictArgs),
    /// Time random batched gathers (or single-record gets) on a synthetic or given store.
    Bench(bench::BenchArgs),
}

/// Runs one parsed command.
pub fn run(cli: Cli) -> CliResult {
    match cli.command {
        Command::Pack(a) => pack::run(&a),
        Command::Info(a) => info::run(&a),
        Command::Verify(a) => verify::run(&a),
        Command::TrainDict(a) => train_dict::run(&a),
        Command::Bench(a) => bench::run(&a),
    }
}

/// Parses the process arguments (clap prints usage errors and exits with 2), runs
/// the command, and turns an error into `zring: <message>` on stderr and status 1.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("zring: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Parses `key=value` for `--meta`.
pub(crate) fn parse_key_value(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        _ => Err(format!("expected KEY=VALUE, got {s:?}")),
    }
}

/// Parses a codec name for clap.
pub(crate) fn parse_codec(s: &str) -> Result<zring_engine::Codec, String> {
    s.parse().map_err(|e: zring_engine::Error| e.to_string())
}

/// Parses a dtype name for clap.
pub(crate) fn parse_dtype(s: &str) -> Result<zring_engine::DType, String> {
    s.parse().map_err(|e: zring_engine::Error| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn clap_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn meta_pairs_split_at_the_first_equals_sign() {
        assert_eq!(
            parse_key_value("source=a=b").expect("pair"),
            ("source".into(), "a=b".into())
        );
        assert_eq!(parse_key_value("k=").expect("empty value").1, "");
        assert!(parse_key_value("novalue").is_err());
        assert!(parse_key_value("=v").is_err());
    }
}

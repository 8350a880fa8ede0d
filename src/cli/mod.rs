//! The `zring` command-line tool: `pack`, `info`, `verify`, `train-dict`, `bench`,
//! `convert` (which points to the Python converters) and `gc`.
//! The binary (`src/bin/zring.rs`) only calls [`main`].

pub mod bench;
pub mod bench_args;
pub mod bench_fio;
pub mod bench_loader;
pub mod bench_plot;
pub mod bench_replay;
pub mod bench_report;
pub mod bench_run;
pub mod bench_series;
pub mod bench_types;
pub mod convert;
pub mod dataset;
pub mod error;
pub mod gc;
pub mod histogram;
pub mod info;
pub mod measure;
pub mod output;
pub mod pack;
pub mod progress;
pub mod synth;
pub mod train_dict;
pub mod verify;

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
    /// Show a store's (or a dataset's) layout, dtype, codec, sizes and metadata.
    Info(info::InfoArgs),
    /// Check every record of a store or dataset (checksums, decoding); exit 1 on damage.
    Verify(verify::VerifyArgs),
    /// Train a zstd dictionary from a store's or a .npy file's records.
    TrainDict(train_dict::TrainDictArgs),
    /// Time random batched gathers (or single-record gets) on a synthetic or given store.
    Bench(bench_args::BenchArgs),
    /// Convert Parquet, Arrow, Hugging Face, WebDataset, image folders, HDF5, .npz or
    /// .npy into a dataset (done by the Python package: `python -m zring convert`).
    Convert(convert::ConvertArgs),
    /// Remove a dataset's old versions: manifests older than the newest --keep, the
    /// stores none of those name, and temporary files of dead writers.
    Gc(gc::GcArgs),
}

/// Runs one parsed command.
pub fn run(cli: Cli) -> CliResult {
    match cli.command {
        Command::Pack(a) => pack::run(&a),
        Command::Info(a) => info::run(&a),
        Command::Verify(a) => verify::run(&a),
        Command::TrainDict(a) => train_dict::run(&a),
        Command::Bench(a) => bench::run(&a),
        Command::Convert(a) => convert::run(&a),
        Command::Gc(a) => gc::run(&a),
    }
}

/// Runs the CLI on `args` (the program name first) and returns the exit status: 0,
/// 1 with `zring: <message>` on stderr when the command fails (2 for usage errors the
/// command finds itself), 2 with clap's usage text on a bad command line (`--help` and `--version` print and return 0). The
/// `zring` binary and the Python package's `zring` command both run this.
pub fn run_args<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            // Printing usage can only fail on a closed stdout/stderr; the status says it.
            let _ = e.print();
            return u8::try_from(e.exit_code()).unwrap_or(2);
        }
    };
    match run(cli) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("zring: {e}");
            if e.is_usage() {
                2
            } else {
                1
            }
        }
    }
}

/// Parses a zstd level for clap, naming the valid range in words.
pub(crate) fn parse_level(s: &str) -> Result<i32, String> {
    let levels = zstd::compression_level_range();
    let level: i32 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a whole number"))?;
    if !levels.contains(&level) {
        return Err(format!(
            "zstd levels run from {} (fastest) to {} (smallest); 1 to 19 are the usual ones",
            levels.start(),
            levels.end()
        ));
    }
    Ok(level)
}

/// Parses a record alignment for clap: a power of two up to 1 MiB.
pub(crate) fn parse_align(s: &str) -> Result<u32, String> {
    let max = zring_engine::format::MAX_ALIGN;
    match s.parse::<u32>() {
        Ok(a) if a.is_power_of_two() && a <= max => Ok(a),
        _ => Err(format!(
            "the alignment must be a power of two from 1 to {max}"
        )),
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

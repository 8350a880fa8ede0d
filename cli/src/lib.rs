//! zring-cli: the `zring` command line (`pack`, `info`, `verify`, `train-dict`,
//! `bench`, `convert`, which points to the Python converters, and `gc`), the `.npy`
//! reader it packs from ([`npy`]), and `zring bench`, the benchmark suite
//! (`src/bench/`). Its records come from `zring-workloads`, the one generator of
//! zring's synthetic data.
//!
//! The library is the command: [`run_cli`] runs it on a command line, and both the
//! `zring` binary (`src/bin/zring.rs`) and the Python package's `zring` command call
//! it. The command's modules are private: they are not an API. The `zring` crate,
//! the library facade, depends on none of this (no clap, indicatif or plotters).
//!
//! Features: `remote` (default) reads stores and datasets at s3://, gs://, az://,
//! http(s):// and file:// URLs; `plot` (default) draws `zring bench --plot`.
//!
//! No `unsafe` here: the system calls and mappings it needs are zring-platform's
//! safe wrappers.
#![deny(unsafe_code)]

mod bench;
mod convert;
mod dataset;
mod error;
mod gc;
mod info;
pub mod npy;
mod output;
mod pack;
mod progress;
mod settings;
mod train_dict;
mod verify;

use clap::{Parser, Subcommand};

pub(crate) use error::{CliError, CliResult};

/// The first line of `zring --help`.
const ABOUT: &str = "Typed record storage engine: immutable single-file stores read by \
                     random batched gathers at the speed of the hardware";

/// zring: typed record stores read by random batched gathers.
///
/// `--help` says what the `zring` crate's description says (this crate's own is
/// about the crate, not the command).
#[derive(Debug, Parser)]
#[command(name = "zring", version, about = ABOUT, long_about = None)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Build a store from a .npy array (dense) or values/offsets .npy files (ragged).
    Pack(pack::PackArgs),
    /// Show a store's (or a dataset's) layout, dtype, codec, sizes and metadata.
    Info(info::InfoArgs),
    /// Check every record of a store or dataset (checksums, decoding); exit 1 on damage.
    Verify(verify::VerifyArgs),
    /// Train a zstd dictionary from a store's or a .npy file's records.
    TrainDict(train_dict::TrainDictArgs),
    /// Time random batched gathers (or single-record gets) on a synthetic or given store.
    Bench(Box<bench::args::BenchArgs>),
    /// Convert Parquet, Arrow, Hugging Face, WebDataset, image folders, HDF5, .npz or
    /// .npy into a dataset (done by the Python package: `python -m zring convert`).
    Convert(convert::ConvertArgs),
    /// Remove a dataset's old versions: manifests older than the newest --keep, the
    /// stores none of those name, and temporary files of dead writers.
    Gc(gc::GcArgs),
}

/// Runs one parsed command.
pub(crate) fn run(cli: Cli) -> CliResult {
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
pub fn run_cli<I, T>(args: I) -> u8
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

/// Parses a size with units for clap (`4096`, `4k`, `64MiB`), by the engine's one
/// rule ([`zring_engine::parse_size`]: binary units, as fio reads them).
pub(crate) fn parse_size<T: TryFrom<u64>>(s: &str) -> Result<T, String> {
    let bytes = zring_engine::parse_size(s).map_err(|e| e.to_string())?;
    T::try_from(bytes).map_err(|_| format!("{s:?} is too large a size for this option"))
}

/// Parses a record alignment for clap: a power of two up to 1 MiB (units allowed).
pub(crate) fn parse_align(s: &str) -> Result<u32, String> {
    let max = zring_engine::format::MAX_ALIGN;
    match parse_size::<u32>(s) {
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

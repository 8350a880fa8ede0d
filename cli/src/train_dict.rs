//! `zring train-dict`: train a zstd dictionary from a store's or a `.npy` file's
//! records, for `zring pack --codec zstd-dict --dict FILE`.

use std::io::Read;
use std::path::PathBuf;

use clap::Args;
use zring_engine::{ReadOptions, Store};

use super::output::{self, count};
use super::pack::DEFAULT_DICT_BYTES;
use super::{CliError, CliResult};
use crate::npy::{NpyFile, MAGIC};

/// zstd wants about 100x the dictionary size in samples.
const SAMPLE_FACTOR: usize = 100;

#[derive(Debug, Args)]
pub struct TrainDictArgs {
    /// A store, or a .npy array whose axis 0 indexes records.
    pub input: PathBuf,
    /// Dictionary size in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_DICT_BYTES)]
    pub size: usize,
    /// Where to write the dictionary.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: PathBuf,
    /// Replace an existing output file.
    #[arg(long)]
    pub overwrite: bool,
}

/// Runs `zring train-dict`.
pub fn run(args: &TrainDictArgs) -> CliResult {
    if args.output.exists() && !args.overwrite {
        return Err(CliError::new(format!(
            "{}: already exists (pass --overwrite to replace it)",
            args.output.display()
        )));
    }
    let dict = if is_npy(&args.input)? {
        from_npy(args)?
    } else {
        let store = Store::open(&args.input, ReadOptions::default())?;
        zring_engine::train_dict_from_store(&store, args.size)?
    };
    std::fs::write(&args.output, &dict)
        .map_err(|e| CliError::io(&args.output, "writing the dictionary", e))?;
    let id = dict_id(&dict).map_or("none".into(), |id| id.to_string());
    output::print(&format!(
        "trained a {}-byte dictionary (id {id}) from {}: wrote {}\n",
        count(dict.len() as u64),
        args.input.display(),
        args.output.display()
    ))
    .map_err(|e| CliError::new(format!("writing to stdout: {e}")))
}

fn is_npy(path: &std::path::Path) -> CliResult<bool> {
    let mut head = [0u8; 6];
    // Not File::open: a FIFO would block it forever.
    let mut f = zring_platform::open_regular(path).map_err(|e| CliError::io(path, "opening", e))?;
    let n = f
        .read(&mut head)
        .map_err(|e| CliError::io(path, "reading", e))?;
    Ok(n == head.len() && &head == MAGIC)
}

fn from_npy(args: &TrainDictArgs) -> CliResult<Vec<u8>> {
    let f = NpyFile::open(&args.input, None)?;
    let n = f.shape().first().copied().unwrap_or(0) as usize;
    if n == 0 {
        return Err(CliError::new(format!(
            "{}: no records to train on",
            args.input.display()
        )));
    }
    let width = f.data().len() / n;
    let want = (args.size.saturating_mul(SAMPLE_FACTOR) / width.max(1)).clamp(1, n);
    let samples: Vec<&[u8]> = (0..want)
        .map(|k| {
            let i = (k as u128 * n as u128 / want as u128) as usize;
            &f.data()[i * width..(i + 1) * width]
        })
        .collect();
    Ok(zring_engine::train_dict(&samples, args.size)?)
}

/// The id in a zstd dictionary's header (magic 0xEC30A437, then the id, LE).
fn dict_id(dict: &[u8]) -> Option<u32> {
    match dict.get(..8)? {
        [0x37, 0xA4, 0x30, 0xEC, a, b, c, d] => Some(u32::from_le_bytes([*a, *b, *c, *d])),
        _ => None,
    }
}

//! `zring convert`: the converters live in the Python package, where the readers of
//! every source format are (pyarrow, datasets, h5py, Pillow); this command says how
//! to run them, with the arguments given, instead of reimplementing those readers.

use clap::Args;

use super::{CliError, CliResult};

#[derive(Debug, Args)]
pub struct ConvertArgs {
    /// parquet, arrow, hf, webdataset, imagefolder, hdf5, npz or npy, then SRC... DST
    /// and options, as `python -m zring convert` takes them.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    pub args: Vec<String>,
}

/// Fails with the command that does the conversion.
pub fn run(args: &ConvertArgs) -> CliResult {
    let shown = if args.args.is_empty() {
        "FORMAT SRC... DST".to_string()
    } else {
        args.args.join(" ")
    };
    Err(CliError::new(format!(
        "conversion is done by the Python package (pip install zring; it reads the source formats with pyarrow, datasets, h5py and Pillow): run\n    python -m zring convert {shown}\n(`zring pack` builds a single store from .npy files natively)"
    )))
}

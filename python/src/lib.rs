//! `zring._zring`: the native half of the `zring` Python package (PyO3, abi3).
//!
//! - [`store`]: `_Store`, the base of both store classes (open, close, schema,
//!   verify, iteration), the read helpers, and `zring.open`.
//! - [`dense`], [`ragged`]: `DenseStore` and `RaggedStore`, NumPy indexing over the
//!   engine's gathers.
//! - [`writer`]: `DenseWriter`, `RaggedWriter`: batches in, one published store out.
//! - [`sampler`]: `Sampler` and `Sampler.Mode` over zring_sampler.
//! - [`epochs`]: `_EpochPlan` (epochs of steps, finite or endless) over zring_sampler.
//! - [`loader`]: `_Loader` (wrapped by `zring.Loader`) over zring-loader.
//! - [`dataset`]: `_Dataset`, `_DatasetField` and `_DatasetBuilder` (wrapped by
//!   `zring.open_dataset` / `zring.write_dataset`).
//! - [`dict`]: the `train_dict` function.
//! - [`buffer`]: `EngineBuffer`, the engine-owned aligned memory behind every array a
//!   read returns, recycled through a pool.
//! - [`index`]: NumPy-style record selection (ints, slices, lists, arrays, masks).
//! - [`input`]: accepting NumPy arrays, DLPack CPU tensors and buffers.
//! - [`interrupt`]: long gathers, appends and verifies cut into slices so that
//!   Ctrl-C stops them within a few tens of milliseconds.
//! - [`dtype`]: engine dtypes and NumPy / ml_dtypes dtypes.
//! - [`errors`]: engine errors as the `zring.ZringError` family.
//! - [`bench`]: the Rust-side timing helper of the benchmark script.
//! - `cli_main`: the `zring` command line (the root crate's CLI) for the console script.
//!
//! The GIL is released around every engine call that reads, writes or waits; a
//! long one checks for signals between slices (see [`interrupt`]). The
//! pure-Python half (`python/zring/`) holds the exceptions, `RaggedBatch` and the
//! `Loader` wrapper that closes loaders at interpreter exit.

mod bench;
mod buffer;
mod dataset;
mod decode;
mod dense;
mod dict;
mod dtype;
mod epochs;
mod errors;
mod index;
mod input;
mod interrupt;
mod loader;
mod mixture;
mod open;
mod pack;
mod pin;
mod ragged;
mod sampler;
mod settings;
mod store;
mod testing;
mod writer;

use pyo3::prelude::*;

/// Runs the `zring` command line (the Rust CLI) on `argv` (program name first) and
/// returns its exit status; the `zring` console script calls it. The GIL is
/// released for the whole command.
#[pyfunction]
fn cli_main(py: Python<'_>, argv: Vec<std::ffi::OsString>) -> u8 {
    py.detach(|| zring_cli::run_cli(argv))
}

/// `_zring._share_threads(processes)`: caps this process's worker pool at its share
/// of the cores when `processes` processes share them (at least one thread, the
/// caller counted), where the pool is not built yet and no thread count was
/// configured; returns whether it will take effect (see `Pool::share_global`). The
/// torch adapters call it in each DataLoader worker process.
#[pyfunction]
fn _share_threads(processes: usize) -> bool {
    let cores = zring_platform::available_cores();
    zring_engine::Pool::share_global((cores / processes.max(1)).max(1))
}

#[pymodule]
#[pyo3(name = "_zring")]
fn zring_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<store::StoreBase>()?;
    m.add_class::<dense::DenseStore>()?;
    m.add_class::<ragged::RaggedStore>()?;
    m.add_class::<store::StoreIter>()?;
    m.add_class::<writer::DenseWriter>()?;
    m.add_class::<writer::RaggedWriter>()?;
    m.add_class::<sampler::Sampler>()?;
    m.add_class::<epochs::EpochPlan>()?;
    m.add_class::<loader::Loader>()?;
    m.add_class::<mixture::PyMixture>()?;
    m.add_class::<sampler::PyMode>()?;
    m.add_class::<buffer::EngineBuffer>()?;
    m.add_class::<dataset::PyDataset>()?;
    m.add_class::<dataset::PyDatasetField>()?;
    m.add_class::<dataset::PyDatasetBuilder>()?;
    m.add_class::<pack::PyPackedLoader>()?;
    m.add_function(wrap_pyfunction!(dataset::_collect_garbage, m)?)?;
    m.add_function(wrap_pyfunction!(decode::_decode_images, m)?)?;
    m.add_function(wrap_pyfunction!(open::open_store, m)?)?;
    m.add_function(wrap_pyfunction!(open::unpickle_store, m)?)?;
    m.add_function(wrap_pyfunction!(dict::train_dict, m)?)?;
    m.add_function(wrap_pyfunction!(settings::parse_size, m)?)?;
    m.add_function(wrap_pyfunction!(buffer::trim_buffers, m)?)?;
    m.add_function(wrap_pyfunction!(buffer::_buffer_pool_stats, m)?)?;
    m.add_function(wrap_pyfunction!(bench::_bench_gather, m)?)?;
    m.add_function(wrap_pyfunction!(bench::_bench_loader, m)?)?;
    m.add_function(wrap_pyfunction!(cli_main, m)?)?;
    m.add_function(wrap_pyfunction!(_share_threads, m)?)?;
    m.add_class::<testing::PublishHold>()?;
    m.add_function(wrap_pyfunction!(testing::_hold_publish, m)?)?;
    m.add("ENGINE_VERSION", env!("CARGO_PKG_VERSION"))?;
    // rust-numpy fills once cells on first use (NumPy's C-API table, the descriptor
    // layout of the NumPy version), which are not fork-safe: a child forked while
    // another thread was filling one (it releases the GIL meanwhile) waits forever.
    // Fill them now, at import, by using what reads use.
    {
        use numpy::{PyArrayDescrMethods, PyArrayMethods, PyUntypedArrayMethods};
        let py = m.py();
        let probe = numpy::PyArray1::<u8>::zeros(py, 1, false);
        let _ = probe.as_any().is_instance_of::<numpy::PyUntypedArray>();
        let _ = probe.as_untyped().dtype().itemsize();
        let _ = numpy::dtype::<u64>(py).itemsize();
    }
    Ok(())
}

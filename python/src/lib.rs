//! `zring._zring`: the native half of the `zring` Python package (PyO3, abi3).
//!
//! - [`store`]: `_Store`, the base of both store classes (open, close, schema,
//!   verify, iteration), the read helpers, and `zring.open`.
//! - [`dense`], [`ragged`]: `DenseStore` and `RaggedStore`, NumPy indexing over the
//!   engine's gathers.
//! - [`writer`]: `DenseWriter`, `RaggedWriter`: batches in, one published store out.
//! - [`sampler`]: `Sampler` and `Sampler.Mode` over zring_sampler.
//! - [`loader`]: `_Loader` (wrapped by `zring.Loader`) over zring-loader.
//! - [`dict`]: the `train_dict` function.
//! - [`buffer`]: `EngineBuffer`, the engine-owned aligned memory behind every array a
//!   read returns, recycled through a pool.
//! - [`index`]: NumPy-style record selection (ints, slices, lists, arrays, masks).
//! - [`input`]: accepting NumPy arrays, DLPack CPU tensors and buffers.
//! - [`dtype`]: engine dtypes and NumPy / ml_dtypes dtypes.
//! - [`errors`]: engine errors as the `zring.ZringError` family.
//! - [`bench`]: the Rust-side timing helper of the benchmark script.
//!
//! The GIL is released around every engine call that reads, writes or waits. The
//! pure-Python half (`python/zring/`) holds the exceptions, `RaggedBatch` and the
//! `Loader` wrapper that closes loaders at interpreter exit.

mod bench;
mod buffer;
mod dense;
mod dict;
mod dtype;
mod errors;
mod index;
mod input;
mod loader;
mod ragged;
mod sampler;
mod store;
mod writer;

use pyo3::prelude::*;

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
    m.add_class::<loader::Loader>()?;
    m.add_class::<sampler::PyMode>()?;
    m.add_class::<buffer::EngineBuffer>()?;
    m.add_function(wrap_pyfunction!(store::open_store, m)?)?;
    m.add_function(wrap_pyfunction!(dict::train_dict, m)?)?;
    m.add_function(wrap_pyfunction!(buffer::trim_buffers, m)?)?;
    m.add_function(wrap_pyfunction!(buffer::_buffer_pool_stats, m)?)?;
    m.add_function(wrap_pyfunction!(bench::_bench_gather, m)?)?;
    m.add_function(wrap_pyfunction!(bench::_bench_loader, m)?)?;
    m.add("ENGINE_VERSION", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}

//! `zring.pack`: packed batches of token sequences from a weighted mixture of ragged
//! stores, made ahead on a Rust thread (`zring_loader::PackedLoader`) and handed to
//! Python as NumPy arrays.

use std::sync::{Arc, Mutex, PoisonError};

use numpy::{PyArray1, PyArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use zring_engine::{DType, ReadOptions, Records, Store};
use zring_loader::{
    PackError, PackState, PackStrategy, PackedBatch, PackedLoader, PackedReader, Packer, Token,
};
use zring_sampler::{Mixture, Mode};

use crate::dataset::PyDatasetField;
use crate::errors;
use crate::store::StoreBase;

/// A packer state as Python holds it: `(next, offset, pending, truncated, batches)`.
type StateTuple = (u64, u64, Vec<u64>, u64, u64);

/// The loader, for the token dtypes packing takes.
enum Tokens {
    I32(PackedLoader<i32>),
    U32(PackedLoader<u32>),
    U16(PackedLoader<u16>),
    I64(PackedLoader<i64>),
}

/// What a state must match to be resumed here: the sources, weights and shape.
#[derive(Clone, PartialEq)]
struct Identity {
    lens: Vec<u64>,
    weights: Vec<u64>,
    seq_len: usize,
    rows: usize,
    strategy: String,
    seed: u64,
}

/// Packed batches of a mixture of ragged token stores; see `zring.pack`.
#[pyclass(module = "zring._zring", name = "_PackedLoader")]
pub struct PyPackedLoader {
    /// `None` once closed. A lock, because a pyclass is shared between threads.
    tokens: Mutex<Option<Tokens>>,
    identity: Identity,
}

fn pack_err(py: Python<'_>, e: PackError) -> PyErr {
    match e {
        PackError::Read(e) => errors::engine(py, e),
        PackError::Mixture(e) => errors::sampler(py, e),
        other => errors::INVALID.err(py, other.to_string()),
    }
}

fn start<T: Token>(
    sources: Vec<Arc<dyn Records>>,
    mixture: Mixture,
    packer: Packer,
    pad: T,
    prefetch: usize,
    (rank, world): (usize, usize),
) -> Result<PackedLoader<T>, PackError> {
    let reader = PackedReader::new(sources, mixture, packer, pad)?.shard(rank, world)?;
    PackedLoader::new(reader, prefetch)
}

#[pymethods]
impl PyPackedLoader {
    #[new]
    #[pyo3(signature = (sources, weights, seq_len, rows, strategy, seed, pad_id, prefetch, window, state, rank = 0, world = 1))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        sources: Vec<Bound<'_, PyAny>>,
        weights: Vec<f64>,
        seq_len: usize,
        rows: usize,
        strategy: &str,
        seed: u64,
        pad_id: i64,
        prefetch: usize,
        window: Option<usize>,
        state: Option<StateTuple>,
        rank: usize,
        world: usize,
    ) -> PyResult<Self> {
        // `rows` are the global batch's; this packer delivers rank `rank`'s share.
        let shard = (rank, world);
        let sources = sources
            .iter()
            .map(|s| token_source(py, s))
            .collect::<PyResult<Vec<_>>>()?;
        let lens: Vec<u64> = sources.iter().map(|s| s.len()).collect();
        let dtype = sources.first().map(|s| s.schema().dtype);
        let mixture = Mixture::new(&lens, &weights, Mode::Cyclic, seed)
            .map_err(|e| errors::sampler(py, e))?;
        let kind: PackStrategy = strategy.parse().map_err(|e| pack_err(py, e))?;
        let mut packer = Packer::new(seq_len, rows, kind).map_err(|e| pack_err(py, e))?;
        if let Some(window) = window {
            packer = packer.with_window(window).map_err(|e| pack_err(py, e))?;
        }
        if let Some((next, offset, pending, truncated, batches)) = state {
            let state = PackState {
                next,
                offset,
                pending,
                truncated,
                batches,
            };
            packer = packer.resume(state).map_err(|e| pack_err(py, e))?;
        }
        let prefetch = prefetch.max(1);
        let tokens = match dtype {
            Some(DType::I32) => {
                start(sources, mixture, packer, pad_id as i32, prefetch, shard).map(Tokens::I32)
            }
            Some(DType::U32) => {
                start(sources, mixture, packer, pad_id as u32, prefetch, shard).map(Tokens::U32)
            }
            Some(DType::U16) => {
                start(sources, mixture, packer, pad_id as u16, prefetch, shard).map(Tokens::U16)
            }
            Some(DType::I64) => {
                start(sources, mixture, packer, pad_id, prefetch, shard).map(Tokens::I64)
            }
            other => {
                return Err(errors::INVALID.err(
                    py,
                    format!(
                        "packing takes ragged int32, uint32, uint16 or int64 token stores, \
                         not {other:?}"
                    ),
                ))
            }
        }
        .map_err(|e| pack_err(py, e))?;
        Ok(Self {
            tokens: Mutex::new(Some(tokens)),
            identity: Identity {
                lens,
                weights: weights.iter().map(|w| w.to_bits()).collect(),
                seq_len,
                rows,
                strategy: strategy.to_owned(),
                seed,
            },
        })
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let mut guard = self.tokens.lock().unwrap_or_else(PoisonError::into_inner);
        let tokens = guard
            .as_mut()
            .ok_or_else(|| errors::closed(py, "the packer"))?;
        // The next batch is usually made already; waiting for it releases the GIL.
        match tokens {
            Tokens::I32(l) => batch(py, py.detach(|| l.next())),
            Tokens::U32(l) => batch(py, py.detach(|| l.next())),
            Tokens::U16(l) => batch(py, py.detach(|| l.next())),
            Tokens::I64(l) => batch(py, py.detach(|| l.next())),
        }
    }

    /// `(next, offset, pending, truncated, batches)` after the last batch delivered,
    /// and the identity a resumed packer must have.
    fn _state(&self, py: Python<'_>) -> PyResult<(StateTuple, Vec<u64>)> {
        let guard = self.tokens.lock().unwrap_or_else(PoisonError::into_inner);
        let tokens = guard
            .as_ref()
            .ok_or_else(|| errors::closed(py, "the packer"))?;
        let s = match tokens {
            Tokens::I32(l) => l.state(),
            Tokens::U32(l) => l.state(),
            Tokens::U16(l) => l.state(),
            Tokens::I64(l) => l.state(),
        };
        Ok((
            (s.next, s.offset, s.pending.clone(), s.truncated, s.batches),
            self.identity_key(),
        ))
    }

    /// Stops the thread making batches ahead.
    fn close(&self) {
        let taken = self
            .tokens
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        // Joining the thread happens here, outside the lock.
        drop(taken);
    }
}

/// One source of token sequences: a store's path, an open store, or a dataset's
/// field (`ds.field(name)`).
fn token_source(py: Python<'_>, source: &Bound<'_, PyAny>) -> PyResult<Arc<dyn Records>> {
    if let Ok(field) = source.cast::<PyDatasetField>() {
        return Ok(Arc::new(field.get().field.clone()));
    }
    if let Ok(store) = source.cast::<StoreBase>() {
        return Ok(Arc::new(store.get().handle(py)?));
    }
    let path: String = source.extract().map_err(|_| {
        PyTypeError::new_err(format!(
            "packing reads store paths, stores or dataset fields, got {}",
            source
                .get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_default()
        ))
    })?;
    let store = Store::open(&path, ReadOptions::default()).map_err(|e| errors::engine(py, e))?;
    Ok(Arc::new(store))
}

impl PyPackedLoader {
    /// A fingerprint of what a state belongs to (compared on resume).
    fn identity_key(&self) -> Vec<u64> {
        let i = &self.identity;
        let mut key = vec![i.seq_len as u64, i.rows as u64, i.seed, i.lens.len() as u64];
        key.extend(&i.lens);
        key.extend(&i.weights);
        key.push(u64::from(i.strategy == "first_fit"));
        key
    }
}

fn batch<'py, T: Token + numpy::Element>(
    py: Python<'py>,
    next: Option<Result<PackedBatch<T>, PackError>>,
) -> PyResult<Bound<'py, PyDict>> {
    let b = match next {
        Some(Ok(b)) => b,
        Some(Err(e)) => return Err(pack_err(py, e)),
        // Endless: only after an error was delivered.
        None => return Err(PyValueError::new_err("the packer stopped after an error")),
    };
    let out = PyDict::new(py);
    let shape = [b.rows, b.seq_len];
    out.set_item("tokens", PyArray1::from_vec(py, b.tokens).reshape(shape)?)?;
    out.set_item(
        "position_ids",
        PyArray1::from_vec(py, b.position_ids).reshape(shape)?,
    )?;
    out.set_item("cu_seqlens", PyArray1::from_vec(py, b.cu_seqlens))?;
    out.set_item("max_seqlen", b.max_seqlen)?;
    let positions: Vec<u64> = b.pieces.iter().map(|p| p.position).collect();
    let starts: Vec<u64> = b.pieces.iter().map(|p| p.start).collect();
    out.set_item("positions", PyArray1::from_vec(py, positions))?;
    out.set_item("starts", PyArray1::from_vec(py, starts))?;
    out.set_item("rows", PyArray1::from_vec(py, b.piece_rows))?;
    Ok(out)
}

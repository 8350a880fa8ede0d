//! What a step delivers: per stream, one tensor per shard.

use std::sync::Arc;

use zring_engine::DType;
use zring_platform::PooledBuf;

use crate::recycle::PooledVec;

/// One shard of one stream. Its buffers are on loan from the loader's pools and go
/// back when the tensor is dropped.
#[derive(Debug)]
pub enum Tensor {
    /// Fixed-shape records, back to back: `data` holds `shape[0]` records of
    /// `shape[1..]`, C order, little-endian `dtype` elements, 64-byte aligned.
    Dense {
        data: PooledBuf,
        /// `(records, *item_shape)`; shared by every step of the stream.
        shape: Arc<[usize]>,
        dtype: DType,
    },
    /// Variable-shape records packed back to back: record `k` is elements
    /// `cu_seqlens[k] .. cu_seqlens[k + 1]` of `values`, with dims
    /// `shapes[k * ndim .. (k + 1) * ndim]`.
    Ragged {
        values: PooledBuf,
        cu_seqlens: PooledVec<u64>,
        shapes: PooledVec<u32>,
        ndim: usize,
        dtype: DType,
    },
}

impl Tensor {
    /// The element type.
    pub fn dtype(&self) -> DType {
        match self {
            Tensor::Dense { dtype, .. } | Tensor::Ragged { dtype, .. } => *dtype,
        }
    }

    /// Whether the records are ragged.
    pub fn is_ragged(&self) -> bool {
        matches!(self, Tensor::Ragged { .. })
    }

    /// The payload bytes (`data` or `values`).
    pub fn bytes(&self) -> &[u8] {
        match self {
            Tensor::Dense { data, .. } => data,
            Tensor::Ragged { values, .. } => values,
        }
    }

    /// The number of records.
    pub fn records(&self) -> usize {
        match self {
            Tensor::Dense { shape, .. } => shape.first().copied().unwrap_or(0),
            Tensor::Ragged { cu_seqlens, .. } => cu_seqlens.len().saturating_sub(1),
        }
    }

    /// The bytes of record `k`, or `None` past the end.
    pub fn record(&self, k: usize) -> Option<&[u8]> {
        match self {
            Tensor::Dense { data, shape, .. } => {
                let records = shape.first().copied().unwrap_or(0);
                if k >= records {
                    return None;
                }
                let width = data.len() / records;
                data.get(k * width..(k + 1) * width)
            }
            Tensor::Ragged {
                values,
                cu_seqlens,
                dtype,
                ..
            } => {
                let size = dtype.itemsize();
                let a = usize::try_from(*cu_seqlens.get(k)?).ok()? * size;
                let b = usize::try_from(*cu_seqlens.get(k + 1)?).ok()? * size;
                values.get(a..b)
            }
        }
    }
}

/// The tensors of one step: for every stream (in the order the streams were given),
/// one [`Tensor`] per shard (view position). Shard `k` of every stream holds the
/// records of the same indices, slice `k` of the step's global batch.
pub struct Batch {
    pub(crate) names: Arc<[Arc<str>]>,
    pub(crate) shards: usize,
    /// Stream-major: stream `s`, shard `k` is at `s * shards + k`.
    pub(crate) tensors: PooledVec<Tensor>,
    /// Records whose images were bad and left out, over the shards in order.
    pub(crate) skipped: Vec<u64>,
    /// `(bad record, the record read in its place)`, over the shards in order.
    pub(crate) substituted: Vec<(u64, u64)>,
}

impl Batch {
    /// The number of shards (views per stream).
    pub fn shards(&self) -> usize {
        self.shards
    }

    /// Records left out of this step because their images could not be decoded
    /// ([`OnError::Skip`](crate::OnError::Skip)): its shards are that much shorter.
    pub fn skipped(&self) -> &[u64] {
        &self.skipped
    }

    /// `(bad record, the record read in its place)` of this step
    /// ([`OnError::Substitute`](crate::OnError::Substitute)).
    pub fn substituted(&self) -> &[(u64, u64)] {
        &self.substituted
    }

    /// The stream names, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.names.iter().map(|n| &**n)
    }

    /// The shards of stream `name`.
    pub fn stream(&self, name: &str) -> Option<&[Tensor]> {
        let s = self.names.iter().position(|n| &**n == name)?;
        self.tensors.get(s * self.shards..(s + 1) * self.shards)
    }

    /// Shard `shard` of stream `name`.
    pub fn get(&self, name: &str, shard: usize) -> Option<&Tensor> {
        self.stream(name)?.get(shard)
    }

    /// Every stream with its shards.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &[Tensor])> {
        self.names
            .iter()
            .zip(self.tensors.chunks(self.shards.max(1)))
            .map(|(n, t)| (&**n, t))
    }

    /// Every stream's tensor of shard `shard` (what placement `shard` receives).
    pub fn shard(&self, shard: usize) -> impl Iterator<Item = (&str, &Tensor)> {
        self.iter()
            .filter_map(move |(n, shards)| shards.get(shard).map(|t| (n, t)))
    }

    /// Takes the tensors out, per stream (allocates the outer vectors).
    pub fn into_streams(mut self) -> Vec<(String, Vec<Tensor>)> {
        let shards = self.shards.max(1);
        let mut tensors = std::mem::take(&mut self.tensors.vec).into_iter();
        self.names
            .iter()
            .map(|n| (n.to_string(), tensors.by_ref().take(shards).collect()))
            .collect()
    }
}

impl std::fmt::Debug for Batch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// One delivered step: its number and its data (a [`Batch`], or what the transform
/// made of it).
#[derive(Debug)]
pub struct Step<T = Batch> {
    /// The step number: the sampler's batch `step` was drawn for it.
    pub step: u64,
    pub data: T,
}

impl<T> Step<T> {
    /// The data, without the step number.
    pub fn into_data(self) -> T {
        self.data
    }
}

impl<T> std::ops::Deref for Step<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.data
    }
}

//! Packed batches read from ragged token records: a mixture (or one source)
//! gives the stream, the [`Packer`] plans, one ragged gather per source fetches,
//! [`assemble`] lays out.

use std::sync::Arc;

use zring_engine::{DType, Layout, Never, RaggedLayout, Records};
use zring_sampler::Mixture;

use super::assemble::assemble_with;
use super::{PackError, PackState, PackedBatch, Packer};

type Result<T, E = PackError> = std::result::Result<T, E>;

/// How many stream positions one length lookup reads ahead (one table lookup per
/// source for a whole chunk, instead of one per sequence).
const LENGTH_CHUNK: u64 = 4096;

/// A token type a packed batch can hold: an integer dtype of the store.
pub trait Token: Copy + Send + 'static {
    /// The store dtype these tokens are read from.
    const DTYPE: DType;
    /// The token from its little-endian bytes (`DTYPE.itemsize()` of them).
    fn from_le(bytes: &[u8]) -> Self;
}

macro_rules! token {
    ($t:ty, $dtype:expr) => {
        impl Token for $t {
            const DTYPE: DType = $dtype;
            fn from_le(bytes: &[u8]) -> Self {
                let mut b = [0u8; std::mem::size_of::<$t>()];
                b.copy_from_slice(bytes);
                <$t>::from_le_bytes(b)
            }
        }
    };
}
token!(u8, DType::U8);
token!(u16, DType::U16);
token!(u32, DType::U32);
token!(u64, DType::U64);
token!(i16, DType::I16);
token!(i32, DType::I32);
token!(i64, DType::I64);

/// Packed batches of tokens from one or more ragged, one-dimensional sources.
pub struct PackedReader<T: Token> {
    sources: Vec<Arc<dyn Records>>,
    mixture: Mixture,
    packer: Packer,
    pad: T,
    /// Lengths of stream positions `[lengths_from, lengths_from + lengths.len())`.
    lengths_from: u64,
    lengths: Vec<u64>,
    layout: RaggedLayout,
    /// Each source's gathered bytes, reused from batch to batch.
    bytes: Vec<Vec<u8>>,
}

impl<T: Token> PackedReader<T> {
    /// Packs the stream `mixture` draws from `sources` (one per mixture source, each
    /// ragged with one dimension and dtype `T::DTYPE`), with `packer`, padding
    /// with `pad`.
    pub fn new(
        sources: Vec<Arc<dyn Records>>,
        mixture: Mixture,
        packer: Packer,
        pad: T,
    ) -> Result<Self> {
        if sources.len() != mixture.len() {
            return Err(PackError::SourceCount {
                sources: sources.len(),
                mixture: mixture.len(),
            });
        }
        for (index, source) in sources.iter().enumerate() {
            let schema = source.schema();
            let ragged_1d = matches!(schema.layout, Layout::Ragged { ndim: 1 });
            if !ragged_1d || schema.dtype != T::DTYPE {
                return Err(PackError::NotTokens {
                    index,
                    layout: schema.layout.clone(),
                    dtype: schema.dtype,
                    expected: T::DTYPE,
                });
            }
            if source.len() != mixture.source_len(index) {
                return Err(PackError::SourceLength {
                    index,
                    records: source.len(),
                    mixture: mixture.source_len(index),
                });
            }
        }
        Ok(Self {
            sources,
            mixture,
            packer,
            pad,
            lengths_from: 0,
            lengths: Vec::new(),
            layout: RaggedLayout::default(),
            bytes: Vec::new(),
        })
    }

    /// Where the packer stands (see [`Packer::state`]).
    pub fn state(&self) -> &PackState {
        self.packer.state()
    }

    /// The next packed batch.
    pub fn next_batch(&mut self) -> Result<PackedBatch<T>> {
        let mut packer = self.packer.clone();
        let plan = {
            let this = &mut *self;
            packer.next_plan(|position| this.length(position))?
        };
        // Gather each source's sequences, then put them in the plan's order.
        let positions = plan.positions();
        let picks = positions
            .iter()
            .map(|&p| self.mixture.pick(p))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let itemsize = T::DTYPE.itemsize();
        // Each sequence's source and byte range in that source's gather.
        let mut seq: Vec<(usize, usize, usize)> = vec![(0, 0, 0); picks.len()];
        self.bytes.resize_with(self.sources.len(), Vec::new);
        for (s, source) in self.sources.iter().enumerate() {
            let (slots, records): (Vec<usize>, Vec<u64>) = picks
                .iter()
                .enumerate()
                .filter(|(_, pick)| pick.source == s)
                .map(|(k, pick)| (k, pick.record))
                .unzip();
            if records.is_empty() {
                continue;
            }
            source.ragged_layout_into(&records, &mut self.layout)?;
            let bytes = &mut self.bytes[s];
            bytes.resize(self.layout.values_bytes, 0);
            source.gather_ragged_until(&records, &self.layout, bytes, &Never)?;
            for (j, &k) in slots.iter().enumerate() {
                let (a, b) = (self.layout.cu_seqlens[j], self.layout.cu_seqlens[j + 1]);
                seq[k] = (s, a as usize * itemsize, b as usize * itemsize);
            }
        }
        // One pass: each piece's bytes converted straight into the batch.
        let bytes = &self.bytes;
        let batch = assemble_with(&plan, self.pad, |k, piece, tokens| {
            let (s, a, _) = seq[k];
            let from = a + piece.start as usize * itemsize;
            let to = from + piece.len as usize * itemsize;
            tokens.extend(bytes[s][from..to].chunks_exact(itemsize).map(T::from_le));
            Ok(())
        })?;
        self.packer = packer;
        Ok(batch)
    }

    /// The length of the sequence at stream `position`, read a chunk at a time.
    fn length(&mut self, position: u64) -> Result<u64> {
        let end = self.lengths_from + self.lengths.len() as u64;
        if position < self.lengths_from || position >= end {
            self.load_lengths(position)?;
        }
        Ok(self.lengths[(position - self.lengths_from) as usize])
    }

    fn load_lengths(&mut self, from: u64) -> Result<()> {
        let mut picks = Vec::with_capacity(LENGTH_CHUNK as usize);
        for p in from..from.saturating_add(LENGTH_CHUNK) {
            picks.push(self.mixture.pick(p)?);
        }
        self.lengths = vec![0; picks.len()];
        for (s, source) in self.sources.iter().enumerate() {
            let (slots, records): (Vec<usize>, Vec<u64>) = picks
                .iter()
                .enumerate()
                .filter(|(_, pick)| pick.source == s)
                .map(|(k, pick)| (k, pick.record))
                .unzip();
            if records.is_empty() {
                continue;
            }
            source.ragged_layout_into(&records, &mut self.layout)?;
            for (j, &k) in slots.iter().enumerate() {
                self.lengths[k] = self.layout.cu_seqlens[j + 1] - self.layout.cu_seqlens[j];
            }
        }
        self.lengths_from = from;
        Ok(())
    }
}

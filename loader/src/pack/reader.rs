//! Packed batches read from ragged token records: a mixture (or one source)
//! gives the stream, the [`Packer`] plans, one ragged gather through a `Concat` of
//! the sources fetches, [`assemble`] lays out.

use std::sync::Arc;

use zring_engine::{Concat, DType, Layout, Never, RaggedLayout, Records};
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
    /// The sources read as one: a mixture's pick of source `s`, record `r` is
    /// record `start(s) + r` of the concatenation, which splits each gather by
    /// source itself.
    sources: Concat,
    mixture: Mixture,
    packer: Packer,
    pad: T,
    /// Lengths of stream positions `[lengths_from, lengths_from + lengths.len())`.
    lengths_from: u64,
    lengths: Vec<u64>,
    layout: RaggedLayout,
    /// The gathered bytes, reused from batch to batch.
    bytes: Vec<u8>,
    /// The rows of each planned batch this reader reads and delivers (all of them
    /// unless sharded).
    rows: std::ops::Range<usize>,
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
        let rows = 0..packer.rows();
        Ok(Self {
            sources: Concat::new(sources)?,
            mixture,
            rows,
            packer,
            pad,
            lengths_from: 0,
            lengths: Vec::new(),
            layout: RaggedLayout::default(),
            bytes: Vec::new(),
        })
    }

    /// The same packing, of which this reader delivers rank `rank`'s share of
    /// `world`: rows `[rank * rows / world, (rank + 1) * rows / world)` of every
    /// batch. Every rank plans the whole batch from the sequences' lengths (cheap:
    /// no tokens are read) and reads only its own rows' tokens, so the packer's
    /// state is the same on every rank, and a state saved with one world size
    /// resumes with another (the global batch is the same rows).
    pub fn shard(mut self, rank: usize, world: usize) -> Result<Self> {
        let rows = self.packer.rows();
        if world == 0 || rank >= world || rows % world != 0 {
            return Err(PackError::Shard { rank, world, rows });
        }
        let share = rows / world;
        self.rows = rank * share..(rank + 1) * share;
        Ok(self)
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
        let plan = if self.rows.len() == plan.rows() {
            plan
        } else {
            plan.select_rows(self.rows.clone())
        };
        // One ragged gather of the plan's sequences, in the plan's order.
        let indices = self.indices(plan.positions())?;
        self.sources
            .ragged_layout_into(&indices, &mut self.layout)?;
        self.bytes.resize(self.layout.values_bytes, 0);
        self.sources
            .gather_ragged_until(&indices, &self.layout, &mut self.bytes, &Never)?;
        // One pass: each piece's bytes converted straight into the batch.
        let itemsize = T::DTYPE.itemsize();
        let (bytes, cu) = (&self.bytes, &self.layout.cu_seqlens);
        let batch = assemble_with(&plan, self.pad, |k, piece, tokens| {
            let from = (cu[k] + piece.start) as usize * itemsize;
            let to = from + piece.len as usize * itemsize;
            tokens.extend(bytes[from..to].chunks_exact(itemsize).map(T::from_le));
            Ok(())
        })?;
        self.packer = packer;
        Ok(batch)
    }

    /// The concatenation's index of each stream position.
    /// (The mixture numbers the sources one after another, as the `Concat` of them
    /// does: `new` checked that each source is as long as the mixture's.)
    fn indices(&self, positions: impl IntoIterator<Item = u64>) -> Result<Vec<u64>> {
        let positions: Vec<u64> = positions.into_iter().collect();
        let mut out = vec![0u64; positions.len()];
        self.mixture.fill_indices(&positions, &mut out)?;
        Ok(out)
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
        let indices = self.indices(from..from.saturating_add(LENGTH_CHUNK))?;
        self.sources
            .ragged_layout_into(&indices, &mut self.layout)?;
        self.lengths = self
            .layout
            .cu_seqlens
            .windows(2)
            .map(|w| w[1] - w[0])
            .collect();
        self.lengths_from = from;
        Ok(())
    }
}

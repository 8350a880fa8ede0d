//! Several record sources read as one: record `i` of the concatenation is record
//! `i - start[p]` of part `p`. A mixture of datasets or stores is read through it
//! (the sampler's `Mixture` gives indices into the concatenation), so the loader,
//! the binding and every gather take a mixture as they take a store.

use std::sync::Arc;

use crate::error::{ArgumentError, Error, Result};
use crate::read::{Interrupt, RaggedLayout};
use crate::records::Records;
use crate::schema::Schema;
use crate::store::Store;

/// Records of several parts with one dtype and layout, one after another.
#[derive(Debug, Clone)]
pub struct Concat {
    parts: Vec<Arc<dyn Records>>,
    /// `starts[p]` is part `p`'s first index; one more entry holds the total.
    starts: Vec<u64>,
}

impl Concat {
    /// The parts in order. They must have the same dtype and layout (their
    /// attributes may differ; the first part's schema is the concatenation's).
    pub fn new(parts: Vec<Arc<dyn Records>>) -> Result<Self> {
        let Some(first) = parts.first() else {
            return Err(Error::InvalidArgument(ArgumentError::NoParts));
        };
        let (layout, dtype) = (&first.schema().layout, first.schema().dtype);
        let mut starts = Vec::with_capacity(parts.len() + 1);
        let mut total = 0u64;
        for (part, records) in parts.iter().enumerate() {
            let schema = records.schema();
            if schema.layout != *layout || schema.dtype != dtype {
                return Err(Error::InvalidArgument(ArgumentError::PartSchema {
                    part,
                    found: format!("{:?} {:?}", schema.dtype, schema.layout),
                    expected: format!("{dtype:?} {layout:?}"),
                }));
            }
            starts.push(total);
            total = total
                .checked_add(records.len())
                .ok_or(Error::InvalidArgument(ArgumentError::BatchTooLarge))?;
        }
        starts.push(total);
        Ok(Self { parts, starts })
    }

    /// The parts, in order.
    pub fn parts(&self) -> &[Arc<dyn Records>] {
        &self.parts
    }

    /// The index of part `p`'s first record in the concatenation.
    pub fn start(&self, part: usize) -> Option<u64> {
        self.starts.get(part).copied()
    }

    /// For each index, its part and its index in the part; groups per part hold
    /// `(slot in the batch, index in the part)`.
    fn split(&self, indices: &[u64]) -> Result<Vec<Vec<(usize, u64)>>> {
        let total = self.starts[self.parts.len()];
        let mut groups = vec![Vec::new(); self.parts.len()];
        for (slot, &index) in indices.iter().enumerate() {
            if index >= total {
                return Err(Error::IndexOutOfRange {
                    path: self.sample_path(),
                    index,
                    len: total,
                });
            }
            // The last start <= index (empty parts share a start and are passed).
            let part = self.starts[1..].partition_point(|&s| s <= index);
            groups[part].push((slot, index - self.starts[part]));
        }
        Ok(groups)
    }

    /// A path to name in errors: the first part's store's.
    fn sample_path(&self) -> std::path::PathBuf {
        self.parts
            .iter()
            .find_map(|p| p.sample_store())
            .map(|s| s.path().to_path_buf())
            .unwrap_or_default()
    }
}

impl Records for Concat {
    fn len(&self) -> u64 {
        self.starts[self.parts.len()]
    }

    fn schema(&self) -> &Schema {
        self.parts[0].schema()
    }

    fn gather_until(&self, indices: &[u64], dest: &mut [u8], stop: &dyn Interrupt) -> Result<()> {
        let groups = self.split(indices)?;
        // One part: straight into the destination.
        if let Some(p) = groups.iter().position(|g| g.len() == indices.len()) {
            let local: Vec<u64> = groups[p].iter().map(|&(_, i)| i).collect();
            return self.parts[p].gather_until(&local, dest, stop);
        }
        let width = dest.len().checked_div(indices.len()).unwrap_or(0);
        let mut scratch = Vec::new();
        for (part, group) in self.parts.iter().zip(&groups) {
            if group.is_empty() {
                continue;
            }
            let local: Vec<u64> = group.iter().map(|&(_, i)| i).collect();
            scratch.resize(local.len() * width, 0);
            part.gather_until(&local, &mut scratch, stop)?;
            for (row, &(slot, _)) in scratch.chunks_exact(width.max(1)).zip(group) {
                dest[slot * width..(slot + 1) * width].copy_from_slice(row);
            }
        }
        Ok(())
    }

    fn ragged_layout_into(&self, indices: &[u64], layout: &mut RaggedLayout) -> Result<()> {
        let groups = self.split(indices)?;
        let ndim = self.schema().ndim();
        // Each record's element count and dims, by slot, from the parts' layouts.
        let mut elems = vec![0u64; indices.len()];
        let mut dims = vec![0u32; indices.len() * ndim];
        let mut part_layout = RaggedLayout::default();
        for (part, group) in self.parts.iter().zip(&groups) {
            if group.is_empty() {
                continue;
            }
            let local: Vec<u64> = group.iter().map(|&(_, i)| i).collect();
            part.ragged_layout_into(&local, &mut part_layout)?;
            for (k, &(slot, _)) in group.iter().enumerate() {
                elems[slot] = part_layout.cu_seqlens[k + 1] - part_layout.cu_seqlens[k];
                dims[slot * ndim..(slot + 1) * ndim]
                    .copy_from_slice(&part_layout.shapes[k * ndim..(k + 1) * ndim]);
            }
        }
        let itemsize = self.schema().dtype.itemsize() as u64;
        layout.cu_seqlens.clear();
        layout.cu_seqlens.push(0);
        let mut total = 0u64;
        for &n in &elems {
            total = total
                .checked_add(n)
                .ok_or(Error::InvalidArgument(ArgumentError::BatchTooLarge))?;
            layout.cu_seqlens.push(total);
        }
        layout.shapes.clear();
        layout.shapes.extend_from_slice(&dims);
        layout.values_bytes = total
            .checked_mul(itemsize)
            .and_then(|b| usize::try_from(b).ok())
            .ok_or(Error::InvalidArgument(ArgumentError::BatchTooLarge))?;
        Ok(())
    }

    fn gather_ragged_until(
        &self,
        indices: &[u64],
        layout: &RaggedLayout,
        values: &mut [u8],
        stop: &dyn Interrupt,
    ) -> Result<()> {
        let groups = self.split(indices)?;
        if let Some(p) = groups.iter().position(|g| g.len() == indices.len()) {
            let local: Vec<u64> = groups[p].iter().map(|&(_, i)| i).collect();
            return self.parts[p].gather_ragged_until(&local, layout, values, stop);
        }
        if layout.cu_seqlens.len() != indices.len() + 1 || values.len() != layout.values_bytes {
            return Err(Error::InvalidArgument(
                ArgumentError::RaggedLayoutMismatch {
                    field: None,
                    layout_records: layout.cu_seqlens.len().saturating_sub(1),
                    layout_bytes: Some(layout.values_bytes),
                    indices: indices.len(),
                    values: values.len(),
                },
            ));
        }
        let itemsize = self.schema().dtype.itemsize();
        let mut part_layout = RaggedLayout::default();
        let mut scratch = Vec::new();
        for (part, group) in self.parts.iter().zip(&groups) {
            if group.is_empty() {
                continue;
            }
            let local: Vec<u64> = group.iter().map(|&(_, i)| i).collect();
            part.ragged_layout_into(&local, &mut part_layout)?;
            scratch.resize(part_layout.values_bytes, 0);
            part.gather_ragged_until(&local, &part_layout, &mut scratch, stop)?;
            for (k, &(slot, _)) in group.iter().enumerate() {
                let (a, b) = (part_layout.cu_seqlens[k], part_layout.cu_seqlens[k + 1]);
                let (c, d) = (layout.cu_seqlens[slot], layout.cu_seqlens[slot + 1]);
                if d - c != b - a {
                    return Err(Error::InvalidArgument(ArgumentError::RaggedLayoutInvalid));
                }
                values[c as usize * itemsize..d as usize * itemsize]
                    .copy_from_slice(&scratch[a as usize * itemsize..b as usize * itemsize]);
            }
        }
        Ok(())
    }

    fn as_store(&self) -> Option<&Store> {
        match self.parts.as_slice() {
            [one] => one.as_store(),
            _ => None,
        }
    }

    fn sample_store(&self) -> Option<&Store> {
        self.parts.iter().find_map(|p| p.sample_store())
    }

    fn describe(&self) -> String {
        // Record numbers in messages are the concatenation's, so name it as a whole.
        let first = self.parts[0].describe();
        format!(
            "{} sources concatenated (the first: {first})",
            self.parts.len()
        )
    }
}

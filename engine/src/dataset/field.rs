//! One field of a dataset, readable with a store's gather methods, so whatever reads
//! a store one stream at a time (the loader) reads a dataset's field the same way.

use super::Dataset;
use crate::error::Result;
use crate::read::{Interrupt, Never, RaggedLayout};
use crate::schema::Schema;

use super::gather::FieldDest;

/// A dataset and one of its fields.
#[derive(Clone, Debug)]
pub struct DatasetField {
    dataset: Dataset,
    field: usize,
}

impl DatasetField {
    pub(super) fn new(dataset: Dataset, field: usize) -> Result<Self> {
        dataset.field_at(field)?;
        Ok(Self { dataset, field })
    }

    /// The dataset this field belongs to.
    pub fn dataset(&self) -> &Dataset {
        &self.dataset
    }

    /// The field's position in [`Dataset::fields`].
    pub fn index(&self) -> usize {
        self.field
    }

    /// The field's name.
    pub fn name(&self) -> &str {
        &self.dataset.fields()[self.field].name
    }

    /// The field's schema.
    pub fn schema(&self) -> &Schema {
        &self.dataset.fields()[self.field].schema
    }

    /// Records in the dataset.
    pub fn len(&self) -> u64 {
        self.dataset.len()
    }

    /// Whether the dataset holds no records.
    pub fn is_empty(&self) -> bool {
        self.dataset.is_empty()
    }

    /// As [`crate::Store::gather`], for a dense field.
    pub fn gather(&self, indices: &[u64], dest: &mut [u8]) -> Result<()> {
        self.gather_until(indices, dest, &Never)
    }

    /// As [`crate::Store::gather_until`], for a dense field.
    pub fn gather_until(
        &self,
        indices: &[u64],
        dest: &mut [u8],
        stop: &dyn Interrupt,
    ) -> Result<()> {
        self.dataset
            .gather_until(indices, &[self.field], &mut [FieldDest::Dense(dest)], stop)
    }

    /// As [`crate::Store::ragged_layout_into`], for a ragged field.
    pub fn ragged_layout_into(&self, indices: &[u64], layout: &mut RaggedLayout) -> Result<()> {
        self.dataset.ragged_layout_into(self.field, indices, layout)
    }

    /// As [`crate::Store::gather_ragged_into`], for a ragged field.
    pub fn gather_ragged_into(
        &self,
        indices: &[u64],
        layout: &RaggedLayout,
        values: &mut [u8],
    ) -> Result<()> {
        self.gather_ragged_until(indices, layout, values, &Never)
    }

    /// As [`crate::Store::gather_ragged_until`], for a ragged field.
    pub fn gather_ragged_until(
        &self,
        indices: &[u64],
        layout: &RaggedLayout,
        values: &mut [u8],
        stop: &dyn Interrupt,
    ) -> Result<()> {
        self.dataset.gather_until(
            indices,
            &[self.field],
            &mut [FieldDest::Ragged { layout, values }],
            stop,
        )
    }
}

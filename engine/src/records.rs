//! Something a batch is gathered from: a store, or one field of a dataset (whose
//! records live in one store per shard), local or remote. Whatever reads records one
//! stream at a time (the loader, the Python binding) holds a `dyn Records` and never
//! asks which it is; both gather through the one batch executor (`read::exec`).

use std::fmt;

use crate::dataset::DatasetField;
use crate::error::Result;
use crate::read::{Interrupt, RaggedLayout};
use crate::schema::Schema;
use crate::store::Store;

/// Records of one schema, gathered into the caller's memory.
pub trait Records: Send + Sync + fmt::Debug {
    /// How many records there are.
    fn len(&self) -> u64;

    /// Whether there are no records.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The records' dtype and layout.
    fn schema(&self) -> &Schema;

    /// Fills `dest` with the dense records `indices` in order (duplicates allowed),
    /// `item_bytes` each; stops with [`crate::Error::Interrupted`] once `stop` says so.
    fn gather_until(&self, indices: &[u64], dest: &mut [u8], stop: &dyn Interrupt) -> Result<()>;

    /// The output layout of a ragged gather of `indices`, into `layout` (its
    /// vectors' capacity reused), from the tables alone.
    fn ragged_layout_into(&self, indices: &[u64], layout: &mut RaggedLayout) -> Result<()>;

    /// Fills `values` (exactly `layout.values_bytes`) with the ragged records
    /// `indices`, laid out by [`Records::ragged_layout_into`]; stops with
    /// [`crate::Error::Interrupted`] once `stop` says so.
    fn gather_ragged_until(
        &self,
        indices: &[u64],
        layout: &RaggedLayout,
        values: &mut [u8],
        stop: &dyn Interrupt,
    ) -> Result<()>;

    /// These records as one store, when they are one (a dataset's field is not):
    /// its read plans then count the reads of a batch exactly.
    fn as_store(&self) -> Option<&Store>;

    /// A store holding some of these records (a dataset field's first shard's), whose
    /// device, backend and codec describe how they are read; `None` when there are
    /// none.
    fn sample_store(&self) -> Option<&Store>;

    /// What these records are, for messages about one of them: `store PATH`, `field
    /// "image" of dataset PATH`. Read-path stages above the engine (image decoding)
    /// name the records they fail on with it.
    fn describe(&self) -> String {
        match self.sample_store() {
            Some(store) => format!("records of store {}", store.path().display()),
            None => "records".to_string(),
        }
    }
}

impl Records for Store {
    fn len(&self) -> u64 {
        Store::len(self)
    }

    fn schema(&self) -> &Schema {
        Store::schema(self)
    }

    fn gather_until(&self, indices: &[u64], dest: &mut [u8], stop: &dyn Interrupt) -> Result<()> {
        Store::gather_until(self, indices, dest, stop)
    }

    fn ragged_layout_into(&self, indices: &[u64], layout: &mut RaggedLayout) -> Result<()> {
        Store::ragged_layout_into(self, indices, layout)
    }

    fn gather_ragged_until(
        &self,
        indices: &[u64],
        layout: &RaggedLayout,
        values: &mut [u8],
        stop: &dyn Interrupt,
    ) -> Result<()> {
        Store::gather_ragged_until(self, indices, layout, values, stop)
    }

    fn as_store(&self) -> Option<&Store> {
        Some(self)
    }

    fn sample_store(&self) -> Option<&Store> {
        Some(self)
    }

    fn describe(&self) -> String {
        format!("store {}", self.path().display())
    }
}

impl Records for DatasetField {
    fn len(&self) -> u64 {
        DatasetField::len(self)
    }

    fn schema(&self) -> &Schema {
        DatasetField::schema(self)
    }

    fn gather_until(&self, indices: &[u64], dest: &mut [u8], stop: &dyn Interrupt) -> Result<()> {
        DatasetField::gather_until(self, indices, dest, stop)
    }

    fn ragged_layout_into(&self, indices: &[u64], layout: &mut RaggedLayout) -> Result<()> {
        DatasetField::ragged_layout_into(self, indices, layout)
    }

    fn gather_ragged_until(
        &self,
        indices: &[u64],
        layout: &RaggedLayout,
        values: &mut [u8],
        stop: &dyn Interrupt,
    ) -> Result<()> {
        DatasetField::gather_ragged_until(self, indices, layout, values, stop)
    }

    fn as_store(&self) -> Option<&Store> {
        None
    }

    fn sample_store(&self) -> Option<&Store> {
        self.dataset().store(0, self.index())
    }

    fn describe(&self) -> String {
        format!(
            "field {:?} of dataset {}",
            self.name(),
            self.dataset().path().display()
        )
    }
}

//! The docs/workloads.md workloads W1-W3: zring-workloads is their one generator
//! (`zring bench` uses it too); re-exported here under the names the benches use,
//! with [`StoreSchema`] for the schema of their stores.

use zring_engine::{DType, Schema};
pub use zring_workloads::{
    w1, w2, w3, Dense, Ragged, VOCAB, W1_RECORD_BYTES, W1_SHAPE, W2_RECORD_BYTES, W2_TOKENS,
    W3_MAX_LEN, W3_MIN_LEN,
};

/// The store schema of a workload's records (zring-workloads depends on no zring
/// crate, so the engine's types are added here).
pub trait StoreSchema {
    fn schema(&self) -> Schema;
}

impl StoreSchema for Dense {
    fn schema(&self) -> Schema {
        let dtype: DType = self
            .dtype
            .parse()
            .expect("a workload's dtype is an engine dtype");
        Schema::dense(dtype, &self.item_shape)
    }
}

impl StoreSchema for Ragged {
    /// Ragged 1-D int32.
    fn schema(&self) -> Schema {
        Schema::ragged(DType::I32, 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_workloads_have_their_schemas() {
        assert_eq!(w1(1, 0).schema(), Schema::dense(DType::U8, &W1_SHAPE));
        let w2 = w2(1, 0).schema();
        assert_eq!(w2, Schema::dense(DType::I32, &[W2_TOKENS as u64]));
        assert_eq!(w2.item_bytes(), Some(W2_RECORD_BYTES as u64));
        assert!(w3(1, 0).schema().is_ragged());
    }
}

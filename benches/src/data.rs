//! The docs/workloads.md workloads W1-W3: [`zring::synth`] is their one generator
//! (`zring bench` uses it too); re-exported here under the names the benches use.

pub use zring::synth::{
    w1, w2, w3, Dense, Ragged, VOCAB, W1_RECORD_BYTES, W1_SHAPE, W2_RECORD_BYTES, W2_TOKENS,
    W3_MAX_LEN, W3_MIN_LEN,
};

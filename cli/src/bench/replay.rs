//! `zring bench --replay STORE`: a synthetic store with another store's record count
//! and record sizes (and, by default, codec), filled with generated data. It measures
//! how the engine does on that size distribution without reading, copying or sharing
//! the store's contents, and the gathers can still be checked against the generator.
//! (Reading a store itself is `--store`.)

use std::path::Path;
use std::sync::Arc;

use zring_engine::{Codec, ReadOptions, Store};

use super::synth::SynthSpec;
use crate::{CliError, CliResult};

/// The generator spec replaying `source`'s sizes, and `source`'s codec.
pub fn spec(source: &Path, seed: u64) -> CliResult<(SynthSpec, Codec)> {
    let store = Store::open(source, ReadOptions::default())?;
    if store.is_empty() {
        return Err(CliError::new(format!(
            "{}: the store to replay has no records",
            source.display()
        )));
    }
    let count = store.len();
    let spec = match store.item_bytes() {
        // Dense: every record has the item size.
        Some(item) => SynthSpec {
            count,
            record_bytes: usize::try_from(item)
                .map_err(|_| CliError::new("the replayed store's records are too large"))?,
            ragged: false,
            seed,
            lengths: None,
        },
        None => {
            let mut lengths = Vec::with_capacity(count as usize);
            for i in 0..count {
                lengths.push(store.entry(i)?.logical_len);
            }
            let total: u64 = lengths.iter().map(|&l| u64::from(l)).sum();
            SynthSpec {
                count,
                record_bytes: (total / count).max(1) as usize,
                ragged: true,
                seed,
                lengths: Some(Arc::from(lengths)),
            }
        }
    };
    Ok((spec, store.codec()))
}

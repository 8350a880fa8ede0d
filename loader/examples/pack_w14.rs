//! W14: packed tokens per second against the plain ragged gather of the same
//! store, measured in the same run (alternating rounds, medians).
//!
//! ```text
//! cargo run --release -p zring-loader --example pack_w14 -- [records] [seq_len] [rows]
//! ```
//!
//! Writes a ragged int32 store of W3 sequences (raw, checksums on) to a temporary
//! directory, reads it once to warm the page cache, then alternates: random
//! ragged gathers of as many sequences as one packed batch holds on average, and
//! packed batches (concat and first fit) over the same store in a cyclic order.
//! Prints tokens/s of each, the ratios to the gather, and first fit's efficiency.

use std::sync::Arc;
use std::time::Instant;

use zring_engine::{DType, ReadOptions, Records, Schema, Store, WriteOptions, Writer};
use zring_loader::{PackStrategy, PackedReader, Packer};
use zring_sampler::{Mixture, Mode, Sampler};

const ROUNDS: usize = 5;
const SECONDS_PER_ROUND: f64 = 1.0;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<usize>());
    let records = args.next().transpose()?.unwrap_or(200_000);
    let seq_len = args.next().transpose()?.unwrap_or(2048);
    let rows = args.next().transpose()?.unwrap_or(8);

    let dir = tempfile::tempdir()?;
    let path = dir.path().join("w3.zr");
    let w3 = zring_workloads::w3(records, 1);
    let mut w = Writer::create(
        &path,
        Schema::ragged(DType::I32, 1),
        WriteOptions::default(),
    )?;
    w.append_ragged(&w3.values, &w3.cu_seqlens, &w3.shapes())?;
    w.close()?;
    let mean = (w3.values.len() / 4) as f64 / records as f64;
    drop(w3);
    let store = Store::open(&path, ReadOptions::default())?;
    let all: Vec<u64> = (0..records as u64).collect();
    store.gather_ragged(&all)?; // warm the page cache
    let per_batch = ((rows * seq_len) as f64 / mean).round().max(1.0) as usize;
    println!(
        "W14: {records} W3 records (mean {mean:.0} tokens), rows {rows} x seq_len {seq_len}; \
         gather baseline: random batches of {per_batch} sequences"
    );

    let mut gather = Vec::new();
    let mut concat = Vec::new();
    let mut first_fit = Vec::new();
    let mut efficiency = 0.0;
    let sampler = Sampler::new(records as u64, per_batch, Mode::Cyclic, 3)?;
    let mut step = 0u64;
    let mixture = Mixture::new(&[records as u64], &[1.0], Mode::Cyclic, 3)?;
    let mut readers = [PackStrategy::Concat, PackStrategy::FirstFit].map(|strategy| {
        let sources: Vec<Arc<dyn Records>> = vec![Arc::new(store.clone())];
        Packer::new(seq_len, rows, strategy)
            .map_err(Box::<dyn std::error::Error>::from)
            .and_then(|p| Ok(PackedReader::new(sources, mixture.clone(), p, 0i32)?))
    });
    for _ in 0..ROUNDS {
        gather.push(rate(|| {
            let batch = store.gather_ragged(&sampler.batch(step))?;
            step += 1;
            Ok(batch.values.len() as u64 / 4)
        })?);
        for (k, reader) in readers.iter_mut().enumerate() {
            let reader = reader.as_mut().map_err(|e| e.to_string())?;
            let (mut real, mut all_tokens) = (0u64, 0u64);
            let r = rate(|| {
                let batch = reader.next_batch()?;
                let tokens: u64 = batch.pieces.iter().map(|p| p.len).sum();
                real += tokens;
                all_tokens += batch.tokens.len() as u64;
                Ok(tokens)
            })?;
            if k == 0 {
                concat.push(r);
            } else {
                first_fit.push(r);
                efficiency = real as f64 / all_tokens as f64;
            }
        }
    }
    let (g, c, f) = (
        median(&mut gather),
        median(&mut concat),
        median(&mut first_fit),
    );
    println!("ragged gather:     {:>8.1} M tokens/s", g / 1e6);
    println!(
        "packed, concat:    {:>8.1} M tokens/s = {:.2}x the gather",
        c / 1e6,
        c / g
    );
    println!(
        "packed, first fit: {:>8.1} M tokens/s = {:.2}x the gather",
        f / 1e6,
        f / g
    );
    println!("first fit efficiency (non-pad / all tokens): {efficiency:.4}");
    Ok(())
}

/// Tokens per second of `work` (which returns the tokens it delivered) over one
/// round.
fn rate(
    mut work: impl FnMut() -> Result<u64, Box<dyn std::error::Error>>,
) -> Result<f64, Box<dyn std::error::Error>> {
    let start = Instant::now();
    let mut tokens = 0;
    while start.elapsed().as_secs_f64() < SECONDS_PER_ROUND {
        tokens += work()?;
    }
    Ok(tokens as f64 / start.elapsed().as_secs_f64())
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

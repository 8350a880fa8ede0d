//! Builds a small synthetic dataset (images, labels and ragged token lists, three
//! aligned stores) in a temporary directory, runs the loader over it and prints
//! batches/s and the process's peak resident memory.
//!
//! ```text
//! cargo run --release -p zring-loader --example loader -- [records] [steps] [workers] [prefetch]
//! ```
//! Defaults: 2,000 records, 500 steps, 2 workers, 4 prefetch; global batch 64 split
//! over 2 placements.

use std::error::Error;
use std::time::Instant;

use zring_engine::{Codec, DType, ReadOptions, Schema, Store, WriteOptions, Writer};
use zring_loader::{Loader, LoaderOptions, Tensor};
use zring_sampler::{Mode, Sampler};

const IMAGE: [u64; 3] = [3, 64, 64];

fn arg(k: usize, default: u64) -> Result<u64, Box<dyn Error>> {
    match std::env::args().nth(k) {
        Some(a) => Ok(a.parse()?),
        None => Ok(default),
    }
}

/// A cheap deterministic byte stream (xorshift), so the data looks a little random.
fn noise(seed: u64) -> impl FnMut() -> u8 {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x as u8
    }
}

fn build(dir: &std::path::Path, n: u64) -> Result<[Store; 3], Box<dyn Error>> {
    let raw = || WriteOptions::with_codec(Codec::Raw);
    let image_bytes: usize = IMAGE.iter().product::<u64>() as usize;

    let images = dir.join("images.zr");
    let mut w = Writer::create(&images, Schema::dense(DType::U8, &IMAGE), raw())?;
    for chunk in (0..n).collect::<Vec<_>>().chunks(256) {
        let mut bytes = Vec::with_capacity(chunk.len() * image_bytes);
        for &i in chunk {
            let mut rnd = noise(i);
            // A smooth gradient plus a little noise, like a photograph.
            bytes.extend(
                (0..image_bytes).map(|p| ((p / 64 + p % 64) as u8 / 2).wrapping_add(rnd() % 8)),
            );
        }
        w.append_dense(&bytes)?;
    }
    w.close()?;

    let labels = dir.join("labels.zr");
    let mut w = Writer::create(&labels, Schema::dense(DType::I64, &[]), raw())?;
    w.append_dense(
        &(0..n as i64)
            .flat_map(i64::to_le_bytes)
            .collect::<Vec<u8>>(),
    )?;
    w.close()?;

    let tokens = dir.join("tokens.zr");
    let mut w = Writer::create(
        &tokens,
        Schema::ragged(DType::I32, 1),
        WriteOptions::default(),
    )?;
    let (mut values, mut cu, mut shapes) = (Vec::new(), vec![0u64], Vec::new());
    for i in 0..n {
        let len = 16 + (i * 7919) % 241;
        let mut rnd = noise(i ^ 0xABCD);
        for _ in 0..len {
            values.extend_from_slice(&(i32::from(rnd()) * 97).to_le_bytes());
        }
        cu.push(cu[cu.len() - 1] + len);
        shapes.push(len as u32);
    }
    w.append_ragged(&values, &cu, &shapes)?;
    w.close()?;

    let open = |p| Store::open(p, ReadOptions::default());
    Ok([open(&images)?, open(&labels)?, open(&tokens)?])
}

fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn main() -> Result<(), Box<dyn Error>> {
    let records = arg(1, 2000)?;
    let steps = arg(2, 500)? as usize;
    let workers = arg(3, 2)? as usize;
    let prefetch = arg(4, 4)? as usize;
    let dir = tempfile::tempdir()?;
    let [images, labels, tokens] = build(dir.path(), records)?;

    // Global batch 64, IID with replacement; two placements, each gathering half.
    let sampler = Sampler::new(records, 64, Mode::Iid, 2024)?;
    let streams = [
        ("image", vec![images.clone(), images]),
        ("label", vec![labels.clone(), labels]),
        ("tokens", vec![tokens.clone(), tokens]),
    ];
    let opts = LoaderOptions::new(workers, prefetch);
    let mut loader = Loader::new(streams, sampler, opts)?;

    let started = Instant::now();
    let mut bytes = 0usize;
    let mut tokens_seen = 0usize;
    for step in loader.by_ref().take(steps) {
        let step = step?;
        for (_, shards) in step.iter() {
            bytes += shards.iter().map(|t| t.bytes().len()).sum::<usize>();
        }
        if let Some(Tensor::Ragged { cu_seqlens, .. }) = step.get("tokens", 0) {
            tokens_seen += cu_seqlens.last().copied().unwrap_or(0) as usize;
        }
    }
    let secs = started.elapsed().as_secs_f64();
    let stats = loader.stats();
    println!(
        "{steps} steps of 64 records over 2 shards, {workers} workers, prefetch {prefetch}: \
         {:.0} batches/s, {:.0} MiB/s, {tokens_seen} tokens in shard 0",
        steps as f64 / secs,
        bytes as f64 / secs / (1 << 20) as f64
    );
    println!(
        "buffers allocated: {} (live at most {}), reused {} times; peak RSS {} KiB",
        stats.buffers.allocations,
        stats.buffers.live_high_water,
        stats.buffers.reuses,
        peak_rss_kib().map_or("unknown".to_string(), |k| k.to_string())
    );
    loader.close();
    Ok(())
}

//! Times dataset gathers, for A/B runs of two builds of the engine.
//!
//! Uses only public API that exists in builds before and after the gather executor
//! was shared by stores and datasets, so the same file compiles against both and the
//! two binaries can be run alternately on the same data (docs/benchmarks/spine-ab.md).
//!
//! ```text
//! dataset_gather_ab make DIR           # writes DIR/raw and DIR/zstd (4 shards each)
//! dataset_gather_ab run DIR [ROUNDS [ROW]]  # per row: field codec backend, median
//!                                           # and best ns/record (only rows naming ROW)
//! ```
//!
//! Each row gathers random batches of 256 records of one field (dense: 1 KiB records;
//! ragged: 64-1024 u16 tokens), warm page cache, default threads and checksums on;
//! the figures are the median and the best of `ROUNDS` timed passes (default 5) of 64
//! batches, in nanoseconds per record.

use std::path::{Path, PathBuf};
use std::time::Instant;

use zring_engine::dataset::{Dataset, DatasetBuilder};
use zring_engine::{
    Backend, Codec, DType, RaggedLayout, ReadOptions, Schema, WriteOptions, Writer,
};

const SHARDS: usize = 4;
const PER_SHARD: u64 = 25_000;
const DENSE_BYTES: usize = 1024;
const BATCH: usize = 256;
const BATCHES: usize = 64;

type Fail = Box<dyn std::error::Error>;

/// splitmix64: a reproducible stream without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

fn main() -> Result<(), Fail> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(mode), Some(dir)) = (args.get(1), args.get(2)) else {
        return Err("usage: dataset_gather_ab make|run DIR [ROUNDS]".into());
    };
    let dir = PathBuf::from(dir);
    match mode.as_str() {
        "make" => {
            make(&dir.join("raw"), Codec::Raw)?;
            make(&dir.join("zstd"), Codec::Zstd)
        }
        "run" => {
            let rounds = match args.get(3) {
                Some(r) => r.parse()?,
                None => 5,
            };
            run(&dir, rounds, args.get(4).map_or("", String::as_str))
        }
        _ => Err(format!("unknown mode {mode:?}").into()),
    }
}

fn make(dir: &Path, codec: Codec) -> Result<(), Fail> {
    let fields = vec![
        (
            "dense".to_string(),
            Schema::dense(DType::U8, &[DENSE_BYTES as u64]),
        ),
        ("tokens".to_string(), Schema::ragged(DType::U16, 1)),
    ];
    let mut builder = DatasetBuilder::create(dir, fields, true)?;
    let mut rng = Rng(7);
    for shard in 0..SHARDS {
        let paths = builder.shard_paths(shard);
        let mut dense = Writer::create(
            &paths[0],
            builder.fields()[0].schema.clone(),
            WriteOptions::with_codec(codec),
        )?;
        let mut tokens = Writer::create(
            &paths[1],
            builder.fields()[1].schema.clone(),
            WriteOptions::with_codec(codec),
        )?;
        // Text-like bytes (a small alphabet) so that zstd has something to compress.
        let mut record = vec![0u8; DENSE_BYTES];
        for _ in 0..PER_SHARD {
            for b in record.iter_mut() {
                *b = b'a' + (rng.next() % 16) as u8;
            }
            dense.append_dense(&record)?;
            let n = 64 + (rng.next() % 961) as usize;
            let values: Vec<u8> = (0..n)
                .flat_map(|_| ((rng.next() % 512) as u16).to_le_bytes())
                .collect();
            tokens.append_ragged(&values, &[0, n as u64], &[n as u32])?;
        }
        dense.close()?;
        tokens.close()?;
        builder.add_shard(PER_SHARD)?;
    }
    builder.publish()?;
    Ok(())
}

fn run(dir: &Path, rounds: usize, only: &str) -> Result<(), Fail> {
    let total = SHARDS as u64 * PER_SHARD;
    let mut rng = Rng(11);
    let batches: Vec<Vec<u64>> = (0..BATCHES)
        .map(|_| (0..BATCH).map(|_| rng.next() % total).collect())
        .collect();
    for codec in ["raw", "zstd"] {
        for backend in [Backend::Pread, Backend::Uring, Backend::Mmap] {
            let ds = Dataset::open(dir.join(codec), ReadOptions::with_backend(backend))?;
            for field in ["dense", "tokens"] {
                if !format!("{field} {codec} {backend}").contains(only) {
                    continue;
                }
                let f = ds.field(ds.field_index(field)?)?;
                let mut dest = vec![0u8; BATCH * DENSE_BYTES];
                let mut layout = RaggedLayout::default();
                let mut values = Vec::new();
                let mut pass = |check: &mut u64| -> Result<(), Fail> {
                    for idx in &batches {
                        if field == "dense" {
                            f.gather(idx, &mut dest)?;
                            *check = check.wrapping_add(u64::from(dest[0]));
                        } else {
                            f.ragged_layout_into(idx, &mut layout)?;
                            values.resize(layout.values_bytes, 0);
                            f.gather_ragged_into(idx, &layout, &mut values)?;
                            *check = check.wrapping_add(u64::from(values[0]));
                        }
                    }
                    Ok(())
                };
                let mut check = 0u64;
                pass(&mut check)?; // warm the page cache and the threads
                let mut ns = Vec::with_capacity(rounds);
                for _ in 0..rounds {
                    let t = Instant::now();
                    pass(&mut check)?;
                    ns.push(t.elapsed().as_nanos() as f64 / (BATCHES * BATCH) as f64);
                }
                ns.sort_by(f64::total_cmp);
                println!(
                    "{field} {codec} {backend} {:.1} {:.1} (check {check})",
                    ns[ns.len() / 2],
                    ns[0]
                );
            }
        }
    }
    Ok(())
}

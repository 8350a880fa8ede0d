//! The benchmark workloads (docs/workloads.md W1-W3), generated from a seed.
//!
//! Every record is generated from its own stream `(seed, index)`, so a record's bytes
//! do not depend on how many records are made or on how many threads make them.

use std::ops::Range;

use super::rng::Rng;

/// The seed of the benchmark data: with it, W1-W3 are the same bytes in every bench
/// (criterion's and the loader's).
pub const SEED: u64 = 0x7a72_696e_6721;

/// W1: one image-like uint8[3, 224, 224] record (147 KiB).
pub const W1_SHAPE: [u64; 3] = [3, 224, 224];
pub const W1_RECORD_BYTES: usize = 3 * 224 * 224;
/// W2: int32[512] token ids (2 KiB).
pub const W2_TOKENS: usize = 512;
pub const W2_RECORD_BYTES: usize = W2_TOKENS * 4;
/// Token ids of W2 and W3 are Zipf-distributed over this many ids.
pub const VOCAB: u64 = 50_000;
/// W3 sequence lengths lie in `W3_MIN_LEN..=W3_MAX_LEN`, median about 130.
pub const W3_MIN_LEN: usize = 16;
pub const W3_MAX_LEN: usize = 512;

/// Dense records of one shape, back to back in `bytes`.
#[derive(Clone, Debug)]
pub struct Dense {
    /// The element type's NumPy name (`"uint8"`, `"int32"`), which is also the name
    /// zring's `DType` parses.
    pub dtype: &'static str,
    pub item_shape: Vec<u64>,
    pub item_bytes: usize,
    pub bytes: Vec<u8>,
}

impl Dense {
    /// Number of records.
    pub fn len(&self) -> usize {
        self.bytes.len() / self.item_bytes
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The bytes of record `i`.
    pub fn record(&self, i: usize) -> &[u8] {
        &self.bytes[i * self.item_bytes..(i + 1) * self.item_bytes]
    }

    /// The first `n` records (all of them if there are fewer).
    pub fn head(&self, n: usize) -> &[u8] {
        &self.bytes[..n.min(self.len()) * self.item_bytes]
    }
}

/// 1-D int32 sequences of varying length (a ragged store of ndim 1): record i is elements
/// `cu_seqlens[i]..cu_seqlens[i + 1]` of `values` (little-endian).
#[derive(Clone, Debug)]
pub struct Ragged {
    pub values: Vec<u8>,
    pub cu_seqlens: Vec<u64>,
}

impl Ragged {
    /// Number of records.
    pub fn len(&self) -> usize {
        self.cu_seqlens.len() - 1
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes of record `i`.
    pub fn record(&self, i: usize) -> &[u8] {
        &self.values[self.cu_seqlens[i] as usize * 4..self.cu_seqlens[i + 1] as usize * 4]
    }

    /// Each record's shape (its length), as `Writer::append_ragged` wants it.
    pub fn shapes(&self) -> Vec<u32> {
        self.cu_seqlens
            .windows(2)
            .map(|w| (w[1] - w[0]) as u32)
            .collect()
    }
}

/// W1: `n` image-like records. Each channel is a smooth gradient with a few flat
/// "objects" on it, plus sparse +-1..2 noise, so zstd-3 compresses it about 2-4x (real
/// raw pixels compress less; the point is a realistic decode cost per byte).
pub fn w1(n: usize, seed: u64) -> Dense {
    w1_range(0..n, seed)
}

/// Records `records` of [`w1`]`(_, seed)`: a store larger than memory is written a
/// slice at a time, and the bytes are those of the whole workload.
pub fn w1_range(records: Range<usize>, seed: u64) -> Dense {
    let first = records.start;
    let mut bytes = vec![0u8; records.len() * W1_RECORD_BYTES];
    fill_records(&mut bytes, W1_RECORD_BYTES, |i, rec| {
        image_record(&mut Rng::new(seed, (first + i) as u64), rec)
    });
    Dense {
        dtype: "uint8",
        item_shape: W1_SHAPE.to_vec(),
        item_bytes: W1_RECORD_BYTES,
        bytes,
    }
}

/// W2: `n` records of 512 int32 token ids, Zipf over [`VOCAB`] ids.
pub fn w2(n: usize, seed: u64) -> Dense {
    let mut bytes = vec![0u8; n * W2_RECORD_BYTES];
    fill_records(&mut bytes, W2_RECORD_BYTES, |i, rec| {
        let mut rng = Rng::new(seed ^ 0x5732, i as u64);
        for t in rec.chunks_exact_mut(4) {
            t.copy_from_slice(&zipf_token(&mut rng).to_le_bytes());
        }
    });
    Dense {
        dtype: "int32",
        item_shape: vec![W2_TOKENS as u64],
        item_bytes: W2_RECORD_BYTES,
        bytes,
    }
}

/// W3: `n` int32 token sequences of length 16..=512 (median about 130), Zipf ids.
pub fn w3(n: usize, seed: u64) -> Ragged {
    w3_range(0..n, seed)
}

/// Records `records` of [`w3`]`(_, seed)` (`cu_seqlens` counts from the first of
/// them), for writing a large store a slice at a time.
pub fn w3_range(records: Range<usize>, seed: u64) -> Ragged {
    let mut cu_seqlens = Vec::with_capacity(records.len() + 1);
    cu_seqlens.push(0u64);
    let mut values = Vec::new();
    for (k, i) in records.enumerate() {
        let mut rng = Rng::new(seed ^ 0x5733, i as u64);
        let len = sequence_len(&mut rng);
        values.reserve(len * 4);
        for _ in 0..len {
            values.extend_from_slice(&zipf_token(&mut rng).to_le_bytes());
        }
        cu_seqlens.push(cu_seqlens[k] + len as u64);
    }
    Ragged { values, cu_seqlens }
}

/// A token id with P(k) roughly proportional to 1 / (k + 1.5): the inverse CDF of the
/// continuous 1/x law, floored (Zipf with exponent 1).
fn zipf_token(rng: &mut Rng) -> u32 {
    let k = (VOCAB as f64 + 1.0).powf(rng.unit()) as u64;
    (k.saturating_sub(1)).min(VOCAB - 1) as u32
}

/// `16 + floor(497 u^2.12)`: 16..=512 with median 16 + 497 * 0.5^2.12 = 130.
fn sequence_len(rng: &mut Rng) -> usize {
    let span = (W3_MAX_LEN - W3_MIN_LEN + 1) as f64;
    (W3_MIN_LEN + (span * rng.unit().powf(2.12)) as usize).min(W3_MAX_LEN)
}

/// One uint8[3, 224, 224] image into `rec`.
fn image_record(rng: &mut Rng, rec: &mut [u8]) {
    const SIDE: usize = 224;
    for plane in rec.chunks_exact_mut(SIDE * SIDE) {
        let base = 40.0 + 160.0 * rng.unit();
        let gx = (rng.unit() - 0.5) * 0.3;
        let gy = (rng.unit() - 0.5) * 0.3;
        // A few flat rectangles ("objects") with their own level.
        let objects: Vec<(usize, usize, usize, usize, f64)> = (0..3)
            .map(|_| {
                let x0 = rng.below(SIDE as u64) as usize;
                let y0 = rng.below(SIDE as u64) as usize;
                let w = 16 + rng.below(96) as usize;
                let h = 16 + rng.below(96) as usize;
                (x0, y0, x0 + w, y0 + h, (rng.unit() - 0.5) * 120.0)
            })
            .collect();
        let mut bits = 0u64;
        for (y, row) in plane.chunks_exact_mut(SIDE).enumerate() {
            for (x, px) in row.iter_mut().enumerate() {
                let mut v = base + gx * x as f64 + gy * y as f64;
                for &(x0, y0, x1, y1, level) in &objects {
                    if (x0..x1).contains(&x) && (y0..y1).contains(&y) {
                        v += level;
                    }
                }
                if x % 8 == 0 {
                    bits = rng.next_u64();
                }
                // 8 bits per pixel: noise on 1 pixel in 4, of -2, -1, +1 or +2.
                let b = (bits >> ((x % 8) * 8)) & 0xff;
                if b & 3 == 0 {
                    v += [-2.0, -1.0, 1.0, 2.0][(b >> 2) as usize & 3];
                }
                *px = v.clamp(0.0, 255.0) as u8;
            }
        }
    }
}

/// Fills `out` record by record with `f(index, record)` on up to 4 threads (the data
/// only depends on the index, so the split does not matter).
fn fill_records(out: &mut [u8], record_bytes: usize, f: impl Fn(usize, &mut [u8]) + Sync) {
    let n = out.len() / record_bytes;
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 4);
    let per = n.div_ceil(threads).max(1);
    std::thread::scope(|s| {
        for (t, part) in out.chunks_mut(per * record_bytes).enumerate() {
            let f = &f;
            s.spawn(move || {
                for (k, rec) in part.chunks_exact_mut(record_bytes).enumerate() {
                    f(t * per + k, rec);
                }
            });
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zstd3_ratio(records: &[&[u8]]) -> f64 {
        let mut c = zstd::bulk::Compressor::new(3).expect("compressor");
        let (mut logical, mut stored) = (0usize, 0usize);
        for r in records {
            logical += r.len();
            stored += c.compress(r).expect("compress").len();
        }
        logical as f64 / stored as f64
    }

    #[test]
    fn the_benchmark_seed_gives_the_same_records_as_before_the_move() {
        // Checksums (XXH3-64, the store format's checksum) of the workloads as
        // zring-benches generated them before their generator moved here (with their
        // seed, SEED): figures stay comparable.
        let sum = xxhash_rust::xxh3::xxh3_64;
        assert_eq!(sum(&w1(4, SEED).bytes), 0x342c_49d8_5b1f_8f2c);
        assert_eq!(sum(&w2(64, SEED).bytes), 0x1863_8482_3291_acb9);
        let r = w3(64, SEED);
        let cu: Vec<u8> = r.cu_seqlens.iter().flat_map(|c| c.to_le_bytes()).collect();
        assert_eq!(sum(&r.values), 0x5d7c_d380_8f75_1fbb);
        assert_eq!(sum(&cu), 0xa422_439a_7795_1f89);
    }

    #[test]
    fn records_do_not_depend_on_how_many_are_made() {
        let a = w1(3, 9);
        let b = w1(5, 9);
        assert_eq!(a.bytes[..], b.bytes[..a.bytes.len()]);
        assert_eq!(w2(4, 1).bytes[..], w2(9, 1).bytes[..4 * W2_RECORD_BYTES]);
        assert_ne!(w2(1, 1).bytes, w2(1, 2).bytes);
    }

    #[test]
    fn a_range_is_those_records_of_the_whole_workload() {
        let all = w1(5, 9);
        assert_eq!(
            w1_range(2..5, 9).bytes[..],
            all.bytes[2 * W1_RECORD_BYTES..]
        );
        assert!(w1_range(3..3, 9).is_empty());
        let all = w3(40, 4);
        let part = w3_range(10..25, 4);
        assert_eq!(part.len(), 15);
        for k in 0..15 {
            assert_eq!(part.record(k), all.record(10 + k));
        }
    }

    #[test]
    fn w1_compresses_two_to_four_times_with_zstd3() {
        let d = w1(8, 1);
        let recs: Vec<&[u8]> = (0..d.len()).map(|i| d.record(i)).collect();
        let ratio = zstd3_ratio(&recs);
        assert!((2.0..4.0).contains(&ratio), "zstd-3 ratio {ratio:.2}");
    }

    #[test]
    fn w2_tokens_are_zipf_over_the_vocabulary() {
        let d = w2(200, 3);
        let ids: Vec<u32> = d
            .bytes
            .chunks_exact(4)
            .map(|t| u32::from_le_bytes([t[0], t[1], t[2], t[3]]))
            .collect();
        assert!(ids.iter().all(|&t| u64::from(t) < VOCAB));
        let top = ids.iter().filter(|&&t| t == 0).count() as f64 / ids.len() as f64;
        let tail = ids.iter().filter(|&&t| t >= 25_000).count() as f64 / ids.len() as f64;
        // 1/x law: P(0) = ln 2 / ln 50001 ~ 6.4 %, P(>= 25000) = ln 2 / ln 50001 too.
        assert!((0.05..0.08).contains(&top), "P(id 0) = {top}");
        assert!((0.05..0.08).contains(&tail), "P(id >= 25000) = {tail}");
    }

    #[test]
    fn w3_lengths_span_16_to_512_with_median_near_130() {
        let r = w3(20_001, 5);
        let mut lens: Vec<u32> = r.shapes();
        assert_eq!(r.values.len() as u64, r.cu_seqlens[r.len()] * 4);
        lens.sort_unstable();
        assert!(lens[0] >= 16 && *lens.last().expect("records") <= 512);
        let median = lens[lens.len() / 2];
        assert!((120..=140).contains(&median), "median {median}");
    }
}

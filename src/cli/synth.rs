//! Deterministic synthetic records for `bench`: image-like bytes (a smooth gradient
//! plus low-amplitude noise, so zstd finds something to do but not everything),
//! each record a pure function of `(seed, index)` so a gather can be checked
//! against the source without keeping it.

use std::path::Path;
use std::time::Instant;

use zring_engine::{Codec, DType, Schema, WriteOptions, Writer};

use super::progress::{self, Unit};
use super::CliResult;

/// The W1 record: uint8[3, 224, 224], 147 KiB.
pub const IMAGE_SHAPE: [u64; 3] = [3, 224, 224];
/// Bytes of one W1 record.
pub const IMAGE_BYTES: usize = 3 * 224 * 224;
/// Width of a synthetic "image row".
const ROW: usize = 224;
/// Noise bits per byte: with 2 (and the gradient below) zstd-3 shrinks a record
/// about 1.6x, near what it does to decoded photos; 3 bits gives ~1.15x, 4 none.
const NOISE_MASK: u64 = 0x0303_0303_0303_0303;
/// Input bytes generated per append call while writing.
const BATCH_BYTES: usize = 16 << 20;

/// What to generate.
#[derive(Clone, Copy, Debug)]
pub struct SynthSpec {
    pub count: u64,
    /// Bytes per record (dense), or the mean (ragged: uniform in [1/2, 3/2] of it).
    pub record_bytes: usize,
    pub ragged: bool,
    pub seed: u64,
}

/// How writing the synthetic store went.
#[derive(Clone, Copy, Debug)]
pub struct WriteReport {
    pub logical_bytes: u64,
    /// Appends and close (which includes both fsyncs); data generation and
    /// dictionary training are not counted.
    pub seconds: f64,
    /// Dictionary training (zstd-dict only).
    pub dict_seconds: Option<f64>,
}

/// splitmix64's finaliser: a good 64-bit mix.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

impl SynthSpec {
    /// The store schema: uint8[3,224,224] for the W1 size, uint8[n] otherwise, or
    /// ragged 1-D uint8.
    pub fn schema(&self) -> Schema {
        let schema = if self.ragged {
            Schema::ragged(DType::U8, 1)
        } else if self.record_bytes == IMAGE_BYTES {
            Schema::dense(DType::U8, &IMAGE_SHAPE)
        } else {
            Schema::dense(DType::U8, &[self.record_bytes as u64])
        };
        schema
            .with_metadata("generator", "zring bench synthetic image-like v1")
            .with_metadata("seed", self.seed.to_string())
    }

    /// Bytes of record `i`.
    pub fn record_len(&self, i: u64) -> usize {
        if !self.ragged {
            return self.record_bytes;
        }
        let half = self.record_bytes / 2;
        let spread = mix(self.seed ^ mix(i ^ 0xA5A5_A5A5)) % (self.record_bytes as u64 + 1);
        (half + spread as usize).max(1)
    }

    /// Total bytes of all records.
    pub fn logical_bytes(&self) -> u64 {
        if self.ragged {
            (0..self.count).map(|i| self.record_len(i) as u64).sum()
        } else {
            self.count * self.record_bytes as u64
        }
    }

    /// Writes record `i` into `out` (exactly `record_len(i)` bytes).
    pub fn fill_record(&self, i: u64, out: &mut [u8]) {
        let h = mix(self.seed ^ mix(i));
        let gx = (h & 7) as usize + 1;
        let gy = ((h >> 3) & 7) as usize + 1;
        let base = (h >> 8) as u8;
        let mut state = h | 1;
        for (row, line) in out.chunks_mut(ROW).enumerate() {
            let row_base = base.wrapping_add((row * gy / 8) as u8);
            for (k, px) in line.chunks_mut(8).enumerate() {
                // xorshift64: 8 bytes of noise per step.
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let noise = (state & NOISE_MASK).to_le_bytes();
                for (j, p) in px.iter_mut().enumerate() {
                    let col = k * 8 + j;
                    *p = row_base
                        .wrapping_add((col * gx / 8) as u8)
                        .wrapping_add(noise[j]);
                }
            }
        }
    }

    /// Record `i` as a new vector.
    pub fn record(&self, i: u64) -> Vec<u8> {
        let mut v = vec![0u8; self.record_len(i)];
        self.fill_record(i, &mut v);
        v
    }
}

/// Builds the synthetic store at `path` (created fresh); `opts.dictionary` is
/// trained here for zstd-dict.
pub fn create_store(
    path: &Path,
    spec: &SynthSpec,
    mut opts: WriteOptions,
    dict_bytes: usize,
) -> CliResult<WriteReport> {
    let total = spec.logical_bytes();
    let bar = progress::bar(total, "write", Unit::Bytes);
    let mut timed = 0.0f64;
    let mut dict_seconds = None;
    if opts.codec == Codec::ZstdDict && opts.dictionary.is_none() {
        let want = (dict_bytes.saturating_mul(100) / spec.record_bytes.max(1))
            .clamp(1, spec.count as usize) as u64;
        let samples: Vec<Vec<u8>> = (0..want)
            .map(|k| spec.record(k * spec.count / want))
            .collect();
        let refs: Vec<&[u8]> = samples.iter().map(Vec::as_slice).collect();
        let started = Instant::now();
        opts.dictionary = Some(zring_engine::train_dict(&refs, dict_bytes)?);
        dict_seconds = Some(started.elapsed().as_secs_f64());
    }
    let started = Instant::now();
    let mut writer = Writer::create(path, spec.schema(), opts)?;
    timed += started.elapsed().as_secs_f64();
    let mut buf: Vec<u8> = Vec::new();
    let mut cu: Vec<u64> = Vec::new();
    let mut shapes: Vec<u32> = Vec::new();
    let mut i = 0u64;
    while i < spec.count {
        buf.clear();
        cu.clear();
        shapes.clear();
        cu.push(0);
        while i < spec.count && (buf.is_empty() || buf.len() + spec.record_len(i) <= BATCH_BYTES) {
            let len = spec.record_len(i);
            let at = buf.len();
            buf.resize(at + len, 0);
            spec.fill_record(i, &mut buf[at..]);
            cu.push(buf.len() as u64);
            shapes.push(len as u32);
            i += 1;
        }
        let started = Instant::now();
        if spec.ragged {
            writer.append_ragged(&buf, &cu, &shapes)?;
        } else {
            writer.append_dense(&buf)?;
        }
        timed += started.elapsed().as_secs_f64();
        bar.inc(buf.len() as u64);
    }
    let started = Instant::now();
    writer.close()?;
    timed += started.elapsed().as_secs_f64();
    bar.finish_and_clear();
    Ok(WriteReport {
        logical_bytes: total,
        seconds: timed,
        dict_seconds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_a_pure_function_of_seed_and_index() {
        let spec = SynthSpec {
            count: 10,
            record_bytes: 1000,
            ragged: false,
            seed: 7,
        };
        assert_eq!(spec.record(3), spec.record(3));
        assert_ne!(spec.record(3), spec.record(4));
        let other = SynthSpec { seed: 8, ..spec };
        assert_ne!(spec.record(3), other.record(3));
    }

    #[test]
    fn ragged_lengths_stay_within_half_to_one_and_a_half() {
        let spec = SynthSpec {
            count: 1000,
            record_bytes: 4096,
            ragged: true,
            seed: 1,
        };
        let lens: Vec<usize> = (0..1000).map(|i| spec.record_len(i)).collect();
        assert!(lens.iter().all(|&l| (2048..=6144).contains(&l)));
        assert!(lens.iter().min() < lens.iter().max());
        assert_eq!(spec.logical_bytes(), lens.iter().sum::<usize>() as u64);
    }

    #[test]
    fn image_sized_records_get_the_image_shape() {
        let spec = SynthSpec {
            count: 1,
            record_bytes: IMAGE_BYTES,
            ragged: false,
            seed: 0,
        };
        assert_eq!(spec.schema().item_bytes(), Some(IMAGE_BYTES as u64));
        assert_eq!(spec.schema().ndim(), 3);
    }
}

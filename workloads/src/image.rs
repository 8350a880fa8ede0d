//! `zring bench`'s synthetic records: image-like bytes (a smooth gradient plus
//! low-amplitude noise, so zstd finds something to do but not everything) of any
//! size, dense or ragged, each record a pure function of `(seed, index)` so a gather
//! can be checked against the source without keeping it.

use std::sync::Arc;

use super::rng;

/// The W1 record: uint8[3, 224, 224], 147 KiB.
pub const IMAGE_SHAPE: [u64; 3] = [3, 224, 224];
/// Bytes of one W1 record.
pub const IMAGE_BYTES: usize = 3 * 224 * 224;
/// Width of a synthetic "image row".
const ROW: usize = 224;
/// Noise bits per byte: with 2 (and the gradient below) zstd-3 shrinks a record
/// about 1.6x, near what it does to decoded photos; 3 bits gives ~1.15x, 4 none.
const NOISE_MASK: u64 = 0x0303_0303_0303_0303;

/// What to generate.
#[derive(Clone, Debug)]
pub struct SynthSpec {
    pub count: u64,
    /// Bytes per record (dense), or the mean (ragged: uniform in [1/2, 3/2] of it).
    pub record_bytes: usize,
    pub ragged: bool,
    pub seed: u64,
    /// Ragged only: the exact byte length of every record (`count` of them), to
    /// replay another store's size distribution, instead of the uniform spread.
    pub lengths: Option<Arc<[u32]>>,
}

/// splitmix64's step and finaliser: [`rng::mix`] of `x` plus the golden gamma.
fn mix(x: u64) -> u64 {
    rng::mix(x.wrapping_add(0x9E37_79B9_7F4A_7C15))
}

impl SynthSpec {
    /// Bytes of record `i`.
    pub fn record_len(&self, i: u64) -> usize {
        if !self.ragged {
            return self.record_bytes;
        }
        if let Some(lengths) = &self.lengths {
            return lengths.get(i as usize).map_or(0, |&l| l as usize);
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
            lengths: None,
        };
        assert_eq!(spec.record(3), spec.record(3));
        assert_ne!(spec.record(3), spec.record(4));
        let other = SynthSpec {
            seed: 8,
            ..spec.clone()
        };
        assert_ne!(spec.record(3), other.record(3));
    }

    #[test]
    fn ragged_lengths_stay_within_half_to_one_and_a_half() {
        let spec = SynthSpec {
            count: 1000,
            record_bytes: 4096,
            ragged: true,
            seed: 1,
            lengths: None,
        };
        let lens: Vec<usize> = (0..1000).map(|i| spec.record_len(i)).collect();
        assert!(lens.iter().all(|&l| (2048..=6144).contains(&l)));
        assert!(lens.iter().min() < lens.iter().max());
        assert_eq!(spec.logical_bytes(), lens.iter().sum::<usize>() as u64);
    }

    #[test]
    fn records_are_the_same_for_a_seed_as_before_the_move() {
        // Checksums (XXH3-64, the store format's checksum) of these records as the CLI
        // generated them before its generator moved here: `zring bench` figures stay
        // comparable across versions.
        for (ragged, record_bytes, seed, len, sum) in [
            (
                false,
                IMAGE_BYTES,
                42u64,
                9_633_792usize,
                0x205d_89ea_53c0_e05fu64,
            ),
            (true, 4096, 7, 248_616, 0x87d0_1efc_8c24_29b7),
            (false, 1000, 0, 64_000, 0x9018_da5f_0053_fa1f),
        ] {
            let spec = SynthSpec {
                count: 64,
                record_bytes,
                ragged,
                seed,
                lengths: None,
            };
            let all: Vec<u8> = (0..64).flat_map(|i| spec.record(i)).collect();
            assert_eq!(all.len(), len);
            assert_eq!(
                xxhash_rust::xxh3::xxh3_64(&all),
                sum,
                "{ragged} {record_bytes} {seed}"
            );
        }
    }
}

//! XXH3-64 (seed 0), the format's checksum, at the speed of the machine it runs on.
//!
//! `xxhash-rust` picks its SIMD width when it is compiled: for the baseline x86-64
//! target that is SSE2, whatever the CPU can do. Inputs above 240 bytes (XXH3's
//! "long" path, where the time goes) are hashed here with AVX2 when the CPU has it,
//! chosen at run time; everything else (short inputs, other CPUs) is `xxhash-rust`.
//! Both give bit-identical values: the AVX2 loop is the reference algorithm's
//! `XXH3_accumulate_512_avx2` / `XXH3_scrambleAcc_avx2` with the default secret.
//!
//! [`copy_and_hash`] copies a record and hashes it in one pass: each 64-byte stripe
//! is loaded once, stored to the destination and accumulated from the same
//! registers, so the hash reads nothing from memory the copy has not just read.

/// XXH3-64 of `bytes` with seed 0 (the same value as `xxhash_rust::xxh3::xxh3_64`).
#[inline]
pub fn xxh3_64(bytes: &[u8]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    if bytes.len() > MID_SIZE_MAX && crate::simd::has_avx2() {
        // SAFETY: the CPU has AVX2 (checked just above); `long` reads only inside
        // `bytes` (its length is above 240, so at least one 64-byte stripe) and
        // writes nothing (no destination).
        return unsafe { avx2::long::<false>(bytes.as_ptr(), std::ptr::null_mut(), bytes.len()) };
    }
    xxhash_rust::xxh3::xxh3_64(bytes)
}

/// Copies `src` into `dst` and returns the XXH3-64 of the bytes copied (what `dst`
/// holds afterwards).
///
/// # Panics
/// If the slices differ in length (as `copy_from_slice` does).
#[inline]
pub fn copy_and_hash(src: &[u8], dst: &mut [u8]) -> u64 {
    assert_eq!(src.len(), dst.len(), "copy_and_hash: lengths differ");
    #[cfg(target_arch = "x86_64")]
    if src.len() > MID_SIZE_MAX && crate::simd::has_avx2() {
        // Ask for every line of a small record at once: the loop below only reaches a
        // few lines ahead, so a record out of a cold mapping arrives one miss after
        // another (2 KiB records: 0.82x of a plain copy without this, 0.92x with).
        for at in (0..src.len().min(PREFETCH_MAX)).step_by(64) {
            // SAFETY: `at` is inside `src`; a prefetch never faults or writes.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(src.as_ptr().add(at).cast()) };
        }
        // SAFETY: the CPU has AVX2 (checked just above); `long` reads `src.len()`
        // bytes from `src` and writes the same count to `dst`, which has that length
        // (asserted above) and, being a `&mut`, does not overlap `src`.
        return unsafe { avx2::long::<true>(src.as_ptr(), dst.as_mut_ptr(), src.len()) };
    }
    dst.copy_from_slice(src);
    xxhash_rust::xxh3::xxh3_64(dst)
}

/// XXH3-64 by `xxhash-rust` alone, whatever the CPU (for tests and benchmarks that
/// compare the two).
pub fn xxh3_64_portable(bytes: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(bytes)
}

/// Whether [`xxh3_64`] takes the AVX2 path for long inputs on this CPU.
pub fn uses_avx2() -> bool {
    crate::simd::has_avx2()
}

/// [`copy_and_hash`] prefetches up to this many bytes of its source up front; past
/// that the hardware's stream prefetcher has the pattern.
#[cfg(target_arch = "x86_64")]
const PREFETCH_MAX: usize = 8192;

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};

/// Inputs up to this length take XXH3's short and mid-size paths.
const MID_SIZE_MAX: usize = 240;

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::{
        __m256i, _mm256_add_epi64, _mm256_loadu_si256, _mm256_mul_epu32, _mm256_set1_epi32,
        _mm256_shuffle_epi32, _mm256_slli_epi64, _mm256_srli_epi64, _mm256_storeu_si256,
        _mm256_xor_si256,
    };

    const PRIME32_1: u64 = 0x9E37_79B1;
    const PRIME32_2: u64 = 0x85EB_CA77;
    const PRIME32_3: u64 = 0xC2B2_AE3D;
    const PRIME64_1: u64 = 0x9E37_79B1_85EB_CA87;
    const PRIME64_2: u64 = 0xC2B2_AE3D_27D4_EB4F;
    const PRIME64_3: u64 = 0x1656_67B1_9E37_79F9;
    const PRIME64_4: u64 = 0x85EB_CA77_C2B2_AE63;
    const PRIME64_5: u64 = 0x27D4_EB2F_1656_67C5;

    const INIT_ACC: [u64; 8] = [
        PRIME32_3, PRIME64_1, PRIME64_2, PRIME64_3, PRIME64_4, PRIME32_2, PRIME64_5, PRIME32_1,
    ];
    const STRIPE: usize = 64;
    /// Secret bytes consumed per stripe.
    const CONSUME: usize = 8;
    const SECRET_SIZE: usize = 192;
    const STRIPES_PER_BLOCK: usize = (SECRET_SIZE - STRIPE) / CONSUME;
    const BLOCK: usize = STRIPE * STRIPES_PER_BLOCK;
    const LASTACC_START: usize = 7;
    const MERGEACCS_START: usize = 11;

    /// XXH3's default secret (`XXH3_kSecret`).
    static SECRET: [u8; SECRET_SIZE] = [
        0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad,
        0x1c, 0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3,
        0x67, 0x1f, 0xcb, 0x79, 0xe6, 0x4e, 0xcc, 0xc0, 0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc,
        0xff, 0x72, 0x21, 0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e, 0xe0, 0x35, 0x90, 0xe6,
        0x81, 0x3a, 0x26, 0x4c, 0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb, 0x88, 0xd0, 0x65,
        0x8b, 0x1b, 0x53, 0x2e, 0xa3, 0x71, 0x64, 0x48, 0x97, 0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19,
        0xef, 0x46, 0xa9, 0xde, 0xac, 0xd8, 0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9,
        0xdc, 0xbb, 0xc7, 0xc7, 0x0b, 0x4f, 0x1d, 0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31,
        0xc8, 0x9f, 0x7e, 0xc9, 0xd9, 0x78, 0x73, 0x64, 0xea, 0xc5, 0xac, 0x83, 0x34, 0xd3, 0xeb,
        0xc3, 0xc5, 0x81, 0xa0, 0xff, 0xfa, 0x13, 0x63, 0xeb, 0x17, 0x0d, 0xdd, 0x51, 0xb7, 0xf0,
        0xda, 0x49, 0xd3, 0x16, 0x55, 0x26, 0x29, 0xd4, 0x68, 0x9e, 0x2b, 0x16, 0xbe, 0x58, 0x7d,
        0x47, 0xa1, 0xfc, 0x8f, 0xf8, 0xb8, 0xd1, 0x7a, 0xd0, 0x31, 0xce, 0x45, 0xcb, 0x3a, 0x8f,
        0x95, 0x16, 0x04, 0x28, 0xaf, 0xd7, 0xfb, 0xca, 0xbb, 0x4b, 0x40, 0x7e,
    ];

    fn secret_u64(at: usize) -> u64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&SECRET[at..at + 8]);
        u64::from_le_bytes(b)
    }

    fn mul128_fold64(a: u64, b: u64) -> u64 {
        let p = u128::from(a) * u128::from(b);
        (p as u64) ^ ((p >> 64) as u64)
    }

    fn avalanche(mut h: u64) -> u64 {
        h ^= h >> 37;
        h = h.wrapping_mul(0x1656_6791_9E37_79F9);
        h ^ (h >> 32)
    }

    /// One 64-byte stripe at `src + at` into the accumulators (and, when `COPY`, to
    /// `dst + at`), keyed by the secret from `key`.
    ///
    /// # Safety
    /// AVX2 must be available; `src + at .. + 64` readable, and when `COPY`,
    /// `dst + at .. + 64` writable; `key + 64 <= SECRET_SIZE`.
    #[inline(always)]
    unsafe fn stripe<const COPY: bool>(
        acc: &mut [__m256i; 2],
        src: *const u8,
        dst: *mut u8,
        at: usize,
        key: usize,
    ) {
        for (i, a) in acc.iter_mut().enumerate() {
            // SAFETY: the caller guarantees the 64 bytes at `src + at` (and `dst +
            // at`) and that `key + 64` lies inside the secret; the loads and stores
            // are the unaligned kind.
            unsafe {
                let data = _mm256_loadu_si256(src.add(at + 32 * i).cast::<__m256i>());
                if COPY {
                    _mm256_storeu_si256(dst.add(at + 32 * i).cast::<__m256i>(), data);
                }
                let k = _mm256_loadu_si256(SECRET.as_ptr().add(key + 32 * i).cast::<__m256i>());
                let dk = _mm256_xor_si256(data, k);
                // _MM_SHUFFLE(0, 3, 0, 1): the high 32 bits of each lane, low.
                let dk_lo = _mm256_shuffle_epi32::<0x31>(dk);
                let product = _mm256_mul_epu32(dk, dk_lo);
                // _MM_SHUFFLE(1, 0, 3, 2): swap the two 64-bit halves of each 128.
                let swapped = _mm256_shuffle_epi32::<0x4E>(data);
                *a = _mm256_add_epi64(product, _mm256_add_epi64(*a, swapped));
            }
        }
    }

    /// # Safety
    /// AVX2 must be available.
    #[inline(always)]
    unsafe fn scramble(acc: &mut [__m256i; 2]) {
        for (i, a) in acc.iter_mut().enumerate() {
            // SAFETY: AVX2 is available (caller); the key load reads bytes
            // 128 + 32 * i .. + 32 of the 192-byte secret.
            unsafe {
                let prime = _mm256_set1_epi32(PRIME32_1 as u32 as i32);
                let shifted = _mm256_srli_epi64::<47>(*a);
                let data = _mm256_xor_si256(*a, shifted);
                let k = _mm256_loadu_si256(
                    SECRET
                        .as_ptr()
                        .add(SECRET_SIZE - STRIPE + 32 * i)
                        .cast::<__m256i>(),
                );
                let dk = _mm256_xor_si256(data, k);
                let dk_hi = _mm256_shuffle_epi32::<0x31>(dk);
                let lo = _mm256_mul_epu32(dk, prime);
                let hi = _mm256_mul_epu32(dk_hi, prime);
                *a = _mm256_add_epi64(lo, _mm256_slli_epi64::<32>(hi));
            }
        }
    }

    /// XXH3-64's long path (`len > 240`) over `src`, copying it to `dst` as it goes
    /// when `COPY`.
    ///
    /// # Safety
    /// AVX2 must be available; `len > 240`; `src .. src + len` readable; when `COPY`,
    /// `dst .. dst + len` writable and not overlapping `src`.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn long<const COPY: bool>(src: *const u8, dst: *mut u8, len: usize) -> u64 {
        // SAFETY (whole body): every stripe below starts at a multiple of 64 that is
        // at most `len - 64` (the stripes of whole blocks and of the last partial
        // block end at or before `len - 1`), or at `len - 64` exactly, so it lies
        // inside `src`/`dst`; keys are at most 15 * 8 and 192 - 64 - 7, so key + 64
        // lies inside the secret.
        unsafe {
            let mut acc = [
                _mm256_loadu_si256(INIT_ACC.as_ptr().cast::<__m256i>()),
                _mm256_loadu_si256(INIT_ACC.as_ptr().add(4).cast::<__m256i>()),
            ];
            let blocks = (len - 1) / BLOCK;
            for b in 0..blocks {
                for s in 0..STRIPES_PER_BLOCK {
                    stripe::<COPY>(&mut acc, src, dst, b * BLOCK + s * STRIPE, s * CONSUME);
                }
                scramble(&mut acc);
            }
            let tail = ((len - 1) - BLOCK * blocks) / STRIPE;
            for s in 0..tail {
                stripe::<COPY>(&mut acc, src, dst, blocks * BLOCK + s * STRIPE, s * CONSUME);
            }
            stripe::<COPY>(
                &mut acc,
                src,
                dst,
                len - STRIPE,
                SECRET_SIZE - STRIPE - LASTACC_START,
            );
            let mut lanes = [0u64; 8];
            _mm256_storeu_si256(lanes.as_mut_ptr().cast::<__m256i>(), acc[0]);
            _mm256_storeu_si256(lanes.as_mut_ptr().add(4).cast::<__m256i>(), acc[1]);
            let mut h = (len as u64).wrapping_mul(PRIME64_1);
            for i in 0..4 {
                let s = MERGEACCS_START + 16 * i;
                h = h.wrapping_add(mul128_fold64(
                    lanes[2 * i] ^ secret_u64(s),
                    lanes[2 * i + 1] ^ secret_u64(s + 8),
                ));
            }
            avalanche(h)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic bytes (xorshift), so failures reproduce.
    fn bytes(n: usize, seed: u64) -> Vec<u8> {
        let mut x = seed | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    #[test]
    fn equals_the_reference_at_every_length_to_5000() {
        for n in 0..5000 {
            let b = bytes(n, n as u64 + 7);
            assert_eq!(xxh3_64(&b), xxh3_64_portable(&b), "length {n}");
        }
    }

    #[test]
    fn equals_the_reference_for_large_and_unaligned_inputs() {
        let b = bytes(3 << 20, 99);
        for (start, len) in [
            (0, 150_528),
            (1, 150_528),
            (3, 1 << 20),
            (7, (3 << 20) - 7),
            (13, 1025),
            (5, 1024 * 16 + 1),
        ] {
            let s = &b[start..start + len];
            assert_eq!(xxh3_64(s), xxh3_64_portable(s), "{start}+{len}");
        }
    }

    #[test]
    fn copy_and_hash_copies_and_hashes() {
        for n in [
            0, 1, 17, 129, 240, 241, 255, 256, 1023, 1024, 1025, 4096, 150_528,
        ] {
            let src = bytes(n + 3, n as u64);
            let mut dst = vec![0u8; n + 5];
            // Unaligned on both sides.
            let h = copy_and_hash(&src[3..], &mut dst[5..]);
            assert_eq!(&dst[5..], &src[3..], "length {n}");
            assert_eq!(h, xxh3_64_portable(&src[3..]), "length {n}");
        }
    }

    /// The published XXH3-64 of the empty input, and that this machine takes the
    /// AVX2 path when it can (so the tests above compare two implementations).
    #[test]
    fn known_value_and_dispatch() {
        assert_eq!(xxh3_64(&[]), 0x2D06_8005_38D3_94C2);
        #[cfg(target_arch = "x86_64")]
        assert_eq!(uses_avx2(), std::is_x86_feature_detected!("avx2"));
    }

    #[test]
    #[should_panic(expected = "lengths differ")]
    fn copy_and_hash_refuses_different_lengths() {
        copy_and_hash(&[1, 2, 3], &mut [0; 2]);
    }
}

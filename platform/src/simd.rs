//! Portable code run as its AVX2 build on CPUs that have AVX2.
//!
//! Loops written once, portably (the sampler's Feistel lanes, its IID reduction),
//! become vector instructions when they are compiled inside a function with
//! `#[target_feature(enable = "avx2")]`; the arithmetic, and so the output, is the
//! same. Calling such a function is `unsafe` (on a CPU without AVX2 it is undefined
//! behaviour), so that one call lives here, behind the check, and callers stay safe.

/// Whether the running CPU has AVX2 (`std` caches the answer).
#[inline]
pub fn has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Calls `f`, compiled for AVX2 where the running CPU has it, else as it is.
///
/// `f` is compiled for AVX2 only where it is inlined into the AVX2 function, so
/// mark the closure `#[inline(always)]` and have it call `#[inline(always)]`
/// functions: without the mark, a large closure stays a function of its own, built
/// for the baseline CPU (the sampler's permutation lost 95% of its vector
/// instructions that way).
#[inline]
pub fn with_avx2<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    {
        if has_avx2() {
            // SAFETY: the running CPU supports AVX2, checked just above; `run_avx2`
            // does nothing but call `f`, whose own safety is the caller's (it is a
            // safe closure).
            return unsafe { run_avx2(f) };
        }
    }
    f()
}

/// `f` compiled for AVX2.
///
/// # Safety
/// The running CPU must support AVX2; executing AVX2 instructions on one that does
/// not is undefined behaviour.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn run_avx2<R>(f: impl FnOnce() -> R) -> R {
    f()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_avx2_build_returns_what_the_closure_returns() {
        let data: Vec<u64> = (0..1000).collect();
        let sum = with_avx2(|| data.iter().map(|x| x * 3).sum::<u64>());
        assert_eq!(sum, 3 * 999 * 1000 / 2);
        // The check and the path taken agree with std's detection.
        #[cfg(target_arch = "x86_64")]
        assert_eq!(has_avx2(), std::arch::is_x86_feature_detected!("avx2"));
    }
}

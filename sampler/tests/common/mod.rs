//! Helpers shared by the integration tests.
#![allow(dead_code)] // each test binary uses a different subset

use zring_sampler::Sampler;

/// Pearson's statistic for observed counts against expected counts.
pub fn chi_square(observed: &[u64], expected: &[f64]) -> f64 {
    assert_eq!(observed.len(), expected.len());
    observed
        .iter()
        .zip(expected)
        .map(|(&o, &e)| {
            let d = o as f64 - e;
            d * d / e
        })
        .sum()
}

/// Upper critical value of chi-square with `dof` degrees of freedom at
/// p = 1e-6 (z = 4.753), by the Wilson-Hilferty approximation, which is
/// within a few percent from dof = 3 upwards. The seeds are fixed, so a
/// pass is deterministic; the small p keeps a correct generator far from
/// the line while biased ones (see the iid tests) land orders above it.
pub fn chi_square_critical(dof: usize) -> f64 {
    let k = dof as f64;
    let z = 4.753;
    let t = 2.0 / (9.0 * k);
    k * (1.0 - t + z * t.sqrt()).powi(3)
}

/// Stream positions `[start, start + count)` of `sampler`, read through
/// whole-batch `fill` calls (the sampler must be unsharded).
pub fn positions(sampler: &Sampler, start: u128, count: usize) -> Vec<u64> {
    let b = sampler.batch_size() as u128;
    let mut out = Vec::with_capacity(count);
    let mut buf = vec![0; sampler.batch_size()];
    let mut step = start / b;
    let mut skip = (start % b) as usize;
    while out.len() < count {
        let t = u64::try_from(step).expect("position reachable with a u64 step");
        sampler
            .fill(t, &mut buf)
            .expect("buffer has the batch length");
        let take = (count - out.len()).min(buf.len() - skip);
        out.extend_from_slice(&buf[skip..skip + take]);
        skip = 0;
        step += 1;
    }
    out
}

/// splitmix64 from the test kit, for sampling test inputs.
#[allow(unused_imports)] // each test binary uses a part of this module
pub use zring_testkit::Rng as TestRng;

//! A small HDR-style latency histogram: log-bucketed with 32 linear sub-buckets per
//! power of two, so any recorded value is reported within 1/32 (3.2%) of itself,
//! in a fixed 15 KiB table, whatever the range (1 ns to centuries).
//!
//! Values below 64 have a bucket each. A value `v >= 64` with highest set bit `e`
//! falls in bucket `(e - 5) * 32 + (v >> (e - 5))`: the top six bits of `v` pick one
//! of 32 sub-buckets of `[2^e, 2^(e+1))`.

/// log2 of the sub-buckets per power of two.
const SUB_BITS: u32 = 5;
const SUB: usize = 1 << SUB_BITS;
/// Buckets for the whole u64 range: 64 exact ones, then 32 per power of two from 2^6.
const BUCKETS: usize = (64 - SUB_BITS as usize - 1) * SUB + 2 * SUB;

/// Counts of values (nanoseconds, in zring's benches) in logarithmic buckets.
#[derive(Clone, Debug)]
pub struct Histogram {
    counts: Box<[u64; BUCKETS]>,
    total: u64,
    min: u64,
    max: u64,
    sum: u128,
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

impl Histogram {
    /// An empty histogram.
    pub fn new() -> Self {
        Self {
            counts: Box::new([0; BUCKETS]),
            total: 0,
            min: u64::MAX,
            max: 0,
            sum: 0,
        }
    }

    /// Adds one value.
    pub fn record(&mut self, v: u64) {
        self.counts[bucket_of(v)] += 1;
        self.total += 1;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        self.sum += u128::from(v);
    }

    /// Adds every value of `other` (per-thread histograms merge into one).
    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a += b;
        }
        self.total += other.total;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        self.sum += other.sum;
    }

    /// Number of recorded values.
    #[cfg_attr(not(feature = "plot"), allow(dead_code))] // only the plots use it
    pub fn len(&self) -> u64 {
        self.total
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// The smallest recorded value.
    #[cfg_attr(not(feature = "plot"), allow(dead_code))] // only the plots use it
    pub fn min(&self) -> Option<u64> {
        (!self.is_empty()).then_some(self.min)
    }

    /// The largest recorded value (exact).
    pub fn max(&self) -> Option<u64> {
        (!self.is_empty()).then_some(self.max)
    }

    /// The mean of the recorded values (exact).
    pub fn mean(&self) -> Option<f64> {
        (!self.is_empty()).then(|| self.sum as f64 / self.total as f64)
    }

    /// The value at quantile `q` in `[0, 1]`: the smallest bucket holding at least
    /// `ceil(q * len)` values, reported as that bucket's highest value (as HDR does),
    /// clamped to the recorded min and max. `None` when empty.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        if self.is_empty() {
            return None;
        }
        let q = if q.is_nan() { 1.0 } else { q.clamp(0.0, 1.0) };
        let rank = ((q * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0u64;
        for (b, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Some(bucket_high(b).clamp(self.min, self.max));
            }
        }
        Some(self.max)
    }
}

// Only the plots use these.
#[cfg_attr(not(feature = "plot"), allow(dead_code))]
impl Histogram {
    /// Every non-empty bucket as `(lowest value, highest value, count)`, in order.
    pub fn buckets(&self) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
        self.counts
            .iter()
            .enumerate()
            .filter(|(_, &c)| c > 0)
            .map(|(b, &c)| (bucket_low(b), bucket_high(b), c))
    }
}

/// The lowest value that falls in bucket `b`.
#[cfg_attr(not(feature = "plot"), allow(dead_code))] // only the plots use it
fn bucket_low(b: usize) -> u64 {
    match b {
        0 => 0,
        b => bucket_high(b - 1) + 1,
    }
}

/// The bucket of value `v`.
fn bucket_of(v: u64) -> usize {
    if v < 2 * SUB as u64 {
        return v as usize;
    }
    let e = 63 - v.leading_zeros();
    let shift = e - SUB_BITS;
    shift as usize * SUB + (v >> shift) as usize
}

/// The highest value that falls in bucket `b`.
fn bucket_high(b: usize) -> u64 {
    if b < 2 * SUB {
        return b as u64;
    }
    let shift = (b / SUB - 1) as u32;
    let top = (b % SUB + SUB) as u64;
    // For the last bucket this is u64::MAX exactly; never overflows before it.
    ((top + 1) << shift).wrapping_sub(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_values_are_exact_and_buckets_tile_the_range() {
        for v in 0..64u64 {
            assert_eq!(bucket_of(v), v as usize);
            assert_eq!(bucket_high(v as usize), v);
        }
        // Every bucket's highest value is one below the next bucket's lowest.
        for b in 64..BUCKETS - 1 {
            let high = bucket_high(b);
            assert_eq!(bucket_of(high), b, "bucket {b}");
            assert_eq!(bucket_of(high + 1), b + 1, "bucket {b}");
        }
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
        assert_eq!(bucket_high(BUCKETS - 1), u64::MAX);
    }

    #[test]
    fn reported_values_are_within_one_thirty_second() {
        let mut v = 1u64;
        while v < u64::MAX / 3 {
            let high = bucket_high(bucket_of(v));
            assert!(high >= v);
            assert!(
                (high - v) as f64 <= v as f64 / 32.0,
                "{v} reported as {high}"
            );
            v = v * 3 + 1;
        }
    }

    #[test]
    fn quantiles_of_a_uniform_ramp_land_near_the_true_ones() {
        let mut h = Histogram::new();
        for v in 1..=100_000u64 {
            h.record(v);
        }
        assert_eq!(h.len(), 100_000);
        assert_eq!(h.min(), Some(1));
        assert_eq!(h.max(), Some(100_000));
        assert_eq!(h.mean(), Some(50_000.5));
        for (q, want) in [
            (0.5, 50_000.0),
            (0.9, 90_000.0),
            (0.99, 99_000.0),
            (0.999, 99_900.0),
        ] {
            let got = h.quantile(q).expect("non-empty") as f64;
            assert!(
                got >= want && got <= want * (1.0 + 1.0 / 32.0),
                "q{q}: {got}"
            );
        }
        assert_eq!(h.quantile(1.0), Some(100_000));
        assert_eq!(h.quantile(0.0), Some(1));
    }

    #[test]
    fn a_tail_outlier_shows_only_in_high_quantiles() {
        let mut h = Histogram::new();
        for _ in 0..999 {
            h.record(1_000);
        }
        h.record(5_000_000);
        let thousand = bucket_high(bucket_of(1_000));
        assert!((1_000..1_032).contains(&thousand));
        assert_eq!(h.quantile(0.99), Some(thousand));
        assert_eq!(h.quantile(0.999), Some(thousand));
        assert_eq!(h.quantile(0.9995), Some(5_000_000));
    }

    #[test]
    fn merging_equals_recording_everything_in_one() {
        let (mut a, mut b, mut all) = (Histogram::new(), Histogram::new(), Histogram::new());
        for v in (0..10_000u64).map(|x| x * x % 7_919 + 1) {
            if v % 2 == 0 {
                a.record(v)
            } else {
                b.record(v)
            }
            all.record(v);
        }
        a.merge(&b);
        assert_eq!(a.len(), all.len());
        assert_eq!(
            (a.min(), a.max(), a.mean()),
            (all.min(), all.max(), all.mean())
        );
        for q in [0.1, 0.5, 0.9, 0.99, 0.999] {
            assert_eq!(a.quantile(q), all.quantile(q));
        }
    }

    #[test]
    fn buckets_list_the_counts_in_order_and_cover_their_values() {
        let mut h = Histogram::new();
        for v in [5, 5, 1_000, 1_010, 70_000] {
            h.record(v);
        }
        let b: Vec<(u64, u64, u64)> = h.buckets().collect();
        assert_eq!(b.iter().map(|x| x.2).sum::<u64>(), 5);
        assert_eq!(b[0], (5, 5, 2));
        assert!(b.windows(2).all(|w| w[0].1 < w[1].0));
        for v in [1_000, 1_010, 70_000] {
            assert!(b.iter().any(|&(lo, hi, _)| lo <= v && v <= hi), "{v}");
        }
        assert_eq!(Histogram::new().buckets().count(), 0);
    }

    #[test]
    fn an_empty_histogram_reports_nothing() {
        let h = Histogram::new();
        assert!(h.is_empty());
        assert_eq!(
            (h.min(), h.max(), h.mean(), h.quantile(0.5)),
            (None, None, None, None)
        );
        let mut m = Histogram::new();
        m.merge(&h);
        assert!(m.is_empty());
    }
}

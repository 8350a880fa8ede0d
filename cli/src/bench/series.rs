//! Throughput over time for `zring bench --json` and `--plot`: what completed in each
//! fixed interval of the timed phase. A steady rate is a flat line; warm-up effects,
//! throttling disks and a neighbour taking the CPU show as steps.

use std::time::Duration;

use serde_json::{json, Value};

use crate::output::MIB;

/// Intervals per run when `--duration` allows: enough points for a line, each long
/// enough to hold several batches.
const POINTS: f64 = 50.0;

/// Completed work per interval, counted at each operation's completion time.
#[derive(Clone, Debug)]
pub struct Series {
    interval: Duration,
    buckets: Vec<Bucket>,
    /// Completion time of the last operation (the end of the last, partial interval).
    end: Duration,
}

/// Work done in one interval; fractional because an operation that spans several
/// intervals is shared between them.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Bucket {
    ops: f64,
    records: f64,
    logical: f64,
    physical: f64,
}

impl Bucket {
    fn add(&mut self, share: f64, records: u64, logical: u64, physical: u64) {
        self.ops += share;
        self.records += share * records as f64;
        self.logical += share * logical as f64;
        self.physical += share * physical as f64;
    }
}

/// One interval of a series, as rates.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    /// Seconds from the start of the timed phase to the end of the interval.
    pub t_s: f64,
    pub ops_per_s: f64,
    pub records_per_s: f64,
    pub logical_mib_per_s: f64,
    pub physical_mib_per_s: f64,
}

impl Series {
    /// An empty series with intervals sized for a run of `duration_s` seconds:
    /// 1/50 of it, between 10 ms and 1 s.
    pub fn for_duration(duration_s: f64) -> Self {
        let interval = (duration_s / POINTS).clamp(0.01, 1.0);
        Self::new(Duration::from_secs_f64(interval))
    }

    /// An empty series of `interval`-long intervals (at least 1 ms).
    pub fn new(interval: Duration) -> Self {
        Self {
            interval: interval.max(Duration::from_millis(1)),
            buckets: Vec::new(),
            end: Duration::ZERO,
        }
    }

    /// The interval length.
    #[cfg_attr(not(feature = "plot"), allow(dead_code))] // only the plots use it
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// Counts one operation that completed `at` after the start of the timed phase
    /// (when only the completion is known, as for a loader step).
    pub fn record(&mut self, at: Duration, records: u64, logical: u64, physical: u64) {
        self.record_span(at, at, records, logical, physical);
    }

    /// Counts one operation that ran from `start` to `end` (after the start of the
    /// timed phase), shared between the intervals it overlaps in proportion to the
    /// overlap: a 20 ms gather does not make a 60 ms interval look 3x faster than
    /// the next one just because it ended inside it.
    pub fn record_span(
        &mut self,
        start: Duration,
        end: Duration,
        records: u64,
        logical: u64,
        physical: u64,
    ) {
        let step = self.interval.as_nanos();
        let (s, e) = (start.as_nanos().min(end.as_nanos()), end.as_nanos());
        let last = (e / step) as usize;
        if self.buckets.len() <= last {
            self.buckets.resize(last + 1, Bucket::default());
        }
        if e == s {
            self.buckets[last].add(1.0, records, logical, physical);
        } else {
            for k in (s / step) as usize..=last {
                let lo = s.max(k as u128 * step);
                let hi = e.min((k as u128 + 1) * step);
                let share = hi.saturating_sub(lo) as f64 / (e - s) as f64;
                self.buckets[k].add(share, records, logical, physical);
            }
        }
        self.end = self.end.max(end);
    }

    /// Adds `other` interval by interval (jobs that ran side by side, each timed
    /// from its own start, which the start barrier makes nearly the same instant).
    pub fn merge(&mut self, other: &Series) {
        if other.interval != self.interval {
            // Different grids cannot be added; the callers always use one.
            return;
        }
        if self.buckets.len() < other.buckets.len() {
            self.buckets.resize(other.buckets.len(), Bucket::default());
        }
        for (a, b) in self.buckets.iter_mut().zip(&other.buckets) {
            a.ops += b.ops;
            a.records += b.records;
            a.logical += b.logical;
            a.physical += b.physical;
        }
        self.end = self.end.max(other.end);
    }

    /// Every interval as rates. The last one is divided by its real, partial
    /// length, and left out when shorter than half an interval (too short a
    /// stretch for a rate).
    pub fn points(&self) -> Vec<Point> {
        let step = self.interval.as_secs_f64();
        let n = self.buckets.len();
        self.buckets
            .iter()
            .enumerate()
            .filter_map(|(k, b)| {
                let start = k as f64 * step;
                let end = if k + 1 == n {
                    self.end.as_secs_f64()
                } else {
                    start + step
                };
                let len = end - start;
                (k + 1 < n || len >= step / 2.0).then(|| Point {
                    t_s: end,
                    ops_per_s: b.ops / len,
                    records_per_s: b.records / len,
                    logical_mib_per_s: b.logical / MIB / len,
                    physical_mib_per_s: b.physical / MIB / len,
                })
            })
            .collect()
    }

    /// `{"interval_s", "t_s": [...], "ops_per_s": [...], "records_per_s": [...],
    /// "logical_mib_per_s": [...], "physical_mib_per_s": [...]}`, one entry per interval.
    pub fn to_json(&self) -> Value {
        let p = self.points();
        let col = |f: fn(&Point) -> f64| p.iter().map(f).collect::<Vec<f64>>();
        json!({
            "interval_s": self.interval.as_secs_f64(),
            "t_s": col(|p| p.t_s),
            "ops_per_s": col(|p| p.ops_per_s),
            "records_per_s": col(|p| p.records_per_s),
            "logical_mib_per_s": col(|p| p.logical_mib_per_s),
            "physical_mib_per_s": col(|p| p.physical_mib_per_s),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_land_in_the_interval_of_their_completion() {
        let mut s = Series::new(Duration::from_millis(100));
        s.record(Duration::from_millis(10), 4, 4 << 20, 1 << 20);
        s.record(Duration::from_millis(90), 4, 4 << 20, 1 << 20);
        s.record(Duration::from_millis(260), 2, 2 << 20, 1 << 20);
        let p = s.points();
        assert_eq!(p.len(), 3);
        assert!((p[0].t_s - 0.1).abs() < 1e-9);
        assert!((p[0].logical_mib_per_s - 80.0).abs() < 1e-6, "{p:?}");
        assert!((p[0].records_per_s - 80.0).abs() < 1e-6);
        assert_eq!(p[1].ops_per_s, 0.0);
        // The last interval ends at the last completion (260 ms): 60 ms long.
        assert!((p[2].t_s - 0.26).abs() < 1e-9);
        assert!((p[2].logical_mib_per_s - 2.0 / 0.06).abs() < 1e-6, "{p:?}");
        // A last stretch under half an interval gives no point.
        s.record(Duration::from_millis(320), 1, 1, 1);
        assert_eq!(s.points().len(), 3);
    }

    #[test]
    fn an_operation_is_shared_by_the_intervals_it_spans() {
        let mut s = Series::new(Duration::from_millis(100));
        // 50 ms in the first interval, 100 in the second, 50 in the third.
        s.record_span(
            Duration::from_millis(50),
            Duration::from_millis(250),
            200,
            200,
            100,
        );
        s.record_span(
            Duration::from_millis(250),
            Duration::from_millis(300),
            50,
            50,
            50,
        );
        let b = &s.buckets;
        assert_eq!(
            b.len(),
            4,
            "the interval starting at 300 ms is touched, empty"
        );
        assert!((b[0].records - 50.0).abs() < 1e-9);
        assert!((b[1].records - 100.0).abs() < 1e-9);
        assert!((b[2].records - 100.0).abs() < 1e-9);
        assert!((b[1].physical - 50.0).abs() < 1e-9);
        let ops: f64 = b.iter().map(|x| x.ops).sum();
        assert!((ops - 2.0).abs() < 1e-9);
    }

    #[test]
    fn merged_series_add_interval_by_interval() {
        let mut a = Series::new(Duration::from_millis(50));
        let mut b = Series::new(Duration::from_millis(50));
        a.record(Duration::from_millis(20), 1, 10, 10);
        b.record(Duration::from_millis(30), 1, 30, 30);
        b.record(Duration::from_millis(120), 1, 5, 5);
        a.merge(&b);
        assert_eq!(a.buckets.len(), 3);
        assert_eq!(a.buckets[0].logical, 40.0);
        assert_eq!(a.buckets[0].ops, 2.0);
        assert_eq!(a.buckets[2].physical, 5.0);
        assert_eq!(a.end, Duration::from_millis(120));
        let v = a.to_json();
        // The last interval (100-120 ms) is under half an interval: no point.
        assert_eq!(v["t_s"].as_array().map(Vec::len), Some(2));
        assert_eq!(v["interval_s"], 0.05);
    }

    #[test]
    fn interval_follows_the_duration_within_bounds() {
        assert_eq!(
            Series::for_duration(5.0).interval(),
            Duration::from_millis(100)
        );
        assert_eq!(
            Series::for_duration(0.1).interval(),
            Duration::from_millis(10)
        );
        assert_eq!(
            Series::for_duration(600.0).interval(),
            Duration::from_secs(1)
        );
    }
}

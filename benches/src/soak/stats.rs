//! The soak's figures: per-period get latency and throughput, resource samples, the
//! end-of-run checks and the CSV files they are written to.

use std::fmt::Write as _;
use std::path::Path;

use hdrhistogram::Histogram;
use zring_platform::BufPoolStats;

use super::procfs::Resources;
use super::SoakError;

/// RSS after warm-up may vary by at most this fraction (max over min).
pub const RSS_TOLERANCE: f64 = 0.05;

/// One period (a minute by default) of the run.
#[derive(Clone, Debug, PartialEq)]
pub struct Period {
    /// 1-based.
    pub index: usize,
    /// Seconds from the start of the soak to the end of the period.
    pub end_s: f64,
    pub secs: f64,
    pub gets: u64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
    pub loader_records: u64,
    pub loader_batches: u64,
    /// The largest loader batch of the period, bytes of records.
    pub loader_max_batch_bytes: u64,
    /// Cores other processes kept busy during the period, where known.
    pub other_cores: Option<f64>,
}

impl Period {
    /// The period's figures from its get latencies (nanoseconds) and loader counts.
    pub fn new(
        index: usize,
        end_s: f64,
        secs: f64,
        latency_ns: &Histogram<u64>,
        loader: (u64, u64),
    ) -> Self {
        let us = |ns: u64| ns as f64 / 1e3;
        let q = |q: f64| us(latency_ns.value_at_quantile(q));
        Self {
            index,
            end_s,
            secs,
            gets: latency_ns.len(),
            p50_us: q(0.5),
            p99_us: q(0.99),
            p999_us: q(0.999),
            max_us: us(latency_ns.max()),
            loader_records: loader.0,
            loader_batches: loader.1,
            loader_max_batch_bytes: 0,
            other_cores: None,
        }
    }

    pub fn gets_per_s(&self) -> f64 {
        self.gets as f64 / self.secs.max(1e-9)
    }

    pub fn loader_records_per_s(&self) -> f64 {
        self.loader_records as f64 / self.secs.max(1e-9)
    }

    /// The line printed at the end of the period.
    pub fn line(&self) -> String {
        format!(
            "period {:>3} ({:>6.0} s): gets {:>8.0}/s  p50 {:>7.0} us  p99 {:>7.0} us  \
             p99.9 {:>7.0} us  max {:>8.0} us | loader {:>7.0} records/s ({} batches) \
             | other processes {} cores",
            self.index,
            self.end_s,
            self.gets_per_s(),
            self.p50_us,
            self.p99_us,
            self.p999_us,
            self.max_us,
            self.loader_records_per_s(),
            self.loader_batches,
            self.other_cores.map_or("?".into(), |c| format!("{c:.2}"))
        )
    }
}

/// One resource sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    /// Whole seconds from the start of the soak.
    pub t_s: u64,
    pub res: Resources,
    /// Memory charged to the soak's cgroup (process and page cache), where known.
    pub cgroup_bytes: Option<u64>,
    /// The loader's batch buffer pool, once the loader runs.
    pub loader_buffers: Option<BufPoolStats>,
}

/// Totals over the whole run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    pub gets: u64,
    pub loader_batches: u64,
    pub loader_records: u64,
    /// Records whose bytes differed from the generator's.
    pub wrong_records: u64,
    /// Reads that failed.
    pub errors: u64,
}

/// One end-of-run check.
#[derive(Clone, Debug, PartialEq)]
pub struct Check {
    pub name: &'static str,
    pub pass: bool,
    pub detail: String,
}

/// The checks the soak promises: steady resources after warm-up (samples taken at or
/// after `warmup_s`), every period busy, nothing wrong and nothing failed.
pub fn checks(periods: &[Period], samples: &[Sample], warmup_s: u64, t: &Totals) -> Vec<Check> {
    let steady: Vec<&Resources> = samples
        .iter()
        .filter(|s| s.t_s >= warmup_s)
        .map(|s| &s.res)
        .collect();
    let span = |f: fn(&Resources) -> u64| {
        let lo = steady.iter().map(|r| f(r)).min().unwrap_or(0);
        let hi = steady.iter().map(|r| f(r)).max().unwrap_or(0);
        (lo, hi)
    };
    let enough = steady.len() >= 2;
    let (rss_lo, rss_hi) = span(|r| r.rss_kib);
    let growth = rss_hi as f64 / rss_lo.max(1) as f64 - 1.0;
    let (fd_lo, fd_hi) = span(|r| r.fds);
    let (th_lo, th_hi) = span(|r| r.threads);
    let idle: Vec<usize> = periods
        .iter()
        .filter(|p| p.gets == 0 || p.loader_batches == 0)
        .map(|p| p.index)
        .collect();
    vec![
        Check {
            name: "rss flat",
            pass: enough && growth <= RSS_TOLERANCE,
            detail: format!(
                "after warm-up {rss_lo}..{rss_hi} KiB ({:+.1}% max over min, limit {:.0}%) over {} samples",
                growth * 100.0,
                RSS_TOLERANCE * 100.0,
                steady.len()
            ),
        },
        Check {
            name: "fds constant",
            pass: enough && fd_lo == fd_hi,
            detail: format!("after warm-up {fd_lo}..{fd_hi}"),
        },
        Check {
            name: "threads constant",
            pass: enough && th_lo == th_hi,
            detail: format!("after warm-up {th_lo}..{th_hi}"),
        },
        Check {
            name: "every period busy",
            pass: !periods.is_empty() && idle.is_empty(),
            detail: if idle.is_empty() {
                format!("{} periods, each with gets and loader batches", periods.len())
            } else {
                format!("periods with no gets or no loader batch: {idle:?}")
            },
        },
        Check {
            name: "no wrong bytes",
            pass: t.wrong_records == 0,
            detail: format!(
                "{} wrong records of {} gets and {} loader records",
                t.wrong_records, t.gets, t.loader_records
            ),
        },
        Check {
            name: "no errors",
            pass: t.errors == 0,
            detail: format!("{} failed reads", t.errors),
        },
    ]
}

/// Writes `periods.csv` and `resources.csv` into `dir`.
pub fn write_csv(dir: &Path, periods: &[Period], samples: &[Sample]) -> Result<(), SoakError> {
    let mut p = String::from(
        "period,end_s,secs,gets,gets_per_s,p50_us,p99_us,p999_us,max_us,\
         loader_records,loader_records_per_s,loader_batches,loader_max_batch_bytes,other_cores\n",
    );
    for m in periods {
        // Writing to a String cannot fail.
        let _ = writeln!(
            p,
            "{},{:.1},{:.3},{},{:.1},{:.1},{:.1},{:.1},{:.1},{},{:.1},{},{},{}",
            m.index,
            m.end_s,
            m.secs,
            m.gets,
            m.gets_per_s(),
            m.p50_us,
            m.p99_us,
            m.p999_us,
            m.max_us,
            m.loader_records,
            m.loader_records_per_s(),
            m.loader_batches,
            m.loader_max_batch_bytes,
            m.other_cores.map_or(String::new(), |c| format!("{c:.2}"))
        );
    }
    let mut r = String::from(
        "t_s,rss_kib,anon_huge_kib,fds,threads,cgroup_bytes,\
         buffers_allocated,buffers_live,buffers_free,buffers_free_bytes\n",
    );
    for s in samples {
        let cg = s.cgroup_bytes.map_or(String::new(), |b| b.to_string());
        let buffers = s.loader_buffers.map_or(",,,".into(), |b| {
            format!("{},{},{},{}", b.allocations, b.live, b.free, b.free_bytes)
        });
        let huge = s.res.anon_huge_kib.map_or(String::new(), |k| k.to_string());
        let _ = writeln!(
            r,
            "{},{},{huge},{},{},{cg},{buffers}",
            s.t_s, s.res.rss_kib, s.res.fds, s.res.threads
        );
    }
    write_file(&dir.join("periods.csv"), &p)?;
    write_file(&dir.join("resources.csv"), &r)
}

pub fn write_file(path: &Path, text: &str) -> Result<(), SoakError> {
    std::fs::write(path, text).map_err(|source| SoakError::Io {
        path: path.to_path_buf(),
        what: "writing results",
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t_s: u64, rss_kib: u64, fds: u64, threads: u64) -> Sample {
        Sample {
            t_s,
            res: Resources {
                rss_kib,
                fds,
                threads,
                anon_huge_kib: None,
            },
            cgroup_bytes: None,
            loader_buffers: None,
        }
    }

    fn period(index: usize) -> Period {
        let mut h = Histogram::<u64>::new(3).expect("histogram");
        h.record(1_000).expect("record");
        Period::new(index, 60.0 * index as f64, 60.0, &h, (64, 1))
    }

    fn passed(checks: &[Check]) -> Vec<(&'static str, bool)> {
        checks.iter().map(|c| (c.name, c.pass)).collect()
    }

    #[test]
    fn warm_up_growth_is_ignored_and_later_growth_fails() {
        let periods = [period(1), period(2)];
        let t = Totals::default();
        // 50% growth during warm-up, then 4%: passes.
        let ok = [
            sample(0, 1000, 9, 20),
            sample(60, 1500, 10, 21),
            sample(70, 1560, 10, 21),
        ];
        assert!(checks(&periods, &ok, 60, &t).iter().all(|c| c.pass));
        // 6% after warm-up, one more fd and thread: fail.
        let bad = [sample(60, 1500, 10, 21), sample(70, 1590, 11, 22)];
        let got = passed(&checks(&periods, &bad, 60, &t));
        assert_eq!(
            &got[..3],
            &[
                ("rss flat", false),
                ("fds constant", false),
                ("threads constant", false)
            ]
        );
    }

    #[test]
    fn wrong_bytes_errors_and_idle_periods_fail() {
        let samples = [sample(60, 1000, 10, 20), sample(70, 1000, 10, 20)];
        let t = Totals {
            wrong_records: 1,
            errors: 2,
            ..Totals::default()
        };
        let mut idle = period(2);
        idle.loader_batches = 0;
        let got = passed(&checks(&[period(1), idle], &samples, 60, &t));
        assert_eq!(
            &got[3..],
            &[
                ("every period busy", false),
                ("no wrong bytes", false),
                ("no errors", false)
            ]
        );
    }
}

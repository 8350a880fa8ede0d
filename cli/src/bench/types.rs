//! What the pieces of `zring bench` hand one another: the records' table, where their
//! expected bytes come from, and the figures of a timed run.

use std::path::Path;

use zring_engine::{Backend, ReadOptions, RecordCodec, Store};

use super::histogram::Histogram;
use super::series::Series;
use super::synth::SynthSpec;
use crate::{CliError, CliResult};

/// Figures of one timed run (of one job, or all jobs summed).
#[derive(Debug)]
pub struct RunResult {
    /// Gathers, gets or loader steps timed.
    pub ops: u64,
    pub records: u64,
    pub logical_bytes: u64,
    pub physical_bytes: u64,
    /// Gather mode: sum of the timed gather calls (the longest job's, for several
    /// jobs). Get and loader mode: wall time of the run.
    pub timed_seconds: f64,
    /// Wall time of the timed phase (index draws included).
    pub wall_seconds: f64,
    /// Process CPU seconds (user + system) over the timed phase.
    pub cpu_seconds: Option<f64>,
    /// Cores that other processes kept busy during the timed phase.
    pub others_cores: Option<f64>,
    /// Nanoseconds per gather, get or loader step (as the consumer waited for it).
    pub latency_ns: Histogram,
    /// Throughput over time.
    pub series: Series,
    /// Per-job figures when `--jobs` > 1.
    pub jobs: Vec<RunResult>,
    /// Loader mode: the process's peak resident memory during the run, bytes.
    pub peak_rss_bytes: Option<u64>,
    /// Loader mode: the workers and ready steps the loader ran with (the look-ahead
    /// may raise --workers and --prefetch, or lower them to fit its budget).
    pub loader_depth: Option<(usize, usize)>,
}

impl RunResult {
    pub(crate) fn empty(duration_s: f64) -> Self {
        Self {
            ops: 0,
            records: 0,
            logical_bytes: 0,
            physical_bytes: 0,
            timed_seconds: 0.0,
            wall_seconds: 0.0,
            cpu_seconds: None,
            others_cores: None,
            latency_ns: Histogram::new(),
            series: Series::for_duration(duration_s),
            jobs: Vec::new(),
            peak_rss_bytes: None,
            loader_depth: None,
        }
    }

    /// Adds a job's counts (rates of the sum are taken over the longest job).
    pub(crate) fn add(&mut self, job: &RunResult) {
        self.ops += job.ops;
        self.records += job.records;
        self.logical_bytes += job.logical_bytes;
        self.physical_bytes += job.physical_bytes;
        self.timed_seconds = self.timed_seconds.max(job.timed_seconds);
        self.wall_seconds = self.wall_seconds.max(job.wall_seconds);
        self.latency_ns.merge(&job.latency_ns);
        self.series.merge(&job.series);
    }
}

/// Per-record figures from the table, loaded before timing.
pub(crate) struct Table {
    pub(crate) offset: Vec<u64>,
    pub(crate) stored_len: Vec<u32>,
    pub(crate) logical_len: Vec<u32>,
    pub(crate) codec: Vec<RecordCodec>,
    pub(crate) max_logical: usize,
}

impl Table {
    pub(crate) fn load(store: &Store) -> CliResult<Self> {
        let n = store.len() as usize;
        let mut t = Self {
            offset: Vec::with_capacity(n),
            stored_len: Vec::with_capacity(n),
            logical_len: Vec::with_capacity(n),
            codec: Vec::with_capacity(n),
            max_logical: 0,
        };
        for i in 0..store.len() {
            let e = store.entry(i)?;
            t.offset.push(e.offset);
            t.stored_len.push(e.stored_len);
            t.logical_len.push(e.logical_len);
            t.codec.push(e.codec);
            t.max_logical = t.max_logical.max(e.logical_len as usize);
        }
        Ok(t)
    }

    /// Record `i` as the baseline takes it.
    pub(crate) fn rec(&self, i: u64) -> Option<super::measure::Rec> {
        let i = usize::try_from(i).ok()?;
        Some(super::measure::Rec {
            offset: *self.offset.get(i)?,
            stored: *self.stored_len.get(i)?,
            logical: *self.logical_len.get(i)?,
            codec: *self.codec.get(i)?,
        })
    }

    /// Stored bytes of the records at `indices`: what a read path moves from the file.
    pub(crate) fn physical(&self, indices: &[u64]) -> u64 {
        indices
            .iter()
            .map(|&i| u64::from(self.stored_len[i as usize]))
            .sum()
    }

    /// The mean stored record size.
    pub(crate) fn mean_stored(&self) -> f64 {
        let total: u64 = self.stored_len.iter().map(|&l| u64::from(l)).sum();
        total as f64 / self.stored_len.len().max(1) as f64
    }

    /// The file range the records occupy: from the first record's offset (rounded
    /// down to 4 KiB, where O_DIRECT reads may start) to the end of the last.
    pub(crate) fn span(&self) -> (u64, u64) {
        let start = self.offset.iter().copied().min().unwrap_or(0) / 4096 * 4096;
        let end = self
            .offset
            .iter()
            .zip(&self.stored_len)
            .map(|(&o, &l)| o + u64::from(l))
            .max()
            .unwrap_or(start);
        (start, end.max(start))
    }
}

/// Where the expected bytes of a record come from: the generator for a synthetic
/// store, checksum-verified pread gets otherwise.
pub(crate) enum Source<'a> {
    Synthetic(&'a SynthSpec),
    Store(Store),
}

impl<'a> Source<'a> {
    pub(crate) fn new(path: &Path, synthetic: Option<&'a SynthSpec>) -> CliResult<Self> {
        Ok(match synthetic {
            Some(spec) => Source::Synthetic(spec),
            None => Source::Store(Store::open(
                path,
                ReadOptions::default()
                    .backend(Backend::Pread)
                    .verify_checksums(true)
                    .threads(1),
            )?),
        })
    }

    /// Record `i` as it must read.
    pub(crate) fn record(&self, i: u64) -> CliResult<Vec<u8>> {
        match self {
            Source::Synthetic(spec) => Ok(spec.record(i)),
            Source::Store(s) => Ok(s.get(i)?),
        }
    }
}

/// The error of a record that read wrong.
pub(crate) fn differs(k: usize, i: u64) -> CliError {
    CliError::new(format!(
        "correctness check failed: record {i} (position {k} of a gathered batch) differs from the source; the timing would be meaningless"
    ))
}

//! The arguments of `zring bench` and the engine options they give, shared by the
//! command (`bench`) and its runs (`run`, `loader`, `report`).

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use zring_engine::{Codec, ReadOptions};

use crate::settings::ReadArgs;
use crate::CliResult;
use zring_sampler::Mode;

use super::synth::IMAGE_BYTES;
use crate::pack::DEFAULT_DICT_BYTES;
use crate::{parse_codec, parse_size};

/// Default synthetic record count: 1000 W1 images (147 MiB) builds and runs in a
/// few seconds on a 2-core machine and keeps the temp file modest.
pub const DEFAULT_COUNT: u64 = 1000;

/// What is timed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BenchMode {
    /// Batched gathers of `--batch` random records.
    Gather,
    /// Single-record gets from `--concurrency` threads (serving latency).
    Get,
    /// Steps of `--batch` records through the end-to-end loader (sampler, workers,
    /// read-ahead, pooled buffers), as a training loop sees them.
    Loader,
}

impl BenchMode {
    pub fn name(self) -> &'static str {
        match self {
            BenchMode::Gather => "gather",
            BenchMode::Get => "get",
            BenchMode::Loader => "loader",
        }
    }
}

/// Reference tools `--compare` can run on the same file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CompareWith {
    /// fio with the equivalent random-read job, in the same invocation.
    Fio,
}

#[derive(Clone, Debug, Args)]
pub struct BenchArgs {
    /// Benchmark this existing store instead of a synthetic one.
    #[arg(long, value_name = "PATH",
          conflicts_with_all = ["count", "record_bytes", "codec", "level", "dict_size", "ragged", "dir", "replay"])]
    pub store: Option<PathBuf>,
    /// Build the synthetic store with the record count and the record sizes of this
    /// store (and its codec, unless --codec is given), filled with generated data:
    /// its size distribution without its contents.
    #[arg(long, value_name = "STORE", conflicts_with_all = ["count", "record_bytes", "ragged"])]
    pub replay: Option<PathBuf>,
    /// Synthetic store: number of records.
    #[arg(long, default_value_t = DEFAULT_COUNT)]
    pub count: u64,
    /// Synthetic store: bytes per record (the mean with --ragged), units allowed
    /// (4k, 1M). The default is one uint8[3, 224, 224] image.
    #[arg(long, value_name = "SIZE", default_value_t = IMAGE_BYTES, value_parser = parse_size::<usize>)]
    pub record_bytes: usize,
    /// Synthetic store: raw, zstd or zstd-dict [default: zstd, or the replayed
    /// store's codec].
    #[arg(long, value_parser = parse_codec)]
    pub codec: Option<Codec>,
    /// Synthetic store: zstd level (zstd's range, -131072 to 22 with the bundled zstd).
    #[arg(long, default_value_t = 3, allow_negative_numbers = true)]
    pub level: i32,
    /// Synthetic store: dictionary size for zstd-dict, units allowed (112k).
    #[arg(long, value_name = "SIZE", default_value_t = DEFAULT_DICT_BYTES, value_parser = parse_size::<usize>)]
    pub dict_size: usize,
    /// Synthetic store: variable-length 1-D records instead of fixed-size ones.
    #[arg(long)]
    pub ragged: bool,
    /// Synthetic store: directory to build it in (default: the system temp
    /// directory). It is removed afterwards.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Seed of the data generator and of the index sampler.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// gather: batched random gathers; get: single-record gets; loader: the
    /// end-to-end loader.
    #[arg(long, value_enum, default_value_t = BenchMode::Gather)]
    pub mode: BenchMode,
    /// The order gathers (and loader steps) draw records in: iid (random, with
    /// replacement), cyclic (a shuffled permutation per epoch) or sequential (the
    /// store's order, where neighbouring records are read together).
    #[arg(long, value_name = "MODE", default_value = "iid", value_parser = parse_sampler)]
    pub sampler: Mode,
    /// Records per gather (per loader step).
    #[arg(long, default_value_t = 256)]
    pub batch: usize,
    /// Threads per gather, counting the caller (0: all cores) [default: 0]. The
    /// `threads` read setting.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub threads: Option<String>,
    /// Gather mode: independent jobs side by side, each a thread with its own store
    /// handle, io_uring rings, indices and buffers (like fio's numjobs); reported per
    /// job and summed.
    #[arg(long, default_value_t = 1)]
    pub jobs: usize,
    /// Loader mode: loader worker threads (0: each step made in the consumer).
    #[arg(long, default_value_t = 2)]
    pub workers: usize,
    /// Loader mode: finished steps kept ready ahead of the consumer.
    #[arg(long, default_value_t = 4)]
    pub prefetch: usize,
    /// Loader mode: size the look-ahead from this much step memory (units allowed:
    /// 512M, 1G) and the device's queue depth, with --workers and --prefetch as
    /// floors (the library's default, 512 MiB); 0 uses them exactly.
    #[arg(long, value_name = "SIZE", default_value = "512M", value_parser = parse_size::<u64>)]
    pub lookahead: u64,
    /// Read backend, by the engine's name for it: auto, pread, mmap or uring
    /// [default: auto]. The `backend` read setting.
    #[arg(long, value_name = "BACKEND")]
    pub backend: Option<String>,
    /// Reads each thread keeps in flight with the uring backend, 1 to 256
    /// [default: 64]. The `queue_depth` read setting.
    #[arg(
        long = "qd",
        value_name = "DEPTH",
        conflicts_with = "queue_depth",
        allow_negative_numbers = true
    )]
    pub qd: Option<String>,
    /// The same as --qd, by the setting's name.
    #[arg(
        long = "queue-depth",
        value_name = "DEPTH",
        allow_negative_numbers = true
    )]
    pub queue_depth: Option<String>,
    /// Read with O_DIRECT, bypassing the page cache (device benchmarking). The
    /// synthetic store is then written with 4096-byte alignment. The `direct` read
    /// setting.
    #[arg(long)]
    pub direct: bool,
    /// Synthetic store: record alignment in the file (default 8, or 4096 with
    /// --direct).
    #[arg(long, value_name = "BYTES")]
    pub align: Option<u32>,
    /// Start with the store out of the page cache (cold reads without O_DIRECT): all
    /// caches dropped as root, else the store file's pages (posix_fadvise DONTNEED).
    #[arg(long)]
    pub cold: bool,
    /// Seconds of timed gathers (or of gets, per thread; or of loader steps).
    #[arg(long, value_name = "SECONDS", default_value_t = 2.0)]
    pub duration: f64,
    /// Untimed warm-up batches (get mode: warm-up gets = this x --batch per thread).
    #[arg(long, value_name = "BATCHES", default_value_t = 5)]
    pub warmup: u64,
    /// Get mode: threads issuing gets at once.
    #[arg(long, default_value_t = 1)]
    pub concurrency: usize,
    /// After zring's run, run this tool on the same file with the equivalent job
    /// (block size, queue depth, O_DIRECT, engine, readers) for --duration seconds,
    /// and print both with the ratio. Skipped, saying so, when it is not installed.
    #[arg(long, value_enum, value_name = "TOOL")]
    pub compare: Option<CompareWith>,
    /// fio's buffers for --compare fio: malloc or shmhuge [default: shmhuge when
    /// enough huge pages are free, like zring's huge-page buffers, else malloc].
    #[arg(long, value_name = "KIND")]
    pub fio_iomem: Option<String>,
    /// Draw throughput over time and the latency histogram into FILE (.svg or .png).
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// Skip the per-record checksum check on reads (on by default, as in every
    /// reader). The `verify_checksums` read setting, false.
    #[arg(long)]
    pub no_verify_checksums: bool,
    /// Any read setting as KEY=VALUE, after the flags above (`--read
    /// remote.in_flight=64`, `--read queue_depth=32`), as `info` and `verify` take.
    #[command(flatten)]
    pub settings: ReadArgs,
    /// The read settings the run uses: the read flags above, then each `--read`,
    /// as [`BenchArgs::resolved`] sets them (the defaults until then). Every job
    /// opens the store with them, and the report shows them.
    #[arg(skip)]
    pub opts: ReadOptions,
}

fn parse_sampler(s: &str) -> Result<Mode, String> {
    s.parse()
        .map_err(|e: zring_sampler::SamplerError| e.to_string())
}

impl BenchArgs {
    /// These arguments with [`opts`](BenchArgs::opts) set from the read flags given,
    /// then each `--read KEY=VALUE`, through the engine's one rule set
    /// ([`ReadArgs::options_after`]): a flag takes exactly the values of its setting
    /// and a bad one is refused with the message `--read`, Rust and Python give
    /// (after the flag's name). The rest of the bench (the synthetic store's
    /// alignment, fio's job, the report) reads the settings from `opts`, however
    /// they were given.
    pub(crate) fn resolved(&self) -> CliResult<Self> {
        let value = |flag: &'static str, key: &'static str, v: &Option<String>| {
            v.as_ref().map(|v| (flag, key, v.clone()))
        };
        let switch = |flag: &'static str, key: &'static str, on: bool, to: bool| {
            on.then(|| (flag, key, to.to_string()))
        };
        let flags = [
            value("--backend", "backend", &self.backend),
            value("--threads", "threads", &self.threads),
            value("--qd", "queue_depth", &self.qd),
            value("--queue-depth", "queue_depth", &self.queue_depth),
            switch("--direct", "direct", self.direct, true),
            switch(
                "--no-verify-checksums",
                "verify_checksums",
                self.no_verify_checksums,
                false,
            ),
        ];
        let mut args = self.clone();
        args.opts = self.settings.options_after(flags.into_iter().flatten())?;
        Ok(args)
    }
}

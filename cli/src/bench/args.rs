//! The arguments of `zring bench` and the engine options they give, shared by the
//! command (`bench`) and its runs (`run`, `loader`, `report`).

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use zring_engine::{Backend, Codec, ReadOptions};

use crate::settings::ReadArgs;
use crate::{CliError, CliResult};
use zring_sampler::Mode;

use super::synth::IMAGE_BYTES;
use crate::pack::DEFAULT_DICT_BYTES;
use crate::parse_codec;

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
    /// Synthetic store: bytes per record (the mean with --ragged). The default is one
    /// uint8[3, 224, 224] image.
    #[arg(long, value_name = "BYTES", default_value_t = IMAGE_BYTES)]
    pub record_bytes: usize,
    /// Synthetic store: raw, zstd or zstd-dict [default: zstd, or the replayed
    /// store's codec].
    #[arg(long, value_parser = parse_codec)]
    pub codec: Option<Codec>,
    /// Synthetic store: zstd level (zstd's range, -131072 to 22 with the bundled zstd).
    #[arg(long, default_value_t = 3, allow_negative_numbers = true)]
    pub level: i32,
    /// Synthetic store: dictionary bytes for zstd-dict.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_DICT_BYTES)]
    pub dict_size: usize,
    /// Synthetic store: variable-length 1-D records instead of fixed-size ones.
    #[arg(long)]
    pub ragged: bool,
    /// Synthetic store: directory to build it in (default: the system temp
    /// directory). It is removed afterwards.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Seed of the data generator and of the index sampler.
    #[arg(long, default_value_t = 42)]
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
    /// Threads per gather, counting the caller (0: all cores).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
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
    /// Loader mode: size the look-ahead from this many MiB of step memory and the
    /// device's queue depth, with --workers and --prefetch as floors (the library's
    /// default, 512 MiB); 0 uses them exactly.
    #[arg(long = "lookahead-mib", value_name = "MIB", default_value_t = 512)]
    pub lookahead_mib: u64,
    /// Read backend, by the engine's name for it (auto, pread, mmap, uring).
    #[arg(long, default_value = "auto", value_parser = parse_backend)]
    pub backend: Backend,
    /// Reads each thread keeps in flight with the uring backend (1..=256).
    #[arg(long = "qd", value_name = "DEPTH", default_value_t = 64)]
    pub queue_depth: usize,
    /// Read with O_DIRECT, bypassing the page cache (device benchmarking). The
    /// synthetic store is then written with 4096-byte alignment.
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
    /// reader).
    #[arg(long)]
    pub no_verify_checksums: bool,
    /// Any read setting as KEY=VALUE, after the flags above (`--read
    /// remote.in_flight=64`, `--read queue_depth=32`), as `info` and `verify` take.
    #[command(flatten)]
    pub settings: ReadArgs,
}

fn parse_sampler(s: &str) -> Result<Mode, String> {
    s.parse()
        .map_err(|e: zring_sampler::SamplerError| e.to_string())
}

fn parse_backend(s: &str) -> Result<Backend, String> {
    s.parse()
        .map_err(|e: zring_engine::ParseBackendError| e.to_string())
}

/// The engine options every job opens the store with: the read flags, then each
/// `--read KEY=VALUE`, through the engine's one rule set (`ReadOptions::set`), so a
/// bad value is refused with the message `--read`, Rust and Python give (after the
/// flag's name, when a flag gave it).
pub(crate) fn read_options(args: &BenchArgs) -> CliResult<ReadOptions> {
    let flags = [
        ("--backend", "backend", args.backend.name().to_string()),
        (
            "--no-verify-checksums",
            "verify_checksums",
            (!args.no_verify_checksums).to_string(),
        ),
        ("--threads", "threads", args.threads.to_string()),
        ("--qd", "queue_depth", args.queue_depth.to_string()),
        ("--direct", "direct", args.direct.to_string()),
    ];
    let mut opts = ReadOptions::default();
    for (flag, key, value) in &flags {
        opts.set(key, value)
            .map_err(|e| CliError::usage(format!("{flag} {value}: {e}")))?;
    }
    for (key, value) in &args.settings.read {
        opts.set(key, value)
            .map_err(|e| CliError::usage(e.to_string()))?;
    }
    opts.validate()
        .map_err(|e| CliError::usage(e.to_string()))?;
    Ok(opts)
}

impl BenchArgs {
    /// These arguments with the read flags set to what `opts` (from
    /// [`read_options`]) says, so the rest of the bench (the synthetic store's
    /// alignment, fio's job, the report) follows the settings however they were
    /// given.
    pub(crate) fn with_settings(&self, opts: &ReadOptions) -> Self {
        let mut args = self.clone();
        args.backend = opts.backend;
        args.no_verify_checksums = !opts.verify_checksums;
        args.threads = opts.threads;
        args.queue_depth = opts.queue_depth;
        args.direct = opts.direct;
        args
    }
}

//! `zring bench --compare fio`: runs fio on the very file zring just read, with the
//! job that issues the same reads (block size, queue depth, O_DIRECT, engine, number
//! of readers, page-cache state), and parses its JSON report. fio is the reference
//! people trust for what a device or a file system can do; the ratio says how much of
//! it a zring read path reaches.

use std::path::PathBuf;
use std::process::Command;

use serde_json::{json, Value};
use zring_engine::Backend;

use crate::error::CliError;
use crate::output::MIB;

/// Bytes of one huge page when `/proc/meminfo` does not say.
const HUGE_PAGE: u64 = 2 << 20;

/// One fio job, described in zring's terms.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FioJob {
    pub filename: PathBuf,
    /// Bytes per read.
    pub block_bytes: u64,
    /// Where the records start and how many bytes they span (fio reads only there).
    pub offset: u64,
    pub size: u64,
    /// `io_uring`, `psync` or `mmap`.
    pub ioengine: &'static str,
    pub iodepth: usize,
    /// Readers side by side (fio's numjobs).
    pub numjobs: usize,
    pub direct: bool,
    /// Drop the file's pages from the page cache before reading (zring's `--cold`).
    pub invalidate: bool,
    /// fio's `--iomem`: `malloc` (4 KiB pages) or `shmhuge` (huge pages, like the
    /// engine's large buffers).
    pub iomem: String,
    pub runtime_ms: u64,
}

/// What fio measured (its `group_reporting` sum over every job).
#[derive(Clone, Debug, PartialEq)]
pub struct FioResult {
    pub job: FioJob,
    /// The exact command run, for the report.
    pub command: String,
    pub version: String,
    pub reads_per_s: f64,
    pub bytes_per_s: f64,
    pub io_bytes: u64,
    pub runtime_s: f64,
    /// Per-read completion latency (submission excluded), microseconds.
    pub clat_us_p50: Option<f64>,
    pub clat_us_p99: Option<f64>,
    /// Per-read total latency (submission + completion), mean, microseconds.
    pub lat_us_mean: Option<f64>,
}

/// fio ran, or why it did not.
#[derive(Clone, Debug, PartialEq)]
pub enum FioOutcome {
    Ran(Box<FioResult>),
    Skipped(String),
}

/// One fio sequential write of as many bytes as the synthetic store holds, in the
/// same directory (so the same file system and disk), fsync included: what the disk
/// can write, to compare the store's write with.
#[derive(Clone, Debug, PartialEq)]
pub struct FioWrite {
    /// How it wrote ([`WRITE_KINDS`]).
    pub how: &'static str,
    pub command: String,
    pub bytes: u64,
    pub bytes_per_s: f64,
    pub runtime_s: f64,
}

/// Block size of the sequential writes, as `dd bs=1M`.
const WRITE_BLOCK: u64 = 1 << 20;

/// The sequential writes fio makes, each ended by an fsync: through the page cache,
/// plain and with the writeback of each write started at once (the writes zring's
/// writer issues: `sync_file_range` per MiB; at 80 MiB 1.4x the plain buffered
/// write), and O_DIRECT with 8 writes in flight (what the device takes with a
/// queue; one O_DIRECT write at a time, `dd oflag=direct`, is slower than a buffered
/// write and fsync on many disks, and zring's write beat it 1.5x). The fastest is
/// the disk's sequential write: a limit for the store's write, not a peer.
pub const WRITE_KINDS: [(&str, &[&str]); 3] = [
    (
        "buffered, fsync at the end",
        &["--ioengine=psync", "--direct=0"],
    ),
    (
        "buffered, writeback started per write",
        &[
            "--ioengine=psync",
            "--direct=0",
            "--sync_file_range=write:1",
        ],
    ),
    (
        "O_DIRECT, io_uring, 8 in flight, fsync at the end",
        &["--ioengine=io_uring", "--iodepth=8", "--direct=1"],
    ),
];

/// Runs each of [`WRITE_KINDS`] for `bytes` (rounded up to whole MiB) into a scratch
/// file in `dir`, removed afterwards, and returns those that ran (a file system may
/// refuse O_DIRECT, a sandbox io_uring); empty when fio is not installed. Errors
/// only when none ran.
pub fn run_write(dir: &std::path::Path, bytes: u64) -> Result<Vec<FioWrite>, CliError> {
    let Some(fio) = find() else {
        return Ok(Vec::new());
    };
    let size = bytes.max(1).div_ceil(WRITE_BLOCK) * WRITE_BLOCK;
    let (mut ran, mut failed) = (Vec::new(), None);
    for (how, engine) in WRITE_KINDS {
        let file = tempfile::Builder::new()
            .prefix("zring-fio-write-")
            .tempfile_in(dir)
            .map_err(|e| CliError::io(dir, "creating fio's scratch file", e))?;
        let mut args = vec![
            "--name=zring-compare-write".to_string(),
            format!("--filename={}", file.path().display()),
            "--rw=write".into(),
            format!("--bs={WRITE_BLOCK}"),
            format!("--size={size}"),
        ];
        args.extend(engine.iter().map(|a| a.to_string()));
        args.extend(["--end_fsync=1".into(), "--output-format=json".into()]);
        match execute(&fio, &args, |text, command| parse_write(text, how, command)) {
            Ok(w) => ran.push(w),
            Err(e) => failed = Some(e),
        }
    }
    match (ran.is_empty(), failed) {
        (true, Some(e)) => Err(e),
        _ => Ok(ran),
    }
}

/// The fastest of the writes that ran.
pub fn best_write(writes: &[FioWrite]) -> Option<&FioWrite> {
    writes
        .iter()
        .max_by(|a, b| a.bytes_per_s.total_cmp(&b.bytes_per_s))
}

/// Reads the write section of fio's JSON report.
fn parse_write(text: &str, how: &'static str, command: String) -> Result<FioWrite, String> {
    let start = text.find('{').ok_or("no JSON object")?;
    let v: Value = serde_json::from_str(&text[start..]).map_err(|e| e.to_string())?;
    let w = &v["jobs"][0]["write"];
    Ok(FioWrite {
        how,
        command,
        bytes: w["io_bytes"].as_u64().ok_or("no write.io_bytes")?,
        bytes_per_s: w["bw_bytes"].as_f64().ok_or("no write.bw_bytes")?,
        runtime_s: w["runtime"].as_f64().ok_or("no write.runtime")? / 1e3,
    })
}

/// The `fio.write` section of `--json`: the fastest write (the disk's sequential
/// write) and every write that ran.
pub fn writes_json(writes: &[FioWrite], zring_write_bytes_per_s: f64) -> Value {
    let one = |w: &FioWrite| {
        json!({
            "how": w.how,
            "command": w.command,
            "bytes": w.bytes,
            "mib_per_s": w.bytes_per_s / MIB,
            "runtime_s": w.runtime_s,
            "zring_write_vs_fio": zring_write_bytes_per_s / w.bytes_per_s.max(1e-12),
        })
    };
    let Some(best) = best_write(writes) else {
        return Value::Null;
    };
    let mut v = one(best);
    let ratio = zring_write_bytes_per_s / best.bytes_per_s.max(1e-12);
    v["exceeded"] = json!(super::measure::exceeds(ratio));
    v["runs"] = Value::Array(writes.iter().map(one).collect());
    v
}

/// fio's ioengine for a resolved zring backend.
pub fn ioengine(backend: Backend) -> &'static str {
    match backend {
        Backend::Uring => "io_uring",
        Backend::Mmap => "mmap",
        _ => "psync",
    }
}

/// The block size fio reads: the stored record size (the mean when records vary),
/// rounded up to 4 KiB with O_DIRECT (the device's granule) and to 512 bytes
/// otherwise (fio's own minimum alignment).
pub fn block_bytes(mean_stored: f64, direct: bool) -> u64 {
    let granule = if direct { 4096 } else { 512 };
    let b = (mean_stored.ceil() as u64).max(1);
    b.div_ceil(granule) * granule
}

/// `shmhuge` when enough huge pages are free for every job's buffers (the engine's
/// large buffers are huge-page backed, so this is the like-for-like setting);
/// otherwise `malloc`, with the reason.
pub fn choose_iomem(block: u64, iodepth: usize, numjobs: usize) -> (String, Option<String>) {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let field = |name: &str| -> Option<u64> {
        meminfo
            .lines()
            .find(|l| l.starts_with(name))?
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()
    };
    let free = field("HugePages_Free:").unwrap_or(0);
    let page = field("Hugepagesize:").map_or(HUGE_PAGE, |kib| kib * 1024);
    // fio allocates one region of block x iodepth per job (plus alignment).
    let per_job = (block * iodepth as u64 + page).div_ceil(page);
    let need = per_job * numjobs as u64;
    if free >= need {
        ("shmhuge".into(), None)
    } else {
        (
            "malloc".into(),
            Some(format!(
                "fio reads into 4 KiB pages: {need} free huge pages are needed for huge-page \
                 buffers like zring's and {free} are free \
                 (echo {need} > /proc/sys/vm/nr_hugepages, or --fio-iomem)"
            )),
        )
    }
}

/// The fio executable on `PATH`, if any.
pub fn find() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("fio"))
        .find(|p| p.is_file())
}

impl FioJob {
    /// fio's arguments for this job.
    pub fn args(&self) -> Vec<String> {
        let mut args = self.common_args();
        if self.ioengine == "io_uring" {
            // What zring's rings do: registered files and buffers (READ_FIXED), and
            // reads submitted and reaped in batches. Without them fio spends more
            // CPU per read and is no limit at 100 k reads/s (zring 1.05-1.24x it).
            args.extend([
                "--registerfiles=1".to_string(),
                "--fixedbufs=1".into(),
                format!("--iodepth_batch_submit={}", self.iodepth.div_ceil(4)),
                format!("--iodepth_batch_complete_max={}", self.iodepth),
            ]);
        }
        args
    }

    fn common_args(&self) -> Vec<String> {
        vec![
            "--name=zring-compare".into(),
            format!("--filename={}", self.filename.display()),
            "--readonly".into(),
            "--rw=randread".into(),
            // zring's IID indices repeat records; fio's random map would not.
            "--norandommap".into(),
            format!("--bs={}", self.block_bytes),
            format!("--offset={}", self.offset),
            format!("--size={}", self.size),
            format!("--ioengine={}", self.ioengine),
            format!("--iodepth={}", self.iodepth),
            format!("--numjobs={}", self.numjobs),
            format!("--direct={}", u8::from(self.direct)),
            format!("--invalidate={}", u8::from(self.invalidate)),
            format!("--iomem={}", self.iomem),
            format!("--runtime={}ms", self.runtime_ms),
            "--time_based".into(),
            "--group_reporting".into(),
            "--output-format=json".into(),
        ]
    }
}

/// Runs `job` with the fio found on `PATH`; `Skipped` when there is none.
pub fn run(job: FioJob) -> Result<FioOutcome, CliError> {
    let Some(fio) = find() else {
        return Ok(FioOutcome::Skipped(
            "fio is not installed (on Debian or Ubuntu: apt-get install fio); \
             the zring figures above stand alone"
                .into(),
        ));
    };
    let args = job.args();
    let result = match execute(&fio, &args, |text, command| {
        parse(text, job.clone(), command)
    }) {
        Ok(r) => r,
        // Registering buffers can be refused (RLIMIT_MEMLOCK on older kernels), as
        // zring's rings then read unregistered: so does fio.
        Err(_) if args.len() > job.common_args().len() => {
            let args = job.common_args();
            execute(&fio, &args, |text, command| parse(text, job, command))?
        }
        Err(e) => return Err(e),
    };
    Ok(FioOutcome::Ran(Box::new(result)))
}

/// Runs `fio` with `args` and reads its JSON report with `parse(stdout, command)`;
/// a failed run or an unreadable report is an error that shows the command.
fn execute<T>(
    fio: &std::path::Path,
    args: &[String],
    parse: impl FnOnce(&str, String) -> Result<T, String>,
) -> Result<T, CliError> {
    let command = format!("fio {}", args.join(" "));
    let out = Command::new(fio)
        .args(args)
        .output()
        .map_err(|e| CliError::io(fio, "running fio", e))?;
    if !out.status.success() {
        return Err(CliError::new(format!(
            "fio failed ({}): {}\ncommand: {command}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    parse(&text, command).map_err(|e| {
        CliError::new(format!(
            "could not read fio's JSON report: {e}\nfio printed: {}",
            text.chars().take(400).collect::<String>()
        ))
    })
}

/// Reads fio's `--output-format=json` report (any lines fio prints before the JSON
/// object, such as warnings, are skipped).
pub fn parse(text: &str, job: FioJob, command: String) -> Result<FioResult, String> {
    let start = text.find('{').ok_or("no JSON object")?;
    let v: Value = serde_json::from_str(&text[start..]).map_err(|e| e.to_string())?;
    let read = &v["jobs"][0]["read"];
    let num = |x: &Value, what: &str| x.as_f64().ok_or_else(|| format!("no {what}"));
    let clat = |q: &str| read["clat_ns"]["percentile"][q].as_f64().map(|ns| ns / 1e3);
    let runtime_ms = num(&read["runtime"], "read.runtime")?;
    Ok(FioResult {
        job,
        command,
        version: v["fio version"].as_str().unwrap_or("fio").to_string(),
        reads_per_s: num(&read["iops"], "read.iops")?,
        bytes_per_s: num(&read["bw_bytes"], "read.bw_bytes")?,
        io_bytes: read["io_bytes"].as_u64().ok_or("no read.io_bytes")?,
        runtime_s: runtime_ms / 1e3,
        clat_us_p50: clat("50.000000"),
        clat_us_p99: clat("99.000000"),
        lat_us_mean: read["lat_ns"]["mean"].as_f64().map(|ns| ns / 1e3),
    })
}

impl FioOutcome {
    /// The `fio` section of `--json`, with zring's physical MiB/s for the ratio.
    pub fn to_json(&self, zring_physical_mib_per_s: f64, zring_reads_per_s: f64) -> Value {
        match self {
            FioOutcome::Skipped(why) => json!({ "skipped": why }),
            FioOutcome::Ran(r) => {
                let mib = r.bytes_per_s / MIB;
                json!({
                    "command": r.command,
                    "version": r.version,
                    "filename": r.job.filename,
                    "ioengine": r.job.ioengine,
                    "block_bytes": r.job.block_bytes,
                    "iodepth": r.job.iodepth,
                    "numjobs": r.job.numjobs,
                    "direct": r.job.direct,
                    "invalidate": r.job.invalidate,
                    "iomem": r.job.iomem,
                    "runtime_s": r.runtime_s,
                    "io_bytes": r.io_bytes,
                    "reads_per_s": r.reads_per_s,
                    "mib_per_s": mib,
                    "clat_us_p50": r.clat_us_p50,
                    "clat_us_p99": r.clat_us_p99,
                    "lat_us_mean": r.lat_us_mean,
                    "zring_physical_vs_fio": zring_physical_mib_per_s / mib.max(1e-12),
                    "zring_reads_vs_fio": zring_reads_per_s / r.reads_per_s.max(1e-12),
                })
            }
        }
    }
}

/// The page-cache state fio should start in: cold (`invalidate`) exactly when
/// zring's run was cold; O_DIRECT bypasses the cache either way.
pub fn invalidate(cold: bool, direct: bool) -> bool {
    cold && !direct
}

/// Whether an fio comparison ran, for the report.
pub(crate) fn fio_ran(f: &Option<FioOutcome>) -> Option<&FioResult> {
    match f {
        Some(FioOutcome::Ran(r)) => Some(r),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> FioJob {
        FioJob {
            filename: "/tmp/s.zr".into(),
            block_bytes: 4096,
            offset: 4096,
            size: 1 << 20,
            ioengine: "io_uring",
            iodepth: 32,
            numjobs: 2,
            direct: true,
            invalidate: false,
            iomem: "malloc".into(),
            runtime_ms: 1500,
        }
    }

    #[test]
    fn block_sizes_round_up_to_the_granule() {
        assert_eq!(block_bytes(4096.0, true), 4096);
        assert_eq!(block_bytes(150_528.0, true), 151_552);
        assert_eq!(block_bytes(150_528.0, false), 150_528);
        assert_eq!(block_bytes(700.4, false), 1024);
        assert_eq!(block_bytes(0.0, true), 4096);
    }

    #[test]
    fn the_job_names_every_setting_that_makes_it_equivalent() {
        let a = job().args().join(" ");
        for want in [
            "--filename=/tmp/s.zr",
            "--rw=randread",
            "--bs=4096",
            "--offset=4096",
            "--size=1048576",
            "--ioengine=io_uring",
            "--iodepth=32",
            "--numjobs=2",
            "--direct=1",
            "--invalidate=0",
            "--runtime=1500ms",
            "--readonly",
            "--output-format=json",
            "--registerfiles=1",
            "--fixedbufs=1",
            "--iodepth_batch_submit=8",
            "--iodepth_batch_complete_max=32",
        ] {
            assert!(a.contains(want), "{want}: {a}");
        }
        let psync = FioJob {
            ioengine: "psync",
            ..job()
        };
        assert!(!psync.args().join(" ").contains("fixedbufs"));
    }

    #[test]
    fn fio_json_is_read_after_any_warning_lines() {
        let text = r#"fio: some warning
{"fio version": "fio-3.33", "jobs": [{"read": {"io_bytes": 4096000, "bw_bytes": 2048000,
 "iops": 500.0, "runtime": 2000, "lat_ns": {"mean": 61000.0},
 "clat_ns": {"percentile": {"50.000000": 52000, "99.000000": 99000}}}}]}"#;
        let r = parse(text, job(), "fio ...".into()).expect("parsed");
        assert_eq!(r.version, "fio-3.33");
        assert_eq!(r.reads_per_s, 500.0);
        assert_eq!(r.io_bytes, 4_096_000);
        assert_eq!(r.runtime_s, 2.0);
        assert_eq!(r.clat_us_p50, Some(52.0));
        assert_eq!(r.lat_us_mean, Some(61.0));
        let v = FioOutcome::Ran(Box::new(r)).to_json(2048000.0 / MIB, 250.0);
        assert!((v["zring_physical_vs_fio"].as_f64().expect("ratio") - 1.0).abs() < 1e-9);
        assert_eq!(v["zring_reads_vs_fio"], 0.5);
        assert!(parse("no json here", job(), String::new()).is_err());
        let w = parse_write(
            r#"{"jobs": [{"write": {"io_bytes": 1048576, "bw_bytes": 524288, "runtime": 2000}}]}"#,
            "buffered",
            "fio".into(),
        )
        .expect("write parsed");
        assert_eq!((w.bytes, w.runtime_s), (1 << 20, 2.0));
        let faster = FioWrite {
            bytes_per_s: 1048576.0,
            how: "direct",
            ..w.clone()
        };
        let j = writes_json(&[w.clone(), faster], 1048576.0);
        assert_eq!(j["how"], "direct", "the faster write is the disk's");
        assert_eq!(j["zring_write_vs_fio"], 1.0);
        assert_eq!(j["exceeded"], false);
        assert_eq!(j["runs"].as_array().map(Vec::len), Some(2));
        assert_eq!(
            writes_json(&[w], 1048576.0)["exceeded"],
            true,
            "2x the disk"
        );
        assert_eq!(writes_json(&[], 1.0), Value::Null);
        assert!(parse(r#"{"jobs": []}"#, job(), String::new()).is_err());
    }

    #[test]
    fn engines_follow_the_backend() {
        assert_eq!(ioengine(Backend::Uring), "io_uring");
        assert_eq!(ioengine(Backend::Pread), "psync");
        assert_eq!(ioengine(Backend::Mmap), "mmap");
        assert!(invalidate(true, false));
        assert!(!invalidate(true, true));
        assert!(!invalidate(false, false));
    }
}

//! The report of `zring bench`: pretty text for people, JSON for scripts. Every
//! figure's name carries its unit.

use std::path::PathBuf;

use serde_json::{json, Value};
use zring_engine::Backend;

use super::args::{BenchArgs, BenchMode};
use super::fio::{fio_ran, FioOutcome, FioWrite};
use super::measure::{busier_during_baseline, exceeds, Baseline, ColdBy, CopyKind, NOISE_MARGIN};
use super::synth::WriteReport;
use super::types::RunResult;
use crate::output::{bytes, count, rate, MIB};

/// What "logical" means in every report.
pub const LOGICAL: &str =
    "logical MiB/s: record bytes delivered to the caller (decoded, as the arrays hold them)";
/// What "physical" means in every report.
pub const PHYSICAL: &str =
    "physical MiB/s: bytes read from the store file (as stored: compressed, without padding)";
/// Other processes busier than this (cores) make the figures suspect.
const BUSY_OTHERS: f64 = 0.25;

/// Everything one bench run measured.
pub struct Report<'a> {
    pub args: &'a BenchArgs,
    /// `info --json` of the store.
    pub store: Value,
    pub synthetic: bool,
    /// `--replay`: the store whose record sizes the synthetic one has.
    pub replayed: Option<PathBuf>,
    /// The backend the store resolved `--backend` to.
    pub backend: Backend,
    pub write: Option<WriteReport>,
    /// Records compared with the source before timing.
    pub checked: u64,
    pub result: RunResult,
    /// The same records copied or decoded out of a mapping of the file (warm runs,
    /// and the decoding of compressed stores).
    pub baseline: Option<Baseline>,
    /// `--compare fio`.
    pub fio: Option<FioOutcome>,
    /// `--compare fio` after writing a synthetic store: fio's sequential writes (the
    /// fastest is the disk's).
    pub fio_write: Vec<FioWrite>,
    /// `--cold`: how the page cache was emptied.
    pub cold_by: Option<ColdBy>,
}

fn cores() -> usize {
    zring_platform::available_cores()
}

/// Rates of one result.
fn records_per_s(r: &RunResult) -> f64 {
    r.records as f64 / r.timed_seconds.max(1e-9)
}

fn logical_mib_per_s(r: &RunResult) -> f64 {
    r.logical_bytes as f64 / MIB / r.timed_seconds.max(1e-9)
}

fn physical_mib_per_s(r: &RunResult) -> f64 {
    r.physical_bytes as f64 / MIB / r.timed_seconds.max(1e-9)
}

fn latency_us(r: &RunResult, q: f64) -> Option<f64> {
    r.latency_ns.quantile(q).map(|ns| ns as f64 / 1e3)
}

/// The figures of one result (the whole run, or one job).
fn result_json(r: &RunResult) -> Value {
    let h = &r.latency_ns;
    json!({
        "ops": r.ops,
        "records": r.records,
        "logical_bytes": r.logical_bytes,
        "physical_bytes": r.physical_bytes,
        "timed_seconds": r.timed_seconds,
        "wall_seconds": r.wall_seconds,
        "records_per_s": records_per_s(r),
        "logical_mib_per_s": logical_mib_per_s(r),
        "physical_mib_per_s": physical_mib_per_s(r),
        "latency_us_p50": latency_us(r, 0.5),
        "latency_us_p90": latency_us(r, 0.9),
        "latency_us_p99": latency_us(r, 0.99),
        "latency_us_p999": latency_us(r, 0.999),
        "latency_us_max": h.max().map(|ns| ns as f64 / 1e3),
        "latency_us_mean": h.mean().map(|ns| ns / 1e3),
    })
}

impl Report<'_> {
    fn cpu_cores_busy(&self) -> Option<f64> {
        self.result
            .cpu_seconds
            .map(|c| c / self.result.wall_seconds.max(1e-9))
    }

    /// Why the store is read through this backend, and what that measures.
    pub fn backend_note(&self) -> String {
        let a = self.args;
        let device = "add --direct (O_DIRECT) or --cold (the store out of the page cache \
                      first) to measure the device";
        match (a.opts.backend, self.backend) {
            (Backend::Auto, Backend::Mmap) => format!(
                "chosen by auto because the store is in the page cache (bench read it once \
                 first): this measures memory, not the device; {device}"
            ),
            (Backend::Auto, b) if a.opts.direct => {
                format!("chosen by auto: O_DIRECT reads go through {b}")
            }
            (Backend::Auto, b) => format!(
                "chosen by auto because the store is not resident in the page cache: \
                 reads go through {b}, with O_DIRECT where the file system allows it"
            ),
            (wanted, got) if wanted != got => {
                format!("{wanted} was asked for but is unavailable here; reads go through {got}")
            }
            _ if !a.opts.direct && !a.cold => format!(
                "as asked; the store is in the page cache (bench read it once first), so \
                 this measures memory, not the device; {device}"
            ),
            _ => "as asked".to_string(),
        }
    }

    /// The baseline with its ratio and whether the gather exceeded it.
    fn baseline_json(&self) -> Value {
        let gather = logical_mib_per_s(&self.result);
        let Some(b) = self.baseline else {
            return json!({ "copy": null, "decode_limit_mib_per_s": null });
        };
        let mib = b.bytes_per_s / MIB;
        let ratio = gather / mib.max(1e-12);
        let busier = busier_during_baseline(self.result.others_cores, b.others_cores);
        let mut v = json!({
            "what": baseline_what(&b),
            "threads": b.threads,
            "copy_kind": match b.copy {
                CopyKind::Memmove => "memmove",
                CopyKind::Lines => "lines",
            },
            "mib_per_s": mib,
            "gather_vs_baseline": ratio,
            "noise_margin": NOISE_MARGIN,
            "others_cores_busy": b.others_cores,
            "busier_during_baseline": busier,
            // Exceeded on a machine no busier than during the gathers: the baseline
            // is wrong (on a busier one the figure says nothing).
            "exceeded": exceeds(ratio) && !busier,
            "copy": null,
            "decode_limit_mib_per_s": null,
        });
        if b.decoded {
            v["decode_limit_mib_per_s"] = json!(mib);
            v["decode_threads"] = json!(b.threads);
            v["gather_vs_decode_limit"] = json!(ratio);
        } else {
            v["copy"] = json!({
                "what": baseline_what(&b),
                "threads": b.threads,
                "mib_per_s": mib,
                "gather_vs_copy": ratio,
            });
        }
        v
    }

    /// The machine-readable report.
    pub fn to_json(&self) -> Value {
        let a = self.args;
        let mut store = self.store.clone();
        store["synthetic"] = json!(self.synthetic);
        store["replayed_from"] = json!(self.replayed);
        let r = &self.result;
        let busy = self.cpu_cores_busy();
        let mut result = result_json(r);
        result["cpu_seconds"] = json!(r.cpu_seconds);
        result["cpu_cores_busy"] = json!(busy);
        result["cpu_utilisation"] = json!(busy.map(|b| b / cores() as f64));
        result["others_cores_busy"] = json!(r.others_cores);
        result["series"] = r.series.to_json();
        result["peak_rss_bytes"] = json!(r.peak_rss_bytes);
        if a.mode != BenchMode::Get {
            result["batches"] = json!(r.ops);
        }
        if !r.jobs.is_empty() {
            result["jobs"] = Value::Array(
                r.jobs
                    .iter()
                    .map(|j| {
                        let mut v = result_json(j);
                        v["series"] = j.series.to_json();
                        v
                    })
                    .collect(),
            );
        }
        // Each record is one read (a gather of B records is B reads).
        let mut fio = self
            .fio
            .as_ref()
            .map(|f| f.to_json(physical_mib_per_s(r), records_per_s(r)));
        if let (Some(fio), Some(w)) = (fio.as_mut(), &self.write) {
            if !self.fio_write.is_empty() {
                // The disk wrote as many bytes as the store file holds: compare
                // rates of file bytes (padding to --align counts).
                fio["write"] = super::fio::writes_json(
                    &self.fio_write,
                    w.file_bytes as f64 / w.seconds.max(1e-9),
                );
            }
        }
        // fio is the device's limit for cold and O_DIRECT reads; a warm fio run is a
        // peer (its per-read overhead is not a limit on a gather's).
        if let (Some(fio), Some(r)) = (fio.as_mut(), fio_ran(&self.fio)) {
            let device = r.job.direct || r.job.invalidate;
            let ratio = physical_mib_per_s(&self.result) / (r.bytes_per_s / MIB).max(1e-12);
            fio["is_limit"] = json!(device);
            fio["exceeded"] = json!(device && exceeds(ratio));
        }
        json!({
            "mode": a.mode.name(),
            "store": store,
            "config": {
                "batch": a.batch,
                "sampler": a.sampler.as_str(),
                "threads": a.opts.threads,
                "jobs": a.jobs,
                "workers": self.result.loader_depth.map(|d| d.0),
                "prefetch": self.result.loader_depth.map(|d| d.1),
                "lookahead_bytes": (a.mode == BenchMode::Loader).then_some(a.lookahead),
                "backend": a.opts.backend.name(),
                "backend_used": self.backend.name(),
                "backend_note": self.backend_note(),
                "queue_depth": a.opts.queue_depth,
                "direct": a.opts.direct,
                // Every read setting the run used, as ReadOptions::to_json gives them.
                "read": serde_json::to_value(&a.opts).unwrap_or(Value::Null),
                "cold": a.cold,
                "cold_by": self.cold_by.map(|c| match c {
                    ColdBy::DropCaches => "drop_caches",
                    ColdBy::Fadvise => "fadvise",
                }),
                "duration_s": a.duration,
                "warmup_batches": a.warmup,
                "concurrency": a.concurrency,
                "seed": a.seed,
                "cores": cores(),
            },
            "units": { "logical": LOGICAL, "physical": PHYSICAL },
            "write": self.write.as_ref().map(write_json),
            "check": { "records": self.checked, "equal": true },
            "result": result,
            "baseline": (a.mode != BenchMode::Get).then(|| self.baseline_json()),
            "fio": fio,
        })
    }
}

/// ", O_DIRECT, qd 32"-style details of how reads were issued.
fn io_note(a: &BenchArgs, backend: Backend, cold_by: Option<ColdBy>) -> String {
    let mut note = String::new();
    if a.opts.direct {
        note.push_str(", O_DIRECT");
    }
    match cold_by {
        Some(ColdBy::DropCaches) => note.push_str(", cold page cache (all caches dropped)"),
        Some(ColdBy::Fadvise) => {
            note.push_str(", cold page cache (the store's pages dropped: posix_fadvise)")
        }
        None if a.cold => note.push_str(", cold page cache"),
        None => {}
    }
    if backend == Backend::Uring {
        note.push_str(&format!(", queue depth {}", a.opts.queue_depth));
    }
    note
}

/// The text report.
pub fn render(rep: &Report<'_>) -> String {
    let a = rep.args;
    let s = &rep.store;
    let u = |k: &str| s[k].as_u64().unwrap_or(0);
    let threads = match a.opts.threads {
        0 => format!("all {} cores", cores()),
        1 => "1 thread".to_string(),
        t => format!("{t} threads"),
    };
    let mut out = String::new();
    let mut line = |l: String| {
        out.push_str(&l);
        out.push('\n');
    };
    let jobs = match a.jobs {
        1 => String::new(),
        n => format!(" x {n} jobs"),
    };
    line(match a.mode {
        BenchMode::Gather => format!(
            "zring bench: {} gathers of {} records, {threads} per gather{jobs}, backend {}{}",
            order(a.sampler),
            a.batch,
            rep.backend,
            io_note(a, rep.backend, rep.cold_by)
        ),
        BenchMode::Get => format!(
            "zring bench: random single-record gets from {} thread(s), backend {}{}",
            a.concurrency,
            rep.backend,
            io_note(a, rep.backend, rep.cold_by)
        ),
        BenchMode::Loader => {
            let (workers, prefetch) = rep.result.loader_depth.unwrap_or((a.workers, a.prefetch));
            let sized = match a.lookahead {
                0 => " (as given)".to_string(),
                bytes => format!(
                    " (look-ahead: sized from the device's queue within {}, at least {} and {})",
                    indicatif::HumanBytes(bytes),
                    a.workers,
                    a.prefetch
                ),
            };
            format!(
                "zring bench: the loader, {} steps of {} records, {workers} workers, {prefetch} steps read ahead{sized}, {threads} per gather, backend {}{}",
                order(a.sampler),
                a.batch,
                rep.backend,
                io_note(a, rep.backend, rep.cold_by)
            )
        }
    });
    line(String::new());
    let origin = match (&rep.replayed, rep.synthetic) {
        (Some(p), _) => format!(
            " (synthetic, with the record sizes of {}; removed afterwards)",
            p.display()
        ),
        (None, true) => " (synthetic, removed afterwards)".into(),
        (None, false) => String::new(),
    };
    line(format!(
        "store     {}{origin}",
        s["path"].as_str().unwrap_or("")
    ));
    let shape = match s["item_shape"].as_array() {
        Some(dims) => {
            let dims: Vec<u64> = dims.iter().filter_map(Value::as_u64).collect();
            format!(
                "{}{} ({} each)",
                s["dtype"].as_str().unwrap_or(""),
                crate::output::shape(&dims),
                bytes(u("item_bytes"))
            )
        }
        None => format!(
            "ragged {} (ndim {}, {} on average)",
            s["dtype"].as_str().unwrap_or(""),
            u("ndim"),
            bytes(u("logical_bytes") / u("records").max(1))
        ),
    };
    let codec = match s["level"].as_i64() {
        Some(l) => format!("{}-{l}", s["codec"].as_str().unwrap_or("")),
        None => s["codec"].as_str().unwrap_or("").to_string(),
    };
    line(format!(
        "          {} records of {shape}, {codec}",
        count(u("records"))
    ));
    let ratio = s["compression_ratio"]
        .as_f64()
        .map_or("n/a".into(), |r| format!("{r:.2}x"));
    line(format!(
        "          {} logical, {} stored ({ratio}), {} raw records",
        bytes(u("logical_bytes")),
        bytes(u("stored_bytes")),
        count(u("raw_records"))
    ));
    if let Some(w) = &rep.write {
        line(format!(
            "write     {} in {:.2} s = {} MiB/s logical ({}, incl. fsync)",
            bytes(w.logical_bytes),
            w.seconds,
            rate(w.logical_bytes as f64 / MIB / w.seconds.max(1e-9)),
            if w.from_memory {
                "create + appends + close, from memory"
            } else {
                "appends + close; records generated between them"
            }
        ));
        if let Some(others) = w.others_cores.filter(|&o| o >= BUSY_OTHERS) {
            line(format!(
                "          note: other processes kept {others:.2} of {} cores busy during the write \
                 (the write used {:.2} s of CPU)",
                cores(),
                w.cpu_seconds.unwrap_or(f64::NAN)
            ));
        }
        if let Some(t) = w.dict_seconds {
            line(format!(
                "dict      {}-byte dictionary trained in {t:.2} s (not in the write time)",
                count(u("dict_bytes"))
            ));
        }
    }
    line(format!("backend   {}: {}", rep.backend, rep.backend_note()));
    // Every read setting the run used (the flags' and each --read's), to rerun it.
    line(format!("settings  {}", a.opts.to_json()));
    line(format!(
        "check     {} {} records equal the {}",
        count(rep.checked),
        if a.mode == BenchMode::Loader {
            "delivered"
        } else {
            "gathered"
        },
        if rep.synthetic {
            "generated source records"
        } else {
            "checksum-verified records"
        }
    ));
    line(String::new());
    let r = &rep.result;
    match a.mode {
        BenchMode::Gather => line(format!(
            "gather    {} warm-up + {} timed batches, {:.2} s of gathers",
            a.warmup,
            count(r.ops),
            r.timed_seconds
        )),
        BenchMode::Get => line(format!(
            "get       {} gets in {:.2} s ({} warm-up gets per thread)",
            count(r.ops),
            r.wall_seconds,
            count(a.warmup.saturating_mul(a.batch as u64))
        )),
        BenchMode::Loader => line(format!(
            "loader    {} warm-up + {} timed steps in {:.2} s",
            a.warmup,
            count(r.ops),
            r.wall_seconds
        )),
    }
    line(format!(
        "  records/s           {:>14}",
        rate(records_per_s(r))
    ));
    line(format!(
        "  logical MiB/s       {:>14}   decoded record bytes delivered",
        rate(logical_mib_per_s(r))
    ));
    line(format!(
        "  physical MiB/s      {:>14}   bytes read from the file, as stored",
        rate(physical_mib_per_s(r))
    ));
    let what = match a.mode {
        BenchMode::Gather => "batch",
        BenchMode::Get => "get",
        BenchMode::Loader => "step wait",
    };
    line(latency_line(what, r));
    if let Some(busy) = rep.cpu_cores_busy() {
        line(format!(
            "  CPU                 {busy:>10.2} cores busy ({:.0}% of {})",
            100.0 * busy / cores() as f64,
            cores()
        ));
    }
    if let Some(rss) = r.peak_rss_bytes {
        line(format!(
            "  peak RSS            {:>14}   (whole process during the run; mapped store pages count)",
            bytes(rss)
        ));
    }
    for (k, j) in r.jobs.iter().enumerate() {
        line(format!(
            "  job {k:<3} {:>12} records/s {:>10} MiB/s logical   p50 {} p99 {} us",
            rate(records_per_s(j)),
            rate(logical_mib_per_s(j)),
            latency_us(j, 0.5).map_or("n/a".into(), |v| format!("{v:.1}")),
            latency_us(j, 0.99).map_or("n/a".into(), |v| format!("{v:.1}")),
        ));
    }
    if let Some(others) = r.others_cores.filter(|&o| o >= BUSY_OTHERS) {
        line(format!(
            "  note: other processes kept {others:.2} of {} cores busy during the run; \
             figures are low, rerun when the machine is idle",
            cores()
        ));
    }
    if a.mode != BenchMode::Get {
        baseline_lines(rep, &mut line);
    }
    if let Some(f) = &rep.fio {
        fio_lines(rep, f, &mut line);
    }
    out
}

/// "  batch latency us  p50 ..." in ms for batches of a millisecond or more.
fn latency_line(what: &str, r: &RunResult) -> String {
    let h = &r.latency_ns;
    let in_ms = h.quantile(0.5).unwrap_or(0) >= 1_000_000;
    let (unit, div, prec) = if in_ms {
        ("ms", 1e6, 3)
    } else {
        ("us", 1e3, 1)
    };
    let q = |v: Option<u64>| v.map_or("n/a".into(), |ns| format!("{:.*}", prec, ns as f64 / div));
    format!(
        "  {what} latency {unit:<6}  p50 {}  p90 {}  p99 {}  p99.9 {}  max {}",
        q(h.quantile(0.5)),
        q(h.quantile(0.9)),
        q(h.quantile(0.99)),
        q(h.quantile(0.999)),
        q(h.max())
    )
}

/// What the baseline did, in words.
fn baseline_what(b: &Baseline) -> String {
    let how = match (b.decoded, b.dictionary) {
        (false, _) => match b.copy {
            CopyKind::Memmove => "copied (memmove: the faster of memmove and a 64-byte loop)",
            CopyKind::Lines => "copied (a 64-byte loop: the faster of memmove and a 64-byte loop)",
        },
        (true, false) => "decoded (zstd, one reused context per thread; raw records copied)",
        (true, true) => {
            "decoded (zstd with the store's dictionary loaded once, one reused context per \
             thread; raw records copied)"
        }
    };
    format!(
        "the records of the gathers' first batches (at least 64, and warm at least 256 MiB \
         of records) {how} out of a mapping of the store file \
         into their slots of a batch-sized aligned buffer, the next record prefetched, {} \
         thread(s) side by side, no checksums, no per-batch synchronisation",
        b.threads
    )
}

/// The line that flags a baseline exceeded by more than noise: then it is no limit.
fn exceeded_line(ratio: f64) -> Option<String> {
    exceeds(ratio).then(|| {
        format!(
            "          WARNING: {ratio:.2}x is more than {:.0}% (noise) above a limit: this \
             baseline is wrong on this machine; please report it with this output",
            NOISE_MARGIN * 100.0
        )
    })
}

fn baseline_lines(rep: &Report<'_>, line: &mut impl FnMut(String)) {
    let a = rep.args;
    let gather = logical_mib_per_s(&rep.result);
    let what = if a.mode == BenchMode::Loader {
        "loader"
    } else {
        "gather"
    };
    line(String::new());
    let Some(b) = rep.baseline else {
        line(
            "baseline  the device: cold or O_DIRECT reads are measured against what the disk does \
             (--compare fio), not against a copy out of memory"
                .into(),
        );
        return;
    };
    let m = b.bytes_per_s / MIB;
    let ratio = gather / m.max(1e-12);
    if b.decoded {
        line(format!(
            "baseline  decoding the same records as the read path does, {} thread(s) side by side: {} MiB/s, \
             the most any read path can deliver on them",
            b.threads,
            rate(m)
        ));
        line(format!(
            "          ({}; the next record prefetched; no checksums)",
            if b.dictionary {
                "zstd with the store's dictionary, one reused context per thread, into the \
                 caller's slots, out of a mapping of the file"
            } else {
                "zstd, one reused context per thread, into the caller's slots, out of a \
                 mapping of the file"
            }
        ));
        line(format!("          {what} = {ratio:.2}x that limit"));
    } else {
        line(format!(
            "baseline  copying the same records out of a mapping of the file into the same kind of buffer, {} thread(s): {} MiB/s",
            b.threads,
            rate(m)
        ));
        line(format!(
            "          (the faster of memmove and a 64-byte loop: {}; the next record prefetched, as the read path does)",
            match b.copy {
                CopyKind::Memmove => "memmove",
                CopyKind::Lines => "the loop",
            }
        ));
        line(format!(
            "          {what} = {ratio:.2}x that copy (1x: the engine costs nothing over moving the bytes; \
             below 1: the engine's overhead, checksums included)"
        ));
    }
    if busier_during_baseline(rep.result.others_cores, b.others_cores) {
        line(format!(
            "          note: other processes kept {:.2} cores busy during the baseline, more than \
             during the {what}s: the ratio is not comparable; rerun when the machine is idle",
            b.others_cores.unwrap_or(0.0)
        ));
    } else if let Some(l) = exceeded_line(ratio) {
        line(l);
    }
}

fn fio_lines(rep: &Report<'_>, f: &FioOutcome, line: &mut impl FnMut(String)) {
    line(String::new());
    let Some(fio) = fio_ran(&rep.fio) else {
        if let FioOutcome::Skipped(why) = f {
            line(format!("fio       comparison skipped: {why}"));
        }
        return;
    };
    let j = &fio.job;
    let r = &rep.result;
    let zring_mib = physical_mib_per_s(r);
    let fio_mib = fio.bytes_per_s / MIB;
    let zring_reads = records_per_s(r);
    let buffers = if j.iomem.contains("huge") {
        "huge-page buffers"
    } else {
        "4 KiB-page buffers"
    };
    line(format!(
        "fio       {} {}, {} blocks, QD {}, {} job(s), {}{}, {buffers}, {:.1} s",
        fio.version,
        j.ioengine,
        bytes(j.block_bytes),
        j.iodepth,
        j.numjobs,
        if j.direct { "O_DIRECT" } else { "buffered" },
        if j.invalidate { ", cache dropped" } else { "" },
        fio.runtime_s
    ));
    let us = |v: Option<f64>| v.map_or("n/a".into(), |v| format!("{v:.1}"));
    line(format!(
        "                          {:>14} {:>14}",
        "zring", "fio"
    ));
    line(format!(
        "  physical MiB/s      {:>14} {:>14}   zring/fio = {:.2}x",
        rate(zring_mib),
        rate(fio_mib),
        zring_mib / fio_mib.max(1e-12)
    ));
    line(format!(
        "  reads/s             {:>14} {:>14}   zring/fio = {:.2}x",
        rate(zring_reads),
        rate(fio.reads_per_s),
        zring_reads / fio.reads_per_s.max(1e-12)
    ));
    line(format!(
        "  fio per-read latency: p50 {} us, p99 {} us (completion), mean {} us (submission + completion)",
        us(fio.clat_us_p50),
        us(fio.clat_us_p99),
        us(fio.lat_us_mean)
    ));
    line(format!("  command: {}", fio.command));
    if j.direct || j.invalidate {
        // Cold or O_DIRECT: both read the device, and fio is its limit.
        if let Some(l) = exceeded_line(zring_mib / fio_mib.max(1e-12)) {
            line(l);
        }
    } else {
        line(
            "  (warm reads: fio is a peer issuing the same reads through its engine, not a \
             limit; the baseline above is the limit)"
                .into(),
        );
    }
    if let (Some(best), Some(w)) = (super::fio::best_write(&rep.fio_write), &rep.write) {
        let zring = w.file_bytes as f64 / MIB / w.seconds.max(1e-9);
        let disk = best.bytes_per_s / MIB;
        line(format!(
            "fio write sequential 1 MiB writes + fsync, {} in the store's directory:",
            bytes(best.bytes),
        ));
        for fw in &rep.fio_write {
            line(format!(
                "  {:<52} {:>10} MiB/s",
                fw.how,
                rate(fw.bytes_per_s / MIB)
            ));
        }
        line(format!(
            "  the store's write above: {} MiB/s of file ({} of it, records and padding) = {:.2}x the disk's sequential write (the faster){}",
            rate(zring),
            bytes(w.file_bytes),
            zring / disk.max(1e-12),
            if w.from_memory {
                ""
            } else {
                " (records generated between appends, only appends timed)"
            }
        ));
        if let Some(l) = exceeded_line(zring / disk.max(1e-12)) {
            line(l);
        }
        for fw in &rep.fio_write {
            line(format!("  command: {}", fw.command));
        }
    }
}

/// The `write` section of the report.
fn write_json(w: &WriteReport) -> Value {
    json!({
        "logical_bytes": w.logical_bytes,
        "file_bytes": w.file_bytes,
        "file_mib_per_s": w.file_bytes as f64 / MIB / w.seconds.max(1e-9),
        "seconds": w.seconds,
        "logical_mib_per_s": w.logical_bytes as f64 / MIB / w.seconds.max(1e-9),
        "dict_train_seconds": w.dict_seconds,
        "from_memory": w.from_memory,
        "cpu_seconds": w.cpu_seconds,
        "others_cores_busy": w.others_cores,
    })
}

/// How a sampler mode orders a batch's records, for the report's first line.
fn order(mode: zring_sampler::Mode) -> &'static str {
    match mode {
        zring_sampler::Mode::Iid => "random IID",
        zring_sampler::Mode::Cyclic => "shuffled (cyclic)",
        zring_sampler::Mode::Sequential => "sequential",
    }
}

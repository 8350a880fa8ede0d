//! The report of `zring bench`: pretty text for people, JSON for scripts. Every
//! figure's name carries its unit.

use serde_json::{json, Value};
use zring_engine::Backend;

use super::bench::{write_json, BenchArgs, BenchMode, RunResult};
use super::output::{bytes, count, rate, MIB};
use super::synth::WriteReport;

/// Everything one bench run measured.
pub struct Report<'a> {
    pub args: &'a BenchArgs,
    /// `info --json` of the store.
    pub store: Value,
    pub synthetic: bool,
    /// The backend the store resolved `--backend` to.
    pub backend: Backend,
    pub write: Option<WriteReport>,
    /// Records compared with the source before timing.
    pub checked: u64,
    pub result: RunResult,
    /// Single-thread memcpy of the bytes of one batch (gather mode).
    pub memcpy_bytes_per_s: Option<f64>,
    /// The same memcpy split over every core (the warm-cache limit).
    pub memcpy_all_bytes_per_s: Option<f64>,
    /// Single-thread zstd decode of the store's own records, logical bytes/s
    /// (compressed stores).
    pub decode_bytes_per_s: Option<f64>,
    /// The machine's 1-minute load average after the run.
    pub load_average: Option<f64>,
}

fn cores() -> usize {
    zring_platform::cpu::available_cores()
}

impl Report<'_> {
    fn records_per_s(&self) -> f64 {
        self.result.records as f64 / self.result.timed_seconds.max(1e-9)
    }

    fn logical_mib_per_s(&self) -> f64 {
        self.result.logical_bytes as f64 / MIB / self.result.timed_seconds.max(1e-9)
    }

    fn physical_mib_per_s(&self) -> f64 {
        self.result.physical_bytes as f64 / MIB / self.result.timed_seconds.max(1e-9)
    }

    fn cpu_cores_busy(&self) -> Option<f64> {
        self.result
            .cpu_seconds
            .map(|c| c / self.result.wall_seconds.max(1e-9))
    }

    fn latency_us(&self, q: f64) -> Option<f64> {
        self.result.latency_ns.quantile(q).map(|ns| ns as f64 / 1e3)
    }

    fn memcpy_mib_per_s(&self) -> Option<f64> {
        self.memcpy_bytes_per_s.map(|b| b / MIB)
    }

    /// The machine-readable report.
    pub fn to_json(&self) -> Value {
        let a = self.args;
        let mut store = self.store.clone();
        store["synthetic"] = json!(self.synthetic);
        let r = &self.result;
        let h = &r.latency_ns;
        let busy = self.cpu_cores_busy();
        let mut result = json!({
            "ops": r.ops,
            "records": r.records,
            "logical_bytes": r.logical_bytes,
            "physical_bytes": r.physical_bytes,
            "timed_seconds": r.timed_seconds,
            "wall_seconds": r.wall_seconds,
            "records_per_s": self.records_per_s(),
            "logical_mib_per_s": self.logical_mib_per_s(),
            "physical_mib_per_s": self.physical_mib_per_s(),
            "latency_us_p50": self.latency_us(0.5),
            "latency_us_p90": self.latency_us(0.9),
            "latency_us_p99": self.latency_us(0.99),
            "latency_us_p999": self.latency_us(0.999),
            "latency_us_max": h.max().map(|ns| ns as f64 / 1e3),
            "latency_us_mean": h.mean().map(|ns| ns / 1e3),
            "cpu_seconds": r.cpu_seconds,
            "cpu_cores_busy": busy,
            "cpu_utilisation": busy.map(|b| b / cores() as f64),
            "load_average_1m": self.load_average,
        });
        if a.mode == BenchMode::Gather {
            result["batches"] = json!(r.ops);
        }
        let gather = self.logical_mib_per_s();
        let all = self.memcpy_all_bytes_per_s.map(|b| b / MIB);
        let decode = self.decode_bytes_per_s.map(|b| b / MIB);
        let baseline = self.memcpy_mib_per_s().map(|m| {
            json!({
                "memcpy_1thread_mib_per_s": m,
                "gather_vs_memcpy": gather / m,
                "memcpy_all_threads_mib_per_s": all,
                "gather_vs_memcpy_all_threads": all.map(|a| gather / a),
                "zstd_decode_1thread_mib_per_s": decode,
                "decode_limit_mib_per_s": decode.map(|d| d * cores() as f64),
                "gather_vs_decode_limit": decode.map(|d| gather / (d * cores() as f64)),
            })
        });
        json!({
            "mode": a.mode.name(),
            "store": store,
            "config": {
                "batch": a.batch,
                "threads": a.threads,
                "backend": a.backend.name(),
                "backend_used": self.backend.name(),
                "queue_depth": a.queue_depth,
                "direct": a.direct,
                "cold": a.cold,
                "duration_s": a.duration,
                "warmup_batches": a.warmup,
                "concurrency": a.concurrency,
                "seed": a.seed,
                "cores": cores(),
            },
            "write": self.write.as_ref().map(write_json),
            "check": { "records": self.checked, "equal": true },
            "result": result,
            "baseline": baseline,
        })
    }
}

/// ", O_DIRECT, qd 32"-style details of how reads were issued.
fn io_note(a: &BenchArgs, backend: Backend) -> String {
    let mut note = String::new();
    if a.direct {
        note.push_str(", O_DIRECT");
    }
    if a.cold {
        note.push_str(", cold page cache");
    }
    if backend == Backend::Uring {
        note.push_str(&format!(", queue depth {}", a.queue_depth));
    }
    note
}

/// The text report.
pub fn render(rep: &Report<'_>) -> String {
    let a = rep.args;
    let s = &rep.store;
    let u = |k: &str| s[k].as_u64().unwrap_or(0);
    let threads = match a.threads {
        0 => format!("all {} cores", cores()),
        1 => "1 thread".to_string(),
        t => format!("{t} threads"),
    };
    let mut out = String::new();
    let mut line = |l: String| {
        out.push_str(&l);
        out.push('\n');
    };
    line(match a.mode {
        BenchMode::Gather => format!(
            "zring bench: random IID gathers of {} records, {threads}, backend {}{}",
            a.batch,
            rep.backend,
            io_note(a, rep.backend)
        ),
        BenchMode::Get => format!(
            "zring bench: random single-record gets from {} thread(s), backend {}{}",
            a.concurrency,
            rep.backend,
            io_note(a, rep.backend)
        ),
    });
    line(String::new());
    let origin = if rep.synthetic {
        " (synthetic, removed afterwards)"
    } else {
        ""
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
                super::output::shape(&dims),
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
            "write     {} in {:.2} s = {} MiB/s logical (appends + close, incl. fsync)",
            bytes(w.logical_bytes),
            w.seconds,
            rate(w.logical_bytes as f64 / MIB / w.seconds.max(1e-9))
        ));
        if let Some(t) = w.dict_seconds {
            line(format!(
                "dict      {}-byte dictionary trained in {t:.2} s (not in the write time)",
                count(u("dict_bytes"))
            ));
        }
    }
    line(format!(
        "check     {} gathered records equal the {}",
        count(rep.checked),
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
    }
    line(format!(
        "  records/s           {:>14}",
        rate(rep.records_per_s())
    ));
    line(format!(
        "  logical MiB/s       {:>14}",
        rate(rep.logical_mib_per_s())
    ));
    line(format!(
        "  physical MiB/s      {:>14}",
        rate(rep.physical_mib_per_s())
    ));
    let h = &r.latency_ns;
    // Milliseconds for batches of a millisecond or more, microseconds below.
    let in_ms = h.quantile(0.5).unwrap_or(0) >= 1_000_000;
    let (unit, div, prec) = if in_ms {
        ("ms", 1e6, 3)
    } else {
        ("us", 1e3, 1)
    };
    let q = |v: Option<u64>| v.map_or("n/a".into(), |ns| format!("{:.*}", prec, ns as f64 / div));
    let what = if a.mode == BenchMode::Gather {
        "batch"
    } else {
        "get"
    };
    line(format!(
        "  {what} latency {unit:<6}  p50 {}  p90 {}  p99 {}  p99.9 {}  max {}",
        q(h.quantile(0.5)),
        q(h.quantile(0.9)),
        q(h.quantile(0.99)),
        q(h.quantile(0.999)),
        q(h.max())
    ));
    if let Some(busy) = rep.cpu_cores_busy() {
        line(format!(
            "  CPU                 {busy:>10.2} cores busy ({:.0}% of {})",
            100.0 * busy / cores() as f64,
            cores()
        ));
    }
    if let Some(load) = rep.load_average.filter(|&l| l > cores() as f64) {
        line(format!(
            "  note: the machine was busy (load average {load:.1} on {} cores); \
             figures are low, rerun when it is idle",
            cores()
        ));
    }
    if let Some(m) = rep.memcpy_mib_per_s() {
        line(String::new());
        line(format!(
            "baseline  memcpy of the same bytes, 1 thread: {} MiB/s; gather = {:.2}x memcpy",
            rate(m),
            rep.logical_mib_per_s() / m
        ));
        if let Some(all) = rep.memcpy_all_bytes_per_s.map(|b| b / MIB) {
            line(format!(
                "          memcpy, all {} cores: {} MiB/s; gather = {:.2}x",
                cores(),
                rate(all),
                rep.logical_mib_per_s() / all
            ));
        }
        if let Some(d) = rep.decode_bytes_per_s.map(|b| b / MIB) {
            let limit = d * cores() as f64;
            line(format!(
                "          zstd decode of these records, 1 thread: {} MiB/s; limit x {} cores = {} MiB/s; gather = {:.2}x the limit",
                rate(d),
                cores(),
                rate(limit),
                rep.logical_mib_per_s() / limit
            ));
        }
    }
    out
}

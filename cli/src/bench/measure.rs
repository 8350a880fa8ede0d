//! Measuring helpers for `bench`: the copy and decode baselines,
//! how busy the rest of the machine was, peak memory, and the page cache.

use std::hint::black_box;
use std::io::Read;
use std::path::Path;
use std::time::{Duration, Instant};

/// CPU seconds of the whole process since `before` (a
/// `zring_platform::process_cpu_time` reading).
pub fn cpu_seconds_since(before: Option<Duration>) -> Option<f64> {
    let after = zring_platform::process_cpu_time()?;
    Some(after.checked_sub(before?)?.as_secs_f64())
}

/// What the copy baseline measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CopyBaseline {
    /// Threads that copied side by side.
    pub threads: usize,
    /// Bytes copied per second, all threads together.
    pub bytes_per_s: f64,
}

/// The raw-gather baseline: copies the records of `batches` (offset and length in
/// `src`, a mapping of the store file) one batch after another into a batch-sized,
/// page-aligned buffer, the kind a gather fills, on `threads` threads (record `k` of
/// each batch goes to thread `k % threads`), for at least `min_time`. The same
/// records from the same pages into the same kind of memory, without the engine's
/// bookkeeping and without any synchronisation between threads per batch: a gather
/// beats it only through a real effect (a kernel copy out of huge pages, prefetching
/// ahead), never because the baseline copied a small, cache-hot buffer.
pub fn copy_records(
    src: &[u8],
    batches: &[Vec<(u64, u32)>],
    threads: usize,
    min_time: Duration,
) -> CopyBaseline {
    let threads = threads.max(1);
    let batch_bytes = batches
        .iter()
        .map(|b| b.iter().map(|&(_, l)| l as usize).sum::<usize>())
        .max()
        .unwrap_or(0)
        .max(4096);
    let start_line = std::sync::Barrier::new(threads);
    let started = Instant::now();
    let copied: u64 = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let start_line = &start_line;
                s.spawn(move || {
                    let mut dst = buffer(batch_bytes);
                    dst.fill(0);
                    start_line.wait();
                    let begun = Instant::now();
                    let (mut bytes, mut rounds) = (0u64, 0u64);
                    while rounds < 3 || begun.elapsed() < min_time {
                        for batch in batches {
                            let mut at = 0usize;
                            for (k, &(off, len)) in batch.iter().enumerate() {
                                let len = len as usize;
                                if k % threads == t {
                                    let from = off as usize;
                                    if let Some(rec) = src.get(from..from + len) {
                                        black_box(&mut dst[at..at + len]).copy_from_slice(rec);
                                        bytes += len as u64;
                                    }
                                }
                                at += len;
                            }
                        }
                        rounds += 1;
                    }
                    bytes
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or(0)).sum()
    });
    CopyBaseline {
        threads,
        bytes_per_s: copied as f64 / started.elapsed().as_secs_f64(),
    }
}

/// An engine buffer of `len` bytes (falls back to a Vec-backed one if that fails).
fn buffer(len: usize) -> Box<dyn AsMutSlice> {
    match zring_platform::AlignedBuf::new(len, 4096) {
        Ok(b) => Box::new(b),
        Err(_) => Box::new(vec![0u8; len]),
    }
}

/// Byte buffers of either kind.
trait AsMutSlice: std::ops::DerefMut<Target = [u8]> + Send {}
impl<T: std::ops::DerefMut<Target = [u8]> + Send> AsMutSlice for T {}

/// Single-thread zstd decode speed (logical bytes/s) of up to 256 of the store's own
/// compressed records, spread over the store, each into its own slot of a
/// batch-sized destination: the per-core limit of a compressed gather. `None` when no sampled record is compressed.
pub fn decode_bytes_per_s(
    store: &zring_engine::Store,
    min_time: Duration,
) -> Result<Option<f64>, crate::error::CliError> {
    use zring_engine::RecordCodec;
    let file = std::fs::File::open(store.path())
        .map_err(|e| crate::error::CliError::io(store.path(), "opening the store", e))?;
    let n = store.len();
    let mut frames = Vec::new();
    for k in 0..n.min(256) {
        let e = store.entry(k * n / n.min(256))?;
        if e.codec == RecordCodec::Raw {
            continue;
        }
        let mut buf = vec![0u8; e.stored_len as usize];
        zring_platform::read_exact_at(&file, &mut buf, e.offset)
            .map_err(|err| crate::error::CliError::io(store.path(), "reading a record", err))?;
        frames.push((
            buf,
            e.logical_len as usize,
            e.codec == RecordCodec::ZstdDict,
        ));
    }
    if frames.is_empty() {
        return Ok(None);
    }
    let codec_err = |e: std::io::Error| crate::error::CliError::new(format!("zstd: {e}"));
    let mut plain = zstd::bulk::Decompressor::new().map_err(codec_err)?;
    let mut dict =
        zstd::bulk::Decompressor::with_dictionary(store.dictionary()).map_err(codec_err)?;
    // Each record decodes into its own slot of a batch-sized buffer, as in a gather:
    // decoding every record into one small, cache-hot buffer would overstate the limit.
    let total: usize = frames.iter().map(|f| f.1).sum();
    let mut out = buffer(total);
    let (mut bytes, mut rounds) = (0u64, 0u32);
    let started = Instant::now();
    while rounds < 2 || started.elapsed() < min_time {
        let mut at = 0usize;
        for (frame, logical, with_dict) in &frames {
            let d = if *with_dict { &mut dict } else { &mut plain };
            d.decompress_to_buffer(frame, &mut out[at..at + *logical])
                .map_err(codec_err)?;
            at += *logical;
            bytes += *logical as u64;
        }
        rounds += 1;
    }
    Ok(Some(bytes as f64 / started.elapsed().as_secs_f64()))
}

/// Drops the page cache (`echo 3 > /proc/sys/vm/drop_caches`) so reads start cold.
pub fn drop_page_cache() -> Result<(), crate::error::CliError> {
    zring_platform::sync_all();
    std::fs::write("/proc/sys/vm/drop_caches", "3\n").map_err(|e| {
        crate::error::CliError::new(format!(
            "--cold needs root to drop the page cache (/proc/sys/vm/drop_caches): {e}"
        ))
    })
}

/// Reads `path` once from front to back so a warm-cache benchmark starts warm.
pub fn warm_page_cache(path: &Path) -> std::io::Result<u64> {
    let mut f = std::fs::File::open(path)?;
    let mut buf = vec![0u8; 4 << 20];
    let mut total = 0u64;
    loop {
        match f.read(&mut buf)? {
            0 => return Ok(total),
            n => total += n as u64,
        }
    }
}

/// How busy the rest of the machine is over a window: `/proc/stat`'s busy time of
/// every core minus this process's own CPU time. Measured over the timed phase
/// itself, so a compile that ended before the run (`cargo run`'s) does not count,
/// as it would in a load average.
pub struct LoadWindow {
    at: Instant,
    busy_ticks: Option<u64>,
}

/// `/proc/stat` counts in USER_HZ, which Linux fixes at 100 per second.
const TICKS_PER_SECOND: f64 = 100.0;

impl LoadWindow {
    /// Starts a window now.
    pub fn start() -> Self {
        Self {
            at: Instant::now(),
            busy_ticks: zring_platform::machine_busy_ticks(),
        }
    }

    /// Cores that other processes kept busy on average since `start`, given this
    /// process's CPU seconds over the same window; `None` when `/proc` is missing or
    /// the window was under 0.1 s (too coarse at 100 ticks per second).
    pub fn other_cores(&self, own_cpu_seconds: Option<f64>) -> Option<f64> {
        let secs = self.at.elapsed().as_secs_f64();
        if secs < 0.1 {
            return None;
        }
        let busy = zring_platform::machine_busy_ticks()?.saturating_sub(self.busy_ticks?) as f64;
        Some((busy / TICKS_PER_SECOND - own_cpu_seconds?).max(0.0) / secs)
    }
}

/// Resets the process's peak resident set size to the current one (Linux
/// `clear_refs` 5), so a later [`peak_rss_bytes`] covers only what follows. Returns
/// whether that worked.
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// The process's peak resident set size (`VmHWM`), in bytes.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kib: u64 = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_copy_baseline_copies_every_record_of_every_batch() {
        let src: Vec<u8> = (0..1 << 16).map(|i| i as u8).collect();
        let batches = vec![vec![(0, 4096), (8192, 100)], vec![(60_000, 5536)]];
        for threads in [1, 2, 3] {
            let c = copy_records(&src, &batches, threads, Duration::from_millis(5));
            assert_eq!(c.threads, threads);
            assert!(c.bytes_per_s.is_finite() && c.bytes_per_s > 1e6, "{c:?}");
        }
    }

    #[test]
    fn a_load_window_reports_only_when_long_enough() {
        let w = LoadWindow::start();
        assert_eq!(w.other_cores(Some(0.0)), None, "too short to say");
        std::thread::sleep(Duration::from_millis(120));
        if let Some(c) = w.other_cores(Some(0.0)) {
            assert!(c >= 0.0 && c <= zring_platform::available_cores() as f64 + 0.5);
        }
    }

    #[test]
    fn peak_rss_is_readable_and_resettable_on_linux() {
        if cfg!(target_os = "linux") {
            assert!(reset_peak_rss());
            // Touched memory counts in the peak (other tests run alongside, so
            // nothing tighter holds).
            let v = black_box(vec![1u8; 32 << 20]);
            assert!(peak_rss_bytes().expect("VmHWM") >= 32 << 20);
            drop(v);
        }
    }
}

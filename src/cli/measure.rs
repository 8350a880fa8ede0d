//! Measuring helpers for `bench`: process CPU time, the memcpy baseline, and
//! warming the page cache.

use std::hint::black_box;
use std::io::Read;
use std::path::Path;
use std::time::{Duration, Instant};

/// User + system CPU time of the whole process so far (all threads), from
/// `getrusage(RUSAGE_SELF)`; `None` where that is unavailable.
pub fn cpu_time() -> Option<Duration> {
    #[cfg(unix)]
    {
        // SAFETY: rusage is a plain C struct of integers, for which all-zero bytes
        // are a valid value.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `usage` is a valid, writable rusage for the duration of the call.
        let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
        if rc != 0 {
            return None;
        }
        let tv = |t: libc::timeval| {
            Duration::from_secs(t.tv_sec.max(0) as u64)
                + Duration::from_micros(t.tv_usec.max(0) as u64)
        };
        Some(tv(usage.ru_utime) + tv(usage.ru_stime))
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// Single-thread memcpy bandwidth in bytes/s, copying buffers of `bytes` (at least
/// 4 KiB) for at least `min_time` and at least 3 times. Source and destination are
/// touched first so page faults are not timed.
pub fn memcpy_bytes_per_s(bytes: usize, min_time: Duration) -> f64 {
    let bytes = bytes.max(4096);
    // The same kind of buffers a gather fills (huge-page backed when large), so the
    // ratio compares copying, not page sizes.
    let (mut src, mut dst) = (buffer(bytes), buffer(bytes));
    src.fill(0x5A);
    dst.copy_from_slice(&src);
    let mut copies = 0u64;
    let started = Instant::now();
    while copies < 3 || started.elapsed() < min_time {
        black_box(&mut dst).copy_from_slice(black_box(&src));
        copies += 1;
    }
    (bytes as u64 * copies) as f64 / started.elapsed().as_secs_f64()
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

/// memcpy bandwidth in bytes/s with the copy of `bytes` split over every core
/// (the warm-cache limit of a gather), for at least `min_time`.
pub fn memcpy_all_threads_bytes_per_s(bytes: usize, min_time: Duration) -> f64 {
    let threads = zring_platform::cpu::available_cores();
    let part = (bytes / threads).max(4096);
    let rounds = std::sync::Barrier::new(threads);
    let started = Instant::now();
    let copies: u64 = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let rounds = &rounds;
                s.spawn(move || {
                    let (mut src, mut dst) = (buffer(part), buffer(part));
                    src.fill(0x5A);
                    dst.copy_from_slice(&src);
                    rounds.wait();
                    let mut n = 0u64;
                    let t = Instant::now();
                    while n < 3 || t.elapsed() < min_time {
                        black_box(&mut dst).copy_from_slice(black_box(&src));
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or(0))
            .min()
            .unwrap_or(0)
    });
    (part as u64 * threads as u64 * copies) as f64 / started.elapsed().as_secs_f64()
}

/// Single-thread zstd decode speed (logical bytes/s) of up to 256 of the store's own
/// compressed records, spread over the store, each into its own slot of a
/// batch-sized destination: the per-core limit of a compressed gather. `None` when no sampled record is compressed.
pub fn decode_bytes_per_s(
    store: &zring_engine::Store,
    min_time: Duration,
) -> Result<Option<f64>, super::error::CliError> {
    use zring_engine::format::RecordCodec;
    let file = std::fs::File::open(store.path())
        .map_err(|e| super::error::CliError::io(store.path(), "opening the store", e))?;
    let n = store.len();
    let mut frames = Vec::new();
    for k in 0..n.min(256) {
        let e = store.entry(k * n / n.min(256))?;
        if e.codec == RecordCodec::Raw {
            continue;
        }
        let mut buf = vec![0u8; e.stored_len as usize];
        zring_platform::file::read_exact_at(&file, &mut buf, e.offset)
            .map_err(|err| super::error::CliError::io(store.path(), "reading a record", err))?;
        frames.push((
            buf,
            e.logical_len as usize,
            e.codec == RecordCodec::ZstdDict,
        ));
    }
    if frames.is_empty() {
        return Ok(None);
    }
    let codec_err = |e: std::io::Error| super::error::CliError::new(format!("zstd: {e}"));
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
pub fn drop_page_cache() -> Result<(), super::error::CliError> {
    // SAFETY: sync(2) takes no arguments and cannot fail.
    #[cfg(unix)]
    unsafe {
        libc::sync()
    };
    std::fs::write("/proc/sys/vm/drop_caches", "3\n").map_err(|e| {
        super::error::CliError::new(format!(
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

/// The 1-minute load average (Linux `/proc/loadavg`); `None` elsewhere. On a shared
/// machine it tells whether the figures were measured on a busy box.
pub fn load_average() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_grows_with_work() {
        let Some(before) = cpu_time() else { return };
        let mut x = 0u64;
        let started = Instant::now();
        while started.elapsed() < Duration::from_millis(30) {
            x = black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        let after = cpu_time().expect("cpu time");
        assert!(after > before, "{before:?} -> {after:?}");
    }

    #[test]
    fn memcpy_baseline_is_a_positive_rate() {
        let r = memcpy_bytes_per_s(1 << 16, Duration::from_millis(5));
        assert!(r.is_finite() && r > 1e6, "{r}");
    }
}

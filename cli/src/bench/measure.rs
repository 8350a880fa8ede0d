//! Measuring helpers for `bench`: the same-run baseline (the gathers' own records
//! copied or decoded out of a mapping of the file), how busy the rest of the machine
//! was, peak memory, and the page cache.

use std::hint::black_box;
use std::io::Read;
use std::path::Path;
use std::time::{Duration, Instant};

use zring_engine::RecordCodec;

use crate::error::CliError;

/// CPU seconds of the whole process since `before` (a
/// `zring_platform::process_cpu_time` reading).
pub fn cpu_seconds_since(before: Option<Duration>) -> Option<f64> {
    let after = zring_platform::process_cpu_time()?;
    Some(after.checked_sub(before?)?.as_secs_f64())
}

/// How far a figure may rise above a baseline measured in the same run before the
/// report calls the baseline exceeded: run-to-run noise on a busy machine, not a
/// property of the engine. A baseline is a limit, so above this the baseline is wrong.
pub const NOISE_MARGIN: f64 = 0.10;

/// Whether `ratio` (zring / a baseline) is above the baseline by more than noise.
pub fn exceeds(ratio: f64) -> bool {
    ratio > 1.0 + NOISE_MARGIN
}

/// Other processes busier by this many cores while the baseline ran than while
/// zring did explain a baseline below zring: the report says so instead of calling
/// the baseline wrong.
pub const LOAD_DIFFERS_CORES: f64 = 0.25;

/// Whether the baseline ran on a busier machine than the gathers (`None`: unknown).
pub fn busier_during_baseline(gather_others: Option<f64>, baseline_others: Option<f64>) -> bool {
    match (gather_others, baseline_others) {
        (Some(g), Some(b)) => b > g + LOAD_DIFFERS_CORES,
        _ => false,
    }
}

/// One record as the baseline handles it, from the store's table.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rec {
    pub offset: u64,
    pub stored: u32,
    pub logical: u32,
    pub codec: RecordCodec,
}

/// What the baseline measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Baseline {
    /// Threads that worked side by side.
    pub threads: usize,
    /// Logical bytes delivered per second, all threads together.
    pub bytes_per_s: f64,
    /// Whether any record was decoded (else every record was a copy).
    pub decoded: bool,
    /// Whether the store's dictionary was loaded into the decoders.
    pub dictionary: bool,
    /// How raw records were copied (the faster way, for raw stores).
    pub copy: CopyKind,
    /// Cores other processes kept busy while the baseline ran.
    pub others_cores: Option<f64>,
}

/// Which batches the baseline takes, and what it must be ready for.
pub struct Walk<'a> {
    /// The gathers' batches from their first timed step, in order; the baseline goes
    /// round them. Drawn before timing, as the gathers' indices are.
    pub batches: &'a [Vec<Rec>],
    /// Take every batch once untimed first (after a cold or O_DIRECT run, whose
    /// records are not in the page cache: then the baseline times decoding, not the
    /// disk); else only the first.
    pub warm_all: bool,
    /// Whether the store's records are compressed (so decoded), and with a dictionary.
    pub compressed: bool,
    pub dictionary: bool,
}

/// Times of the baseline are the best of this many measurements: a limit is what
/// the machine can do, and a neighbour's burst lowers one measurement, not three.
const REPEATS: usize = 3;

/// The baseline of a gather: the records of the gathers' batches (`walk`: the same
/// steps of the same sampler, in their order, round and round) taken out of `src`, a mapping of the store
/// file, into their slots of a batch-sized page-aligned buffer, on `threads` threads
/// side by side (record `k` of each batch goes to thread `k % threads`; each thread's
/// next record prefetched with `prefetch`, as the read path does), for at least
/// `min_time`, the best of [`REPEATS`]. A raw record is copied (the faster of two
/// copies); a compressed one is decoded with the read path's setup: one zstd
/// context per thread, reused, the store's dictionary loaded once, decoding straight
/// into the slot. That is the work a gather cannot avoid, on the same records from
/// the same pages into the same kind of memory, without checksums, bookkeeping or
/// any synchronisation per batch. So it is a limit: a gather above it by more than
/// noise means the baseline is wrong. (Earlier baselines were not: one thread
/// decoding 256 cache-hot frames, times the cores, was beaten 1.48x; a memmove out
/// of a few dozen batches that stay in the CPU's cache overstated a raw limit.)
pub fn records_baseline(
    src: &[u8],
    prefetch: &(dyn Fn(usize, usize) + Sync),
    walk: &Walk<'_>,
    dict: &[u8],
    threads: usize,
    min_time: Duration,
) -> Result<Baseline, CliError> {
    let mut best: Option<Baseline> = None;
    // Raw records: the faster of the two copies (which one wins depends on the CPU
    // and the record size); decoding dominates a compressed store's, one will do.
    let copies: &[CopyKind] = match walk.compressed {
        true => &[CopyKind::Memmove],
        false => &[CopyKind::Memmove, CopyKind::Lines],
    };
    for &copy in copies {
        for _ in 0..REPEATS {
            let load = LoadWindow::start();
            let cpu = zring_platform::process_cpu_time();
            let mut b = baseline_with(src, prefetch, walk, dict, threads, min_time, copy)?;
            b.others_cores = load.other_cores(cpu_seconds_since(cpu));
            if best.is_none_or(|x| b.bytes_per_s > x.bytes_per_s) {
                best = Some(b);
            }
        }
    }
    best.ok_or_else(|| CliError::new("the baseline measured nothing"))
}

/// How the baseline copies a raw record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyKind {
    /// `copy_from_slice` (the C library's memmove).
    Memmove,
    /// 64 bytes at a time, as vector registers: faster than memmove on some CPUs
    /// (an AMD EPYC guest: 2 KiB records 0.83x, 147 KiB 0.85-0.9x of this loop), and
    /// the way the read path's fused copy-and-checksum moves bytes.
    Lines,
}

/// Batches a thread times between looks at the clock.
const BATCHES_PER_LOOK: u64 = 4;

fn baseline_with(
    src: &[u8],
    prefetch: &(dyn Fn(usize, usize) + Sync),
    walk: &Walk<'_>,
    dict: &[u8],
    threads: usize,
    min_time: Duration,
    copy: CopyKind,
) -> Result<Baseline, CliError> {
    let threads = threads.max(1);
    let start_line = std::sync::Barrier::new(threads + 1);
    let mut started = Instant::now();
    let per_thread: Vec<Result<u64, CliError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let start_line = &start_line;
                s.spawn(move || {
                    let mut dst = buffer(4096);
                    // This thread's share of batch `step`; returns the logical bytes.
                    let share = |d: &mut Decoders,
                                 dst: &mut Box<dyn AsMutSlice>,
                                 k: u64|
                     -> Result<u64, CliError> {
                        let Some(recs) = walk.batches.get(k as usize % walk.batches.len().max(1))
                        else {
                            return Ok(0);
                        };
                        let need: usize = recs.iter().map(|r| r.logical as usize).sum();
                        if dst.len() < need {
                            *dst = buffer(need);
                            dst.fill(0);
                        }
                        let (mut at, mut bytes) = (0usize, 0u64);
                        for (k, r) in recs.iter().enumerate() {
                            let len = r.logical as usize;
                            if k % threads == t {
                                if let Some(n) = recs.get(k + threads) {
                                    prefetch(n.offset as usize, n.stored as usize);
                                }
                                let from = r.offset as usize;
                                if let Some(rec) = src.get(from..from + r.stored as usize) {
                                    d.take(r, rec, black_box(&mut dst[at..at + len]), copy)?;
                                    bytes += len as u64;
                                }
                            }
                            at += len;
                        }
                        Ok(bytes)
                    };
                    // Untimed: the decoders, the buffer, and (after a cold run) the
                    // records' pages, as the read path's state is ready before a
                    // timed gather.
                    let untimed = match walk.warm_all {
                        true => walk.batches.len() as u64,
                        false => 1,
                    };
                    let ready =
                        Decoders::new(dict, walk.compressed, walk.dictionary).and_then(|mut d| {
                            for k in 0..untimed {
                                share(&mut d, &mut dst, k)?;
                            }
                            Ok(d)
                        });
                    start_line.wait();
                    let mut d = ready?;
                    let begun = Instant::now();
                    let (mut bytes, mut k) = (0u64, 0u64);
                    loop {
                        for _ in 0..BATCHES_PER_LOOK {
                            bytes += share(&mut d, &mut dst, k)?;
                            k += 1;
                        }
                        if begun.elapsed() >= min_time {
                            return Ok(bytes);
                        }
                    }
                })
            })
            .collect();
        start_line.wait();
        started = Instant::now();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(CliError::new("a baseline thread panicked")))
            })
            .collect()
    });
    let elapsed = started.elapsed().as_secs_f64();
    let mut total = 0u64;
    for b in per_thread {
        total += b?;
    }
    Ok(Baseline {
        threads,
        bytes_per_s: total as f64 / elapsed,
        decoded: walk.compressed,
        dictionary: walk.dictionary,
        copy,
        others_cores: None,
    })
}

/// One baseline thread's zstd contexts, as the read path keeps them per thread.
struct Decoders {
    plain: Option<zstd::bulk::Decompressor<'static>>,
    dict: Option<zstd::bulk::Decompressor<'static>>,
}

impl Decoders {
    fn new(dict: &[u8], plain: bool, with_dict: bool) -> Result<Self, CliError> {
        let err = |e: std::io::Error| CliError::new(format!("zstd: {e}"));
        Ok(Self {
            plain: plain
                .then(zstd::bulk::Decompressor::new)
                .transpose()
                .map_err(err)?,
            dict: with_dict
                .then(|| zstd::bulk::Decompressor::with_dictionary(dict))
                .transpose()
                .map_err(err)?,
        })
    }

    /// Copies or decodes one record's stored bytes into its slot.
    fn take(
        &mut self,
        r: &Rec,
        stored: &[u8],
        slot: &mut [u8],
        copy: CopyKind,
    ) -> Result<(), CliError> {
        let d = match r.codec {
            RecordCodec::Raw => {
                match copy {
                    CopyKind::Memmove => slot.copy_from_slice(stored),
                    CopyKind::Lines => copy_lines(stored, slot),
                }
                return Ok(());
            }
            RecordCodec::Zstd => self.plain.as_mut(),
            RecordCodec::ZstdDict => self.dict.as_mut(),
        };
        let d = d.ok_or_else(|| CliError::new("the baseline has no decoder for a record"))?;
        match d.decompress_to_buffer(stored, slot) {
            Ok(n) if n == slot.len() => Ok(()),
            Ok(n) => Err(CliError::new(format!(
                "zstd: a record at offset {} decoded to {n} bytes, not {}",
                r.offset,
                slot.len()
            ))),
            Err(e) => Err(CliError::new(format!(
                "zstd: the record at offset {}: {e}",
                r.offset
            ))),
        }
    }
}

/// Copies `src` into `dst` (the same length) 64 bytes at a time.
fn copy_lines(src: &[u8], dst: &mut [u8]) {
    let mut d = dst.chunks_exact_mut(64);
    let mut s = src.chunks_exact(64);
    for (a, b) in (&mut d).zip(&mut s) {
        a.copy_from_slice(b);
    }
    d.into_remainder().copy_from_slice(s.remainder());
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

/// Drops the page cache so reads start cold: every cache on the machine
/// (`echo 3 > /proc/sys/vm/drop_caches`) where that is writable (root), else only
/// `paths`' pages (`posix_fadvise(POSIX_FADV_DONTNEED)`, which any user may do on a
/// file it can open). Returns which of the two it did.
pub fn drop_page_cache(paths: &[&Path]) -> Result<ColdBy, CliError> {
    zring_platform::sync_all();
    if std::fs::write("/proc/sys/vm/drop_caches", "3\n").is_ok() {
        return Ok(ColdBy::DropCaches);
    }
    for p in paths {
        let f = std::fs::File::open(p).map_err(|e| CliError::io(p, "opening the store", e))?;
        zring_platform::evict_from_page_cache(&f).map_err(|e| {
            CliError::io(
                p,
                "dropping the store's pages from the page cache (posix_fadvise)",
                e,
            )
        })?;
    }
    Ok(ColdBy::Fadvise)
}

/// How `--cold` emptied the page cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColdBy {
    /// Every cache on the machine (`/proc/sys/vm/drop_caches`).
    DropCaches,
    /// Only the store file's pages (`posix_fadvise(POSIX_FADV_DONTNEED)`).
    Fadvise,
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
    fn the_baseline_copies_and_decodes_every_record_of_every_batch() {
        let raw: Vec<u8> = (0..1 << 16).map(|i| i as u8).collect();
        let frame = zstd::bulk::compress(&[7u8; 5000], 3).expect("compress");
        let mut src = raw.clone();
        src.extend_from_slice(&frame);
        let r = |offset, stored, logical, codec| Rec {
            offset,
            stored,
            logical,
            codec,
        };
        let z = r(1 << 16, frame.len() as u32, 5000, RecordCodec::Zstd);
        let batches = [
            vec![
                r(0, 4096, 4096, RecordCodec::Raw),
                z,
                r(8192, 100, 100, RecordCodec::Raw),
            ],
            vec![r(60_000, 5536, 5536, RecordCodec::Raw)],
        ];
        // A raw store's batches have raw records only.
        let raw_only = [vec![
            r(0, 4096, 4096, RecordCodec::Raw),
            r(8192, 100, 100, RecordCodec::Raw),
        ]];
        let walk = |warm_all, compressed| Walk {
            batches: if compressed {
                &batches[..]
            } else {
                &raw_only[..]
            },
            warm_all,
            compressed,
            dictionary: false,
        };
        let ms = Duration::from_millis(5);
        for threads in [1, 2, 3] {
            for (warm_all, compressed) in [(false, true), (true, true), (false, false)] {
                let w = walk(warm_all, compressed);
                let b = records_baseline(&src, &|_, _| {}, &w, &[], threads, ms).expect("baseline");
                assert_eq!((b.threads, b.decoded), (threads, compressed));
                assert!(b.bytes_per_s.is_finite() && b.bytes_per_s > 1e6, "{b:?}");
            }
        }
        // A record that does not decode to its logical size is an error, not a figure.
        let bad = [vec![r(
            1 << 16,
            frame.len() as u32,
            4000,
            RecordCodec::Zstd,
        )]];
        let w = Walk {
            batches: &bad,
            ..walk(false, true)
        };
        assert!(records_baseline(&src, &|_, _| {}, &w, &[], 2, ms).is_err());
        // Both copies copy.
        let mut a = vec![0u8; 200];
        copy_lines(&src[..200], &mut a);
        assert_eq!(a, src[..200]);
    }

    #[test]
    fn a_ratio_exceeds_a_baseline_only_beyond_the_noise_margin() {
        assert!(!exceeds(1.0));
        assert!(!exceeds(1.0 + NOISE_MARGIN * 0.9));
        assert!(exceeds(1.0 + NOISE_MARGIN * 1.1));
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

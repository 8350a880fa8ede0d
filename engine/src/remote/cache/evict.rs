//! Eviction: the scan that keeps a cache under its bound, and the lock files that
//! serialise it and the fetches of missing chunks.

use std::fs::{self, File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};

use crate::error::{Error, Result};

use super::{Cache, CacheStats, TEMP_PREFIX};

/// Temporary files older than this are a crashed writer's and are deleted by scans.
const STALE_TEMP: Duration = Duration::from_secs(3600);

/// The lock file at `path` (created if missing), locked exclusively: held by the
/// returned handle until it is dropped, across threads and processes.
pub(super) fn lock_file(path: &Path, what: &'static str) -> Result<File> {
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| Error::io(path, "opening a cache lock", e))?;
    zring_platform::lock_exclusive(&lock).map_err(|e| Error::io(path, what, e))?;
    Ok(lock)
}

impl Cache {
    /// Scans the cache and, when it holds more than `max_bytes`, deletes the least
    /// recently used entries down to 90% of the bound. One thread or process scans
    /// at a time (the others wait: each then sees the entries written before it
    /// asked). Returns what is left.
    pub(crate) fn evict_if_needed(&self) -> Result<CacheStats> {
        let _lock = lock_file(&self.locks.join("evict"), "locking the cache for eviction")?;
        // Writes this process counts while the scan runs may land after the scan
        // listed their directory: they stay counted on top of what the scan finds
        // (a write the scan did see is then counted twice, which only evicts early).
        let counted = self.used.load(Ordering::Relaxed);
        let mut found = scan(&self.entries)?;
        let mut stats = CacheStats {
            entries: found.len() as u64,
            bytes: found.iter().map(|f| f.1).sum(),
        };
        if stats.bytes <= self.max_bytes {
            self.recount(counted, stats.bytes);
            return Ok(stats);
        }
        let low = self.max_bytes / 10 * 9;
        found.sort_by_key(|f| f.0);
        for (_, size, path) in found {
            if stats.bytes <= low {
                break;
            }
            if fs::remove_file(&path).is_ok() {
                stats.bytes -= size;
                stats.entries -= 1;
                if let Some(dir) = path.parent() {
                    // Only succeeds once the version's last entry is gone.
                    let _ = fs::remove_dir(dir);
                }
            }
        }
        self.recount(counted, stats.bytes);
        Ok(stats)
    }

    /// Sets the count of bytes in the cache to `found` by a scan that started when
    /// the count was `counted`, keeping what was counted since. Scans run one at a
    /// time, so the count only grew meanwhile.
    fn recount(&self, counted: u64, found: u64) {
        let _ = self
            .used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |now| {
                Some(found + now.saturating_sub(counted))
            });
    }

    /// The cache's root directory.
    #[allow(dead_code)]
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }
}

/// Every entry under `entries`: (modification time, bytes, path). Deletes
/// temporary files left by crashed writers.
pub(super) fn scan(entries: &Path) -> Result<Vec<(SystemTime, u64, PathBuf)>> {
    let mut out = Vec::new();
    let dirs = match fs::read_dir(entries) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(Error::io(entries, "scanning the cache", e)),
    };
    let now = SystemTime::now();
    for dir in dirs.flatten() {
        let Ok(files) = fs::read_dir(dir.path()) else {
            continue;
        };
        for f in files.flatten() {
            let Ok(meta) = f.metadata() else { continue };
            let mtime = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
            let name = f.file_name();
            if name.to_string_lossy().starts_with(TEMP_PREFIX) {
                if now.duration_since(mtime).unwrap_or_default() > STALE_TEMP {
                    let _ = fs::remove_file(f.path());
                }
                continue;
            }
            out.push((mtime, meta.len(), f.path()));
        }
    }
    Ok(out)
}

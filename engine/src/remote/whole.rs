//! Whole-object cache entries: an object small enough for the cache (see
//! [`CacheOptions::caches_whole`]) is downloaded once, at open, into one file of the
//! cache, and the store is then opened as a **local** store on that file: every
//! local backend and the whole local read path (checksums included) serve it, so a
//! warm cache reads at local speed instead of paying a block read and hash per hit.
//!
//! - Key: the URL and the object's version (size, ETag, last-modified) from one HEAD,
//!   hashed apart from the chunk entries' keys: `DIR/v2/KEY/object`. A changed
//!   object has another key and never reuses a stale entry.
//! - Download: ranged GETs of [`PART`] bytes, `in_flight` at a time, each written at
//!   its offset into a temporary file beside the entry (a GET's slot is freed once
//!   its bytes are written: at most `in_flight` parts in memory), synced and renamed
//!   into place only when complete: a torn or partial download is never visible.
//! - Sharing: the download runs under an exclusive `flock` of the entry's lock file:
//!   processes opening the same object at once wait for the first and open the file
//!   it published. Whoever takes the lock deletes the temporary files of the
//!   entry's earlier, dead downloaders (no live one can hold the lock).
//! - Validation: an entry is opened exactly as a local store is (superblock, footer,
//!   section checksums, schema); one that fails is deleted and fetched again once.
//!   A fresh download that still fails falls back to ranged reads, whose errors
//!   name the object.
//! - Bound: the entry counts in the cache's byte budget like chunks; eviction
//!   unlinks the least recently opened entries (a store reading one keeps reading
//!   its unlinked file; a file in the cache is never truncated or rewritten).

use std::fs::{self, File, OpenOptions};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::SystemTime;

use object_store::{ObjectMeta, ObjectStoreExt};
use tokio::sync::Semaphore;

use crate::error::{Error, InternalError, Result};
use crate::format::BLOCK;

use super::cache::{Cache, TEMP_PREFIX};
use super::fetch::{RemoteSource, Version};
use super::object::{Connector, RemoteStats};
use super::options::{CacheOptions, RemoteOptions};
use super::runtime;

/// The bytes of one GET of a download: large enough that a request's round trip is
/// a small share of its transfer, small enough that `in_flight` of them in memory
/// stay modest (32 x 8 MiB).
pub(crate) const PART: u64 = 8 << 20;
/// The bytes of a download written (and their writeback started) at once.
const WRITE_PIECE: usize = 1 << 20;
/// The entry's file name in its key directory.
const ENTRY: &str = "object";

/// Where a store opened on a whole-object entry came from.
#[derive(Debug)]
pub(crate) struct Origin {
    pub(crate) version: Version,
    pub(crate) stats: RemoteStats,
}

/// Why a download failed: the object store (an error for the caller), or the cache
/// directory (the store is read by ranges instead).
enum Failure {
    Remote(Error),
    Local,
}

/// The store behind `conn` opened on its whole-object entry in the cache `copts`
/// (fetched first when missing or damaged) by `open_local`, which opens and
/// validates a local store file (`None` when it fails), with where it came from;
/// `None` when the object is not cached whole (its size, or a cache directory that
/// cannot be written): the caller reads it by ranges.
pub(crate) fn open<T>(
    conn: &Connector,
    opts: &RemoteOptions,
    copts: &CacheOptions,
    mut open_local: impl FnMut(&Path) -> Option<T>,
) -> Result<Option<(T, Origin)>> {
    let meta = head(conn)?;
    if meta.size < 2 * BLOCK as u64 || !copts.caches_whole(meta.size) {
        // Too small to be a store: the ranged open says what is wrong with it.
        return Ok(None);
    }
    let cache = Cache::open(copts)?;
    let version = Version::of(&meta);
    let dir = cache.whole_dir(&conn.url.to_string_lossy(), &version.key());
    let entry = dir.join(ENTRY);
    if let Some(store) = open_entry(&entry, &version, &mut open_local) {
        return Ok(Some((store, hit(version, &entry))));
    }
    let Ok(lock) = cache.lock_whole(&dir) else {
        return Ok(None);
    };
    // Another process may have published it while this one waited.
    if let Some(store) = open_entry(&entry, &version, &mut open_local) {
        drop(lock);
        return Ok(Some((store, hit(version, &entry))));
    }
    clear_temps(&dir);
    let tmp = cache.temp_path(&entry);
    let stats = match download(conn, &version, opts, &dir, &tmp, &entry) {
        Ok(stats) => stats,
        Err(Failure::Remote(e)) => return Err(e),
        Err(Failure::Local) => return Ok(None),
    };
    drop(lock);
    let Some(store) = open_entry(&entry, &version, &mut open_local) else {
        return Ok(None);
    };
    // Counted (and eviction run) only now that the store holds the file open.
    cache.wrote(version.size);
    let origin = Origin {
        version,
        stats: RemoteStats {
            whole_fetches: 1,
            ..stats
        },
    };
    Ok(Some((store, origin)))
}

/// Puts the store file `local`, just uploaded as the object at `conn` with the ETag
/// `uploaded`, into the cache as that object's whole-object entry, as if it had been
/// downloaded: the dataset a conversion to a URL returns, and every later open on
/// this machine, then read it locally instead of fetching back what was just sent.
/// The file is moved (copied across file systems). Best effort and silent: no cache,
/// an object the cache would not keep whole, a store that gives no ETag, or an
/// object that is no longer the one uploaded (another writer replaced it since:
/// its ETag differs) leave the cache as it was, and `local` where it was.
pub(crate) fn seed(conn: &Connector, opts: &RemoteOptions, local: &Path, uploaded: Option<&str>) {
    let Some(uploaded) = uploaded else {
        return;
    };
    let Ok(Some(copts)) = opts.effective_cache() else {
        return;
    };
    let Ok(len) = fs::metadata(local).map(|m| m.len()) else {
        return;
    };
    if len < 2 * BLOCK as u64 || !copts.caches_whole(len) {
        return;
    }
    let Ok(meta) = head(conn) else {
        return;
    };
    let version = Version::of(&meta);
    if version.size != len || version.e_tag.as_deref() != Some(uploaded) {
        return;
    }
    let Ok(cache) = Cache::open(&copts) else {
        return;
    };
    let dir = cache.whole_dir(&conn.url.to_string_lossy(), &version.key());
    let entry = dir.join(ENTRY);
    let Ok(lock) = cache.lock_whole(&dir) else {
        return;
    };
    if entry.exists() || fs::create_dir_all(&dir).is_err() {
        return;
    }
    let tmp = cache.temp_path(&entry);
    // Durable before it is visible, as a download is (the upload did not need the
    // staged file durable, so nothing made it so): the staged file before it is
    // moved, a copy across file systems once written.
    let durable = |path: &Path| File::open(path).and_then(|f| f.sync_data()).is_ok();
    let moved = (durable(local) && fs::rename(local, &tmp).is_ok())
        || (fs::copy(local, &tmp).is_ok() && durable(&tmp));
    if !moved || fs::rename(&tmp, &entry).is_err() {
        let _ = fs::remove_file(&tmp);
        return;
    }
    drop(lock);
    cache.wrote(len);
}

/// The object's metadata (size and version), from one HEAD.
fn head(conn: &Connector) -> Result<ObjectMeta> {
    let store = conn.store()?;
    let location = conn.location.clone();
    let site = conn.site();
    runtime::run(async move {
        store
            .head(&location)
            .await
            .map_err(|e| site.err("opening the store", e))
    })?
}

/// The store in the entry `path` of `version`, opened by `open_local`; `None` when
/// there is none, or when it is damaged (wrong length, or failing the store's open
/// validation), which deletes it.
fn open_entry<T>(
    path: &Path,
    version: &Version,
    open_local: &mut impl FnMut(&Path) -> Option<T>,
) -> Option<T> {
    let len = fs::metadata(path).ok()?.len();
    let opened = match len == version.size {
        true => open_local(path),
        false => None,
    };
    if opened.is_none() {
        // Every file published at this path is a complete copy of this version:
        // one that fails is damaged (on disk, or after a crash of the machine).
        let _ = fs::remove_file(path);
    }
    opened
}

/// The origin of a store opened on an existing entry: the entry is marked recently
/// used (eviction goes by modification time) and counted as a hit.
fn hit(version: Version, entry: &Path) -> Origin {
    if let Ok(f) = fs::File::open(entry) {
        let _ = f.set_modified(SystemTime::now());
    }
    Origin {
        version,
        stats: RemoteStats {
            whole_hits: 1,
            ..RemoteStats::default()
        },
    }
}

/// Deletes the temporary files in the entry directory `dir`: the caller holds the
/// entry's lock, so they are downloads of processes that died.
fn clear_temps(dir: &Path) {
    let Ok(files) = fs::read_dir(dir) else {
        return;
    };
    for f in files.flatten() {
        if f.file_name().to_string_lossy().starts_with(TEMP_PREFIX) {
            let _ = fs::remove_file(f.path());
        }
    }
}

/// The GETs of a download of an object of `size` bytes, `part` bytes each.
fn parts(size: u64, part: u64) -> Vec<Range<u64>> {
    let part = part.max(1);
    (0..size.div_ceil(part))
        .map(|k| k * part..((k + 1) * part).min(size))
        .collect()
}

/// Fetches `pieces` of the object into `file` at their offsets, `in_flight` GETs at
/// a time. A GET's slot is freed only once its bytes are written, so at most
/// `in_flight` parts are in memory however slow the disk.
fn fetch_into(
    source: &RemoteSource,
    file: &Arc<File>,
    pieces: Vec<Range<u64>>,
) -> std::result::Result<(), Failure> {
    let getter = source.getter().map_err(Failure::Remote)?;
    let rt = runtime::get().map_err(Failure::Remote)?;
    let n = pieces.len();
    let (tx, rx) = mpsc::channel();
    let limit = Arc::new(Semaphore::new(source.in_flight()));
    let stop = Arc::new(AtomicBool::new(false));
    let stopped = stop.clone();
    let file = file.clone();
    rt.spawn(async move {
        for range in pieces {
            let Ok(permit) = limit.clone().acquire_owned().await else {
                return;
            };
            if stopped.load(Ordering::Relaxed) {
                return;
            }
            let (tx, getter, file) = (tx.clone(), getter.clone(), file.clone());
            tokio::spawn(async move {
                // Each piece is written (off the runtime's threads) as it arrives
                // and its writeback started, so the device writes while the rest
                // downloads and the fsync before publishing waits for the last
                // pieces only: all parts run at once and would otherwise complete,
                // and be written, together at the end (W1 over a 1 Gbit/s link: the
                // download of 154 MB took 1.76 s with the parts written whole, the
                // link alone needs 1.23 s).
                let got = getter
                    .get_pieces(range, WRITE_PIECE, |at, bytes| {
                        let file = file.clone();
                        let written = tokio::task::spawn_blocking(move || {
                            zring_platform::write_all_at(&file, &bytes, at)?;
                            // A hint: what it cannot start, the fsync writes.
                            let _ = zring_platform::start_writeback(&file, at, bytes.len() as u64);
                            std::io::Result::Ok(())
                        });
                        async move { matches!(written.await, Ok(Ok(()))) }
                    })
                    .await;
                let done = match got {
                    Ok(true) => Ok(()),
                    // The sink stopped: a piece could not be written.
                    Ok(false) => Err(Failure::Local),
                    Err(e) => Err(Failure::Remote(e)),
                };
                drop(permit);
                // The receiver is gone once the download failed.
                let _ = tx.send(done);
            });
        }
    });
    for _ in 0..n {
        let done = rx.recv().unwrap_or_else(|_| {
            Err(Failure::Remote(Error::Internal(InternalError::Remote {
                what: "a download stopped before its last part",
            })))
        });
        if let Err(f) = done {
            // Start no more GETs (those in flight finish into a file being deleted).
            stop.store(true, Ordering::Relaxed);
            return Err(f);
        }
    }
    Ok(())
}

/// Downloads `version` of the object into `tmp` and renames it to `entry`; what the
/// GETs cost. Nothing is left behind when it fails.
fn download(
    conn: &Connector,
    version: &Version,
    opts: &RemoteOptions,
    dir: &Path,
    tmp: &PathBuf,
    entry: &Path,
) -> std::result::Result<RemoteStats, Failure> {
    fs::create_dir_all(dir).map_err(|_| Failure::Local)?;
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(tmp)
        .map_err(|_| Failure::Local)?;
    let result = (|| {
        file.set_len(version.size).map_err(|_| Failure::Local)?;
        let file = Arc::new(file);
        // Every GET is checked against `version` (size, ETag): an object replaced
        // mid-download fails instead of mixing two versions' bytes.
        let source = RemoteSource::new(conn.clone(), version.clone(), opts, None);
        fetch_into(&source, &file, parts(version.size, PART))?;
        // Durable before it is visible: a machine crash never leaves a published
        // entry with holes (the rename itself may be lost: the entry is refetched).
        file.sync_data().map_err(|_| Failure::Local)?;
        fs::rename(tmp, entry).map_err(|_| Failure::Local)?;
        Ok(source.stats())
    })();
    if result.is_err() {
        let _ = fs::remove_file(tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_cover_the_object_exactly() {
        assert_eq!(parts(0, 8), Vec::<Range<u64>>::new());
        assert_eq!(parts(8, 8), vec![0..8]);
        assert_eq!(parts(9, 8), vec![0..8, 8..9]);
        assert_eq!(parts(20, 8), vec![0..8, 8..16, 16..20]);
        let p = parts(100 << 20, PART);
        assert_eq!(p.len(), 13);
        assert_eq!(p.last(), Some(&(96 << 20..100 << 20)));
        assert!(p.windows(2).all(|w| w[0].end == w[1].start));
    }

    #[test]
    fn temporary_files_are_cleared_and_entries_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(dir.path().join(ENTRY), b"x").expect("write");
        fs::write(dir.path().join(format!("{TEMP_PREFIX}{ENTRY}.1.0")), b"y").expect("write");
        clear_temps(dir.path());
        let left: Vec<_> = fs::read_dir(dir.path())
            .expect("ls")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(left, vec![std::ffi::OsString::from(ENTRY)]);
    }
}

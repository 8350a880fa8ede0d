//! The local chunk cache of remote objects (for example on NVMe), shared by the
//! stores of a process and by the processes of a node.
//!
//! Layout: `DIR/v2/KEY/CHUNK` where `KEY` is a hash of the object's URL and version
//! (size, ETag, last-modified: a replaced object gets a new key and never serves the
//! old bytes) and of the chunk size, and `CHUNK` the chunk's index (16 hex digits);
//! `DIR/locks/` holds lock files. An entry's path therefore names its bytes: every
//! file ever written at one path holds the same bytes (or damaged ones). Whole-object
//! entries (`whole.rs`) live in the same tree, as `DIR/v2/KEY/object` under keys of
//! their own, and share the bound and the eviction scan.
//!
//! An entry is the chunk's bytes followed by a trailer: the XXH3-64 of each
//! [`BLOCK`]-byte block of the chunk (the last block may be short), the magic
//! `ZRCACHE2`, the chunk's length (u64 LE) and the XXH3-64 of the trailer before it. A hit reads only the blocks holding the bytes asked for and checks
//! each against its hash, so every byte served has been checked, and a small record
//! costs a 4 KiB read and hash instead of its whole chunk's. (Memoising "this file
//! was verified once" would be cheaper still, but would trust bytes damaged on disk
//! after that check for the rest of the process; per-block hashes keep every read
//! checked for 0.2% of the entry's size.) Format `v1` (one hash of the whole chunk)
//! is no longer read; its directory is deleted when a cache is opened.
//!
//! - Verified block tables are kept in memory (a bounded map from entry path to its
//!   block hashes): a hit on a known entry reads its blocks and nothing else. This is
//!   sound whatever happened to the file since (deleted, replaced by another process
//!   after damage, evicted and fetched again): the table is a function of the path
//!   (see the layout), and the blocks are read from whatever file is there now and
//!   checked against it.
//! - Crash safety: an entry is written to a temporary file beside it and renamed
//!   into place, and checked on every read: an entry torn by a crash or damaged on
//!   disk fails its length, its trailer's checksum or a block's, is deleted and
//!   fetched again. No fsync is needed for that (a lost entry is refetched).
//! - Sharing: a missing chunk is fetched under an exclusive `flock` of one of
//!   [`LOCK_STRIPES`] lock files (chosen by the entry's hash): concurrent readers of
//!   that chunk, in any process, wait for the first and then read its entry, so each
//!   chunk is fetched once per node.
//! - Bound: written bytes are counted; past `max_bytes` the cache is scanned under
//!   an exclusive lock and the least recently used entries (by modification time,
//!   which a hit refreshes) are deleted down to 90% of the bound. A process counts its
//!   own writes from its last scan, so while several processes fill one cache at
//!   once it may exceed the bound by what the others wrote since this one's scan.

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::Write;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::SystemTime;

use bytes::Bytes;
use xxhash_rust::xxh3::{xxh3_128, xxh3_64};
use zring_platform::{ForkOnce, InChild};

use crate::error::{Error, InternalError, Result};

use super::options::CacheOptions;

mod evict;
#[cfg(test)]
mod tests;

pub(crate) use super::cache_entry::BLOCK;
use super::cache_entry::{block_table, check_ranges, read_ranges, trailer, trailer_len};
use evict::lock_file;

/// Lock files per cache directory.
pub const LOCK_STRIPES: u64 = 1024;
/// The entry format's directory.
const VERSION_DIR: &str = "v2";
/// Directories of older entry formats, deleted on open.
const OLD_VERSION_DIRS: [&str; 1] = ["v1"];
/// Block hashes kept in memory per cache (8 bytes each): 16 MiB, the tables of
/// 8 GiB of entries at 4 MiB chunks.
const MEMO_HASHES: usize = 2 << 20;
/// How temporary files' names start.
pub(crate) const TEMP_PREFIX: &str = ".tmp.";

/// What a cache directory holds, from a scan.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CacheStats {
    /// Complete entries.
    pub entries: u64,
    /// Their bytes (trailers included).
    pub bytes: u64,
}

/// One cache directory, shared by every store of this process that names it.
#[derive(Debug)]
pub(crate) struct Cache {
    root: PathBuf,
    entries: PathBuf,
    locks: PathBuf,
    pub(crate) max_bytes: u64,
    pub(crate) chunk_bytes: u64,
    /// Bytes in the cache as last scanned plus what this process wrote since.
    used: AtomicU64,
    temp_seq: AtomicU64,
    /// Verified block tables by entry path (see the module's notes).
    tables: Mutex<Tables>,
}

/// Entries' block hashes, at most [`MEMO_HASHES`] of them (all are dropped when a
/// new table would pass the bound: a dropped table costs one trailer read).
#[derive(Debug, Default)]
struct Tables {
    map: HashMap<PathBuf, Arc<[u64]>>,
    hashes: usize,
}

impl Tables {
    fn get(&self, path: &Path) -> Option<Arc<[u64]>> {
        self.map.get(path).cloned()
    }

    fn insert(&mut self, path: &Path, table: Arc<[u64]>) {
        if table.len() > MEMO_HASHES {
            return;
        }
        if self.hashes + table.len() > MEMO_HASHES {
            self.map.clear();
            self.hashes = 0;
        }
        self.hashes += table.len();
        if let Some(old) = self.map.insert(path.to_path_buf(), table) {
            self.hashes -= old.len();
        }
    }

    fn remove(&mut self, path: &Path) {
        if let Some(old) = self.map.remove(path) {
            self.hashes -= old.len();
        }
    }
}

/// The caches open in this process, by root. One registry per fork generation: an
/// open holds the lock while it scans the cache, and a child forked meanwhile would
/// wait forever for a thread it does not have; it starts a registry of its own (the
/// caches it inherited stay usable through the stores holding them).
static OPEN: ForkOnce<Mutex<HashMap<PathBuf, Weak<Cache>>>> = ForkOnce::new(InChild::Recreate);

impl Cache {
    /// The cache at `opts.dir` (created if needed), shared within the process.
    pub(crate) fn open(opts: &CacheOptions) -> Result<Arc<Cache>> {
        let io = |what, e| Error::io(&opts.dir, what, e);
        fs::create_dir_all(opts.dir.join(VERSION_DIR)).map_err(|e| io("creating the cache", e))?;
        fs::create_dir_all(opts.dir.join("locks")).map_err(|e| io("creating the cache", e))?;
        let root = fs::canonicalize(&opts.dir).map_err(|e| io("resolving the cache", e))?;
        let mut map = OPEN
            .get_or_init(|| Mutex::new(HashMap::new()))
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(c) = map.get(&root).and_then(Weak::upgrade) {
            if c.max_bytes == opts.max_bytes && c.chunk_bytes == opts.chunk_bytes.max(1) {
                return Ok(c);
            }
        }
        for old in OLD_VERSION_DIRS {
            // Entries no reader uses any more, outside the bound: best effort (a
            // process of an older zring may still be writing there; it recreates
            // what it needs).
            let _ = fs::remove_dir_all(root.join(old));
        }
        let cache = Arc::new(Cache {
            entries: root.join(VERSION_DIR),
            locks: root.join("locks"),
            root: root.clone(),
            max_bytes: opts.max_bytes,
            chunk_bytes: opts.chunk_bytes.max(1),
            used: AtomicU64::new(0),
            temp_seq: AtomicU64::new(0),
            tables: Mutex::new(Tables::default()),
        });
        cache.evict_if_needed()?;
        map.insert(root, Arc::downgrade(&cache));
        Ok(cache)
    }

    /// The directory of one object version's entries (at this cache's chunk size:
    /// chunk `n` of another size is other bytes).
    pub(crate) fn key_dir(&self, url: &str, version: &str) -> PathBuf {
        let key = xxh3_128(format!("{url}\n{version}\n{}", self.chunk_bytes).as_bytes());
        self.entries.join(format!("{key:032x}"))
    }

    /// The directory of one object version's whole-object entry (`whole.rs`): its
    /// own key, so a whole entry and chunk entries of one object never share a path.
    pub(crate) fn whole_dir(&self, url: &str, version: &str) -> PathBuf {
        let key = xxh3_128(format!("{url}\n{version}\nwhole").as_bytes());
        self.entries.join(format!("{key:032x}"))
    }

    /// An exclusive lock on the whole-object entry in `dir`, held while it is fetched
    /// (one of [`LOCK_STRIPES`] lock files of its own, apart from the chunks' so a long
    /// download never holds up a chunk fetch).
    pub(crate) fn lock_whole(&self, dir: &Path) -> Result<File> {
        self.lock_stripe("whole-", dir, "locking a whole-object entry")
    }

    /// An exclusive lock on the lock file `<prefix><stripe>` that `key` hashes to
    /// (several keys share a stripe: the lock files stay few however large the cache).
    fn lock_stripe(&self, prefix: &str, key: &Path, what: &'static str) -> Result<File> {
        let stripe = xxh3_64(key.as_os_str().as_encoded_bytes()) % LOCK_STRIPES;
        lock_file(&self.locks.join(format!("{prefix}{stripe:04}")), what)
    }

    /// A fresh temporary file name beside `entry` (scans delete stale ones).
    pub(crate) fn temp_path(&self, entry: &Path) -> PathBuf {
        let seq = self.temp_seq.fetch_add(1, Ordering::Relaxed);
        let name = entry
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("entry");
        entry.with_file_name(format!("{TEMP_PREFIX}{name}.{}.{seq}", std::process::id()))
    }

    /// Counts `bytes` just written to the cache, and evicts when that passes the
    /// bound (best effort: a failed scan is retried by the next write).
    pub(crate) fn wrote(&self, bytes: u64) {
        let total = self.used.fetch_add(bytes, Ordering::Relaxed);
        if total + bytes > self.max_bytes {
            let _ = self.evict_if_needed();
        }
    }

    fn entry_path(dir: &Path, chunk: u64) -> PathBuf {
        dir.join(format!("{chunk:016x}"))
    }

    /// The byte ranges `ranges` of chunk `chunk` (of `len` bytes) of the object whose
    /// entries are in `dir`, when the cache holds a valid entry (only the blocks
    /// holding `ranges` are read and checked); `None` when it does not. Takes no
    /// lock: a hit never waits.
    pub(crate) fn hit(
        &self,
        dir: &Path,
        chunk: u64,
        len: usize,
        ranges: &[Range<usize>],
    ) -> Result<Option<Vec<Bytes>>> {
        check_ranges(len, ranges)?;
        Ok(self.read_entry(&Self::entry_path(dir, chunk), len, ranges))
    }

    /// The byte ranges `ranges` of chunk `chunk` (of `len` bytes) of the object whose
    /// entries are in `dir`: from the cache when it holds a valid entry (`true`; only
    /// the blocks holding `ranges` are read and checked), else from `fetch` (the whole
    /// chunk; at most one fetch per chunk at a time across processes), then kept.
    pub(crate) fn get(
        &self,
        dir: &Path,
        chunk: u64,
        len: usize,
        ranges: &[Range<usize>],
        fetch: impl FnOnce() -> Result<Bytes>,
    ) -> Result<(Vec<Bytes>, bool)> {
        check_ranges(len, ranges)?;
        let path = Self::entry_path(dir, chunk);
        if let Some(b) = self.read_entry(&path, len, ranges) {
            return Ok((b, true));
        }
        let lock = self.lock_stripe("", &path, "locking a cache chunk")?;
        // Another reader may have fetched it while this one waited.
        if let Some(b) = self.read_entry(&path, len, ranges) {
            return Ok((b, true));
        }
        let data = fetch()?;
        if data.len() != len {
            return Err(Error::Internal(InternalError::CacheChunkLen {
                got: data.len(),
                expected: len,
            }));
        }
        let wrote = self.write_entry(dir, &path, &data);
        drop(lock);
        if wrote.is_ok() {
            // The read succeeded whatever eviction finds.
            self.wrote((len + trailer_len(len)) as u64);
        }
        // A cache that cannot be written (disk full, permissions) still serves the
        // bytes just fetched.
        Ok((
            ranges.iter().map(|r| data.slice(r.clone())).collect(),
            false,
        ))
    }

    /// Writes an entry through a temporary file renamed into place, and keeps its
    /// block table.
    fn write_entry(&self, dir: &Path, path: &Path, data: &[u8]) -> std::io::Result<()> {
        fs::create_dir_all(dir)?;
        let tmp = self.temp_path(path);
        let table = block_table(data);
        let result = (|| {
            let mut f = File::create(&tmp)?;
            f.write_all(data)?;
            f.write_all(&trailer(&table, data.len()))?;
            drop(f);
            fs::rename(&tmp, path)
        })();
        if result.is_err() {
            let _ = fs::remove_file(&tmp);
        } else {
            self.tables
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(path, table);
        }
        result
    }

    /// `ranges` of a valid entry (its modification time refreshed for LRU), or
    /// `None`: a missing entry, or a torn or damaged one, which is deleted.
    fn read_entry(&self, path: &Path, len: usize, ranges: &[Range<usize>]) -> Option<Vec<Bytes>> {
        // The file opened may be deleted (eviction) or renamed over (a refetch after
        // damage) by another process while it is read: this descriptor still reads
        // the file it opened, and that is sound, because every file ever written at
        // this path holds the same bytes (the path names one chunk of one immutable
        // object version at one chunk size) and each block read is checked against
        // the hashes of those bytes.
        let f = File::open(path).ok()?;
        let known = self
            .tables
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(path);
        match read_ranges(&f, len, ranges, known.as_deref()) {
            Some((out, table)) => {
                if let Some(table) = table {
                    self.tables
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .insert(path, table);
                }
                // Recently used: eviction goes by modification time.
                let _ = f.set_modified(SystemTime::now());
                Some(out)
            }
            None => {
                drop(f);
                self.tables
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(path);
                let _ = fs::remove_file(path);
                None
            }
        }
    }
}

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
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use xxhash_rust::xxh3::{xxh3_128, xxh3_64};
use zring_platform::{ForkOnce, InChild};

use crate::error::{Error, InternalError, Result};

use super::options::CacheOptions;

/// Lock files per cache directory.
pub const LOCK_STRIPES: u64 = 1024;
/// The bytes one hash of an entry's trailer covers: a hit reads and checks whole
/// blocks. A page: a record of a few hundred bytes costs one page's read and hash.
pub(crate) const BLOCK: usize = 4096;
/// The entry format's directory.
const VERSION_DIR: &str = "v2";
/// Directories of older entry formats, deleted on open.
const OLD_VERSION_DIRS: [&str; 1] = ["v1"];
const MAGIC: &[u8; 8] = b"ZRCACHE2";
/// The trailer's fixed part: magic, length, checksum of the block table.
const TRAILER_FIXED: usize = 24;
/// Block hashes kept in memory per cache (8 bytes each): 16 MiB, the tables of
/// 8 GiB of entries at 4 MiB chunks.
const MEMO_HASHES: usize = 2 << 20;
/// Temporary files older than this are a crashed writer's and are deleted by scans.
const STALE_TEMP: Duration = Duration::from_secs(3600);
/// How temporary files' names start.
pub(crate) const TEMP_PREFIX: &str = ".tmp.";

/// Blocks of an entry of `len` bytes.
fn blocks(len: usize) -> usize {
    len.div_ceil(BLOCK)
}

/// The trailer's bytes for an entry of `len` bytes.
fn trailer_len(len: usize) -> usize {
    blocks(len) * 8 + TRAILER_FIXED
}

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
        let table: Arc<[u64]> = data.chunks(BLOCK).map(xxh3_64).collect();
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
            Ok((out, table)) => {
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
            Err(()) => {
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

/// An error unless every range lies inside a chunk of `len` bytes (a planner bug).
fn check_ranges(len: usize, ranges: &[Range<usize>]) -> Result<()> {
    if ranges.iter().any(|r| r.start > r.end || r.end > len) {
        return Err(Error::Internal(InternalError::Remote {
            what: "a range asked of the cache lies outside its chunk",
        }));
    }
    Ok(())
}

/// The trailer of an entry of `len` bytes whose blocks hash to `table`.
fn trailer(table: &[u64], len: usize) -> Vec<u8> {
    let mut t = Vec::with_capacity(trailer_len(len));
    for h in table {
        t.extend_from_slice(&h.to_le_bytes());
    }
    t.extend_from_slice(MAGIC);
    t.extend_from_slice(&(len as u64).to_le_bytes());
    let check = xxh3_64(&t);
    t.extend_from_slice(&check.to_le_bytes());
    t
}

/// Reads `ranges` of the entry `f` (of `len` bytes), each block checked against
/// `known` or else the entry's own trailer (checked first, and returned to be kept).
/// `Err` for any entry that is not complete and intact where it was read.
#[allow(clippy::type_complexity)]
fn read_ranges(
    f: &File,
    len: usize,
    ranges: &[Range<usize>],
    known: Option<&[u64]>,
) -> std::result::Result<(Vec<Bytes>, Option<Arc<[u64]>>), ()> {
    let tlen = trailer_len(len);
    // A torn entry (or one of another length) is known by its size alone.
    if f.metadata().map_err(drop)?.len() != (len + tlen) as u64 {
        return Err(());
    }
    let mut read = None;
    let table = match known {
        Some(t) if t.len() == blocks(len) => t,
        _ => {
            let mut t = vec![0u8; tlen];
            zring_platform::read_exact_at(f, &mut t, len as u64).map_err(drop)?;
            &**read.insert(parse_trailer(&t, len).ok_or(())?)
        }
    };
    let mut out = Vec::with_capacity(ranges.len());
    for r in ranges {
        if r.is_empty() {
            out.push(Bytes::new());
            continue;
        }
        let (first, last) = (r.start / BLOCK, (r.end - 1) / BLOCK);
        let at = first * BLOCK;
        let mut buf = vec![0u8; ((last + 1) * BLOCK).min(len) - at];
        zring_platform::read_exact_at(f, &mut buf, at as u64).map_err(drop)?;
        for (b, block) in buf.chunks(BLOCK).enumerate() {
            if xxh3_64(block) != table[first + b] {
                return Err(());
            }
        }
        out.push(Bytes::from(buf).slice(r.start - at..r.end - at));
    }
    Ok((out, read))
}

/// The block table of trailer `t` of an entry of `len` bytes, when `t` is one
/// (its length, magic, entry length and checksum all right).
fn parse_trailer(t: &[u8], len: usize) -> Option<Arc<[u64]>> {
    if t.len() != trailer_len(len) {
        return None;
    }
    let table: Arc<[u64]> = t[..blocks(len) * 8]
        .chunks_exact(8)
        .map(|h| u64::from_le_bytes(h.try_into().unwrap_or_default()))
        .collect();
    (trailer(&table, len) == t).then_some(table)
}

/// The lock file at `path` (created if missing), locked exclusively: held by the
/// returned handle until it is dropped, across threads and processes.
fn lock_file(path: &Path, what: &'static str) -> Result<File> {
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
fn scan(entries: &Path) -> Result<Vec<(SystemTime, u64, PathBuf)>> {
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

#[cfg(test)]
// The cache takes a slice of ranges; one range is `&[a..b]`, not a mistaken `vec![a; b]`.
#[allow(clippy::single_range_in_vec_init)]
mod tests {
    use super::*;

    fn chunk(seed: u8, len: usize) -> Bytes {
        Bytes::from(
            (0..len)
                .map(|i| seed.wrapping_add((i % 251) as u8))
                .collect::<Vec<u8>>(),
        )
    }

    /// `ranges` of `c`.
    fn parts(c: &Bytes, ranges: &[Range<usize>]) -> Vec<Bytes> {
        ranges.iter().map(|r| c.slice(r.clone())).collect()
    }

    const NO_FETCH: fn() -> Result<Bytes> = || panic!("must not fetch a cached chunk");

    /// A chunk of 5 blocks and a bit, asked for in pieces that start, end and straddle
    /// block boundaries.
    const LEN: usize = 5 * BLOCK + 100;
    fn pieces() -> Vec<Range<usize>> {
        vec![
            0..1,
            10..20,
            BLOCK - 1..BLOCK + 1,
            BLOCK..2 * BLOCK,
            2 * BLOCK + 7..4 * BLOCK + 3,
            LEN - 50..LEN,
            300..300,
            0..LEN,
        ]
    }

    /// Drops the block tables this process verified, so the next hit reads them from
    /// the entry's trailer.
    fn forget_tables(cache: &Cache) {
        cache
            .tables
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .map
            .clear();
    }

    fn open(dir: &Path, max_bytes: u64) -> (Arc<Cache>, PathBuf) {
        let cache = Cache::open(&CacheOptions::new(dir, max_bytes)).expect("cache");
        let key = cache.key_dir("s3://b/k", "100:etag");
        (cache, key)
    }

    #[test]
    fn sub_ranges_are_served_from_the_cache() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (cache, key) = open(dir.path(), 1 << 20);
        let c = chunk(1, LEN);
        let want = parts(&c, &pieces());
        let (b, hit) = cache
            .get(&key, 3, LEN, &pieces(), || Ok(c.clone()))
            .expect("get");
        assert!(!hit);
        assert_eq!(b, want);
        let path = Cache::entry_path(&key, 3);
        let size = fs::metadata(&path).expect("stat").len() as usize;
        assert_eq!(size, LEN + 6 * 8 + TRAILER_FIXED);
        // From the kept table, then (as another process would) from the trailer.
        for _ in 0..2 {
            for r in pieces() {
                let (b, hit) = cache
                    .get(&key, 3, LEN, std::slice::from_ref(&r), NO_FETCH)
                    .expect("get");
                assert!(hit);
                assert_eq!(b, vec![c.slice(r)]);
            }
            forget_tables(&cache);
        }
        let (b, hit) = cache.get(&key, 3, LEN, &pieces(), NO_FETCH).expect("get");
        assert!(hit);
        assert_eq!(b, want);
        // A range outside the chunk is refused, not served.
        assert!(cache
            .get(&key, 3, LEN, &[LEN - 1..LEN + 1], NO_FETCH)
            .is_err());
    }

    #[test]
    fn damage_in_a_block_a_hit_reads_is_detected_and_refetched() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (cache, key) = open(dir.path(), 1 << 20);
        let c = chunk(1, LEN);
        cache
            .get(&key, 0, LEN, &[0..1], || Ok(c.clone()))
            .expect("get");
        let path = Cache::entry_path(&key, 0);
        // One flipped bit in block 2, with the table in memory and without (where
        // the trailer is read first).
        for forget in [false, true] {
            let mut bad = fs::read(&path).expect("read");
            bad[2 * BLOCK + 5] ^= 1;
            fs::write(&path, &bad).expect("damage");
            if forget {
                forget_tables(&cache);
            }
            // A hit that does not read block 2 is served (every byte it returns was
            // checked)...
            let (b, hit) = cache
                .get(&key, 0, LEN, &[BLOCK..2 * BLOCK], NO_FETCH)
                .expect("get");
            assert!(hit);
            assert_eq!(b, parts(&c, &[BLOCK..2 * BLOCK]));
            // ...one that does is not: the entry is dropped and fetched again.
            let r = [3 * BLOCK - 10..3 * BLOCK - 9];
            let (b, hit) = cache.get(&key, 0, LEN, &r, || Ok(c.clone())).expect("get");
            assert!(!hit);
            assert_eq!(b, parts(&c, &r));
            let (b, hit) = cache.get(&key, 0, LEN, &r, NO_FETCH).expect("get");
            assert!(hit, "the refetched entry is kept");
            assert_eq!(b, parts(&c, &r));
        }
        // A damaged trailer (table not in memory) drops the entry.
        let mut bad = fs::read(&path).expect("read");
        let n = bad.len();
        bad[n - 20] ^= 1;
        fs::write(&path, &bad).expect("damage");
        forget_tables(&cache);
        let (_, hit) = cache
            .get(&key, 0, LEN, &[0..1], || Ok(c.clone()))
            .expect("get");
        assert!(!hit);
    }

    #[test]
    fn torn_short_or_replaced_entries_are_refetched() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (cache, key) = open(dir.path(), 1 << 20);
        let c = chunk(1, LEN);
        cache
            .get(&key, 3, LEN, &[0..1], || Ok(c.clone()))
            .expect("get");
        let path = Cache::entry_path(&key, 3);
        let full = fs::read(&path).expect("read");
        // Torn (the file ends early, even inside the trailer), or longer than it
        // should be: dropped whatever the range asked.
        for cut in [full[..50].to_vec(), full[..LEN + 8].to_vec(), {
            let mut f = full.clone();
            f.push(0);
            f
        }] {
            fs::write(&path, &cut).expect("tear");
            let (b, hit) = cache
                .get(&key, 3, LEN, &[0..1], || Ok(c.clone()))
                .expect("get");
            assert!(!hit);
            assert_eq!(b, parts(&c, &[0..1]));
        }
        // An entry deleted (by another process's eviction) is a miss.
        fs::remove_file(&path).expect("rm");
        let (_, hit) = cache
            .get(&key, 3, LEN, &[0..1], || Ok(c.clone()))
            .expect("get");
        assert!(!hit);
        // An entry asked for at another length (never happens: the length is the
        // path's) is dropped, not misread.
        let short = chunk(1, LEN - 1);
        let (b, hit) = cache
            .get(&key, 3, LEN - 1, &[0..LEN - 1], || Ok(short.clone()))
            .expect("get");
        assert!(!hit);
        assert_eq!(b, vec![short]);
        // A fetch of the wrong length is an error.
        assert!(cache
            .get(&key, 4, LEN, &[0..1], || Ok(chunk(1, 10)))
            .is_err());
        // Another version of the object, or another chunk size, has other entries.
        assert_ne!(cache.key_dir("s3://b/k", "100:etag2"), key);
        let other = tempfile::tempdir().expect("tempdir");
        let mut opts = CacheOptions::new(other.path(), 1 << 20);
        opts.chunk_bytes = 1 << 16;
        let small = Cache::open(&opts).expect("cache");
        assert_ne!(
            small.key_dir("s3://b/k", "100:etag").file_name(),
            key.file_name()
        );
    }

    #[test]
    fn entries_of_the_old_format_are_ignored_and_deleted() {
        let dir = tempfile::tempdir().expect("tempdir");
        // A v1 entry: the chunk's bytes, `ZRCACHE1` and the XXH3-64 of the bytes.
        let old = dir
            .path()
            .join("v1")
            .join("0123456789abcdef0123456789abcdef");
        fs::create_dir_all(&old).expect("mkdir");
        let stale = chunk(9, LEN);
        let mut e = stale.to_vec();
        e.extend_from_slice(b"ZRCACHE1");
        e.extend_from_slice(&xxh3_64(&stale).to_le_bytes());
        fs::write(old.join(format!("{:016x}", 3)), &e).expect("write");
        let (cache, key) = open(dir.path(), 1 << 20);
        assert!(
            !dir.path().join("v1").exists(),
            "the old format's entries are gone"
        );
        assert_eq!(
            cache.evict_if_needed().expect("scan"),
            CacheStats::default()
        );
        // A v1-format file where a v2 entry belongs is damage: dropped and refetched.
        fs::create_dir_all(&key).expect("mkdir");
        fs::write(Cache::entry_path(&key, 3), &e).expect("write");
        let c = chunk(1, LEN);
        let (b, hit) = cache
            .get(&key, 3, LEN, &[0..LEN], || Ok(c.clone()))
            .expect("get");
        assert!(!hit);
        assert_eq!(b, vec![c]);
    }

    #[test]
    fn the_block_table_memo_stays_bounded() {
        let mut t = Tables::default();
        let table: Arc<[u64]> = vec![0u64; MEMO_HASHES / 3 + 1].into();
        for k in 0..10 {
            t.insert(Path::new(&format!("e{k}")), table.clone());
            assert!(t.hashes <= MEMO_HASHES);
            assert_eq!(t.hashes, t.map.values().map(|v| v.len()).sum::<usize>());
        }
        t.insert(Path::new("e9"), table.clone());
        assert_eq!(t.hashes, t.map.values().map(|v| v.len()).sum::<usize>());
        t.remove(Path::new("e9"));
        assert_eq!(t.hashes, t.map.values().map(|v| v.len()).sum::<usize>());
    }

    #[test]
    fn eviction_keeps_the_bytes_under_the_bound_dropping_the_least_recent() {
        let dir = tempfile::tempdir().expect("tempdir");
        let bound = 10 * (1000 + trailer_len(1000) as u64);
        let cache = Cache::open(&CacheOptions::new(dir.path(), bound)).expect("cache");
        let key = cache.key_dir("s3://b/k", "v");
        for c in 0..30u64 {
            cache
                .get(&key, c, 1000, &[0..1000], || Ok(chunk(c as u8, 1000)))
                .expect("get");
            // Chunk 0 stays the most recently used.
            let (_, hit) = cache
                .get(&key, 0, 1000, &[0..1000], || Ok(chunk(0, 1000)))
                .expect("get");
            assert!(hit || c == 0);
            let s = scan(&cache.entries).expect("scan");
            let bytes: u64 = s.iter().map(|f| f.1).sum();
            assert!(bytes <= bound, "{bytes} > {bound} after chunk {c}");
            // Coarse file-system timestamps: let the order be visible.
            std::thread::sleep(Duration::from_millis(5));
        }
        let (_, hit) = cache
            .get(&key, 0, 1000, &[0..1000], || Ok(chunk(0, 1000)))
            .expect("get");
        assert!(hit, "the most recently used chunk survived eviction");
        let (_, hit) = cache
            .get(&key, 1, 1000, &[0..1000], || Ok(chunk(1, 1000)))
            .expect("get");
        assert!(!hit, "an old chunk was evicted");
    }

    #[test]
    fn concurrent_writers_leave_the_cache_under_its_bound() {
        // Writes that land while another thread's eviction scan runs stay counted,
        // so the last writer over the bound still evicts. Each round starts afresh.
        for round in 0..3 {
            let dir = tempfile::tempdir().expect("tempdir");
            let bound = 200 * (1000 + trailer_len(1000) as u64);
            let cache = Cache::open(&CacheOptions::new(dir.path(), bound)).expect("cache");
            let key = cache.key_dir("s3://b/k", "v");
            std::thread::scope(|s| {
                for t in 0..4u64 {
                    let (cache, key) = (&cache, &key);
                    s.spawn(move || {
                        for c in (0..300).map(|k| t * 300 + k) {
                            cache
                                .get(key, c, 1000, &[0..1000], || Ok(chunk(c as u8, 1000)))
                                .expect("get");
                        }
                    });
                }
            });
            let bytes: u64 = scan(&cache.entries)
                .expect("scan")
                .iter()
                .map(|f| f.1)
                .sum();
            assert!(bytes <= bound, "round {round}: {bytes} > {bound}");
        }
    }
}

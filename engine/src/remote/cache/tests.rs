//! Tests of the chunk cache: hits, damage, sharing, eviction.

// The cache takes a slice of ranges; one range is `&[a..b]`, not a mistaken `vec![a; b]`.
#![allow(clippy::single_range_in_vec_init)]

use super::evict::scan;
use super::*;
use crate::remote::cache_entry::TRAILER_FIXED;
use std::time::Duration;

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

//! The chunk cache's entry format: a chunk's bytes, then its block hashes and a
//! checked trailer (see the `cache` module's notes), and the checked reads of its
//! ranges.
//!
//! Pure (a file in, checked bytes out), so it builds without the `remote` feature;
//! public (hidden) only for the fuzz target that reads damaged and hostile entries
//! (fuzz/cache_entry).

use std::fs::File;
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use xxhash_rust::xxh3::xxh3_64;

use crate::error::{Error, InternalError, Result};

/// The bytes one hash of an entry's trailer covers: a hit reads and checks whole
/// blocks. A page: a record of a few hundred bytes costs one page's read and hash.
pub const BLOCK: usize = 4096;

const MAGIC: &[u8; 8] = b"ZRCACHE2";
/// The trailer's fixed part: magic, length, checksum of the block table.
pub const TRAILER_FIXED: usize = 24;

/// Blocks of an entry of `len` bytes.
pub fn blocks(len: usize) -> usize {
    len.div_ceil(BLOCK)
}

/// The trailer's bytes for an entry of `len` bytes.
pub fn trailer_len(len: usize) -> usize {
    blocks(len) * 8 + TRAILER_FIXED
}

/// An error unless every range lies inside a chunk of `len` bytes (a planner bug).
pub fn check_ranges(len: usize, ranges: &[Range<usize>]) -> Result<()> {
    if ranges.iter().any(|r| r.start > r.end || r.end > len) {
        return Err(Error::Internal(InternalError::Remote {
            what: "a range asked of the cache lies outside its chunk",
        }));
    }
    Ok(())
}

/// The block table of a chunk: the XXH3-64 of each [`BLOCK`]-byte block.
pub fn block_table(data: &[u8]) -> Arc<[u64]> {
    data.chunks(BLOCK).map(xxh3_64).collect()
}

/// The trailer of an entry of `len` bytes whose blocks hash to `table`.
pub fn trailer(table: &[u64], len: usize) -> Vec<u8> {
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
/// `None` for any entry that is not complete and intact where it was read (the
/// caller deletes it and fetches the chunk again: why it failed changes nothing).
#[allow(clippy::type_complexity)]
pub fn read_ranges(
    f: &File,
    len: usize,
    ranges: &[Range<usize>],
    known: Option<&[u64]>,
) -> Option<(Vec<Bytes>, Option<Arc<[u64]>>)> {
    let tlen = trailer_len(len);
    // A torn entry (or one of another length) is known by its size alone.
    if f.metadata().ok()?.len() != (len + tlen) as u64 {
        return None;
    }
    let mut read = None;
    let table = match known {
        Some(t) if t.len() == blocks(len) => t,
        _ => {
            let mut t = vec![0u8; tlen];
            zring_platform::read_exact_at(f, &mut t, len as u64).ok()?;
            &**read.insert(parse_trailer(&t, len)?)
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
        zring_platform::read_exact_at(f, &mut buf, at as u64).ok()?;
        for (b, block) in buf.chunks(BLOCK).enumerate() {
            if xxh3_64(block) != table[first + b] {
                return None;
            }
        }
        out.push(Bytes::from(buf).slice(r.start - at..r.end - at));
    }
    Some((out, read))
}

/// The block table of trailer `t` of an entry of `len` bytes, when `t` is one
/// (its length, magic, entry length and checksum all right).
pub fn parse_trailer(t: &[u8], len: usize) -> Option<Arc<[u64]>> {
    if t.len() != trailer_len(len) {
        return None;
    }
    let table: Arc<[u64]> = t[..blocks(len) * 8]
        .chunks_exact(8)
        .map(|h| u64::from_le_bytes(h.try_into().unwrap_or_default()))
        .collect();
    (trailer(&table, len) == t).then_some(table)
}

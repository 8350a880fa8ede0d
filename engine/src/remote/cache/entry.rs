//! The entry format: a chunk's bytes, then its block hashes and a checked trailer
//! (see the parent module's notes), and the checked reads of its ranges.

use std::fs::File;
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use xxhash_rust::xxh3::xxh3_64;

use crate::error::{Error, InternalError, Result};

use super::BLOCK;

const MAGIC: &[u8; 8] = b"ZRCACHE2";
/// The trailer's fixed part: magic, length, checksum of the block table.
pub(super) const TRAILER_FIXED: usize = 24;

/// Blocks of an entry of `len` bytes.
pub(super) fn blocks(len: usize) -> usize {
    len.div_ceil(BLOCK)
}

/// The trailer's bytes for an entry of `len` bytes.
pub(super) fn trailer_len(len: usize) -> usize {
    blocks(len) * 8 + TRAILER_FIXED
}

/// An error unless every range lies inside a chunk of `len` bytes (a planner bug).
pub(super) fn check_ranges(len: usize, ranges: &[Range<usize>]) -> Result<()> {
    if ranges.iter().any(|r| r.start > r.end || r.end > len) {
        return Err(Error::Internal(InternalError::Remote {
            what: "a range asked of the cache lies outside its chunk",
        }));
    }
    Ok(())
}

/// The trailer of an entry of `len` bytes whose blocks hash to `table`.
pub(super) fn trailer(table: &[u64], len: usize) -> Vec<u8> {
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
pub(super) fn read_ranges(
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
pub(super) fn parse_trailer(t: &[u8], len: usize) -> Option<Arc<[u64]>> {
    if t.len() != trailer_len(len) {
        return None;
    }
    let table: Arc<[u64]> = t[..blocks(len) * 8]
        .chunks_exact(8)
        .map(|h| u64::from_le_bytes(h.try_into().unwrap_or_default()))
        .collect();
    (trailer(&table, len) == t).then_some(table)
}

//! The same-run baselines every zring figure is divided by: what the hardware and the
//! plain alternatives do with the same records and the same indices.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

use crate::stores::Frames;

/// Copies record `indices[k]` of `src` (records of `width` bytes back to back) to
/// slot `k` of `dst` on the calling thread: the warm-cache limit of a raw gather.
pub fn memcpy_gather(src: &[u8], width: usize, indices: &[u64], dst: &mut [u8]) {
    for (&i, slot) in indices.iter().zip(dst.chunks_exact_mut(width)) {
        let at = i as usize * width;
        slot.copy_from_slice(&src[at..at + width]);
    }
}

/// [`memcpy_gather`] split into `threads` contiguous parts of the batch, each copied
/// by its own scoped thread (spawned per call, as a naive parallel copy would).
pub fn memcpy_gather_threads(
    src: &[u8],
    width: usize,
    indices: &[u64],
    dst: &mut [u8],
    threads: usize,
) {
    let per = indices.len().div_ceil(threads.max(1)).max(1);
    std::thread::scope(|s| {
        for (idx, part) in indices.chunks(per).zip(dst.chunks_mut(per * width)) {
            s.spawn(move || memcpy_gather(src, width, idx, part));
        }
    });
}

/// Copies record `indices[k]` out of `mapped` (a mapping of the store's file, where
/// record i starts at `offsets[i]`) into slot `k`: what a gather from the mapping costs
/// without any per-record bookkeeping.
pub fn mapped_gather(
    mapped: &[u8],
    offsets: &[u64],
    width: usize,
    indices: &[u64],
    dst: &mut [u8],
) {
    for (&i, slot) in indices.iter().zip(dst.chunks_exact_mut(width)) {
        let at = offsets[i as usize] as usize;
        slot.copy_from_slice(&mapped[at..at + width]);
    }
}

/// One `pread` per record straight into its slot, on the calling thread: the plain
/// syscall loop a gather must beat. `offsets[i]` is record i's position in `file`.
pub fn pread_gather(
    file: &File,
    offsets: &[u64],
    width: usize,
    indices: &[u64],
    dst: &mut [u8],
) -> io::Result<()> {
    for (&i, slot) in indices.iter().zip(dst.chunks_exact_mut(width)) {
        zring_platform::read_exact_at(file, slot, offsets[i as usize])?;
    }
    Ok(())
}

/// Decompresses the stored frames of `indices` back to back into `dst` with one
/// reused zstd context on the calling thread (raw-kept records are copied): the
/// single-core decode limit of a compressed gather, dense or ragged. Returns the bytes
/// written; `dst` must hold them all.
pub fn zstd_decode_gather(
    frames: &Frames,
    dctx: &mut zstd::bulk::Decompressor<'_>,
    indices: &[u64],
    dst: &mut [u8],
) -> io::Result<usize> {
    let mut at = 0usize;
    for &i in indices {
        let logical = frames.entries[i as usize].logical_len as usize;
        let slot = dst
            .get_mut(at..at + logical)
            .ok_or_else(|| io::Error::other("destination too small for the batch"))?;
        let (src, compressed) = frames.stored(i as usize);
        if compressed {
            let n = dctx.decompress_to_buffer(src, slot)?;
            if n != logical {
                return Err(io::Error::other(format!(
                    "record {i} decoded to {n} bytes, expected {logical}"
                )));
            }
        } else {
            slot.copy_from_slice(src);
        }
        at += logical;
    }
    Ok(at)
}

/// Compresses every record with one reused zstd context on the calling thread;
/// returns the compressed bytes: the single-core compress limit of a zstd write.
pub fn zstd_compress_records<'a>(
    records: impl Iterator<Item = &'a [u8]>,
    cctx: &mut zstd::bulk::Compressor<'_>,
    scratch: &mut Vec<u8>,
) -> io::Result<usize> {
    let mut total = 0;
    for r in records {
        let bound = zstd::zstd_safe::compress_bound(r.len());
        if scratch.len() < bound {
            scratch.resize(bound, 0);
        }
        total += cctx.compress_to_buffer(r, &mut scratch[..bound])?;
    }
    Ok(total)
}

/// Writes `bytes` to a new file at `path` (replacing one that exists) with one
/// sequential `write` and an `fsync`: what the device and file system allow.
pub fn write_fsync(path: &Path, bytes: &[u8]) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let mut f = OpenOptions::new().write(true).create_new(true).open(path)?;
    f.write_all(bytes)?;
    f.sync_all()
}

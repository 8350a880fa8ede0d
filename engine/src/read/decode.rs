//! Turning a record's stored bytes into its logical bytes, and the per-thread state
//! that needs: zstd decompressors and read scratch.
//!
//! Scratch has one owner per kind of read: reads through io_uring land in the
//! platform's per-thread slab (`uring::with_scratch`), because the ring must have it
//! registered; every other read that cannot go straight into its slot (compressed
//! records read with `pread`, O_DIRECT spans) lands in this module's [`DecodeCtx`].
//! Both follow the platform's one keep policy (`zring_platform::scratch_oversized`): scratch
//! grown past its limit is released after the task, so one huge gather does not pin
//! memory in every thread for the life of the process.

use std::cell::RefCell;
use std::io;

use zring_platform::{scratch_oversized, AlignedBuf, DIRECT_ALIGN};

use crate::entry::{Entry, RecordCodec};
use crate::error::{
    AllocFailure, Allocation, CodecError, Error, InternalError, RecordProblem, Result,
};
use crate::format;

use super::Reader;

/// How many dictionary decoders a thread keeps (one per recently read store).
const DICT_CACHE: usize = 8;

/// zstd decompression contexts of one thread.
#[derive(Default)]
pub(crate) struct Decoders {
    plain: Option<zstd::bulk::Decompressor<'static>>,
    /// Decompressors with a store's dictionary loaded, by store id (most recent last).
    with_dict: Vec<(u64, zstd::bulk::Decompressor<'static>)>,
}

/// Per-thread read state, reused across gathers and stores: nothing on the read path
/// allocates once these have grown to the working size.
#[derive(Default)]
pub(crate) struct DecodeCtx {
    /// Compressed records read with `pread`.
    pub(crate) scratch: Vec<u8>,
    /// O_DIRECT spans read with `pread` (aligned).
    pub(crate) aligned: Option<AlignedBuf>,
    pub(crate) decoders: Decoders,
}

thread_local! {
    static CTX: RefCell<DecodeCtx> = RefCell::new(DecodeCtx::default());
}

/// Runs `f` with this thread's read state, then releases oversized scratch.
pub(crate) fn with_ctx<T>(f: impl FnOnce(&mut DecodeCtx) -> Result<T>) -> Result<T> {
    CTX.with(|c| match c.try_borrow_mut() {
        Ok(mut ctx) => {
            let out = f(&mut ctx);
            ctx.shrink();
            out
        }
        // Re-entrant use (not expected): a fresh context is correct, only slower.
        Err(_) => f(&mut DecodeCtx::default()),
    })
}

impl DecodeCtx {
    fn shrink(&mut self) {
        if scratch_oversized(self.scratch.capacity()) {
            self.scratch = Vec::new();
        }
        if self
            .aligned
            .as_ref()
            .is_some_and(|b| scratch_oversized(b.len()))
        {
            self.aligned = None;
        }
    }
}

/// `len` bytes of plain scratch from `v`.
pub(crate) fn grow(v: &mut Vec<u8>, len: usize) -> &mut [u8] {
    if v.len() < len {
        v.resize(len, 0);
    }
    &mut v[..len]
}

/// `len` bytes of scratch aligned for O_DIRECT from `slot`.
pub(crate) fn grow_aligned(slot: &mut Option<AlignedBuf>, len: usize) -> Result<&mut [u8]> {
    if slot.as_ref().is_none_or(|b| b.len() < len) {
        let cap = len.next_power_of_two().max(1 << 16);
        *slot = Some(AlignedBuf::new(cap, DIRECT_ALIGN).map_err(|e| {
            Error::out_of_memory(
                Allocation::DirectScratch,
                cap as u64,
                None,
                Some(AllocFailure::Os(e)),
            )
        })?);
    }
    match slot.as_mut() {
        Some(b) => Ok(&mut b[..len]),
        None => Err(Error::Internal(InternalError::Missing {
            what: "the direct-read scratch",
        })),
    }
}

/// A decoder slot that was just filled is empty: a bug.
const NO_DECOMPRESSOR: InternalError = InternalError::Missing {
    what: "the decompressor just created",
};

impl Decoders {
    fn get(&mut self, r: &Reader, dict: bool) -> Result<&mut zstd::bulk::Decompressor<'static>> {
        let codec_err = |source: io::Error| Error::Codec(CodecError::Decompressor { dict, source });
        if !dict {
            if self.plain.is_none() {
                self.plain = Some(zstd::bulk::Decompressor::new().map_err(codec_err)?);
            }
            return self.plain.as_mut().ok_or(Error::Internal(NO_DECOMPRESSOR));
        }
        match self.with_dict.iter().rposition(|(id, _)| *id == r.id) {
            // Already the most recent: the common case of a batch from one store.
            Some(k) if k + 1 == self.with_dict.len() => {}
            Some(k) => {
                let hit = self.with_dict.remove(k);
                self.with_dict.push(hit);
            }
            None => {
                let d = zstd::bulk::Decompressor::with_dictionary(&r.dict).map_err(codec_err)?;
                if self.with_dict.len() == DICT_CACHE {
                    self.with_dict.remove(0);
                }
                self.with_dict.push((r.id, d));
            }
        }
        self.with_dict
            .last_mut()
            .map(|(_, d)| d)
            .ok_or(Error::Internal(NO_DECOMPRESSOR))
    }
}

impl Reader {
    /// Checks `stored` against the entry's checksum, when the store verifies reads.
    pub(crate) fn check_sum(&self, index: u64, e: &Entry, stored: &[u8]) -> Result<()> {
        if self.opened_with.verify_checksums {
            self.check_sum_always(index, e, stored)?;
        }
        Ok(())
    }

    /// Checks `stored` against the entry's checksum.
    pub(crate) fn check_sum_always(&self, index: u64, e: &Entry, stored: &[u8]) -> Result<()> {
        let actual = format::checksum(stored);
        if actual != e.checksum {
            return Err(self.checksum_mismatch(index, e, actual));
        }
        Ok(())
    }

    /// Turns `stored` bytes of record `index` into its logical bytes in `dst`,
    /// checking the checksum while the bytes are in cache: a raw record right after
    /// its copy (hashing the copy), a compressed one right before its decode (the
    /// checksum covers the stored bytes).
    pub(crate) fn decode_into(
        &self,
        index: u64,
        e: &Entry,
        stored: &[u8],
        dst: &mut [u8],
        decoders: &mut Decoders,
    ) -> Result<()> {
        let raw = e.codec == RecordCodec::Raw;
        if raw && self.opened_with.verify_checksums && stored.len() == dst.len() {
            // One pass: each stripe is hashed from the registers that copy it.
            let actual = zring_platform::copy_and_hash(stored, dst);
            if actual != e.checksum {
                return Err(self.checksum_mismatch(index, e, actual));
            }
            return Ok(());
        }
        if !raw {
            self.check_sum(index, e, stored)?;
        }
        self.decode_checked(index, e, stored, dst, decoders)?;
        if raw {
            self.check_sum(index, e, dst)?;
        }
        Ok(())
    }

    /// Decodes `stored` into `dst` without looking at the checksum.
    pub(crate) fn decode_checked(
        &self,
        index: u64,
        e: &Entry,
        stored: &[u8],
        dst: &mut [u8],
        decoders: &mut Decoders,
    ) -> Result<()> {
        if e.codec == RecordCodec::Raw {
            dst.copy_from_slice(stored);
            return Ok(());
        }
        let d = decoders.get(self, e.codec == RecordCodec::ZstdDict)?;
        match d.decompress_to_buffer(stored, dst) {
            Ok(n) if n == dst.len() => Ok(()),
            Ok(n) => Err(Error::record(
                &self.path,
                index,
                RecordProblem::DecompressedSize {
                    got: n,
                    expected: dst.len(),
                },
            )),
            Err(err) => Err(Error::record(&self.path, index, RecordProblem::Zstd(err))),
        }
    }

    fn checksum_mismatch(&self, index: u64, e: &Entry, actual: u64) -> Error {
        Error::record(
            &self.path,
            index,
            RecordProblem::ChecksumMismatch {
                expected: e.checksum,
                actual,
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zring_platform::SCRATCH_KEEP_BYTES;

    #[test]
    fn decode_scratch_follows_the_platform_keep_policy() {
        let mut ctx = DecodeCtx::default();
        grow(&mut ctx.scratch, SCRATCH_KEEP_BYTES);
        grow_aligned(&mut ctx.aligned, 1 << 20).expect("aligned scratch");
        ctx.shrink();
        assert!(
            ctx.scratch.capacity() >= SCRATCH_KEEP_BYTES,
            "kept at the limit"
        );
        assert!(ctx.aligned.is_some(), "small aligned scratch kept");

        grow(&mut ctx.scratch, SCRATCH_KEEP_BYTES + 1);
        grow_aligned(&mut ctx.aligned, SCRATCH_KEEP_BYTES + 1).expect("aligned scratch");
        ctx.shrink();
        assert_eq!(ctx.scratch.capacity(), 0, "released past the limit");
        assert!(ctx.aligned.is_none(), "released past the limit");
    }
}

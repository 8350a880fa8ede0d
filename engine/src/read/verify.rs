//! `verify`: every table entry, every checksum, and that every compressed record
//! decodes to its logical length. Records are read with the store's source (`pread`
//! on every backend but `mmap`), never through a mapping the caller did not ask for.

use std::ops::Range;

use crate::entry::{Entry, RecordCodec};
use crate::error::{ArgumentError, Error, RecordProblem, Result};

use super::decode::{with_ctx, DecodeCtx, Decoders};
use super::exec::Interrupt;
use super::Reader;

impl Reader {
    /// See [`Store::verify_range`](crate::Store::verify_range).
    pub(crate) fn verify_range(&self, range: Range<u64>, stop: &dyn Interrupt) -> Result<()> {
        if range.start > range.end || range.end > self.footer.record_count {
            return Err(Error::InvalidArgument(ArgumentError::VerifyRange {
                start: range.start,
                end: range.end,
                len: self.footer.record_count,
            }));
        }
        #[cfg(feature = "remote")]
        if let Some(src) = self.remote() {
            // One plan per task: the task's records fetched together, coalesced.
            return self.for_each_task(range.start, range.end, stop, |records| {
                with_ctx(|ctx| {
                    let items = records
                        .map(|i| Ok((i, self.verify_entry(i)?)))
                        .collect::<Result<Vec<_>>>()?;
                    let mut buf = Vec::new();
                    let decoders = &mut ctx.decoders;
                    self.with_remote_stored(src, &items, |i, e, stored| {
                        self.verify_stored(i, e, stored, &mut buf, decoders)
                    })
                })
            });
        }
        self.for_each_task(range.start, range.end, stop, |records| {
            with_ctx(|ctx| {
                let mut buf = Vec::new();
                records
                    .into_iter()
                    .try_for_each(|i| self.verify_one(i, &mut buf, ctx))
            })
        })
    }

    /// Record `i`'s entry, checked against its shape for ragged stores.
    fn verify_entry(&self, i: u64) -> Result<Entry> {
        match self.stored.schema.is_ragged() {
            true => self.with_ragged_shape(i, |_, e| e),
            false => self.entry(i),
        }
    }

    fn verify_one(&self, i: u64, buf: &mut Vec<u8>, ctx: &mut DecodeCtx) -> Result<()> {
        let e = self.verify_entry(i)?;
        self.with_stored(i, &e, ctx, |src, decoders| {
            self.verify_stored(i, &e, src, buf, decoders)
        })
    }

    /// Checks record `i`'s stored bytes `src`: checksum, frame size, decode.
    fn verify_stored(
        &self,
        i: u64,
        e: &Entry,
        src: &[u8],
        buf: &mut Vec<u8>,
        decoders: &mut Decoders,
    ) -> Result<()> {
        // Whatever `verify_checksums` says.
        self.check_sum_always(i, e, src)?;
        if e.codec == RecordCodec::Raw {
            return Ok(());
        }
        // Check the frame's declared size before sizing the buffer: a hostile
        // entry must not make verify fill gigabytes.
        let declared = zstd::zstd_safe::get_frame_content_size(src).ok().flatten();
        if declared != Some(u64::from(e.logical_len)) {
            return Err(Error::record(
                &self.path,
                i,
                RecordProblem::FrameSize {
                    declared,
                    logical: e.logical_len,
                },
            ));
        }
        let len = e.logical_len as usize;
        if buf.len() < len {
            // Fallible, and zeroed by the allocator (fresh pages are not touched until
            // the decoder writes them): a frame may truthfully expand a few bytes to
            // 4 GiB, or claim to and fail a few bytes in, and only the former costs
            // its memory.
            *buf = zring_platform::try_zeroed_vec(len).ok_or_else(|| Error::RecordOutOfMemory {
                path: self.path.clone(),
                index: i,
                bytes: u64::from(e.logical_len),
            })?;
        }
        buf.truncate(len);
        self.decode_checked(i, e, src, buf, decoders)
    }
}

//! Moving one task's records from the file into their destination slots.
//!
//! Three ways, chosen by the store's backend:
//! - `Mmap`: copy or decompress straight out of the mapping (no syscall);
//! - `Pread`: one positional read per record, into the slot (raw) or into per-thread
//!   scratch (compressed), then decompress into the slot;
//! - `Uring`: the task's reads go to the thread's io_uring `queue_depth` at a time;
//!   each record is decompressed as soon as its read completes, while the others are
//!   still in flight.
//!
//! With O_DIRECT, reads cover whole 4 KiB-aligned spans into aligned scratch; a raw
//! record that is itself aligned in the file, in length and in the destination is read
//! straight into its slot.

use std::cell::RefCell;
use std::io;

use zring_platform::file::{self, DIRECT_ALIGN};
use zring_platform::uring::{self, ReadReq};
use zring_platform::{AlignedBuf, Backend};

use crate::error::{Error, Result};
use crate::format::{self, Entry, RecordCodec};
use crate::store::Inner;

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
    scratch: Vec<u8>,
    aligned: Option<AlignedBuf>,
    decoders: Decoders,
}

thread_local! {
    static CTX: RefCell<DecodeCtx> = RefCell::new(DecodeCtx::default());
}

/// Runs `f` with this thread's read state.
pub(crate) fn with_ctx<T>(f: impl FnOnce(&mut DecodeCtx) -> Result<T>) -> Result<T> {
    CTX.with(|c| match c.try_borrow_mut() {
        Ok(mut ctx) => f(&mut ctx),
        // Re-entrant use (not expected): a fresh context is correct, only slower.
        Err(_) => f(&mut DecodeCtx::default()),
    })
}

impl DecodeCtx {
    pub(crate) fn decoders(&mut self) -> &mut Decoders {
        &mut self.decoders
    }
}

impl Decoders {
    fn get(&mut self, inner: &Inner, dict: bool) -> Result<&mut zstd::bulk::Decompressor<'static>> {
        let codec_err = |e: io::Error| Error::Codec(format!("cannot create a decompressor: {e}"));
        if !dict {
            if self.plain.is_none() {
                self.plain = Some(zstd::bulk::Decompressor::new().map_err(codec_err)?);
            }
            return self
                .plain
                .as_mut()
                .ok_or_else(|| Error::Codec("no decompressor".into()));
        }
        match self.with_dict.iter().position(|(id, _)| *id == inner.id) {
            Some(k) => {
                let hit = self.with_dict.remove(k);
                self.with_dict.push(hit);
            }
            None => {
                let d = zstd::bulk::Decompressor::with_dictionary(inner.section(inner.footer.dict))
                    .map_err(codec_err)?;
                if self.with_dict.len() == DICT_CACHE {
                    self.with_dict.remove(0);
                }
                self.with_dict.push((inner.id, d));
            }
        }
        self.with_dict
            .last_mut()
            .map(|(_, d)| d)
            .ok_or_else(|| Error::Codec("no decompressor".into()))
    }
}

/// Grows `slot` to an aligned buffer of at least `len` bytes and returns it.
fn aligned_scratch(slot: &mut Option<AlignedBuf>, len: usize) -> Result<&mut AlignedBuf> {
    if slot.as_ref().is_none_or(|b| b.len() < len) {
        let cap = len.next_power_of_two().max(1 << 16);
        *slot = Some(
            AlignedBuf::new(cap, DIRECT_ALIGN)
                .map_err(|e| Error::Codec(format!("cannot allocate direct-read scratch: {e}")))?,
        );
    }
    slot.as_mut()
        .ok_or_else(|| Error::Codec("direct-read scratch missing".into()))
}

/// The aligned span `[start, end)` an O_DIRECT read of `e` must cover.
fn direct_span(e: &Entry) -> (u64, u64) {
    let a = DIRECT_ALIGN as u64;
    let start = e.offset / a * a;
    let end = (e.offset + u64::from(e.stored_len)).div_ceil(a) * a;
    (start, end)
}

/// Whether a raw record can be read with O_DIRECT straight into `dst`.
fn direct_into_slot(e: &Entry, dst: &[u8]) -> bool {
    let a = DIRECT_ALIGN as u64;
    e.codec == RecordCodec::Raw
        && e.offset % a == 0
        && u64::from(e.stored_len) % a == 0
        && dst.as_ptr() as usize % DIRECT_ALIGN == 0
}

impl Inner {
    fn check_sum(&self, index: u64, e: &Entry, stored: &[u8]) -> Result<()> {
        if self.verify && format::checksum(stored) != e.checksum {
            return Err(Error::record(&self.path, index, "checksum mismatch"));
        }
        Ok(())
    }

    /// Turns `stored` bytes of record `index` into its logical bytes in `dst`.
    pub(crate) fn decode_into(
        &self,
        index: u64,
        e: &Entry,
        stored: &[u8],
        dst: &mut [u8],
        decoders: &mut Decoders,
    ) -> Result<()> {
        self.check_sum(index, e, stored)?;
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
                format!("decompressed to {n} bytes, the table says {}", dst.len()),
            )),
            Err(err) => Err(Error::record(&self.path, index, format!("zstd: {err}"))),
        }
    }

    fn read_err(&self, index: Option<u64>, err: io::Error) -> Error {
        match (err.kind(), index) {
            (io::ErrorKind::UnexpectedEof, Some(i)) => {
                Error::record(&self.path, i, "the file ends inside the record")
            }
            (io::ErrorKind::UnexpectedEof, None) => {
                Error::corrupt(&self.path, "the file ends inside a record")
            }
            _ => Error::io(&self.path, "reading records", err),
        }
    }

    /// Fills `dst` (exactly `logical_len` bytes) with record `index` whose validated
    /// entry is `e`, one record at a time (mmap or pread, direct or not).
    pub(crate) fn read_record(
        &self,
        index: u64,
        e: &Entry,
        dst: &mut [u8],
        ctx: &mut DecodeCtx,
    ) -> Result<()> {
        if dst.len() != e.logical_len as usize {
            return Err(Error::arg(format!(
                "destination slot of {} bytes for record {index} of {} bytes",
                dst.len(),
                e.logical_len
            )));
        }
        let stored = e.stored_len as usize;
        if let Some(direct) = &self.direct_file {
            if direct_into_slot(e, dst) {
                file::read_exact_at(direct, dst, e.offset)
                    .map_err(|err| self.read_err(Some(index), err))?;
                return self.check_sum(index, e, dst);
            }
            let (start, end) = direct_span(e);
            let buf = aligned_scratch(&mut ctx.aligned, (end - start) as usize)?;
            let span = &mut buf[..(end - start) as usize];
            file::read_exact_at(direct, span, start)
                .map_err(|err| self.read_err(Some(index), err))?;
            let skip = (e.offset - start) as usize;
            return self.decode_into(index, e, &span[skip..skip + stored], dst, &mut ctx.decoders);
        }
        if self.backend == Backend::Mmap {
            let src = &self.map.bytes()[e.offset as usize..e.offset as usize + stored];
            return self.decode_into(index, e, src, dst, &mut ctx.decoders);
        }
        if e.codec == RecordCodec::Raw {
            file::read_exact_at(&self.file, dst, e.offset)
                .map_err(|err| self.read_err(Some(index), err))?;
            return self.check_sum(index, e, dst);
        }
        if ctx.scratch.len() < stored {
            ctx.scratch.resize(stored, 0);
        }
        let src = &mut ctx.scratch[..stored];
        file::read_exact_at(&self.file, src, e.offset)
            .map_err(|err| self.read_err(Some(index), err))?;
        self.decode_into(index, e, src, dst, &mut ctx.decoders)
    }

    /// Fills each `(index, slot)` of one task with its record.
    pub(crate) fn read_many<'d>(
        &self,
        items: impl Iterator<Item = (u64, &'d mut [u8])>,
        ctx: &mut DecodeCtx,
    ) -> Result<()> {
        if self.backend != Backend::Uring {
            for (i, dst) in items {
                let e = self.entry(i)?;
                self.read_record(i, &e, dst, ctx)?;
            }
            return Ok(());
        }
        self.read_many_uring(items, ctx)
    }

    fn read_many_uring<'d>(
        &self,
        items: impl Iterator<Item = (u64, &'d mut [u8])>,
        ctx: &mut DecodeCtx,
    ) -> Result<()> {
        /// What to do when a read completes.
        struct Pending<'d> {
            index: u64,
            entry: Entry,
            /// The slot, when the read went to scratch and must be copied or decoded.
            target: Option<&'d mut [u8]>,
            /// Where the record starts inside the bytes read.
            skip: usize,
        }
        let direct = self.direct_file.is_some();
        let hint = items.size_hint().0;
        // (pending, read offset, read len)
        let mut plan: Vec<(Pending<'d>, u64, usize)> = Vec::with_capacity(hint);
        let mut slots: Vec<Option<&'d mut [u8]>> = Vec::with_capacity(hint);
        let mut scratch_len = 0usize;
        for (i, dst) in items {
            let e = self.entry(i)?;
            if dst.len() != e.logical_len as usize {
                return Err(Error::arg(format!(
                    "destination slot of {} bytes for record {i} of {} bytes",
                    dst.len(),
                    e.logical_len
                )));
            }
            let into_slot = if direct {
                direct_into_slot(&e, dst)
            } else {
                e.codec == RecordCodec::Raw
            };
            let (start, end) = if direct && !into_slot {
                direct_span(&e)
            } else {
                (e.offset, e.offset + u64::from(e.stored_len))
            };
            let len = (end - start) as usize;
            if !into_slot {
                scratch_len += len;
            }
            let pending = Pending {
                index: i,
                entry: e,
                target: None,
                skip: (e.offset - start) as usize,
            };
            plan.push((pending, start, len));
            slots.push(Some(dst));
        }
        let DecodeCtx {
            scratch,
            aligned,
            decoders,
        } = ctx;
        let mut rest: &mut [u8] = if direct {
            &mut aligned_scratch(aligned, scratch_len)?[..scratch_len]
        } else {
            if scratch.len() < scratch_len {
                scratch.resize(scratch_len, 0);
            }
            &mut scratch[..scratch_len]
        };
        let mut reqs: Vec<ReadReq<'_>> = Vec::with_capacity(plan.len());
        let mut pending: Vec<Pending<'d>> = Vec::with_capacity(plan.len());
        for ((mut p, start, len), slot) in plan.into_iter().zip(slots) {
            let slot = slot.ok_or_else(|| Error::arg("slot used twice"))?;
            let into_slot = if direct {
                direct_into_slot(&p.entry, slot)
            } else {
                p.entry.codec == RecordCodec::Raw
            };
            let buf: &mut [u8] = if into_slot {
                slot
            } else {
                p.target = Some(slot);
                let (head, tail) = std::mem::take(&mut rest).split_at_mut(len);
                rest = tail;
                head
            };
            reqs.push(ReadReq { buf, offset: start });
            pending.push(p);
        }
        let file = self.direct_file.as_ref().unwrap_or(&self.file);
        let mut failure: Option<Error> = None;
        let result = uring::read_batch(file, &mut reqs, self.queue_depth, |k, buf| {
            let p = &mut pending[k];
            let stored = p.entry.stored_len as usize;
            let r = match p.target.take() {
                None => self.check_sum(p.index, &p.entry, buf),
                Some(dst) => {
                    let src = &buf[p.skip..p.skip + stored];
                    self.decode_into(p.index, &p.entry, src, dst, decoders)
                }
            };
            r.map_err(|e| {
                failure = Some(e);
                io::Error::other("record failed")
            })
        });
        match (failure, result) {
            (Some(e), _) => Err(e),
            (None, Err(e)) => Err(self.read_err(None, e)),
            (None, Ok(())) => Ok(()),
        }
    }
}

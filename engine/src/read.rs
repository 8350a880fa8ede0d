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
use zring_platform::uring::{self, ReadReq, RingFile};
use zring_platform::{AlignedBuf, Backend};

use crate::error::{Error, Result};
use crate::format::{self, Entry, RecordCodec};
use crate::store::Inner;

/// How many dictionary decoders a thread keeps (one per recently read store).
const DICT_CACHE: usize = 8;
/// The most scratch one io_uring window uses (compressed and direct reads land in
/// scratch): bounds per-thread memory whatever the batch size.
const SCRATCH_WINDOW: usize = 8 << 20;
/// The most records one io_uring window plans at once.
const WINDOW_RECORDS: usize = 4096;
/// Scratch above this is released after a task, so one huge gather does not pin
/// memory in every thread for the life of the process.
const SCRATCH_KEEP: usize = 16 << 20;

/// One record of an io_uring window.
struct Planned<'d> {
    index: u64,
    entry: Entry,
    slot: Option<&'d mut [u8]>,
    /// Whether the read goes straight into the slot (else into scratch).
    into_slot: bool,
    start: u64,
    len: usize,
}

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

    /// Releases scratch grown beyond what a usual task needs.
    fn shrink(&mut self) {
        if self.scratch.capacity() > SCRATCH_KEEP {
            self.scratch = Vec::new();
        }
        if self
            .aligned
            .as_ref()
            .is_some_and(|b| b.len() > SCRATCH_KEEP)
        {
            self.aligned = None;
        }
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
        match self.with_dict.iter().rposition(|(id, _)| *id == inner.id) {
            // Already the most recent: the common case of a batch from one store.
            Some(k) if k + 1 == self.with_dict.len() => {}
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
                .map_err(|e| Error::OutOfMemory(format!("direct-read scratch: {e}")))?,
        );
    }
    slot.as_mut()
        .ok_or_else(|| Error::Internal("direct-read scratch missing".into()))
}

/// The aligned span `[start, end)` an O_DIRECT read of `e` must cover.
fn direct_span(e: &Entry) -> (u64, u64) {
    let a = DIRECT_ALIGN as u64;
    let start = e.offset / a * a;
    let end = (e.offset + u64::from(e.stored_len)).div_ceil(a) * a;
    (start, end)
}

/// A destination slot must hold exactly the record's logical bytes.
fn check_slot(index: u64, e: &Entry, dst: &[u8]) -> Result<()> {
    if dst.len() != e.logical_len as usize {
        return Err(Error::arg(format!(
            "destination slot of {} bytes for record {index} of {} bytes",
            dst.len(),
            e.logical_len
        )));
    }
    Ok(())
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
        self.decode_checked(index, e, stored, dst, decoders)
    }

    /// [`Inner::decode_into`] for bytes whose checksum was already checked (or is not
    /// to be).
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
        check_slot(index, e, dst)?;
        let stored = e.stored_len as usize;
        if let Some(direct) = self.direct_file.as_ref().map(RingFile::file) {
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
            file::read_exact_at(self.file.file(), dst, e.offset)
                .map_err(|err| self.read_err(Some(index), err))?;
            return self.check_sum(index, e, dst);
        }
        if ctx.scratch.len() < stored {
            ctx.scratch.resize(stored, 0);
        }
        let src = &mut ctx.scratch[..stored];
        file::read_exact_at(self.file.file(), src, e.offset)
            .map_err(|err| self.read_err(Some(index), err))?;
        self.decode_into(index, e, src, dst, &mut ctx.decoders)
    }

    /// Fills each `(index, slot)` of one task with its record.
    pub(crate) fn read_many<'d>(
        &self,
        items: impl Iterator<Item = (u64, &'d mut [u8])>,
        ctx: &mut DecodeCtx,
    ) -> Result<()> {
        // A thread that cannot have a ring of its own (see thread_ring_ready) reads
        // with pread instead of failing.
        let result = if self.backend == Backend::Mmap && self.direct_file.is_none() {
            self.read_many_mapped(items, ctx)
        } else if self.backend != Backend::Uring || !uring::thread_ring_ready() {
            items.into_iter().try_for_each(|(i, dst)| {
                let e = self.entry(i)?;
                self.read_record(i, &e, dst, ctx)
            })
        } else {
            self.read_many_uring(items, ctx)
        };
        ctx.shrink();
        result
    }

    /// Copies (or decodes) a task's records out of the mapping, one record ahead:
    /// the next record's table entry is decoded and its first cache lines prefetched
    /// before the current one is copied, so the memory latency of random records
    /// overlaps the copy instead of adding to it.
    fn read_many_mapped<'d>(
        &self,
        mut items: impl Iterator<Item = (u64, &'d mut [u8])>,
        ctx: &mut DecodeCtx,
    ) -> Result<()> {
        let mut current = items.next().map(|(i, dst)| (i, dst, self.entry(i)));
        while let Some((i, dst, entry)) = current {
            let e = entry?;
            current = items.next().map(|(j, d)| (j, d, self.entry(j)));
            if let Some((_, _, Ok(next))) = &current {
                self.map
                    .prefetch(next.offset as usize, next.stored_len as usize);
            }
            self.read_record(i, &e, dst, ctx)?;
        }
        Ok(())
    }

    /// Reads a task's records through this thread's ring, one window of at most
    /// `SCRATCH_WINDOW` bytes of scratch at a time, so a task's share of a huge
    /// compressed batch never needs scratch for all of it at once.
    fn read_many_uring<'d>(
        &self,
        items: impl Iterator<Item = (u64, &'d mut [u8])>,
        ctx: &mut DecodeCtx,
    ) -> Result<()> {
        let direct = self.direct_file.is_some();
        let mut items = items.peekable();
        let hint = items.size_hint().0.min(WINDOW_RECORDS);
        let mut window: Vec<Planned<'d>> = Vec::with_capacity(hint);
        while items.peek().is_some() {
            window.clear();
            let mut scratch_len = 0usize;
            while let Some((i, dst)) = items.next_if(|_| {
                window.len() < WINDOW_RECORDS && (window.is_empty() || scratch_len < SCRATCH_WINDOW)
            }) {
                let e = self.entry(i)?;
                check_slot(i, &e, dst)?;
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
                window.push(Planned {
                    index: i,
                    entry: e,
                    slot: Some(dst),
                    into_slot,
                    start,
                    len,
                });
            }
            self.read_window(&mut window, scratch_len, ctx)?;
        }
        Ok(())
    }

    /// Issues one window's reads and decodes each record as its read completes.
    fn read_window(
        &self,
        window: &mut [Planned<'_>],
        scratch_len: usize,
        ctx: &mut DecodeCtx,
    ) -> Result<()> {
        let decoders = &mut ctx.decoders;
        // The thread's registered scratch (aligned, so fit for O_DIRECT too).
        uring::with_scratch(scratch_len, |scratch| {
            self.read_into(window, scratch, decoders)
        })
        .map_err(|e| Error::OutOfMemory(format!("io_uring read scratch: {e}")))?
    }

    /// [`Inner::read_window`] with its scratch: reads land in their slot or in
    /// `scratch`, and are decoded as they complete.
    fn read_into(
        &self,
        window: &mut [Planned<'_>],
        scratch: &mut [u8],
        decoders: &mut Decoders,
    ) -> Result<()> {
        /// What to do when a read completes.
        struct Pending<'s> {
            index: u64,
            entry: Entry,
            /// The slot, when the read went to scratch and must be copied or decoded.
            target: Option<&'s mut [u8]>,
            /// Where the record starts inside the bytes read.
            skip: usize,
        }
        let mut rest: &mut [u8] = scratch;
        let mut reqs: Vec<ReadReq<'_>> = Vec::with_capacity(window.len());
        let mut pending: Vec<Pending<'_>> = Vec::with_capacity(window.len());
        for p in window.iter_mut() {
            let slot = p.slot.take().ok_or_else(|| Error::arg("slot used twice"))?;
            let mut target = None;
            let buf: &mut [u8] = if p.into_slot {
                slot
            } else {
                target = Some(slot);
                let (head, tail) = std::mem::take(&mut rest).split_at_mut(p.len);
                rest = tail;
                head
            };
            reqs.push(ReadReq {
                buf,
                offset: p.start,
            });
            pending.push(Pending {
                index: p.index,
                entry: p.entry,
                target,
                skip: (p.entry.offset - p.start) as usize,
            });
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

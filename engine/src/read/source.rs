//! Where record bytes come from, chosen once when a store is opened, and one
//! executor per source:
//!
//! - `Mmap`: copy or decompress straight out of the mapping (no syscall); the table
//!   entries of the next records and the bytes of the one after next are prefetched
//!   while the current one is copied;
//! - `Pread`: one positional read per record, into the slot (raw) or into per-thread
//!   scratch (compressed), then decompress into the slot;
//! - `Uring`: a task's records are planned into reads (neighbours merged, see
//!   [`super::plan`]) and kept `queue_depth` deep in the thread's io_uring; each
//!   record is checked and decoded as soon as its read completes, while the others
//!   are still in flight;
//! - `Direct`: O_DIRECT, through io_uring or with `pread`: reads cover whole 4 KiB
//!   blocks into aligned scratch; a raw record that is itself aligned in the file, in
//!   length and in the destination is read straight into its slot.
//!
//! Only `Mmap` maps the store file. The others read every byte with `pread` or
//! io_uring, so a file truncated under an open store gives
//! [`Error::FileChanged`] rather than SIGBUS.

use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::Arc;

use zring_platform::{
    open_direct, read_exact_at, uring_read_batch, with_uring_scratch, Mapping, ReadReq, RingFile,
    UringReadBy, UringRequestFailed, DIRECT_ALIGN, URING_MAX_DEPTH,
};

use crate::entry::{Entry, RecordCodec};
use crate::error::{
    AllocFailure, Allocation, ArgumentError, Error, InternalError, RecordProblem, Result,
    StoreProblem,
};
use crate::format::Footer;
use crate::schema::Codec;

use super::decode::{grow, grow_aligned, DecodeCtx, Decoders};
use super::plan::{span, Coalesce, Planner, Window, WINDOW_RECORDS};
use super::{netfs, Backend, ReadOptions, Reader};

/// How many pages of the data region `Auto` samples for page-cache residency.
const RESIDENCY_SAMPLES: u64 = 32;

/// The source of an open store's record bytes.
pub(crate) enum Source {
    Mmap(Arc<Mapping>),
    Pread(RingFile),
    Uring {
        file: RingFile,
        depth: usize,
    },
    /// Opened with O_DIRECT; through io_uring when `uring`.
    Direct {
        file: RingFile,
        uring: bool,
        depth: usize,
    },
    /// An object at a URL, read with ranged GETs (`crate::remote`).
    #[cfg(feature = "remote")]
    Remote(Arc<crate::remote::RemoteSource>),
}

impl Source {
    /// Resolves `opts.backend` for the store at `path` (whose footer says where the
    /// data lies) and opens its source. `Auto` takes `Mmap` when at least 3/4 of
    /// sampled data pages are resident (warm data: no syscall per record wins) and the
    /// file is not on a network file system (where another machine may shrink it under
    /// the mapping); `Uring` otherwise or with O_DIRECT. When `Auto` finds the data
    /// cold (not resident, or larger than the machine's memory) it reads with O_DIRECT
    /// through io_uring, so a pass over a store larger than memory does not fill the
    /// page cache and evict the rest of the machine; buffered io_uring where the file
    /// system refuses O_DIRECT. Whether io_uring works is not asked here: where it
    /// does not, the platform reads each batch with `pread` (and says why, once).
    ///
    /// `file` was opened at `at`; `path` is the name errors give the store (they
    /// differ for a dataset's store behind a symbolic link, see
    /// `dataset/location.rs`). O_DIRECT opens `at` again.
    pub(crate) fn open(
        at: &Path,
        path: &Path,
        file: File,
        opts: &ReadOptions,
        f: &Footer,
    ) -> Result<(Source, Backend)> {
        let mut probe_map = None;
        // `Auto` found the data cold: read it with O_DIRECT if the file system allows.
        let mut cold = false;
        let wanted = match opts.backend {
            Backend::Mmap if opts.direct => {
                return Err(Error::InvalidArgument(
                    ArgumentError::DirectNeedsFileBackend {
                        path: path.to_path_buf(),
                    },
                ))
            }
            Backend::Auto if opts.direct => Backend::Uring,
            Backend::Auto if netfs::is_network(at) => Backend::Uring,
            Backend::Auto if larger_than_memory(f) => {
                cold = true;
                Backend::Uring
            }
            Backend::Auto => {
                // mincore on a mapping never faults, whatever happened to the file.
                let map =
                    Mapping::new(&file).map_err(|e| Error::io(path, "mapping the store", e))?;
                let resident = (0..RESIDENCY_SAMPLES)
                    .filter(|k| {
                        let at = f.data.offset + f.data.len * k / RESIDENCY_SAMPLES;
                        map.is_resident(at as usize).unwrap_or(true)
                    })
                    .count() as u64;
                let warm = f.data.len == 0 || resident * 4 >= RESIDENCY_SAMPLES * 3;
                if warm {
                    probe_map = Some(map);
                    Backend::Mmap
                } else {
                    cold = true;
                    Backend::Uring
                }
            }
            b => b,
        };
        // Chosen once: where io_uring turns out unusable, the platform's batch read
        // falls back to pread by itself (`reads_served` says which served).
        let backend = wanted;
        let depth = opts.queue_depth.clamp(1, URING_MAX_DEPTH);
        let source = match backend {
            Backend::Mmap => {
                let map = match probe_map {
                    Some(m) => m,
                    None => {
                        Mapping::new(&file).map_err(|e| Error::io(path, "mapping the store", e))?
                    }
                };
                // The file may have changed size since the footer was read.
                let len = map.bytes().len() as u64;
                if len != f.file_len {
                    return Err(Error::FileChanged {
                        path: path.to_path_buf(),
                        len,
                        expected: f.file_len,
                    });
                }
                let bytes = map.bytes().len();
                // The metadata is read now and on every lookup: read it ahead. The
                // data region is read at random.
                let meta_start = (f.data.offset + f.data.len) as usize;
                map.advise_sequential(meta_start..bytes);
                map.advise_random(f.data.offset as usize..meta_start);
                Source::Mmap(Arc::new(map))
            }
            Backend::Uring if cold => match open_direct(at) {
                Ok(direct) => Source::Direct {
                    file: RingFile::new(direct),
                    uring: true,
                    depth,
                },
                // tmpfs and some others refuse O_DIRECT: buffered reads then.
                Err(_) => Source::Uring {
                    file: RingFile::new(file),
                    depth,
                },
            },
            _ if opts.direct => Source::Direct {
                file: RingFile::new(
                    open_direct(at).map_err(|e| Error::io(path, "opening with O_DIRECT", e))?,
                ),
                uring: backend == Backend::Uring,
                depth,
            },
            Backend::Uring => Source::Uring {
                file: RingFile::new(file),
                depth,
            },
            _ => Source::Pread(RingFile::new(file)),
        };
        Ok((source, backend))
    }

    /// The mapping, for the `mmap` backend.
    pub(crate) fn mapping(&self) -> Option<&Arc<Mapping>> {
        match self {
            Source::Mmap(m) => Some(m),
            _ => None,
        }
    }

    /// Whether a task is one stream of reads kept `depth` deep (io_uring, buffered or
    /// O_DIRECT), so that a gather gives each thread one task holding its whole share.
    pub(crate) fn streams_reads(&self) -> bool {
        matches!(
            self,
            Source::Uring { .. } | Source::Direct { uring: true, .. }
        )
    }

    /// The file records are read from (none for `mmap`).
    pub(crate) fn file(&self) -> Option<&RingFile> {
        match self {
            Source::Mmap(_) => None,
            #[cfg(feature = "remote")]
            Source::Remote(_) => None,
            Source::Pread(f) | Source::Uring { file: f, .. } | Source::Direct { file: f, .. } => {
                Some(f)
            }
        }
    }
}

/// Whether the store's data region is larger than this machine's memory (or its
/// memory cgroup's limit): a pass over it could never stay in the page cache, and
/// buffered reads would only evict everything else on the way.
fn larger_than_memory(f: &Footer) -> bool {
    zring_platform::memory_bytes().is_some_and(|m| f.data.len > m)
}

/// A destination slot must hold exactly the record's logical bytes.
pub(crate) fn check_slot(index: u64, e: &Entry, dst: &[u8]) -> Result<()> {
    if dst.len() != e.logical_len as usize {
        return Err(Error::InvalidArgument(ArgumentError::SlotSize {
            index,
            slot: dst.len(),
            record: u64::from(e.logical_len),
        }));
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

impl Reader {
    /// The most record reads one gather keeps in flight: threads per gather x the
    /// queue depth of each thread's ring (1 per thread for `pread` and `mmap`).
    pub(crate) fn reads_in_flight(&self) -> usize {
        let threads = match self.opened_with.threads {
            0 => zring_platform::available_cores(),
            t => t,
        };
        let depth = match &self.source {
            Source::Uring { depth, .. }
            | Source::Direct {
                uring: true, depth, ..
            } => *depth,
            #[cfg(feature = "remote")]
            Source::Remote(r) => r.in_flight(),
            _ => 1,
        };
        threads.max(1) * depth
    }

    /// The error for a failed read of the file: a file that is no longer the length
    /// it had at open says so (with both lengths), before anything else.
    pub(crate) fn read_err(&self, index: Option<u64>, err: io::Error) -> Error {
        let now = self
            .source
            .file()
            .and_then(|f| f.file().metadata().ok())
            .map(|m| m.len());
        if let Some(len) = now.filter(|&l| l != self.footer.file_len) {
            return Error::FileChanged {
                path: self.path.clone(),
                len,
                expected: self.footer.file_len,
            };
        }
        match (err.kind(), index) {
            (io::ErrorKind::UnexpectedEof, Some(i)) => {
                Error::record(&self.path, i, RecordProblem::EndsInsideRecord)
            }
            (io::ErrorKind::UnexpectedEof, None) => {
                Error::corrupt(&self.path, StoreProblem::EndsInsideRecord)
            }
            (_, Some(index)) => Error::RecordIo {
                path: self.path.clone(),
                index,
                source: err,
            },
            _ => Error::io(&self.path, "reading records", err),
        }
    }

    /// Fills `dst` (exactly `logical_len` bytes) with record `index` whose validated
    /// entry is `e`, one record at a time (any source; io_uring sources read it with
    /// `pread`, which is what one read costs anyway).
    pub(crate) fn read_record(
        &self,
        index: u64,
        e: &Entry,
        dst: &mut [u8],
        ctx: &mut DecodeCtx,
    ) -> Result<()> {
        check_slot(index, e, dst)?;
        let stored = e.stored_len as usize;
        let file = match &self.source {
            Source::Mmap(map) => {
                let src = map
                    .bytes()
                    .get(e.offset as usize..e.offset as usize + stored)
                    .ok_or_else(|| Error::record(&self.path, index, RecordProblem::OutsideFile))?;
                return self.decode_into(index, e, src, dst, &mut ctx.decoders);
            }
            Source::Direct { file, .. } => {
                if direct_into_slot(e, dst) {
                    read_exact_at(file.file(), dst, e.offset)
                        .map_err(|err| self.read_err(Some(index), err))?;
                    return self.check_sum(index, e, dst);
                }
                let (start, end) = span(e, DIRECT_ALIGN as u64);
                let buf = grow_aligned(&mut ctx.aligned, (end - start) as usize)?;
                read_exact_at(file.file(), buf, start)
                    .map_err(|err| self.read_err(Some(index), err))?;
                let skip = (e.offset - start) as usize;
                let src = &buf[skip..skip + stored];
                return self.decode_into(index, e, src, dst, &mut ctx.decoders);
            }
            Source::Pread(f) | Source::Uring { file: f, .. } => f.file(),
            #[cfg(feature = "remote")]
            Source::Remote(r) => {
                let items = std::iter::once((index, dst));
                return self.read_remote(r, items, ctx);
            }
        };
        if e.codec == RecordCodec::Raw {
            read_exact_at(file, dst, e.offset).map_err(|err| self.read_err(Some(index), err))?;
            return self.check_sum(index, e, dst);
        }
        let src = grow(&mut ctx.scratch, stored);
        read_exact_at(file, src, e.offset).map_err(|err| self.read_err(Some(index), err))?;
        self.decode_into(index, e, src, dst, &mut ctx.decoders)
    }

    /// Runs `f` on record `index`'s stored bytes (for `verify`).
    pub(crate) fn with_stored<T>(
        &self,
        index: u64,
        e: &Entry,
        ctx: &mut DecodeCtx,
        f: impl FnOnce(&[u8], &mut Decoders) -> Result<T>,
    ) -> Result<T> {
        let stored = e.stored_len as usize;
        let DecodeCtx {
            scratch,
            aligned,
            decoders,
        } = ctx;
        match &self.source {
            Source::Mmap(map) => {
                let src = map
                    .bytes()
                    .get(e.offset as usize..e.offset as usize + stored)
                    .ok_or_else(|| Error::record(&self.path, index, RecordProblem::OutsideFile))?;
                f(src, decoders)
            }
            Source::Direct { file, .. } => {
                let (start, end) = span(e, DIRECT_ALIGN as u64);
                let buf = grow_aligned(aligned, (end - start) as usize)?;
                read_exact_at(file.file(), buf, start)
                    .map_err(|err| self.read_err(Some(index), err))?;
                let skip = (e.offset - start) as usize;
                f(&buf[skip..skip + stored], decoders)
            }
            Source::Pread(file) | Source::Uring { file, .. } => {
                let buf = grow(scratch, stored);
                read_exact_at(file.file(), buf, e.offset)
                    .map_err(|err| self.read_err(Some(index), err))?;
                f(buf, decoders)
            }
            #[cfg(feature = "remote")]
            Source::Remote(r) => {
                let buf = r.read_range(e.offset..e.offset + stored as u64)?;
                f(&buf, decoders)
            }
        }
    }

    /// Fills each `(index, slot)` of one task with its record, with the store's
    /// source. An io_uring source always hands its reads to the platform, which reads
    /// them with `pread` where this thread has no ring or the ring fails (the one
    /// fallback rule, in `zring_platform::uring`); each window is counted as served by
    /// whichever of the two read it.
    pub(crate) fn read_task<'d>(
        &self,
        items: impl Iterator<Item = (u64, &'d mut [u8])>,
        ctx: &mut DecodeCtx,
    ) -> Result<()> {
        let mut count = 0u64;
        let items = items.inspect(|_| count += 1);
        let (result, served) = match &self.source {
            #[cfg(feature = "remote")]
            Source::Remote(r) => {
                let result = self.read_remote(r, items, ctx);
                self.served_remote(count);
                return result;
            }
            Source::Uring { file, depth }
            | Source::Direct {
                file,
                uring: true,
                depth,
            } => return self.read_uring(file, *depth, items, ctx),
            Source::Mmap(map) => (self.read_mapped(map, items, ctx), Backend::Mmap),
            _ => (self.read_preads(items, ctx), Backend::Pread),
        };
        self.served(served, count);
        result
    }

    /// Reads a task's records with `pread`: compressed records that follow each
    /// other in the file (each starting at most a page after the previous one ends,
    /// as the io_uring planner merges them: [`Coalesce::COMPRESSED`]) are read as
    /// one window into scratch and decoded from it, so a sequential batch of small
    /// compressed records costs one system call per window instead of one per
    /// record (a record stored raw in a compressed store joins its window and is
    /// copied out of it). Records of a raw store, and every record of an O_DIRECT
    /// file, are read one at a time (straight into their slots, or block-aligned).
    fn read_preads<'d>(
        &self,
        items: impl Iterator<Item = (u64, &'d mut [u8])>,
        ctx: &mut DecodeCtx,
    ) -> Result<()> {
        let file = match &self.source {
            Source::Pread(f) | Source::Uring { file: f, .. } if self.stored.codec != Codec::Raw => {
                Some(f.file())
            }
            _ => None,
        };
        let rule = Coalesce::COMPRESSED;
        let mut items = items.peekable();
        // On the stack: a warm gather allocates nothing per task (tests/alloc.rs).
        let mut slots: [Option<(u64, Entry, &'d mut [u8])>; PREAD_WINDOW_RECORDS] =
            std::array::from_fn(|_| None);
        while let Some((i, dst)) = items.next() {
            let e = self.entry(i)?;
            let Some(file) = file else {
                self.read_record(i, &e, dst, ctx)?;
                continue;
            };
            let start = e.offset;
            let mut end = e.offset + u64::from(e.stored_len);
            slots[0] = Some((i, e, dst));
            let mut n = 1;
            // Each following record is looked up once: it joins the window, or
            // starts the next one through the loop above.
            while let Some((j, _)) = items.peek() {
                let f = self.entry(*j)?;
                if n == PREAD_WINDOW_RECORDS || !rule.joins(start..end, end, &f) {
                    break;
                }
                let Some((j, d)) = items.next() else { break };
                slots[n] = Some((j, f, d));
                n += 1;
                end = f.offset + u64::from(f.stored_len);
            }
            let window = &mut slots[..n];
            if let [Some((i, e, dst))] = window {
                self.read_record(*i, e, dst, ctx)?;
                continue;
            }
            for (i, e, dst) in window.iter().flatten() {
                check_slot(*i, e, dst)?;
            }
            let DecodeCtx {
                scratch, decoders, ..
            } = ctx;
            let buf = grow(scratch, (end - start) as usize);
            // A failed window names its first record, as an io_uring read does.
            read_exact_at(file, buf, start).map_err(|err| self.read_err(Some(i), err))?;
            for (i, e, dst) in window.iter_mut().flatten() {
                let skip = (e.offset - start) as usize;
                let src = &buf[skip..skip + e.stored_len as usize];
                self.decode_into(*i, e, src, dst, decoders)?;
            }
        }
        Ok(())
    }

    /// The backend [`Reader::read_record`] reads with: the mapping for `mmap`, else
    /// pread.
    pub(crate) fn record_source(&self) -> Backend {
        match self.source {
            Source::Mmap(_) => Backend::Mmap,
            _ => Backend::Pread,
        }
    }

    /// Copies (or decodes) a task's records out of the mapping with the next ones'
    /// memory already on its way: the table entries of the next [`ENTRY_AHEAD`]
    /// records, and the bytes of the record [`RECORD_AHEAD`] places ahead, are
    /// prefetched before the current record is copied and its checksum computed. A
    /// random small record is a cache miss for its entry and one for its bytes; with
    /// them asked for early, the misses of the next records overlap the copy and the
    /// hash of this one instead of following them (with only the next record's first
    /// KiB asked for, W2's 2 KiB records read 0.85 as fast with checksums as without).
    fn read_mapped<'d>(
        &self,
        map: &Mapping,
        mut items: impl Iterator<Item = (u64, &'d mut [u8])>,
        ctx: &mut DecodeCtx,
    ) -> Result<()> {
        // The records ahead, in a ring (no allocation per task); a record's entry is
        // decoded once, when its bytes are prefetched, and kept for its read.
        let mut ring: [Option<Ahead<'d>>; ENTRY_AHEAD] = Default::default();
        let (mut head, mut len) = (0usize, 0usize);
        let mut push = |ring: &mut [Option<Ahead<'d>>; ENTRY_AHEAD], at: usize| {
            let (i, dst) = items.next()?;
            self.prefetch_entry(i);
            ring[at % ENTRY_AHEAD] = Some(Ahead {
                index: i,
                dst,
                entry: None,
            });
            Some(())
        };
        while len < ENTRY_AHEAD && push(&mut ring, head + len).is_some() {
            len += 1;
        }
        while len > 0 {
            let Some(Ahead { index, dst, entry }) = ring[head].take() else {
                break;
            };
            head = (head + 1) % ENTRY_AHEAD;
            len -= 1;
            if push(&mut ring, head + len).is_some() {
                len += 1;
            }
            if len >= RECORD_AHEAD {
                if let Some(next) = &mut ring[(head + RECORD_AHEAD - 1) % ENTRY_AHEAD] {
                    let e = self.entry(next.index);
                    if let Ok(e) = &e {
                        map.prefetch(e.offset as usize, e.stored_len as usize);
                    }
                    next.entry = Some(e);
                }
            }
            let e = match entry {
                Some(e) => e?,
                None => self.entry(index)?,
            };
            self.read_record(index, &e, dst, ctx)?;
        }
        Ok(())
    }

    /// Reads a task's records through this thread's ring, one window (cut by
    /// [`Window`]: a bounded number of records and of scratch bytes) at a time, so a task's share of a huge
    /// compressed batch never needs scratch for all of it at once.
    fn read_uring<'d>(
        &self,
        file: &RingFile,
        depth: usize,
        items: impl Iterator<Item = (u64, &'d mut [u8])>,
        ctx: &mut DecodeCtx,
    ) -> Result<()> {
        let direct = file.is_direct();
        let rule = match (direct, self.stored.codec) {
            (true, _) => Coalesce::DIRECT,
            (false, Codec::Raw) => Coalesce::BUFFERED,
            (false, _) => Coalesce::COMPRESSED,
        };
        // Whether a read of this one record may go straight into its slot.
        let slot_ok = |e: &Entry, dst: &[u8]| match direct {
            true => direct_into_slot(e, dst),
            false => e.codec == RecordCodec::Raw,
        };
        let mut items = items.peekable();
        let hint = items.size_hint().0.min(WINDOW_RECORDS);
        let mut window: Vec<Windowed<'d>> = Vec::with_capacity(hint);
        let mut plan = Window::with_capacity(rule, hint);
        while items.peek().is_some() {
            window.clear();
            plan.clear();
            while let Some((i, dst)) = items.next_if(|_| plan.has_room()) {
                let e = self.entry(i)?;
                check_slot(i, &e, dst)?;
                plan.push(&e, slot_ok(&e, dst));
                window.push(Windowed {
                    index: i,
                    entry: e,
                    slot: Some(dst),
                });
            }
            let scratch_len = plan.scratch_len();
            let decoders = &mut ctx.decoders;
            // The thread's registered scratch (aligned, so fit for O_DIRECT too).
            with_uring_scratch(scratch_len, |scratch| {
                self.read_window(
                    file,
                    depth,
                    &mut window,
                    plan.plan(),
                    &slot_ok,
                    scratch,
                    decoders,
                )
            })
            .map_err(|e| {
                Error::out_of_memory(
                    Allocation::UringScratch,
                    scratch_len as u64,
                    Some(&self.path),
                    Some(AllocFailure::Os(e)),
                )
            })??;
        }
        Ok(())
    }

    /// Issues one window's reads and checks and decodes each record as its read
    /// completes.
    #[allow(clippy::too_many_arguments)]
    fn read_window(
        &self,
        file: &RingFile,
        depth: usize,
        window: &mut [Windowed<'_>],
        plan: &Planner,
        slot_ok: &dyn Fn(&Entry, &[u8]) -> bool,
        scratch: &mut [u8],
        decoders: &mut Decoders,
    ) -> Result<()> {
        let reads = plan.reads();
        let mut rest: &mut [u8] = scratch;
        let mut reqs: Vec<ReadReq<'_>> = Vec::with_capacity(reads.len());
        // Per read: what to do when it completes.
        let mut targets: Vec<Target<'_, '_>> = Vec::with_capacity(reads.len());
        let records = window.len() as u64;
        let mut left: &mut [Windowed<'_>] = window;
        for r in reads {
            let (mine, tail) = std::mem::take(&mut left).split_at_mut(r.records.len());
            left = tail;
            let buf: &mut [u8] = match mine {
                [w] if w.slot.as_deref().is_some_and(|s| slot_ok(&w.entry, s)) => {
                    targets.push(Target::Slot(w.index, w.entry));
                    w.slot.take().ok_or_else(slot_used)?
                }
                _ => {
                    targets.push(Target::Scratch(mine));
                    let (head, tail) = std::mem::take(&mut rest).split_at_mut(r.len as usize);
                    rest = tail;
                    head
                }
            };
            reqs.push(ReadReq {
                buf,
                offset: r.offset,
            });
        }
        let mut failure: Option<Error> = None;
        let result = uring_read_batch(file, &mut reqs, depth, |k, buf| {
            let r = &reads[k];
            let done = match &mut targets[k] {
                // Hashed right after the read, while the bytes are in cache.
                Target::Slot(index, e) => self.check_sum(*index, e, buf),
                Target::Scratch(ws) => ws.iter_mut().try_for_each(|w| {
                    let skip = r.skip(&w.entry);
                    let src = &buf[skip..skip + w.entry.stored_len as usize];
                    let dst = w.slot.take().ok_or_else(slot_used)?;
                    self.decode_into(w.index, &w.entry, src, dst, decoders)
                }),
            };
            done.map_err(|e| {
                failure = Some(e);
                io::Error::other("record failed")
            })
        });
        match (failure, result) {
            (Some(e), _) => Err(e),
            (None, Err(e)) => {
                // Name the record of the read that failed (its first, for a read
                // that covers several).
                let failed = e
                    .get_ref()
                    .and_then(|r| r.downcast_ref::<UringRequestFailed>())
                    .map(|f| f.request);
                let index = failed.and_then(|k| match targets.get(k)? {
                    Target::Slot(index, _) => Some(*index),
                    Target::Scratch(ws) => ws.first().map(|w| w.index),
                });
                let e = match failed {
                    Some(_) => match e.into_inner().map(|r| r.downcast::<UringRequestFailed>()) {
                        Some(Ok(f)) => f.source,
                        Some(Err(other)) => io::Error::other(other),
                        None => io::Error::other("io_uring read failed"),
                    },
                    None => e,
                };
                Err(self.read_err(index, e))
            }
            (None, Ok(by)) => {
                let backend = match by {
                    UringReadBy::Uring => Backend::Uring,
                    UringReadBy::Pread => Backend::Pread,
                };
                self.served(backend, records);
                Ok(())
            }
        }
    }
}

/// What to do when one read of a window completes.
enum Target<'w, 'd> {
    /// The read went straight into the slot of this record: check it.
    Slot(u64, Entry),
    /// The read landed in scratch: copy or decode each of these records out of it.
    Scratch(&'w mut [Windowed<'d>]),
}

/// One record of an io_uring window.
struct Windowed<'d> {
    index: u64,
    entry: Entry,
    /// Taken when its read is issued (into the slot) or completes (from scratch).
    slot: Option<&'d mut [u8]>,
}

/// The most records one `pread` window holds.
const PREAD_WINDOW_RECORDS: usize = 32;

/// How many records ahead the mapped read path asks for table entries: enough for
/// an entry's miss to be over when its record's bytes are asked for.
const ENTRY_AHEAD: usize = 8;

/// How many records ahead the mapped read path asks for a record's bytes (the
/// record after next: the next one's are on their way already).
const RECORD_AHEAD: usize = 2;

/// A record of a mapped read waiting its turn: its entry decoded once its bytes
/// are prefetched (an error is kept for its read, where it is reported).
struct Ahead<'d> {
    index: u64,
    dst: &'d mut [u8],
    entry: Option<Result<Entry>>,
}

/// A window's destination slot taken twice: a bug in the window's bookkeeping.
fn slot_used() -> Error {
    Error::Internal(InternalError::Missing {
        what: "a destination slot (used twice)",
    })
}

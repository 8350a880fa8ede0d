//! The read path: everything between "records `i, j, k` of this store" and their
//! bytes in the caller's buffer. [`Store`](crate::Store) opens and validates a store
//! and hands every read here.
//!
//! ```text
//! indices ──► table entries ──► plan (reads) ──► source executes ──► check + decode ──► slots
//!             meta.rs            plan.rs          source.rs           decode.rs
//! ```
//!
//! - `meta`: table entries and shapes (mapped, copied at open, or read on demand);
//! - [`plan`]: the pure planner (records -> reads, neighbours merged);
//! - `source`: the source chosen once at open (`mmap`, `pread`, `uring`, O_DIRECT)
//!   and its executor;
//! - `decode`: checksums, zstd decoders and per-thread scratch;
//! - `exec`: the one batch executor: cuts any batch (a store's, a dataset's) into
//!   tasks by each store's policy and runs them on the pool, with a stop signal;
//! - `gather`: a store's dense, ragged and single-record reads;
//! - `verify`: checking every record;
//! - `remote`: stores in object storage, opened and read through `crate::remote`;
//! - `options`: [`ReadOptions`], and the one rule set that parses and checks them;
//! - `netfs`: whether a file is on a network file system (`Auto` then never maps it).

mod backend;
mod decode;
pub(crate) mod exec;
mod gather;
mod layout;
mod meta;
mod netfs;
mod options;
pub(crate) mod plan;
#[cfg(feature = "remote")]
mod remote;
mod source;
mod verify;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::entry::{Entry, RecordCodec};
use crate::error::{AllocFailure, Allocation, Error, RecordProblem, Result, StoreProblem};
use crate::format::{self, Footer, Section, SectionKind, Superblock};
use crate::schema::{Layout, StoreSchema};

pub use backend::{Backend, ParseBackendError};
pub use gather::{RaggedBatch, RaggedLayout};
pub use options::{ReadOptions, ReadSetup};
pub use plan::{Coalesce, Read};

pub(crate) use decode::with_ctx;
pub use exec::{Interrupt, Never};
pub(crate) use gather::LAYOUT_AHEAD;
pub(crate) use layout::{check_footer, check_schema, decode_footer, decode_superblock};

use layout::{outside_data_region, TableScan};
pub(crate) use meta::Meta;
pub(crate) use source::Source;

/// Summary figures of a store, from its table.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StoreStats {
    pub records: u64,
    /// Uncompressed payload bytes.
    pub logical_bytes: u64,
    /// Payload bytes on disk (without alignment padding).
    pub stored_bytes: u64,
    /// Records kept raw (in a compressed store: those that did not shrink).
    pub raw_records: u64,
    pub file_bytes: u64,
}

/// Records served by each backend, from [`Store::reads_served`](crate::Store::reads_served).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReadsServed {
    pub pread: u64,
    pub mmap: u64,
    pub uring: u64,
    /// Records read from object storage (a store opened from a URL).
    pub remote: u64,
}

/// The counters behind [`ReadsServed`]: bumped once per task, not per record.
#[derive(Default)]
struct ServedCounters {
    pread: AtomicU64,
    mmap: AtomicU64,
    uring: AtomicU64,
    remote: AtomicU64,
}

impl ServedCounters {
    fn add(&self, backend: Backend, records: u64) {
        let c = match backend {
            Backend::Mmap => &self.mmap,
            Backend::Uring => &self.uring,
            _ => &self.pread,
        };
        c.fetch_add(records, Ordering::Relaxed);
    }
}

/// An open store's read side: its validated layout, where its metadata and records
/// come from, and how reads are checked. Shared by every clone of a `Store`.
pub(crate) struct Reader {
    pub(crate) path: PathBuf,
    pub(crate) footer: Footer,
    pub(crate) stored: StoreSchema,
    pub(crate) superblock: Superblock,
    /// The backend in use (`Auto` resolved).
    pub(crate) backend: Backend,
    /// The zstd dictionary (empty unless the codec is zstd-dict).
    pub(crate) dict: Vec<u8>,
    source: Source,
    meta: Meta,
    /// The settings and pool the store was opened with (a dataset made of the store
    /// reads with them too).
    pub(crate) opened_with: ReadSetup,
    /// Distinguishes stores in per-thread decoder caches.
    id: u64,
    pub(crate) item_bytes: Option<u64>,
    served: ServedCounters,
}

/// What opening a store found, before the schema is parsed: its checked sections.
pub(crate) struct Opened {
    pub(crate) source: Source,
    pub(crate) backend: Backend,
    pub(crate) meta: Meta,
    pub(crate) dict: Vec<u8>,
    pub(crate) schema_json: Vec<u8>,
    /// The verdict of the pass over the table that open makes while it checksums
    /// it ([`TableScan`]): reported by [`Opened::check_table`] once the schema is
    /// checked, so that a footer or schema that lies about the layout is reported
    /// as such rather than as the first record it displaces.
    pub(crate) table: Result<()>,
}

impl Opened {
    /// Opens the source of the store `path` (footer read and checked against the
    /// file by the caller) and loads and checksums its metadata sections: dictionary
    /// and schema into memory; table and shapes mapped (`mmap`), copied, or, when
    /// larger than [`meta::IN_MEMORY_MAX`], checksummed in chunks and read on demand.
    ///
    /// Every table, however it is kept, gets one [`TableScan`] at open, in the
    /// pass that checksums it ([`TableCheck`]): each chunk of the table is scanned
    /// right after it is hashed (and, unless mapped, read), while it is in cache,
    /// so a table larger than the caches is still read from memory once. Mapped,
    /// copied and on-demand tables alike (the last, over 256 MiB, are never read
    /// twice). Remote stores keep their table in memory and scan it at open too
    /// (`read/remote.rs`). Checking at open rather than per lookup costs little
    /// next to the checksum open computes anyway, and lets a lookup stay one 32-byte
    /// decode: the order of records is a property of neighbouring entries that no
    /// single lookup sees (an empty record's predecessor may be any number of
    /// entries back).
    ///
    /// `at` is the file's path (an O_DIRECT source opens it again), `path` the name
    /// errors give it ([`Store::open_file`](crate::Store)).
    pub(crate) fn load(
        at: &Path,
        path: &Path,
        file: File,
        opts: &ReadOptions,
        f: &Footer,
    ) -> Result<Self> {
        // A second descriptor reads metadata: the source may be O_DIRECT, and a
        // table read on demand needs a handle of its own.
        let meta_file = file
            .try_clone()
            .map_err(|e| Error::io(path, "duplicating the store's descriptor", e))?;
        let (source, backend) = Source::open(at, path, file, opts, f)?;
        let read = |s: Section, section: SectionKind| -> Result<Vec<u8>> {
            let mut buf = section_buf(path, s, section)?;
            zring_platform::read_exact_at(&meta_file, &mut buf, s.offset)
                .map_err(|e| changed_or(path, &meta_file, f, e, "reading metadata"))?;
            check_section(path, s, section, &buf)?;
            Ok(buf)
        };
        let dict = read(f.dict, SectionKind::Dictionary)?;
        let schema_json = read(f.schema, SectionKind::Schema)?;
        let mut scan = TableScan::new(f.data);
        let meta = match source.mapping() {
            Some(map) => {
                let bytes = map.bytes();
                for (s, name) in [
                    (f.shapes, SectionKind::Shapes),
                    (f.table, SectionKind::Table),
                ] {
                    // Bounds were checked against this very mapping's length.
                    let body = bytes
                        .get(s.offset as usize..(s.offset + s.len) as usize)
                        .ok_or_else(|| {
                            Error::corrupt(
                                path,
                                StoreProblem::SectionOutside {
                                    section: name,
                                    object: false,
                                },
                            )
                        })?;
                    match name {
                        SectionKind::Table => {
                            let mut check = TableCheck::new(Some(&mut scan));
                            body.chunks(TableCheck::CHUNK).for_each(|c| check.update(c));
                            check.finish(path, s, name)?;
                        }
                        _ => check_section(path, s, name, body)?,
                    }
                }
                Meta::Mapped {
                    map: map.clone(),
                    table: f.table,
                    shapes: f.shapes,
                }
            }
            None if f.table.len + f.shapes.len <= in_memory_max() => Meta::Memory {
                shapes: read(f.shapes, SectionKind::Shapes)?.into_boxed_slice(),
                table: read_table(path, &meta_file, f, &mut scan)?.into_boxed_slice(),
            },
            None => {
                checksum_in_chunks(path, &meta_file, f, f.shapes, SectionKind::Shapes, None)?;
                let table = SectionKind::Table;
                checksum_in_chunks(path, &meta_file, f, f.table, table, Some(&mut scan))?;
                Meta::OnDemand {
                    file: meta_file,
                    table: f.table,
                    shapes: f.shapes,
                }
            }
        };
        // Records are read at random; a mapping was advised when it was made.
        if let Some(file) = source.file() {
            zring_platform::advise_random(file.file());
        }
        Ok(Self {
            source,
            backend,
            meta,
            dict,
            schema_json,
            table: scan.finish(path),
        })
    }

    /// The first table entry the pass at open refused (see [`Opened::load`]); the
    /// caller asks once the schema is checked.
    pub(crate) fn check_table(&mut self) -> Result<()> {
        std::mem::replace(&mut self.table, Ok(()))
    }
}

/// The most table and shape bytes copied at open ([`meta::IN_MEMORY_MAX`]; tests
/// lower it to exercise on-demand lookups).
fn in_memory_max() -> u64 {
    #[cfg(test)]
    if let Some(max) = tests::IN_MEMORY_MAX.get() {
        return max;
    }
    meta::IN_MEMORY_MAX
}

/// A failed metadata read: [`Error::FileChanged`] when the file is no longer the
/// length the footer says, else the I/O error.
fn changed_or(
    path: &Path,
    file: &File,
    f: &Footer,
    e: std::io::Error,
    what: &'static str,
) -> Error {
    match file.metadata().map(|m| m.len()) {
        Ok(len) if len != f.file_len => Error::FileChanged {
            path: path.to_path_buf(),
            len,
            expected: f.file_len,
        },
        _ => Error::io(path, what, e),
    }
}

pub(crate) fn check_section(
    path: &Path,
    s: Section,
    section: SectionKind,
    body: &[u8],
) -> Result<()> {
    section_checksum_is(path, s, section, format::checksum(body))
}

/// Section `s`'s checksum is `actual`, or the error naming the section.
fn section_checksum_is(path: &Path, s: Section, section: SectionKind, actual: u64) -> Result<()> {
    if actual != s.checksum {
        return Err(Error::corrupt(
            path,
            StoreProblem::SectionChecksum {
                section,
                expected: s.checksum,
                actual,
            },
        ));
    }
    Ok(())
}

/// A section's checksum computed a chunk at a time, each chunk also fed to the
/// table's [`TableScan`] (when given) while it is in cache: one pass over the
/// table's bytes for both checks.
struct TableCheck<'a> {
    hasher: xxhash_rust::xxh3::Xxh3,
    scan: Option<&'a mut TableScan>,
}

impl<'a> TableCheck<'a> {
    /// Bytes per chunk: well inside a core's L2, and whole table entries (the
    /// table is 8-aligned and its chunks start at its offset).
    const CHUNK: usize = 256 << 10;

    fn new(scan: Option<&'a mut TableScan>) -> Self {
        Self {
            hasher: xxhash_rust::xxh3::Xxh3::new(),
            scan,
        }
    }

    fn update(&mut self, chunk: &[u8]) {
        self.hasher.update(chunk);
        if let Some(scan) = self.scan.as_deref_mut() {
            scan.feed(chunk);
        }
    }

    /// Compares the checksum of everything fed with section `s`'s.
    fn finish(self, path: &Path, s: Section, section: SectionKind) -> Result<()> {
        section_checksum_is(path, s, section, self.hasher.digest())
    }
}

const _: () = assert!(TableCheck::CHUNK % format::ENTRY_BYTES == 0);

/// A zeroed buffer for metadata section `s`, or the error naming it: a section too
/// large for this machine's address space, or for its memory.
fn section_buf(path: &Path, s: Section, section: SectionKind) -> Result<Vec<u8>> {
    let len = usize::try_from(s.len)
        .map_err(|_| Error::corrupt(path, StoreProblem::SectionTooLarge { section }))?;
    let mut buf = Vec::new();
    buf.try_reserve_exact(len).map_err(|e| {
        Error::out_of_memory(
            Allocation::Section { section },
            s.len,
            Some(path),
            Some(AllocFailure::Reserve(e)),
        )
    })?;
    buf.resize(len, 0);
    Ok(buf)
}

/// Copies the table into memory a chunk at a time, checksumming and scanning each
/// chunk just after its read ([`TableCheck`]).
fn read_table(path: &Path, file: &File, f: &Footer, scan: &mut TableScan) -> Result<Vec<u8>> {
    let section = SectionKind::Table;
    let s = f.table;
    let mut buf = section_buf(path, s, section)?;
    let mut check = TableCheck::new(Some(scan));
    let mut at = s.offset;
    for chunk in buf.chunks_mut(TableCheck::CHUNK) {
        zring_platform::read_exact_at(file, chunk, at)
            .map_err(|e| changed_or(path, file, f, e, "reading metadata"))?;
        check.update(chunk);
        at += chunk.len() as u64;
    }
    check.finish(path, s, section)?;
    Ok(buf)
}

/// Checksums a section too large to copy, a chunk at a time, feeding each chunk to
/// `scan` too (the table's).
fn checksum_in_chunks(
    path: &Path,
    file: &File,
    f: &Footer,
    s: Section,
    section: SectionKind,
    scan: Option<&mut TableScan>,
) -> Result<()> {
    let mut check = TableCheck::new(scan);
    let mut buf = vec![0u8; TableCheck::CHUNK];
    let mut at = s.offset;
    while at < s.offset + s.len {
        let n = (TableCheck::CHUNK as u64).min(s.offset + s.len - at) as usize;
        zring_platform::read_exact_at(file, &mut buf[..n], at)
            .map_err(|e| changed_or(path, file, f, e, "reading metadata"))?;
        check.update(&buf[..n]);
        at += n as u64;
    }
    check.finish(path, s, section)
}

impl Reader {
    /// The read side of a validated store.
    pub(crate) fn new(
        path: PathBuf,
        opened: Opened,
        footer: Footer,
        superblock: Superblock,
        stored: StoreSchema,
        opts: &ReadSetup,
    ) -> Self {
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        Self {
            path,
            item_bytes: stored.schema.item_bytes(),
            footer,
            stored,
            superblock,
            backend: opened.backend,
            dict: opened.dict,
            source: opened.source,
            meta: opened.meta,
            opened_with: opts.clone(),
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            served: ServedCounters::default(),
        }
    }

    /// The options of the reads a dataset of this store makes: every setting the
    /// store was opened with (its backend as resolved) and its pool.
    pub(crate) fn read_options(&self) -> ReadSetup {
        let mut setup = self.opened_with.clone();
        setup.settings.backend = self.backend;
        setup
    }

    /// Counts `records` served by `backend`.
    pub(crate) fn served(&self, backend: Backend, records: u64) {
        self.served.add(backend, records);
    }

    /// Counts `records` read from object storage.
    #[cfg(feature = "remote")]
    pub(crate) fn served_remote(&self, records: u64) {
        self.served.remote.fetch_add(records, Ordering::Relaxed);
    }

    /// Whether the store was opened from a URL.
    pub(crate) fn is_remote(&self) -> bool {
        #[cfg(feature = "remote")]
        if let Source::Remote(_) = self.source {
            return true;
        }
        false
    }

    /// The remote source, for a store opened from a URL.
    #[cfg(feature = "remote")]
    pub(crate) fn remote(&self) -> Option<&std::sync::Arc<crate::remote::RemoteSource>> {
        match &self.source {
            Source::Remote(r) => Some(r),
            _ => None,
        }
    }

    /// See [`Store::reads_served`](crate::Store::reads_served).
    pub(crate) fn reads_served(&self) -> ReadsServed {
        let s = &self.served;
        ReadsServed {
            pread: s.pread.load(Ordering::Relaxed),
            mmap: s.mmap.load(Ordering::Relaxed),
            uring: s.uring.load(Ordering::Relaxed),
            remote: s.remote.load(Ordering::Relaxed),
        }
    }

    /// Whether records are read with O_DIRECT.
    pub(crate) fn is_direct(&self) -> bool {
        matches!(self.source, Source::Direct { .. })
    }

    pub(crate) fn check_index(&self, index: u64) -> Result<()> {
        if index >= self.footer.record_count {
            return Err(Error::IndexOutOfRange {
                path: self.path.clone(),
                index,
                len: self.footer.record_count,
            });
        }
        Ok(())
    }

    pub(crate) fn check_indices(&self, indices: &[u64]) -> Result<()> {
        let n = self.footer.record_count;
        match indices.iter().find(|&&i| i >= n) {
            Some(&i) => self.check_index(i),
            None => Ok(()),
        }
    }

    /// Decodes and bounds-checks the entry of an in-range record.
    pub(crate) fn entry(&self, index: u64) -> Result<Entry> {
        let raw = self
            .meta
            .entry(index)
            .map_err(|e| self.read_err(Some(index), e))?;
        let e = Entry::decode(&raw).map_err(|source| Error::CorruptEntry {
            path: self.path.clone(),
            index,
            source,
        })?;
        // Open checked every entry's position already (`TableScan`); checked again
        // here because it guards every read's bounds, for the price of a compare.
        if let Some(p) = outside_data_region(e.offset, e.stored_len, self.footer.data) {
            return Err(Error::record(&self.path, index, p));
        }
        if e.codec == RecordCodec::ZstdDict && self.dict.is_empty() {
            return Err(Error::record(
                &self.path,
                index,
                RecordProblem::NoDictionary,
            ));
        }
        if let Some(w) = self.item_bytes {
            if u64::from(e.logical_len) != w {
                return Err(Error::record(
                    &self.path,
                    index,
                    RecordProblem::LogicalLength {
                        logical: e.logical_len,
                        record_bytes: w,
                    },
                ));
            }
        }
        Ok(e)
    }

    /// Starts loading record `index`'s table entry into the cache (a hint for reads
    /// that look ahead).
    pub(crate) fn prefetch_entry(&self, index: u64) {
        self.meta.prefetch_entry(index);
    }

    /// Starts loading record `index`'s table entry and shape into the cache (a hint
    /// for layouts computed ahead of their reads).
    pub(crate) fn prefetch_layout(&self, index: u64) {
        self.meta.prefetch(index, self.stored.schema.ndim());
    }

    /// Runs `f` on the dims (little-endian u32) of ragged record `index` and its
    /// validated entry, after checking the dims against the entry's logical length.
    pub(crate) fn with_ragged_shape<T>(
        &self,
        index: u64,
        f: impl FnOnce(&[u8], Entry) -> T,
    ) -> Result<T> {
        let e = self.entry(index)?;
        let ndim = self.stored.schema.ndim();
        let itemsize = self.stored.schema.dtype.itemsize() as u64;
        let checked = self
            .meta
            .with_shape(index, ndim, |dims| {
                let elems = dims
                    .chunks_exact(4)
                    .map(|d| u64::from(u32::from_le_bytes([d[0], d[1], d[2], d[3]])))
                    .try_fold(1u64, u64::checked_mul);
                match elems.and_then(|n| n.checked_mul(itemsize)) {
                    Some(b) if b == u64::from(e.logical_len) => Ok(f(dims, e)),
                    b => Err(b),
                }
            })
            .map_err(|err| self.read_err(Some(index), err))?;
        checked.map_err(|bytes| {
            Error::record(
                &self.path,
                index,
                RecordProblem::ShapeBytes {
                    shape_bytes: bytes,
                    logical: e.logical_len,
                },
            )
        })
    }

    /// The shape of record `index` (the item shape for dense stores).
    pub(crate) fn shape(&self, index: u64) -> Result<Vec<u64>> {
        self.check_index(index)?;
        match &self.stored.schema.layout {
            Layout::Dense { item_shape } => Ok(item_shape.clone()),
            Layout::Ragged { .. } => self.with_ragged_shape(index, |dims, _| {
                dims.chunks_exact(4)
                    .map(|d| u64::from(u32::from_le_bytes([d[0], d[1], d[2], d[3]])))
                    .collect()
            }),
        }
    }

    /// Counts logical and stored bytes over the whole table.
    pub(crate) fn stats(&self) -> Result<StoreStats> {
        let mut s = StoreStats {
            records: self.footer.record_count,
            file_bytes: self.footer.file_len,
            ..StoreStats::default()
        };
        for i in 0..self.footer.record_count {
            let e = self.entry(i)?;
            s.logical_bytes += u64::from(e.logical_len);
            s.stored_bytes += u64::from(e.stored_len);
            s.raw_records += u64::from(e.codec == RecordCodec::Raw);
        }
        Ok(s)
    }

    /// The reads a batch of `indices` needs under `rule`, without doing them.
    pub(crate) fn plan(&self, indices: &[u64], rule: Coalesce) -> Result<(Vec<Entry>, Vec<Read>)> {
        self.check_indices(indices)?;
        let entries = indices
            .iter()
            .map(|&i| self.entry(i))
            .collect::<Result<Vec<_>>>()?;
        let reads = plan::coalesce(&entries, rule);
        Ok((entries, reads))
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;
    use crate::{DType, Schema, Store, WriteOptions, Writer};

    thread_local! {
        pub(super) static IN_MEMORY_MAX: Cell<Option<u64>> = const { Cell::new(None) };
    }

    #[test]
    fn tables_too_large_to_copy_are_read_on_demand_and_survive_truncation() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("r.zr");
        let mut w = Writer::create(&path, Schema::ragged(DType::U8, 1), WriteOptions::default())
            .expect("create");
        let records: Vec<Vec<u8>> = (0..200u32)
            .map(|i| vec![i as u8; 100 + i as usize])
            .collect();
        let values: Vec<u8> = records.concat();
        let mut cu = vec![0u64];
        for r in &records {
            cu.push(cu[cu.len() - 1] + r.len() as u64);
        }
        let shapes: Vec<u32> = records.iter().map(|r| r.len() as u32).collect();
        w.append_ragged(&values, &cu, &shapes).expect("append");
        w.close().expect("close");
        IN_MEMORY_MAX.with(|m| m.set(Some(0)));
        let store = Store::open(&path, ReadOptions::with_backend(Backend::Pread)).expect("open");
        IN_MEMORY_MAX.with(|m| m.set(None));
        assert!(matches!(store.inner.meta, Meta::OnDemand { .. }));
        let batch = store.gather_ragged(&[199, 3]).expect("gather");
        assert_eq!(batch.record(0, 1), Some(records[199].as_slice()));
        assert_eq!(store.shape(5).expect("shape"), vec![105]);
        store.verify().expect("verify");
        let len = std::fs::metadata(&path).expect("stat").len();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .and_then(|f| f.set_len(8192))
            .expect("truncate");
        for r in [
            store.stats().map(|_| ()),
            store.shape(199).map(|_| ()),
            store.verify(),
        ] {
            match r {
                Err(Error::FileChanged {
                    len: 8192,
                    expected,
                    ..
                }) => assert_eq!(expected, len),
                other => panic!("expected FileChanged, got {other:?}"),
            }
        }
    }

    #[test]
    fn tables_read_on_demand_are_checked_for_order_at_open() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("d.zr");
        let schema = Schema::dense(DType::U8, &[64]);
        let mut w = Writer::create(&path, schema, WriteOptions::default()).expect("create");
        let data: Vec<u8> = (0..64 * 100u32).map(|i| (i * 7 / 3) as u8).collect();
        w.append_dense(&data).expect("append");
        w.close().expect("close");
        // Record 1's entry becomes a copy of record 0's, the table and footer
        // checksums recomputed: only the order check can tell.
        let mut b = std::fs::read(&path).expect("read");
        let at = b.len() - format::BLOCK;
        let mut f = Footer::decode(&b[at..]).expect("footer");
        let t = f.table.offset as usize;
        let first: [u8; format::ENTRY_BYTES] = b[t..t + 32].try_into().expect("entry");
        b[t + 32..t + 64].copy_from_slice(&first);
        f.table.checksum = format::checksum(&b[t..t + f.table.len as usize]);
        b[at..].copy_from_slice(&f.encode());
        std::fs::write(&path, &b).expect("write");
        IN_MEMORY_MAX.with(|m| m.set(Some(0)));
        let r = Store::open(&path, ReadOptions::with_backend(Backend::Pread));
        IN_MEMORY_MAX.with(|m| m.set(None));
        match r {
            Err(Error::CorruptRecord {
                index: 1,
                problem: RecordProblem::OutOfOrder { previous: 0, .. },
                ..
            }) => {}
            other => panic!("expected record 1 out of order, got {other:?}"),
        }
    }
}

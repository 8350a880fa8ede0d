//! Opening a store: validate everything once, then serve reads without locks.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use zring_platform::uring::RingFile;
use zring_platform::{file, Backend, Mapping};

use crate::error::{Error, Result};
use crate::format::{self, BlockError, Entry, Footer, RecordCodec, Superblock, BLOCK, ENTRY_BYTES};
use crate::schema::{Codec, Layout, Schema, StoreSchema};

/// How a store is read.
#[derive(Clone, Debug)]
pub struct ReadOptions {
    /// Which system interface moves record bytes (see [`Backend`]).
    pub backend: Backend,
    /// Check every record's checksum on every read (costs one XXH3 pass over the
    /// stored bytes, ~30 GB/s). `verify()` always checks.
    pub verify_checksums: bool,
    /// Threads per gather, counting the caller: 0 means the caller plus every pool
    /// worker (one per core); 1 means the caller alone.
    pub threads: usize,
    /// Reads each thread keeps in flight with the `uring` backend (1..=256).
    pub queue_depth: usize,
    /// Read with O_DIRECT, bypassing the page cache (cold-data serving, device
    /// benchmarks). Needs a file system that supports it; not with `mmap`.
    pub direct: bool,
}

impl Default for ReadOptions {
    fn default() -> Self {
        Self {
            backend: Backend::Auto,
            verify_checksums: false,
            threads: 0,
            queue_depth: 64,
            direct: false,
        }
    }
}

impl ReadOptions {
    /// Default options with `backend`.
    pub fn with_backend(backend: Backend) -> Self {
        Self {
            backend,
            ..Self::default()
        }
    }
}

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

pub(crate) struct Inner {
    pub(crate) path: PathBuf,
    /// The store's file (io_uring rings register it on first read).
    pub(crate) file: RingFile,
    /// A second handle opened with O_DIRECT, when direct reads were asked.
    pub(crate) direct_file: Option<RingFile>,
    pub(crate) queue_depth: usize,
    pub(crate) map: Mapping,
    pub(crate) footer: Footer,
    pub(crate) stored: StoreSchema,
    pub(crate) superblock: Superblock,
    pub(crate) backend: Backend,
    pub(crate) verify: bool,
    pub(crate) threads: usize,
    /// Distinguishes stores in per-thread decoder caches.
    pub(crate) id: u64,
    pub(crate) item_bytes: Option<u64>,
}

/// An open, immutable store. Cloning is cheap (shared); every method takes `&self`
/// and any number of threads may read at once.
#[derive(Clone)]
pub struct Store {
    pub(crate) inner: Arc<Inner>,
}

impl Store {
    /// Opens and validates the store at `path`: superblock, footer, section bounds and
    /// checksums, and the schema. Record entries are checked when they are used.
    pub fn open(path: impl AsRef<Path>, opts: ReadOptions) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let file = File::open(&path).map_err(|e| Error::io(&path, "opening the store", e))?;
        let len = file
            .metadata()
            .map_err(|e| Error::io(&path, "reading the store's size", e))?
            .len();
        if len < 2 * BLOCK as u64 {
            return Err(Error::corrupt(
                &path,
                format!("the file is {len} bytes, too small for a superblock and a footer"),
            ));
        }
        let map = Mapping::new(&file).map_err(|e| Error::io(&path, "mapping the store", e))?;
        let bytes = map.bytes();
        // Checked again on the mapping itself: the file may have shrunk in between.
        if bytes.len() < 2 * BLOCK {
            return Err(Error::corrupt(
                &path,
                format!(
                    "the file is {} bytes, too small for a superblock and a footer",
                    bytes.len()
                ),
            ));
        }
        let block_err = |e: BlockError, which: &str| match e {
            BlockError::Magic => Error::corrupt(&path, format!("bad {which} magic")),
            BlockError::Checksum => Error::corrupt(&path, format!("{which} checksum mismatch")),
            BlockError::Version { major, minor } => Error::UnsupportedVersion {
                path: path.clone(),
                found_major: major,
                found_minor: minor,
            },
            BlockError::Field(d) => Error::corrupt(&path, format!("{which}: {d}")),
        };
        let superblock =
            Superblock::decode(&bytes[..BLOCK]).map_err(|e| block_err(e, "superblock"))?;
        let footer_at = bytes.len() - BLOCK;
        let footer = Footer::decode(&bytes[footer_at..]).map_err(|e| block_err(e, "footer"))?;
        // The metadata is read front to back right now (checksums), and the table on
        // every record lookup: read it ahead. The data region is read at random.
        // (The footer is not validated yet: clamp, never trust.)
        let meta_start = footer
            .data
            .offset
            .saturating_add(footer.data.len)
            .clamp(BLOCK as u64, bytes.len() as u64) as usize;
        map.advise_sequential(meta_start..bytes.len());
        map.advise_random(BLOCK..meta_start);
        let stored = check_layout(&path, bytes, &superblock, &footer)?;
        let backend = resolve_backend(&path, &opts, &map, &footer)?;
        if backend != Backend::Mmap {
            file::advise_random(&file);
        }
        let direct_file = match opts.direct {
            true => Some(RingFile::new(
                file::open_direct(&path)
                    .map_err(|e| Error::io(&path, "opening with O_DIRECT", e))?,
            )),
            false => None,
        };
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        let item_bytes = stored.schema.item_bytes();
        Ok(Self {
            inner: Arc::new(Inner {
                path,
                file: RingFile::new(file),
                direct_file,
                queue_depth: opts.queue_depth.clamp(1, zring_platform::uring::MAX_DEPTH),
                map,
                footer,
                stored,
                superblock,
                backend,
                verify: opts.verify_checksums,
                threads: opts.threads,
                id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
                item_bytes,
            }),
        })
    }

    /// The store's path as opened.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Number of records.
    pub fn len(&self) -> u64 {
        self.inner.footer.record_count
    }

    /// Whether the store holds no records.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Layout, dtype and metadata.
    pub fn schema(&self) -> &Schema {
        &self.inner.stored.schema
    }

    /// Everything the schema section says (codec, level, dictionary id, count).
    pub fn stored_schema(&self) -> &StoreSchema {
        &self.inner.stored
    }

    /// The store's codec.
    pub fn codec(&self) -> Codec {
        self.inner.stored.codec
    }

    /// The backend in use (`Auto` resolved).
    pub fn backend(&self) -> Backend {
        self.inner.backend
    }

    /// Record alignment in the data region.
    pub fn align(&self) -> u32 {
        self.inner.footer.align
    }

    /// The zring version that wrote the store.
    pub fn writer_version(&self) -> &str {
        &self.inner.superblock.writer
    }

    /// Format version `(major, minor)` of the file.
    pub fn format_version(&self) -> (u16, u16) {
        (self.inner.footer.major, self.inner.footer.minor)
    }

    /// The zstd dictionary (empty unless the codec is zstd-dict).
    pub fn dictionary(&self) -> &[u8] {
        self.inner.section(self.inner.footer.dict)
    }

    /// Bytes per dense record (`None` for ragged stores).
    pub fn item_bytes(&self) -> Option<u64> {
        self.inner.item_bytes
    }

    /// Size of the file in bytes.
    pub fn file_bytes(&self) -> u64 {
        self.inner.footer.file_len
    }

    /// Counts logical and stored bytes over the whole table.
    pub fn stats(&self) -> Result<StoreStats> {
        let mut s = StoreStats {
            records: self.len(),
            file_bytes: self.file_bytes(),
            ..StoreStats::default()
        };
        for i in 0..self.len() {
            let e = self.inner.entry(i)?;
            s.logical_bytes += u64::from(e.logical_len);
            s.stored_bytes += u64::from(e.stored_len);
            s.raw_records += u64::from(e.codec == RecordCodec::Raw);
        }
        Ok(s)
    }

    /// The validated table entry of record `index`.
    pub fn entry(&self, index: u64) -> Result<Entry> {
        self.inner.check_index(index)?;
        self.inner.entry(index)
    }

    /// The shape of record `index` (the item shape for dense stores).
    pub fn shape(&self, index: u64) -> Result<Vec<u64>> {
        self.inner.check_index(index)?;
        match &self.schema().layout {
            Layout::Dense { item_shape } => Ok(item_shape.clone()),
            Layout::Ragged { .. } => Ok(self
                .inner
                .ragged_shape(index)?
                .chunks_exact(4)
                .map(|d| u64::from(u32::from_le_bytes([d[0], d[1], d[2], d[3]])))
                .collect()),
        }
    }

    /// The bytes of record `index`.
    pub fn get(&self, index: u64) -> Result<Vec<u8>> {
        self.inner.check_index(index)?;
        let e = self.inner.entry(index)?;
        if self.schema().is_ragged() {
            self.inner.ragged_shape(index)?;
        }
        let mut out = vec![0u8; e.logical_len as usize];
        crate::read::with_ctx(|ctx| self.inner.read_record(index, &e, &mut out, ctx))?;
        Ok(out)
    }
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("path", &self.inner.path)
            .field("records", &self.len())
            .field("schema", self.schema())
            .field("codec", &self.codec())
            .field("backend", &self.inner.backend)
            .finish()
    }
}

impl Inner {
    pub(crate) fn section(&self, s: format::Section) -> &[u8] {
        // Bounds were checked at open.
        &self.map.bytes()[s.offset as usize..(s.offset + s.len) as usize]
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

    /// Decodes and bounds-checks the entry of an in-range record.
    /// Where record `index`'s table entry lies in the file (unchecked).
    pub(crate) fn entry_bytes(&self, index: u64) -> std::ops::Range<usize> {
        let at = self.footer.table.offset as usize + index as usize * ENTRY_BYTES;
        at..at + ENTRY_BYTES
    }

    /// Where record `index`'s shape (ndim little-endian u32) lies in the file
    /// (unchecked).
    pub(crate) fn shape_bytes(&self, index: u64) -> std::ops::Range<usize> {
        let ndim = self.stored.schema.ndim();
        let at = self.footer.shapes.offset as usize + index as usize * ndim * 4;
        at..at + ndim * 4
    }

    pub(crate) fn entry(&self, index: u64) -> Result<Entry> {
        let raw = self
            .map
            .bytes()
            .get(self.entry_bytes(index))
            .ok_or_else(|| Error::record(&self.path, index, "table entry outside the file"))?;
        let e = Entry::decode(raw).map_err(|d| Error::record(&self.path, index, d))?;
        let data = self.footer.data;
        let end = e.offset.checked_add(u64::from(e.stored_len));
        if e.offset < data.offset || end.is_none_or(|end| end > data.offset + data.len) {
            return Err(Error::record(
                &self.path,
                index,
                format!(
                    "stored bytes {}..+{} lie outside the data region {}..{}",
                    e.offset,
                    e.stored_len,
                    data.offset,
                    data.offset + data.len
                ),
            ));
        }
        if e.codec == RecordCodec::ZstdDict && self.footer.dict.len == 0 {
            return Err(Error::record(
                &self.path,
                index,
                "compressed with a dictionary but the store has none",
            ));
        }
        if let Some(w) = self.item_bytes {
            if u64::from(e.logical_len) != w {
                return Err(Error::record(
                    &self.path,
                    index,
                    format!(
                        "logical length {} differs from the record size {w}",
                        e.logical_len
                    ),
                ));
            }
        }
        Ok(e)
    }

    /// The dims of a ragged record, checked against its entry's logical length.
    pub(crate) fn ragged_shape(&self, index: u64) -> Result<&[u8]> {
        self.ragged_shape_entry(index).map(|(dims, _)| dims)
    }

    /// The dims of a ragged record and its validated entry (decoded once).
    pub(crate) fn ragged_shape_entry(&self, index: u64) -> Result<(&[u8], Entry)> {
        let dims = self
            .map
            .bytes()
            .get(self.shape_bytes(index))
            .ok_or_else(|| Error::record(&self.path, index, "shape outside the file"))?;
        let e = self.entry(index)?;
        let elems = dims
            .chunks_exact(4)
            .map(|d| u64::from(u32::from_le_bytes([d[0], d[1], d[2], d[3]])))
            .try_fold(1u64, u64::checked_mul);
        let bytes = elems.and_then(|n| n.checked_mul(self.stored.schema.dtype.itemsize() as u64));
        if bytes != Some(u64::from(e.logical_len)) {
            return Err(Error::record(
                &self.path,
                index,
                format!(
                    "shape implies {} bytes but the table says {}",
                    bytes.map_or("too many".to_string(), |b| b.to_string()),
                    e.logical_len
                ),
            ));
        }
        Ok((dims, e))
    }
}

/// How many pages of the data region `Auto` samples for page-cache residency.
const RESIDENCY_SAMPLES: u64 = 32;

/// Resolves `Auto` and checks the combination asked for. `Auto` takes `Mmap` when
/// at least 3/4 of sampled data pages are resident (warm data: no syscall per record
/// wins) and `Uring` otherwise or with O_DIRECT; `Uring` degrades to `Pread` where
/// io_uring is unavailable (the platform prints why, once).
fn resolve_backend(path: &Path, opts: &ReadOptions, map: &Mapping, f: &Footer) -> Result<Backend> {
    let wanted = match opts.backend {
        Backend::Mmap if opts.direct => {
            return Err(Error::arg(format!(
                "{}: O_DIRECT reads need the pread or uring backend, not mmap",
                path.display()
            )))
        }
        Backend::Auto if opts.direct => Backend::Uring,
        Backend::Auto => {
            let resident = (0..RESIDENCY_SAMPLES)
                .filter(|k| {
                    let at = f.data.offset + f.data.len * k / RESIDENCY_SAMPLES;
                    map.is_resident(at as usize).unwrap_or(true)
                })
                .count() as u64;
            if f.data.len == 0 || resident * 4 >= RESIDENCY_SAMPLES * 3 {
                Backend::Mmap
            } else {
                Backend::Uring
            }
        }
        b => b,
    };
    if wanted == Backend::Uring && !zring_platform::uring::available() {
        return Ok(Backend::Pread);
    }
    Ok(wanted)
}

/// Checks footer fields against the file and the superblock, the section checksums
/// and the schema; returns the parsed schema.
fn check_layout(path: &Path, bytes: &[u8], sb: &Superblock, f: &Footer) -> Result<StoreSchema> {
    let len = bytes.len() as u64;
    let bad = |d: String| Error::corrupt(path, d);
    if f.file_len != len {
        return Err(bad(format!(
            "the footer says the file is {} bytes but it is {len} (truncated or appended to)",
            f.file_len
        )));
    }
    if f.align != sb.align {
        return Err(bad(format!(
            "footer alignment {} differs from superblock alignment {}",
            f.align, sb.align
        )));
    }
    if f.data.offset != BLOCK as u64 {
        return Err(bad(format!(
            "data region starts at {}, expected {BLOCK}",
            f.data.offset
        )));
    }
    let names = ["data", "dictionary", "shapes", "table", "schema"];
    let mut prev_end = BLOCK as u64;
    for (s, name) in f.sections().iter().zip(names) {
        let end = s.end().filter(|&e| e <= len - BLOCK as u64);
        match end {
            Some(end) if s.offset >= prev_end => prev_end = end,
            _ => {
                return Err(bad(format!(
                    "{name} section {}..+{} is out of place (file is {len} bytes)",
                    s.offset, s.len
                )))
            }
        }
    }
    for (s, name) in f.sections().iter().zip(names).skip(1) {
        let body = &bytes[s.offset as usize..(s.offset + s.len) as usize];
        if format::checksum(body) != s.checksum {
            return Err(bad(format!("{name} section checksum mismatch")));
        }
    }
    let stored = StoreSchema::from_json(
        &bytes[f.schema.offset as usize..(f.schema.offset + f.schema.len) as usize],
    )
    .map_err(bad)?;
    if stored.record_count != f.record_count {
        return Err(bad(format!(
            "schema counts {} records but the footer {}",
            stored.record_count, f.record_count
        )));
    }
    let table_len = f.record_count.checked_mul(ENTRY_BYTES as u64);
    if table_len != Some(f.table.len) {
        return Err(bad(format!(
            "table is {} bytes, expected {} records x {ENTRY_BYTES}",
            f.table.len, f.record_count
        )));
    }
    let shapes_len = match stored.schema.layout {
        Layout::Dense { .. } => Some(0),
        Layout::Ragged { ndim } => f.record_count.checked_mul(ndim as u64 * 4),
    };
    if shapes_len != Some(f.shapes.len) {
        return Err(bad(format!(
            "shapes section is {} bytes, expected {}",
            f.shapes.len,
            shapes_len.unwrap_or(u64::MAX)
        )));
    }
    if (stored.codec == Codec::ZstdDict) != (f.dict.len > 0) {
        return Err(bad(format!(
            "codec {} with a {}-byte dictionary",
            stored.codec, f.dict.len
        )));
    }
    if f.table.offset % 8 != 0 || f.shapes.offset % 4 != 0 {
        return Err(bad("table or shapes section is misaligned".into()));
    }
    // The writer refuses zero-byte dense records; a schema claiming them is hostile
    // (and a zero record width would break the gather's slot arithmetic).
    if stored.schema.item_bytes() == Some(0) {
        return Err(bad("the schema declares dense records of zero bytes".into()));
    }
    Ok(stored)
}

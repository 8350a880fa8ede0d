//! Opening a store: validate everything once, then hand every read to the read path
//! (`crate::read`), which serves them without locks.

use std::fs::File;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use zring_platform::{open_regular, read_exact_at};

use crate::entry::Entry;
use crate::error::{Error, Result, StoreProblem};
use crate::format::{Footer, Superblock, BLOCK};
use crate::read::{
    check_schema, decode_footer, decode_superblock, Backend, Coalesce, Interrupt, Never, Opened,
    RaggedBatch, RaggedLayout, Read, ReadSetup, Reader, ReadsServed, StoreStats,
};
use crate::schema::{Codec, Schema, StoreSchema};

/// An open, immutable store. Cloning is cheap (shared); every method takes `&self`
/// and any number of threads may read at once.
#[derive(Clone)]
pub struct Store {
    pub(crate) inner: Arc<Reader>,
    /// For a store opened on a whole-object cache entry: the remote object it is a
    /// copy of (`crate::remote::whole`).
    #[cfg(feature = "remote")]
    pub(crate) origin: Option<Arc<crate::remote::Origin>>,
}

/// The reads a batch needs, planned from the table without doing them (see
/// [`Store::plan`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadPlan {
    /// The validated table entry of each index, in batch order.
    pub entries: Vec<Entry>,
    /// The reads, in batch order; each names the batch positions it holds.
    pub reads: Vec<Read>,
}

impl Store {
    /// Opens and validates the store at `path`: superblock, footer, section bounds and
    /// checksums, the schema, and where the table puts records (each inside the data
    /// region, in table order, none overlapping another: one pass over the table).
    /// The other fields of an entry are checked when it is used.
    ///
    /// A path that is an `s3://`, `gs://`, `az://`, `http(s)://` or `file://` URL
    /// opens the object there (with the `remote` feature; see docs/remote.md).
    /// `opts` is a [`ReadOptions`](crate::ReadOptions) (the reads run on the
    /// process-wide pool) or a [`ReadSetup`] (`opts.with_pool(pool)`).
    pub fn open(path: impl AsRef<Path>, opts: impl Into<ReadSetup>) -> Result<Self> {
        let opts = opts.into();
        opts.validate()?;
        if let Some(url) = crate::remote::url_of(path.as_ref()) {
            return Self::open_url(url, &opts);
        }
        Self::open_file(path.as_ref(), path.as_ref().to_path_buf(), &opts)
    }

    /// Opens the store in the local file `path`, named `name` in its errors and
    /// those of its reads: a dataset's store is named by its path in the dataset
    /// while the file opened is that path resolved (`dataset/location.rs`), and a
    /// whole-object cache entry is named by its URL.
    pub(crate) fn open_file(path: &Path, name: PathBuf, opts: &ReadSetup) -> Result<Self> {
        // Not File::open: a FIFO would block it forever.
        let file = open_regular(path).map_err(|e| Error::io(&name, "opening the store", e))?;
        let meta = file
            .metadata()
            .map_err(|e| Error::io(&name, "reading the store's size", e))?;
        let len = meta.len();
        if len < 2 * BLOCK as u64 {
            return Err(Error::corrupt(
                &name,
                StoreProblem::TooSmall { len, object: false },
            ));
        }
        let (superblock, footer) = read_blocks(&name, &file, len)?;
        crate::read::check_footer(&footer, &superblock, len)
            .map_err(|p| Error::corrupt(&name, p))?;
        let mut opened = Opened::load(path, &name, file, opts, &footer)?;
        let stored = check_schema(&name, &opened.schema_json, &footer)?;
        opened.check_table()?;
        let reader = Reader::new(name, opened, footer, superblock, stored, opts);
        Ok(Self {
            inner: Arc::new(reader),
            #[cfg(feature = "remote")]
            origin: None,
        })
    }

    #[cfg(feature = "remote")]
    fn open_url(url: &str, opts: &ReadSetup) -> Result<Self> {
        Self::open_at(crate::remote::Connector::from_url(url, &opts.remote)?, opts)
    }

    /// Opens the store behind `conn`: an object of an object store the caller built
    /// (tests wrap one to count or fail requests; embedders bring their own client).
    /// It is opened as a local store on a whole-object cache entry when the cache
    /// keeps this object whole (`remote/whole.rs`), else read by ranged GETs.
    #[cfg(feature = "remote")]
    pub fn open_at(conn: crate::remote::Connector, opts: impl Into<ReadSetup>) -> Result<Self> {
        use crate::remote::WholeObjects;
        let opts = &opts.into();
        opts.validate()?;
        if let Some(cache) = opts.remote.effective_cache()? {
            if cache.whole != WholeObjects::Never {
                // The entry is named by the URL in the messages of its reads.
                let name = conn.url.clone();
                let open_local = |path: &Path| Self::open_file(path, name.clone(), opts).ok();
                if let Some((mut store, origin)) =
                    crate::remote::open_whole(&conn, &opts.remote, &cache, open_local)?
                {
                    store.origin = Some(Arc::new(origin));
                    return Ok(store);
                }
            }
        }
        Ok(Self {
            inner: Arc::new(Reader::open_remote(conn, opts)?),
            origin: None,
        })
    }

    #[cfg(not(feature = "remote"))]
    fn open_url(url: &str, _: &ReadSetup) -> Result<Self> {
        Err(Error::InvalidArgument(
            crate::error::ArgumentError::RemoteNotBuilt {
                url: url.to_string(),
            },
        ))
    }

    /// The store's path as opened (its URL for a remote store).
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

    /// The backend in use (`Auto` resolved): `Pread` for an io_uring store once the
    /// process has fallen back to pread (a report only; reads never ask).
    pub fn backend(&self) -> Backend {
        match self.inner.backend {
            Backend::Uring if !zring_platform::uring_available() => Backend::Pread,
            b => b,
        }
    }

    /// The most record reads one gather keeps in flight (threads per gather x each
    /// thread's io_uring queue depth; 1 per thread without io_uring): what a reader
    /// sizing its look-ahead against a device's queue needs.
    pub fn reads_in_flight(&self) -> usize {
        self.inner.reads_in_flight()
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
        &self.inner.dict
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
        self.inner.stats()
    }

    /// The validated table entry of record `index`.
    pub fn entry(&self, index: u64) -> Result<Entry> {
        self.inner.check_index(index)?;
        self.inner.entry(index)
    }

    /// The shape of record `index` (the item shape for dense stores).
    pub fn shape(&self, index: u64) -> Result<Vec<u64>> {
        self.inner.shape(index)
    }

    /// The bytes of record `index`.
    pub fn get(&self, index: u64) -> Result<Vec<u8>> {
        self.inner.get(index)
    }

    /// Fills `dest` with the dense records `indices` in order (duplicates allowed):
    /// record `indices[k]` lands at `dest[k * item_bytes ..]`. `dest` must be exactly
    /// `indices.len() * item_bytes` bytes.
    pub fn gather(&self, indices: &[u64], dest: &mut [u8]) -> Result<()> {
        self.inner.gather(indices, dest, &Never)
    }

    /// [`Store::gather`] that stops early, with [`Error::Interrupted`], once `stop`
    /// says so (it is asked between records on every thread of the gather).
    pub fn gather_until(
        &self,
        indices: &[u64],
        dest: &mut [u8],
        stop: &dyn Interrupt,
    ) -> Result<()> {
        self.inner.gather(indices, dest, stop)
    }

    /// Gathers dense records into a new vector.
    pub fn gather_vec(&self, indices: &[u64]) -> Result<Vec<u8>> {
        let width = self.item_bytes().unwrap_or(0) as usize;
        let mut out = vec![0u8; indices.len().saturating_mul(width)];
        self.gather(indices, &mut out)?;
        Ok(out)
    }

    /// The output layout of a ragged gather of `indices`, from the table alone.
    pub fn ragged_layout(&self, indices: &[u64]) -> Result<RaggedLayout> {
        let mut layout = RaggedLayout::default();
        self.ragged_layout_into(indices, &mut layout)?;
        Ok(layout)
    }

    /// [`Store::ragged_layout`] into an existing layout, reusing its vectors'
    /// capacity (a loader that recycles layouts allocates nothing per batch).
    pub fn ragged_layout_into(&self, indices: &[u64], layout: &mut RaggedLayout) -> Result<()> {
        self.inner.ragged_layout_into(indices, layout)
    }

    /// Fills `values` (exactly `layout.values_bytes`) with the ragged records
    /// `indices`, whose layout was computed by [`Store::ragged_layout`].
    pub fn gather_ragged_into(
        &self,
        indices: &[u64],
        layout: &RaggedLayout,
        values: &mut [u8],
    ) -> Result<()> {
        self.inner
            .gather_ragged_into(indices, layout, values, &Never)
    }

    /// [`Store::gather_ragged_into`] that stops early, with [`Error::Interrupted`],
    /// once `stop` says so.
    pub fn gather_ragged_until(
        &self,
        indices: &[u64],
        layout: &RaggedLayout,
        values: &mut [u8],
        stop: &dyn Interrupt,
    ) -> Result<()> {
        self.inner.gather_ragged_into(indices, layout, values, stop)
    }

    /// Gathers ragged records into a new batch (values in an aligned buffer).
    pub fn gather_ragged(&self, indices: &[u64]) -> Result<RaggedBatch> {
        self.inner.gather_ragged(indices)
    }

    /// Checks records `range`: every table entry, every checksum, and that every
    /// compressed record decodes to its logical length. Returns the first bad record's
    /// error (the lowest index).
    pub fn verify_range(&self, range: Range<u64>) -> Result<()> {
        self.inner.verify_range(range, &Never)
    }

    /// [`Store::verify_range`] that stops early, with [`Error::Interrupted`], once
    /// `stop` says so.
    pub fn verify_range_until(&self, range: Range<u64>, stop: &dyn Interrupt) -> Result<()> {
        self.inner.verify_range(range, stop)
    }

    /// Checks every record (see [`Store::verify_range`]).
    pub fn verify(&self) -> Result<()> {
        self.verify_range(0..self.len())
    }

    /// How many records each backend has served since the store was opened (by `get`
    /// and the gathers; `verify` is not counted). A `uring` store whose thread could
    /// not have a ring reads with pread, and this says so.
    pub fn reads_served(&self) -> ReadsServed {
        self.inner.reads_served()
    }

    /// Whether records are read with O_DIRECT: asked in [`ReadOptions::direct`](crate::ReadOptions::direct), or
    /// chosen by `Auto` for a cold or larger-than-memory store.
    pub fn is_direct(&self) -> bool {
        self.inner.is_direct()
    }

    /// Whether the store was opened from a URL (object storage; also when it reads
    /// a whole-object copy in the local cache).
    pub fn is_remote(&self) -> bool {
        #[cfg(feature = "remote")]
        if self.origin.is_some() {
            return true;
        }
        self.inner.is_remote()
    }

    /// What this store's remote reads have cost so far (requests, bytes, cache hits;
    /// for a store read from a whole-object cache entry, what opening it cost);
    /// `None` for a local store.
    #[cfg(feature = "remote")]
    pub fn remote_stats(&self) -> Option<crate::remote::RemoteStats> {
        if let Some(o) = &self.origin {
            return Some(o.stats);
        }
        self.inner.remote().map(|r| r.stats())
    }

    /// The remote object's version as opened: `(size, ETag, last-modified)`;
    /// `None` for a local store.
    #[cfg(feature = "remote")]
    pub fn remote_version(&self) -> Option<(u64, Option<String>, String)> {
        let v = match &self.origin {
            Some(o) => &o.version,
            None => &self.inner.remote()?.version,
        };
        Some((v.size, v.e_tag.clone(), v.last_modified.clone()))
    }

    /// Plans the reads of a batch of `indices` under `rule` without doing them: the
    /// byte ranges of the file the batch needs, neighbours merged. For readers that
    /// fetch bytes themselves (look-ahead, remote object stores); the store's own
    /// reads use the same planner.
    pub fn plan(&self, indices: &[u64], rule: Coalesce) -> Result<ReadPlan> {
        let (entries, reads) = self.inner.plan(indices, rule)?;
        Ok(ReadPlan { entries, reads })
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

/// Reads and decodes the superblock and footer of a file of `len` bytes.
fn read_blocks(path: &PathBuf, file: &File, len: u64) -> Result<(Superblock, Footer)> {
    let read = |block: &mut [u8], at: u64| -> Result<()> {
        read_exact_at(file, block, at).map_err(|e| match file.metadata().map(|m| m.len()) {
            Ok(now) if now != len => Error::FileChanged {
                path: path.clone(),
                len: now,
                expected: len,
            },
            _ => Error::io(path, "reading the store's header", e),
        })
    };
    let mut head = vec![0u8; BLOCK];
    read(&mut head, 0)?;
    let superblock = decode_superblock(path, &head)?;
    let mut tail = vec![0u8; BLOCK];
    read(&mut tail, len - BLOCK as u64)?;
    Ok((superblock, decode_footer(path, &tail)?))
}

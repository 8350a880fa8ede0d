//! Building a store: batches in, one crash-safe published file out.
//!
//! The writer fills a temporary file beside the final path ([`append`] compresses and
//! writes the records on the worker pool). `close` writes the metadata sections and the
//! footer ([`layout`]) and publishes the file (`zring_platform::publish`: fsync, link
//! or rename into place, fsync of the directory), so the final path is either absent
//! (or its old file) or a complete store. Anything that fails poisons the writer (an
//! fsync failure cannot be retried safely on Linux: the kernel may already have
//! dropped the dirty pages); a failed `close` and dropping an unclosed writer remove
//! the temporary file.
//!
//! Memory: the writer keeps each record's table entry (32 bytes) and shape until
//! `close`, up to a bound in memory and the rest in a temporary file beside the store
//! ([`spill`]), so its memory does not grow with the record count; growing the buffers
//! is fallible ([`Error::OutOfMemory`] naming the allocation).

mod append;
mod layout;
mod poison;
mod spill;
mod stage;
mod validate;

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use zring_platform::{parent_dir, PendingFile, PoolHandle, PublishError};

use crate::error::{ArgumentError, Error, InternalError, Result, SchemaError};
use crate::format::{Superblock, BLOCK, ENTRY_BYTES};
use crate::remote::{url_of, RemoteOptions};
use crate::schema::{Codec, Layout, Schema, StoreSchema};

use append::{Slot, Source, Target};
use poison::share;
use spill::Spill;
use stage::Staged;

/// How a store is written. `Default` is zstd level 3, 8-byte alignment, all cores.
///
/// `#[non_exhaustive]`, so that a new setting breaks no caller: outside this crate
/// it is built from [`Default`] (or [`WriteOptions::with_codec`]) and the chainable
/// setters (one per field, named like it), e.g.
/// `WriteOptions::default().codec(Codec::Raw).align(4096).overwrite(true)`; the
/// public fields can still be read and assigned.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct WriteOptions {
    /// The store's codec; records that do not shrink are kept raw regardless.
    pub codec: Codec,
    /// zstd compression level (1..=22; negative levels are zstd's fast modes).
    pub level: i32,
    /// The trained dictionary, required by (and only by) `Codec::ZstdDict`.
    pub dictionary: Option<Vec<u8>>,
    /// Every record starts at a multiple of this (a power of two, at most 1 MiB).
    /// 4096 makes raw records readable with O_DIRECT straight into aligned memory.
    pub align: u32,
    /// Replace an existing file at the destination instead of failing.
    pub overwrite: bool,
    /// Compression threads; 0 means one per available core (with the global pool),
    /// or the caller plus every worker of [`WriteOptions::pool`] when it is one of
    /// the caller's.
    pub threads: usize,
    /// Logical bytes per unit of parallel work. Memory in flight is about
    /// `threads x chunk_bytes`, whatever the size of an append.
    pub chunk_bytes: usize,
    /// The worker pool an append's compression and write tasks run on: the
    /// process-wide pool by default, or one of the caller's (see
    /// [`WriteOptions::with_pool`]; the same handle [`crate::ReadOptions`] takes).
    pub pool: PoolHandle,
    /// How a store written to a URL is uploaded (credentials overrides in
    /// `config`, retries, timeouts; the read options' type, its cache unused).
    pub remote: RemoteOptions,
}

impl Default for WriteOptions {
    fn default() -> Self {
        Self {
            codec: Codec::Zstd,
            level: 3,
            dictionary: None,
            align: 8,
            overwrite: false,
            threads: 0,
            chunk_bytes: 1 << 20,
            pool: PoolHandle::global(),
            remote: RemoteOptions::default(),
        }
    }
}

impl WriteOptions {
    /// Options for `codec` with everything else default.
    pub fn with_codec(codec: Codec) -> Self {
        Self {
            codec,
            ..Self::default()
        }
    }

    /// These options with the appends' tasks run on `pool` (with `threads` 0, an
    /// append uses the caller and every worker of `pool`).
    pub fn with_pool(mut self, pool: impl Into<PoolHandle>) -> Self {
        self.pool = pool.into();
        self
    }

    /// These options with the store's codec `codec`.
    pub fn codec(mut self, codec: Codec) -> Self {
        self.codec = codec;
        self
    }

    /// These options compressing at zstd level `level`.
    pub fn level(mut self, level: i32) -> Self {
        self.level = level;
        self
    }

    /// These options with the trained dictionary `dictionary` (for `Codec::ZstdDict`;
    /// `None` for none).
    pub fn dictionary(mut self, dictionary: impl Into<Option<Vec<u8>>>) -> Self {
        self.dictionary = dictionary.into();
        self
    }

    /// These options starting every record at a multiple of `align` bytes.
    pub fn align(mut self, align: u32) -> Self {
        self.align = align;
        self
    }

    /// These options replacing an existing file at the destination (`true`) or not.
    pub fn overwrite(mut self, on: bool) -> Self {
        self.overwrite = on;
        self
    }

    /// These options compressing on `threads` threads (0: all; see the field).
    pub fn threads(mut self, threads: usize) -> Self {
        self.threads = threads;
        self
    }

    /// These options with `chunk_bytes` logical bytes per unit of parallel work.
    pub fn chunk_bytes(mut self, chunk_bytes: usize) -> Self {
        self.chunk_bytes = chunk_bytes;
        self
    }

    /// These options with the appends' tasks run on `pool` (as
    /// [`with_pool`](WriteOptions::with_pool)).
    pub fn pool(self, pool: impl Into<PoolHandle>) -> Self {
        self.with_pool(pool)
    }

    /// These options uploading a store written to a URL by `remote`.
    pub fn remote(mut self, remote: RemoteOptions) -> Self {
        self.remote = remote;
        self
    }
}

/// The source bytes of a store bound for a URL written between two sends of its
/// finished parts: one upload part, so that a part can go up while the next is
/// compressed.
const STREAMED_RUN_BYTES: usize = 8 << 20;

/// Writes one store. See the module docs for the publish protocol.
pub struct Writer {
    /// The destination as given: a path, or a URL (messages and [`Writer::path`]).
    path: PathBuf,
    /// Where the file is built and published: `path`, or for a URL the staged file
    /// that `close` uploads.
    local: PathBuf,
    /// The staging of a store written to a URL.
    staged: Option<Staged>,
    file: Option<PendingFile>,
    schema: Schema,
    opts: WriteOptions,
    data_end: u64,
    records: u64,
    /// The encoded table entries, in record order.
    table: Spill,
    /// The ragged records' shapes, little-endian u32s.
    shapes: Spill,
    slots: Vec<Mutex<Slot>>,
    /// The first error, kept whole for every later call to report.
    poisoned: Option<Arc<Error>>,
    /// Set once the file is at its final path: Drop must then leave it alone.
    published: bool,
}

impl Writer {
    /// Starts a store at `path` (written under a temporary name until `close`).
    /// `path` may be a URL (`s3://bucket/key.zr`, `gs://`, `az://`, `file://`): the
    /// store is then written in a staging directory under `$TMPDIR` and `close`
    /// uploads it as one object (see `stage.rs`).
    pub fn create(path: impl AsRef<Path>, schema: Schema, opts: WriteOptions) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        validate::options(&schema, &opts)?;
        let staged = match url_of(&path) {
            Some(url) => Some(Staged::new(url, &opts)?),
            None if !opts.overwrite && path.exists() => {
                return Err(Error::AlreadyExists { path });
            }
            None => None,
        };
        let local = staged
            .as_ref()
            .map_or_else(|| path.clone(), |s| s.local_path().to_path_buf());
        let tmp_path = temp_path_for(&local)?;
        remove_stale_temps(&local);
        let file =
            PendingFile::create(&tmp_path).map_err(|e| create_error(&local, &tmp_path, e))?;
        let mut writer = Self {
            path,
            local,
            staged,
            file: Some(file),
            schema,
            data_end: BLOCK as u64,
            records: 0,
            table: Spill::new("table entries"),
            shapes: Spill::new("record shapes"),
            slots: Vec::new(),
            poisoned: None,
            published: false,
            opts,
        };
        let sb = Superblock::current(writer.opts.align).encode();
        let written = writer
            .file()?
            .write_all_at(&sb, 0)
            .map_err(|e| Error::io(&tmp_path, "writing the superblock", e));
        writer.poison_on(written)?;
        Ok(writer)
    }

    /// The final path of the store.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The temporary file being written, until `close` publishes it (so that a program
    /// can remove it if it is killed: the `zring` CLI does on SIGINT and SIGTERM).
    pub fn temp_path(&self) -> Option<&Path> {
        self.file.as_ref().map(PendingFile::path)
    }

    /// The schema being written.
    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// Records appended so far.
    pub fn len(&self) -> u64 {
        self.records
    }

    /// Whether nothing has been appended.
    pub fn is_empty(&self) -> bool {
        self.records == 0
    }

    /// Appends `bytes.len() / item_bytes` dense records laid out back to back and
    /// returns their ids.
    pub fn append_dense(&mut self, bytes: &[u8]) -> Result<Range<u64>> {
        self.check_usable()?;
        let width = match self.schema.item_bytes() {
            Some(w) => w as usize,
            None => {
                return Err(Error::Schema(SchemaError::WrongLayout {
                    operation: "append_dense",
                    ragged: true,
                    instead: "append_ragged",
                }))
            }
        };
        if bytes.len() % width != 0 {
            return Err(Error::InvalidArgument(ArgumentError::DenseBatchSize {
                len: bytes.len(),
                width,
            }));
        }
        self.append(Source::Dense { bytes, width }, &[])
    }

    /// Appends ragged records: `values` holds the elements of all records back to
    /// back, record i is elements `cu_seqlens[i] .. cu_seqlens[i + 1]` and has shape
    /// `shapes[i * ndim .. (i + 1) * ndim]`. Offsets must start at 0, strictly
    /// increase, agree with the shapes, and end at the number of elements in `values`.
    pub fn append_ragged(
        &mut self,
        values: &[u8],
        cu_seqlens: &[u64],
        shapes: &[u32],
    ) -> Result<Range<u64>> {
        self.check_usable()?;
        self.check_ragged(values.len(), cu_seqlens, shapes)?;
        let itemsize = self.schema.dtype.itemsize();
        self.append(
            Source::Ragged {
                values,
                cu_seqlens,
                itemsize,
            },
            shapes,
        )
    }

    /// Checks a ragged batch of `values_len` value bytes exactly as
    /// [`Writer::append_ragged`] does, without appending it. A caller that appends
    /// one batch in several calls checks the whole batch first, so that a bad tail
    /// cannot leave its head appended.
    pub fn check_ragged(
        &self,
        values_len: usize,
        cu_seqlens: &[u64],
        shapes: &[u32],
    ) -> Result<()> {
        let ndim = match self.schema.layout {
            Layout::Ragged { ndim } => ndim,
            Layout::Dense { .. } => {
                return Err(Error::Schema(SchemaError::WrongLayout {
                    operation: "append_ragged",
                    ragged: false,
                    instead: "append_dense",
                }))
            }
        };
        let itemsize = self.schema.dtype.itemsize();
        validate::ragged(values_len, itemsize, cu_seqlens, shapes, ndim)
    }

    fn append(&mut self, src: Source<'_>, shapes: &[u32]) -> Result<Range<u64>> {
        let n = src.len();
        let first = self.records;
        if n == 0 {
            return Ok(first..first);
        }
        let written = if self.staged.is_some() {
            // A store bound for a URL is written a run of records at a time, so that
            // its parts go up while the rest of a large append is compressed.
            let ndim = shapes.len() / n;
            src.runs(STREAMED_RUN_BYTES, 0)
                .into_iter()
                .try_for_each(|r| {
                    let shapes = &shapes[r.start * ndim..r.end * ndim];
                    self.write_records(src.slice(r), shapes)
                })
        } else {
            self.write_records(src, shapes)
        };
        self.poison_on(written)?;
        self.records += n as u64;
        Ok(first..first + n as u64)
    }

    /// Writes the records of `src` and keeps their entries and shapes.
    fn write_records(&mut self, src: Source<'_>, shapes: &[u32]) -> Result<()> {
        let n = src.len();
        // Room for the metadata first: running out of memory after the records are in
        // the file would leave them without entries.
        let path = &self.local;
        self.table
            .reserve(n * ENTRY_BYTES, path, || temp_path_for(path))?;
        self.shapes
            .reserve(shapes.len() * 4, path, || temp_path_for(path))?;
        let file = self.file.as_ref().ok_or_else(closed)?;
        let target = Target {
            file,
            codec: self.opts.codec,
            level: self.opts.level,
            dictionary: self.opts.dictionary.as_deref(),
            align: self.opts.align,
            threads: self.opts.threads,
            chunk_bytes: self.opts.chunk_bytes,
            pool: &self.opts.pool,
            data_end: self.data_end,
        };
        let (entries, data_end) = append::write_records(&target, src, &mut self.slots)?;
        self.data_end = data_end;
        if let Some(staged) = &mut self.staged {
            // A store bound for a URL sends its finished parts now, while the next
            // batches are prepared, rather than all at `close`.
            staged.send_ready(file.file(), file.path(), data_end)?;
        }
        for e in &entries {
            self.table.extend(&e.encode());
        }
        for d in shapes {
            self.shapes.extend(&d.to_le_bytes());
        }
        Ok(())
    }

    /// Writes the metadata and footer, makes the file durable and publishes it at the
    /// final path. Returns the number of records. On failure the temporary file is
    /// removed (unless the store is already in place and only the directory fsync
    /// failed).
    pub fn close(mut self) -> Result<u64> {
        self.check_usable()?;
        let finished = self.finish();
        self.poison_on(finished)?;
        Ok(self.records)
    }

    fn finish(&mut self) -> Result<()> {
        let dict: &[u8] = match self.opts.codec {
            Codec::ZstdDict => self.opts.dictionary.as_deref().unwrap_or_default(),
            _ => &[],
        };
        let stored = StoreSchema {
            schema: self.schema.clone(),
            codec: self.opts.codec,
            level: self.opts.level,
            dict_id: (!dict.is_empty())
                .then(|| zstd::zstd_safe::get_dict_id_from_dict(dict))
                .flatten()
                .map(|id| id.get()),
            record_count: self.records,
        };
        let schema = stored.to_json();
        let meta = layout::Metadata {
            dict,
            shapes: &self.shapes,
            table: &self.table,
            schema: schema.as_bytes(),
        };
        let file = self.file.as_ref().ok_or_else(closed)?;
        layout::write(file, self.data_end, self.records, self.opts.align, &meta)?;
        self.table.discard();
        self.shapes.discard();
        let file = self.file.take().ok_or_else(closed)?;
        let tmp = file.path().to_path_buf();
        if let Some(staged) = &mut self.staged {
            // Staged for an upload: the object is the store's durable copy, so the
            // upload does not wait for an fsync: the staged file is only renamed,
            // then uploaded (and made durable only if it becomes a cache entry). It
            // is removed with its directory, whatever the upload does: nothing of it
            // is published until the upload completes.
            file.rename_unsynced(&self.local)
                .map_err(|e| Error::io(&self.local, "naming the staged store", e))?;
            return staged.upload();
        }
        match file.publish(&self.local, self.opts.overwrite) {
            Ok(()) => {
                self.published = true;
                Ok(())
            }
            Err(PublishError::Exists) => {
                remove_temp(&tmp);
                Err(Error::AlreadyExists {
                    path: self.path.clone(),
                })
            }
            Err(PublishError::Io {
                step,
                path,
                source,
                in_place,
            }) => {
                if in_place {
                    self.published = true;
                    return Err(Error::io(
                        path,
                        "fsync of the directory (the store is in place, but its name may not survive a crash)",
                        source,
                    ));
                }
                remove_temp(&tmp);
                Err(Error::io(path, step, source))
            }
            Err(other) => {
                remove_temp(&tmp);
                Err(Error::Internal(InternalError::Publish {
                    source: Arc::new(other),
                }))
            }
        }
    }

    /// Discards everything written; the final path is left untouched.
    pub fn abort(mut self) {
        self.discard();
    }

    fn discard(&mut self) {
        if let Some(file) = self.file.take() {
            file.discard();
        }
        if let Some(staged) = &mut self.staged {
            staged.abandon();
        }
        self.table.discard();
        self.shapes.discard();
    }

    fn file(&self) -> Result<&PendingFile> {
        self.file.as_ref().ok_or_else(closed)
    }

    /// Keeps the first error of `r` (the writer accepts nothing after it) and removes
    /// the temporary file, which can never be published now.
    fn poison_on<T>(&mut self, r: Result<T>) -> Result<T> {
        r.map_err(|mut e| {
            if self.poisoned.is_none() {
                self.poisoned = Some(Arc::new(share(&mut e)));
            }
            if !self.published {
                self.discard();
            }
            e
        })
    }

    fn check_usable(&self) -> Result<()> {
        match &self.poisoned {
            Some(e) => Err(self.poisoned_error_from(Some(Arc::clone(e)))),
            None => Ok(()),
        }
    }

    fn poisoned_error_from(&self, first_error: Option<Arc<Error>>) -> Error {
        Error::WriterPoisoned {
            path: self.path.clone(),
            first_error,
        }
    }
}

/// Grows `buf` by `more` bytes of capacity, or says which metadata did not fit.
fn closed() -> Error {
    Error::Internal(InternalError::Missing {
        what: "the writer's file (closed or failed)",
    })
}

fn remove_temp(tmp: &Path) {
    let _ = std::fs::remove_file(tmp);
}

/// The error for a temporary file that could not be created, naming what the user
/// can act on: a missing directory, or a destination that is a directory.
fn create_error(path: &Path, tmp: &Path, e: std::io::Error) -> Error {
    use std::io::{Error as IoError, ErrorKind};
    if path.is_dir() {
        let why = IoError::new(ErrorKind::IsADirectory, "the path is a directory");
        return Error::io(path, "creating the store", why);
    }
    let dir = parent_dir(path);
    if e.kind() == ErrorKind::NotFound && !dir.is_dir() {
        let why = IoError::new(
            ErrorKind::NotFound,
            format!("the directory {} does not exist", dir.display()),
        );
        return Error::io(path, "creating the store", why);
    }
    Error::io(tmp, "creating the temporary store file", e)
}

impl Drop for Writer {
    fn drop(&mut self) {
        if !self.published {
            self.discard();
        }
    }
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("path", &self.path)
            .field("records", &self.records)
            .finish()
    }
}

/// Removes temporary files that writers of the same destination left behind when their
/// process died (killed, or a power cut): the pid in the name is not alive, and the
/// file has not changed for a minute (a writer in another pid namespace sharing the
/// directory is not removed while it writes).
fn remove_stale_temps(path: &Path) {
    let Some(name) = path.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return;
    };
    let Ok(listing) = std::fs::read_dir(parent_dir(path)) else {
        return;
    };
    let prefix = format!(".{name}.");
    for entry in listing.flatten() {
        let file = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = file
            .strip_prefix(&prefix)
            .and_then(|r| r.strip_suffix(".zr-tmp"))
        else {
            continue;
        };
        let Some(pid) = rest.split('.').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if left_by_dead_process(&entry, pid) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Whether `entry`, named for process `pid`, was left by a process that is gone:
/// not this one, not alive, and untouched for a minute (a writer in another pid
/// namespace sharing the directory is not taken for dead while it writes).
fn left_by_dead_process(entry: &std::fs::DirEntry, pid: u32) -> bool {
    let idle = entry
        .metadata()
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age >= std::time::Duration::from_secs(60));
    pid != std::process::id() && idle && !zring_platform::process_is_alive(pid)
}

/// `.<name>.<pid>.<n>.zr-tmp` beside the final path: same directory (so the final
/// rename is atomic), hidden, and unique per process and writer.
fn temp_path_for(path: &Path) -> Result<PathBuf> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let name = path.file_name().ok_or_else(|| {
        Error::InvalidArgument(ArgumentError::NotAFileName {
            path: path.to_path_buf(),
        })
    })?;
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let tmp = format!(
        ".{}.{}.{n}.zr-tmp",
        name.to_string_lossy(),
        std::process::id()
    );
    Ok(parent_dir(path).join(tmp))
}

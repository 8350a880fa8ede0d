//! Creating and growing a dataset: stores first, then one atomic manifest.
//!
//! The builder names each new shard's store files (under `data/`, with the manifest
//! version they are written for and a name of their own for this builder, so neither
//! a rerun after a crash nor a concurrent writer building the same version ever
//! writes to a file another writer wrote). The caller writes those stores with
//! [`crate::Writer`] (which publishes each one atomically), reports each shard with
//! `add_shard`, and `publish` commits the version by creating
//! `manifests/<version>.json` only if it is absent (a hard link from a fsynced
//! temporary file, which fails if the name exists), then points `manifest.json` at
//! it. Of two writers that built on the same version, exactly one creates the next
//! version's manifest; the other gets [`ManifestProblem::Conflict`] and publishes
//! nothing. Readers find the newest committed version even while `manifest.json`
//! lags (see `location::read_current`); stores of an unpublished version are never
//! named by any manifest.
//!
//! A dataset at a URL (`s3://bucket/prefix`) is built the same way: its stores are
//! uploaded by their writers, and the version's manifest is created with the object
//! store's create-if-absent PUT, so of two writers exactly one publishes it there too.

use std::fs;
use std::hash::{BuildHasher, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use zring_platform::{parent_dir, PendingFile, PublishError};

use super::location::{read_current, version_path};
use super::manifest::{Field, Manifest, Shard, DATA_DIR, MANIFEST_FILE, VERSIONS_DIR};
use super::{check_store, is_dataset, location_of};
use crate::error::{Error, ManifestProblem, Result, ShardMismatch};
use crate::read::ReadOptions;
use crate::schema::Schema;
use crate::store::Store;

/// Builds the next version of a dataset (see the module documentation).
#[derive(Debug)]
pub struct DatasetBuilder {
    dir: PathBuf,
    /// The version current when the builder started (0: none).
    base_version: u64,
    /// Shards kept from the base version.
    kept: Vec<Shard>,
    fields: Vec<Field>,
    added: Vec<Shard>,
    /// This builder's part of its store names: unique to it, so two writers building
    /// the same version never write the same file.
    writer: String,
}

impl DatasetBuilder {
    /// Starts a new dataset in `dir` with `fields`. An existing dataset there is an
    /// error unless `overwrite`, in which case the published version replaces it
    /// (its stores stay on disk for readers that still hold the old version).
    pub fn create(
        dir: impl AsRef<Path>,
        fields: Vec<(String, Schema)>,
        overwrite: bool,
    ) -> Result<Self> {
        let dir = dir.as_ref().to_path_buf();
        let base_version = match is_dataset(&dir) {
            true if !overwrite => return Err(Error::AlreadyExists { path: dir }),
            true => current(&dir)?.version,
            false => 0,
        };
        let fields: Vec<Field> = fields
            .into_iter()
            .map(|(name, schema)| Field { name, schema })
            .collect();
        let probe = Manifest {
            version: base_version + 1,
            fields: fields.clone(),
            shards: Vec::new(),
        };
        probe.validate_fields().map_err(Error::Schema)?;
        Self::prepare(&dir)?;
        Ok(Self {
            dir,
            base_version,
            kept: Vec::new(),
            fields,
            added: Vec::new(),
            writer: writer_name(),
        })
    }

    /// Starts the next version of the dataset in `dir`: its shards and fields, plus
    /// whatever shards are added.
    pub fn append(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref().to_path_buf();
        let current = current(&dir)?;
        Self::prepare(&dir)?;
        Ok(Self {
            dir,
            base_version: current.version,
            kept: current.shards,
            fields: current.fields,
            added: Vec::new(),
            writer: writer_name(),
        })
    }

    /// Checks that every store the new version keeps from the current one lies
    /// inside the dataset directory with its links followed, as opening the dataset
    /// does unless its read setting `follow_links_out` is on ([`Error::LinkOutOfDataset`]
    /// otherwise). An append to a dataset whose stores are linked in from outside
    /// would publish a version that opens only with that setting: a caller that opens
    /// what it published without it checks first, before writing anything. One path
    /// resolution per store, no store opened; a dataset at a URL has no links.
    pub fn check_links_stay_inside(&self) -> Result<()> {
        if crate::remote::url_of(&self.dir).is_some() {
            return Ok(());
        }
        let dir = super::location::LocalDir::new(&self.dir);
        for file in self.kept.iter().flat_map(|s| &s.files) {
            dir.resolve_inside(&self.dir.join(file))?;
        }
        Ok(())
    }

    fn prepare(dir: &Path) -> Result<()> {
        if crate::remote::url_of(dir).is_some() {
            // Object stores have no directories to make.
            return Ok(());
        }
        for d in [dir.join(DATA_DIR), dir.join(VERSIONS_DIR)] {
            fs::create_dir_all(&d)
                .map_err(|e| Error::io(&d, "creating the dataset directory", e))?;
        }
        Ok(())
    }

    /// The dataset's fields.
    pub fn fields(&self) -> &[Field] {
        &self.fields
    }

    /// The version `publish` will write.
    pub fn version(&self) -> u64 {
        self.base_version + 1
    }

    /// Shards added so far.
    pub fn added(&self) -> usize {
        self.added.len()
    }

    fn relative(&self, shard: usize, field: &str) -> String {
        format!(
            "{DATA_DIR}/v{:06}-{shard:06}-{}.{field}.zr",
            self.version(),
            self.writer
        )
    }

    /// The store paths (one per field, in field order) of new shard number `shard`
    /// (0 for the first shard this builder adds). Writers may fill several shards at
    /// once; `add_shard` takes them in order.
    pub fn shard_paths(&self, shard: usize) -> Vec<PathBuf> {
        self.fields
            .iter()
            .map(|f| self.dir.join(self.relative(shard, &f.name)))
            .collect()
    }

    /// Adds the next new shard (number `added()`), whose stores hold `records`
    /// records each; checks every store against its field's schema and the count.
    pub fn add_shard(&mut self, records: u64) -> Result<()> {
        self.add_shards(&[records])
    }

    /// Adds the next new shard from stores already written under the names `files`
    /// (one per field, in field order; paths relative to the dataset, under its
    /// `data/` directory), checked as [`add_shard`](DatasetBuilder::add_shard)
    /// checks. For writers that cannot know the names `shard_paths` would give
    /// (Ray's write tasks run before the version is chosen): the names must be
    /// their own, so that no other writer's manifest names the same stores.
    pub fn add_shard_files(&mut self, records: u64, files: Vec<String>) -> Result<()> {
        let k = self.added.len();
        let problem = |why: String| {
            Error::manifest(&self.dir, ManifestProblem::NewShardFiles { shard: k, why })
        };
        if files.len() != self.fields.len() {
            return Err(problem(format!(
                "{} store names for {} fields",
                files.len(),
                self.fields.len()
            )));
        }
        for f in &files {
            let plain = f
                .strip_prefix(DATA_DIR)
                .and_then(|r| r.strip_prefix('/'))
                .is_some_and(|name| {
                    !name.is_empty() && !name.contains(['/', '\\']) && !name.starts_with('.')
                });
            if !plain {
                return Err(problem(format!(
                    "{f:?} is not a file name under {DATA_DIR}/"
                )));
            }
            let taken = self
                .kept
                .iter()
                .chain(&self.added)
                .any(|s| s.files.contains(f));
            if taken || files.iter().filter(|g| *g == f).count() > 1 {
                return Err(problem(format!("{f:?} is already a store of this dataset")));
            }
        }
        self.add(vec![(records, files)])
    }

    /// Adds the next new shards, `records[i]` records each in shard `added() + i`,
    /// checked as [`add_shard`](DatasetBuilder::add_shard) checks them, with up to
    /// [`CHECKS_AT_ONCE`] stores opened side by side: at a URL each open is a round
    /// trip or two, which one after the other made a conversion's end wait about
    /// 0.1 s per store on a 10 ms link. On an error nothing is added.
    pub fn add_shards(&mut self, records: &[u64]) -> Result<()> {
        let first = self.added.len();
        let shards = records
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                let files = self
                    .fields
                    .iter()
                    .map(|f| self.relative(first + i, &f.name))
                    .collect();
                (n, files)
            })
            .collect();
        self.add(shards)
    }

    /// Checks the stores of the next new shards, `(records, files)` each, and adds
    /// them, or none if one fails (the first failing store in shard and field order
    /// is the error, as one at a time).
    fn add(&mut self, shards: Vec<(u64, Vec<String>)>) -> Result<()> {
        let first = self.added.len();
        let checks: Vec<(usize, u64, &Field, &String)> = shards
            .iter()
            .enumerate()
            .flat_map(|(i, (n, files))| {
                self.fields
                    .iter()
                    .zip(files)
                    .map(move |(f, rel)| (first + i, *n, f, rel))
            })
            .collect();
        let this = &*self;
        for group in checks.chunks(CHECKS_AT_ONCE) {
            let results: Vec<Result<()>> = std::thread::scope(|s| {
                let handles: Vec<_> = group
                    .iter()
                    .map(|&(k, n, f, rel)| s.spawn(move || this.check_new(k, n, f, rel)))
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                    .collect()
            });
            results.into_iter().collect::<Result<Vec<()>>>()?;
        }
        for (records, files) in shards {
            self.added.push(Shard { records, files });
        }
        Ok(())
    }

    /// Opens new shard `k`'s store `rel` of field `f` and checks it against the
    /// field's schema and the shard's `records`.
    fn check_new(&self, k: usize, records: u64, f: &Field, rel: &str) -> Result<()> {
        let store = Store::open(self.dir.join(rel), checking())?;
        check_store(&store, f, records).map_err(|mismatch| {
            Error::manifest(
                store.path(),
                ManifestProblem::Store(Box::new(ShardMismatch {
                    shard: k,
                    new: true,
                    field: f.name.clone(),
                    store: None,
                    mismatch,
                })),
            )
        })
    }

    /// Publishes the new version atomically and returns its manifest. Fails with
    /// [`ManifestProblem::Conflict`], and publishes nothing, if another writer
    /// published a version since this builder started.
    pub fn publish(self) -> Result<Manifest> {
        let now = match is_dataset(&self.dir) {
            true => current(&self.dir)?.version,
            false => 0,
        };
        let (dir, base) = (&self.dir, self.base_version);
        let conflict =
            |published| Error::manifest(dir, ManifestProblem::Conflict { published, base });
        // Only an early answer: two writers can both pass it, and the version's
        // manifest being created only if absent is what decides between them.
        if now != base {
            return Err(conflict(now));
        }
        let mut shards = self.kept;
        shards.extend(self.added);
        let m = Manifest {
            version: base + 1,
            fields: self.fields,
            shards,
        };
        m.validate()
            .map_err(|problem| Error::manifest(dir, problem))?;
        let text = m.to_json();
        if !write_atomic(&version_path(dir, m.version), text.as_bytes(), false)? {
            return Err(conflict(m.version));
        }
        // The version is committed and durable: readers find it even where the pointer
        // lags, so a failure to move the pointer must not tell the caller that nothing
        // was published (a retry would publish the same records twice).
        let _ = write_atomic(&dir.join(MANIFEST_FILE), text.as_bytes(), true);
        Ok(m)
    }
}

/// The current manifest of the dataset at `dir` (a directory or a URL).
fn current(dir: &Path) -> Result<Manifest> {
    read_current(&*location_of(dir, &checking())?)
}

/// New stores [`DatasetBuilder::add_shards`] opens side by side to check them.
const CHECKS_AT_ONCE: usize = 16;

/// How the builder reads what it checks: never through the remote cache (a store
/// just uploaded would be downloaded whole into it for one look at its footer).
fn checking() -> ReadOptions {
    let mut o = ReadOptions::default();
    o.remote.no_cache = true;
    o
}

/// A name for one builder's stores: 16 hex digits, different for every builder on
/// every host. Uniqueness is all it needs, not unpredictability: the standard
/// library's randomly keyed hasher (keys from the OS, advanced per instance) over the
/// process, the time and a counter gives that without a dependency.
fn writer_name() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    if let Ok(t) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        h.write_u128(t.as_nanos());
    }
    format!("{:016x}", h.finish())
}

/// Writes `bytes` to `path` so that `path` is either absent (or its old content) or
/// all of the new one, and survives a crash once this returns (the platform's
/// publication protocol: temporary file, fsync, link or rename, directory fsync).
/// Without `replace`, returns `Ok(false)` and changes nothing when `path` exists.
fn write_atomic(path: &Path, bytes: &[u8], replace: bool) -> Result<bool> {
    if let Some(url) = crate::remote::url_of(path) {
        return put_object(url, bytes, replace);
    }
    static TEMPS: AtomicU64 = AtomicU64::new(0);
    let dir = parent_dir(path);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // Each write has its own temporary name, so threads of one process never share one.
    let n = TEMPS.fetch_add(1, Ordering::Relaxed);
    let tmp = dir.join(format!(".{name}.{}.{n}.tmp", std::process::id()));
    // A temporary file of an earlier, killed process with this pid is only clutter.
    let _ = fs::remove_file(&tmp);
    let pending = PendingFile::create(&tmp)
        .map_err(|e| Error::io(&tmp, "creating the temporary manifest", e))?;
    if let Err(e) = pending.write_all_at(bytes, 0) {
        pending.discard();
        return Err(Error::io(&tmp, "writing the manifest", e));
    }
    match pending.publish(path, replace) {
        Ok(()) => Ok(true),
        Err(PublishError::Exists) => {
            let _ = fs::remove_file(&tmp);
            Ok(false)
        }
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            Err(match e {
                PublishError::Io {
                    step, path, source, ..
                } => Error::io(path, step, source),
                // The platform's enum is non-exhaustive: a step it may name later.
                other => Error::manifest(
                    path,
                    ManifestProblem::Publish {
                        source: std::sync::Arc::new(other),
                    },
                ),
            })
        }
    }
}

/// [`write_atomic`] for an object: a PUT, create-if-absent without `replace`.
#[cfg(feature = "remote")]
fn put_object(url: &str, bytes: &[u8], replace: bool) -> Result<bool> {
    let conn = crate::remote::Connector::from_url(url, &checking().remote)?;
    crate::remote::put(&conn, bytes.to_vec(), replace)
}

#[cfg(not(feature = "remote"))]
fn put_object(url: &str, _: &[u8], _: bool) -> Result<bool> {
    Err(Error::InvalidArgument(
        crate::error::ArgumentError::RemoteNotBuilt {
            url: url.to_string(),
        },
    ))
}

//! Creating and growing a dataset: stores first, then one atomic manifest.
//!
//! The builder names each new shard's store files (under `data/`, with the manifest
//! version they are written for, so a rerun after a crash never collides with a
//! published store). The caller writes those stores with [`crate::Writer`] (which
//! publishes each one atomically), reports each shard with `add_shard`, and
//! `publish` writes the manifest: first `manifests/<version>.json`, then
//! `manifest.json`, each through a temporary file, fsync, rename and a directory
//! fsync. Until `manifest.json` is renamed, readers see the previous version (or no
//! dataset); stores of an unpublished version are never named by any manifest.

use std::fs;
use std::path::{Path, PathBuf};

use zring_platform::{parent_dir, PendingFile, PublishError};

use super::location::{version_path, LocalDir, Location};
use super::manifest::{Field, Manifest, Shard, DATA_DIR, MANIFEST_FILE, VERSIONS_DIR};
use super::{check_store, is_dataset};
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
            true => read_current(&dir)?.version,
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
        })
    }

    /// Starts the next version of the dataset in `dir`: its shards and fields, plus
    /// whatever shards are added.
    pub fn append(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref().to_path_buf();
        let current = read_current(&dir)?;
        Self::prepare(&dir)?;
        Ok(Self {
            dir,
            base_version: current.version,
            kept: current.shards,
            fields: current.fields,
            added: Vec::new(),
        })
    }

    fn prepare(dir: &Path) -> Result<()> {
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
        format!("{DATA_DIR}/v{:06}-{shard:06}.{field}.zr", self.version())
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
        let k = self.added.len();
        let mut files = Vec::with_capacity(self.fields.len());
        for f in &self.fields {
            let rel = self.relative(k, &f.name);
            let store = Store::open(self.dir.join(&rel), ReadOptions::default())?;
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
            })?;
            files.push(rel);
        }
        self.added.push(Shard { records, files });
        Ok(())
    }

    /// Publishes the new version atomically and returns its manifest. Fails, and
    /// publishes nothing, if another writer published a version since this builder
    /// started.
    pub fn publish(self) -> Result<Manifest> {
        let now = match is_dataset(&self.dir) {
            true => read_current(&self.dir)?.version,
            false => 0,
        };
        if now != self.base_version {
            return Err(Error::manifest(
                &self.dir,
                ManifestProblem::Conflict {
                    published: now,
                    base: self.base_version,
                },
            ));
        }
        let mut shards = self.kept;
        shards.extend(self.added);
        let m = Manifest {
            version: self.base_version + 1,
            fields: self.fields,
            shards,
        };
        m.validate()
            .map_err(|problem| Error::manifest(&self.dir, problem))?;
        let text = m.to_json();
        write_atomic(&version_path(&self.dir, m.version), text.as_bytes())?;
        write_atomic(&self.dir.join(MANIFEST_FILE), text.as_bytes())?;
        Ok(m)
    }
}

/// The current manifest of the dataset in `dir`, parsed.
fn read_current(dir: &Path) -> Result<Manifest> {
    let text = LocalDir::new(dir).read_manifest(None)?;
    Manifest::from_json(&text).map_err(|problem| Error::manifest(dir, problem))
}

/// Writes `bytes` to `path` so that `path` is either its old content or all of the
/// new one, and survives a crash once this returns (the platform's publication
/// protocol: temporary file, fsync, rename, directory fsync).
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = parent_dir(path);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    // A temporary file of an earlier, killed process with this pid is only clutter.
    let _ = fs::remove_file(&tmp);
    let pending = PendingFile::create(&tmp)
        .map_err(|e| Error::io(&tmp, "creating the temporary manifest", e))?;
    if let Err(e) = pending.write_all_at(bytes, 0) {
        pending.discard();
        return Err(Error::io(&tmp, "writing the manifest", e));
    }
    pending.publish(path, true).map_err(|e| {
        let _ = fs::remove_file(&tmp);
        match e {
            PublishError::Io {
                step, path, source, ..
            } => Error::io(path, step, source),
            // Replacing was asked for, so the name being taken is not an error the
            // protocol reports; kept for its non-exhaustive enum.
            other => Error::manifest(
                path,
                ManifestProblem::Publish {
                    source: std::sync::Arc::new(other),
                },
            ),
        }
    })
}

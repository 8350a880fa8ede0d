//! Datasets: several stores read as one.
//!
//! A dataset is a directory holding a manifest that names its fields (each a dense or
//! ragged schema) and its shards (each one store per field, all with the shard's
//! record count). Record `i` of the dataset is record `i - start(shard)` of its
//! shard's stores; a gather splits the indices by shard and reads every field of
//! every shard in parallel, with the stores' own backends and checksums.
//!
//! A dataset grows by publishing a new manifest (see [`DatasetBuilder`]); stores are
//! never changed, so a [`Dataset`] keeps reading the version it opened. A single
//! store is a dataset of one field and one shard ([`Dataset::from_store`]).
//!
//! ```
//! use zring_engine::dataset::{Dataset, DatasetBuilder, FieldDest};
//! use zring_engine::{DType, ReadOptions, Schema, WriteOptions, Writer};
//! # let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("ds");
//! let fields = vec![("label".to_string(), Schema::dense(DType::I64, &[]))];
//! let mut b = DatasetBuilder::create(&path, fields, false)?;
//! for shard in 0..2i64 {
//!     let files = b.shard_paths(shard as usize);
//!     let mut w = Writer::create(&files[0], Schema::dense(DType::I64, &[]), WriteOptions::default())?;
//!     let labels: Vec<u8> = (0..5i64).flat_map(|x| (x + 5 * shard).to_le_bytes()).collect();
//!     w.append_dense(&labels)?;
//!     w.close()?;
//!     b.add_shard(5)?;
//! }
//! b.publish()?;
//!
//! let ds = Dataset::open(&path, ReadOptions::default())?;
//! assert_eq!(ds.len(), 10);
//! let mut out = vec![0u8; 2 * 8];
//! ds.gather(&[7, 1], &[0], &mut [FieldDest::Dense(&mut out)])?;
//! assert_eq!(out[..8], 7i64.to_le_bytes());
//! # Ok::<(), zring_engine::Error>(())
//! ```

mod builder;
mod field;
mod gather;
mod gc;
mod location;
mod manifest;
#[cfg(feature = "remote")]
mod object_dir;

use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use builder::DatasetBuilder;
pub use field::DatasetField;
pub use gather::{FieldBatch, FieldDest};
pub use gc::{collect_garbage, GcReport};
pub use location::{version_path, LocalDir, Location};
pub use manifest::{Field, Manifest, Shard};

use crate::error::{ArgumentError, Error, ManifestProblem, Result, ShardMismatch, StoreMismatch};
use crate::read::{ReadOptions, ReadSetup};
use crate::schema::Layout;
use crate::store::Store;

struct Inner {
    location: Arc<dyn Location>,
    manifest: Manifest,
    /// `stores[shard][field]`.
    stores: Vec<Vec<Store>>,
    /// `starts[s]` is the global index of shard `s`'s first record; one more entry
    /// holds the total.
    starts: Vec<u64>,
    opts: ReadSetup,
}

/// An open dataset, pinned to the manifest version it opened. Cloning is cheap.
#[derive(Clone)]
pub struct Dataset {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Dataset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dataset")
            .field("location", &self.path())
            .field("version", &self.version())
            .field("records", &self.len())
            .field("shards", &self.shards())
            .finish()
    }
}

/// Whether `path` is a dataset directory (holds a manifest), as opposed to a store.
/// For a URL, whether a manifest object is under it (one HEAD request; `false` when
/// that request fails: opening it as a store then reports the error).
pub fn is_dataset(path: &Path) -> bool {
    #[cfg(feature = "remote")]
    if let Some(url) = crate::remote::url_of(path) {
        return crate::remote::ObjectDir::new(url, &ReadOptions::default().remote)
            .and_then(|d| d.exists())
            .unwrap_or(false);
    }
    // A first version whose writer was killed before `manifest.json` is a dataset too
    // (see `location::read_current`).
    path.join(manifest::MANIFEST_FILE).is_file() || location::version_path(path, 1).is_file()
}

/// The location of a dataset at `dir`: a local directory, or a URL prefix.
fn location_of(dir: &Path, opts: &ReadOptions) -> Result<Arc<dyn Location>> {
    opts.validate()?;
    if let Some(url) = crate::remote::url_of(dir) {
        #[cfg(feature = "remote")]
        return Ok(Arc::new(crate::remote::ObjectDir::new(url, &opts.remote)?));
        #[cfg(not(feature = "remote"))]
        return Err(Error::InvalidArgument(ArgumentError::RemoteNotBuilt {
            url: url.to_string(),
        }));
    }
    let _ = opts;
    Ok(Arc::new(LocalDir::new(dir)))
}

impl Dataset {
    /// Opens the dataset in directory `dir` at its current manifest.
    /// A URL (`s3://bucket/prefix`, ...) opens the dataset under that prefix.
    pub fn open(dir: impl AsRef<Path>, opts: impl Into<ReadSetup>) -> Result<Self> {
        let opts = opts.into();
        Self::open_at(location_of(dir.as_ref(), &opts)?, None, opts)
    }

    /// Opens exactly manifest `version` of the dataset in `dir` (what a reader that
    /// was pickled at that version reopens).
    pub fn open_version(
        dir: impl AsRef<Path>,
        version: u64,
        opts: impl Into<ReadSetup>,
    ) -> Result<Self> {
        let opts = opts.into();
        Self::open_at(location_of(dir.as_ref(), &opts)?, Some(version), opts)
    }

    /// Opens a dataset from any [`Location`], at its current manifest or `version`.
    pub fn open_at(
        location: Arc<dyn Location>,
        version: Option<u64>,
        opts: impl Into<ReadSetup>,
    ) -> Result<Self> {
        let opts = opts.into();
        opts.validate()?;
        let bad = |problem: ManifestProblem| Error::manifest(location.describe(), problem);
        let manifest = match version {
            None => location::read_current(location.as_ref())?,
            Some(v) => {
                let manifest =
                    Manifest::from_json(&location.read_manifest(Some(v))?).map_err(bad)?;
                if v != manifest.version {
                    return Err(bad(ManifestProblem::VersionMismatch {
                        asked: v,
                        found: manifest.version,
                    }));
                }
                manifest
            }
        };
        let mut stores = Vec::with_capacity(manifest.shards.len());
        for (s, shard) in manifest.shards.iter().enumerate() {
            let mut row = Vec::with_capacity(shard.files.len());
            for (field, rel) in manifest.fields.iter().zip(&shard.files) {
                let store = location.open_store(rel, &opts)?;
                check_store(&store, field, shard.records).map_err(|mismatch| {
                    bad(ManifestProblem::Store(Box::new(ShardMismatch {
                        shard: s,
                        new: false,
                        field: field.name.clone(),
                        store: Some(rel.clone()),
                        mismatch,
                    })))
                })?;
                row.push(store);
            }
            stores.push(row);
        }
        Ok(Self::assemble(location, manifest, stores, opts))
    }

    /// A store as a dataset of one field, `name`, and one shard.
    pub fn from_store(name: &str, store: Store) -> Result<Self> {
        manifest::check_field_name(name).map_err(|_| {
            Error::InvalidArgument(ArgumentError::FieldName {
                name: name.to_string(),
            })
        })?;
        let manifest = Manifest {
            version: 0,
            fields: vec![Field {
                name: name.to_string(),
                schema: store.schema().clone(),
            }],
            shards: vec![Shard {
                records: store.len(),
                files: vec![store.path().to_string_lossy().into_owned()],
            }],
        };
        let location = Arc::new(LocalDir::new(store.path()));
        let opts = store.inner.read_options();
        Ok(Self::assemble(location, manifest, vec![vec![store]], opts))
    }

    /// Several datasets with the same fields read as one: record `i` of the result
    /// is record `i - start(d)` of dataset `d`, where `start(d)` counts the records
    /// of the datasets before it (the numbering `Concat` and a mixture use). Field
    /// names, dtypes and layouts must match the first dataset's (metadata may
    /// differ; the first one's is kept). Nothing is read or written: the result
    /// shares the datasets' open stores, shard after shard.
    pub fn join(parts: &[Dataset]) -> Result<Self> {
        let Some(first) = parts.first() else {
            return Err(Error::InvalidArgument(ArgumentError::NoParts));
        };
        let describe = |ds: &Dataset| {
            let fields: Vec<String> = ds
                .fields()
                .iter()
                .map(|f| format!("{}: {:?} {:?}", f.name, f.schema.dtype, f.schema.layout))
                .collect();
            format!("[{}]", fields.join(", "))
        };
        let same = |a: &Field, b: &Field| {
            a.name == b.name
                && a.schema.dtype == b.schema.dtype
                && a.schema.layout == b.schema.layout
        };
        let mut shards = Vec::new();
        let mut stores = Vec::new();
        let mut total = 0u64;
        for (part, ds) in parts.iter().enumerate() {
            let fields = ds.fields();
            if fields.len() != first.fields().len()
                || !fields.iter().zip(first.fields()).all(|(a, b)| same(a, b))
            {
                return Err(Error::InvalidArgument(ArgumentError::PartFields {
                    part,
                    found: describe(ds),
                    expected: describe(first),
                }));
            }
            total = total
                .checked_add(ds.len())
                .ok_or(Error::InvalidArgument(ArgumentError::BatchTooLarge))?;
            // The joined manifest names each store by its own path: relative names
            // would be relative to different directories.
            for (shard, row) in ds.inner.manifest.shards.iter().zip(&ds.inner.stores) {
                shards.push(Shard {
                    records: shard.records,
                    files: row
                        .iter()
                        .map(|s| s.path().to_string_lossy().into_owned())
                        .collect(),
                });
                stores.push(row.clone());
            }
        }
        let manifest = Manifest {
            version: 0,
            fields: first.fields().to_vec(),
            shards,
        };
        let names: Vec<String> = parts
            .iter()
            .map(|d| d.path().to_string_lossy().into_owned())
            .collect();
        // Only described (in errors and `path`): the stores are open, so nothing is
        // ever read through this location.
        let location = Arc::new(LocalDir::new(format!("[{}]", names.join(" + "))));
        Ok(Self::assemble(
            location,
            manifest,
            stores,
            first.inner.opts.clone(),
        ))
    }

    fn assemble(
        location: Arc<dyn Location>,
        manifest: Manifest,
        stores: Vec<Vec<Store>>,
        opts: ReadSetup,
    ) -> Self {
        let mut starts = Vec::with_capacity(manifest.shards.len() + 1);
        let mut at = 0u64;
        starts.push(0);
        for s in &manifest.shards {
            at += s.records;
            starts.push(at);
        }
        Self {
            inner: Arc::new(Inner {
                location,
                manifest,
                stores,
                starts,
                opts,
            }),
        }
    }

    /// The dataset's directory (or URL) as opened.
    pub fn path(&self) -> &Path {
        self.inner.location.describe()
    }

    /// The manifest version this dataset reads.
    pub fn version(&self) -> u64 {
        self.inner.manifest.version
    }

    /// The manifest this dataset reads.
    pub fn manifest(&self) -> &Manifest {
        &self.inner.manifest
    }

    /// The settings every store was opened with.
    pub fn read_options(&self) -> &ReadOptions {
        &self.inner.opts.settings
    }

    /// Total records over all shards.
    pub fn len(&self) -> u64 {
        self.inner.starts.last().copied().unwrap_or(0)
    }

    /// Whether the dataset holds no records.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The fields, in manifest order.
    pub fn fields(&self) -> &[Field] {
        &self.inner.manifest.fields
    }

    /// The position of field `name`, or an error naming the fields there are.
    pub fn field_index(&self, name: &str) -> Result<usize> {
        self.inner.manifest.field_index(name).ok_or_else(|| {
            Error::InvalidArgument(ArgumentError::UnknownField {
                path: self.path().to_path_buf(),
                name: name.to_string(),
                fields: self.fields().iter().map(|f| f.name.clone()).collect(),
            })
        })
    }

    /// The number of shards.
    pub fn shards(&self) -> usize {
        self.inner.stores.len()
    }

    /// The global index of each shard's first record, and the total at the end.
    pub fn shard_starts(&self) -> &[u64] {
        &self.inner.starts
    }

    /// The store holding field `field` of shard `shard`.
    pub fn store(&self, shard: usize, field: usize) -> Option<&Store> {
        self.inner.stores.get(shard)?.get(field)
    }

    /// A view of one field, readable like a store (what the loader takes).
    pub fn field(&self, field: usize) -> Result<DatasetField> {
        DatasetField::new(self.clone(), field)
    }

    /// The shard holding global record `index` and the record's index inside it.
    pub fn locate(&self, index: u64) -> Result<(usize, u64)> {
        let starts = &self.inner.starts;
        if index >= self.len() {
            return Err(Error::IndexOutOfRange {
                path: self.path().to_path_buf(),
                index,
                len: self.len(),
            });
        }
        // The last start <= index (shards of zero records share a start and are
        // skipped because partition_point passes them).
        let s = starts.partition_point(|&st| st <= index) - 1;
        Ok((s, index - starts[s]))
    }

    /// Checks every record of every store (see [`Store::verify`]); the error names the
    /// store and record.
    pub fn verify(&self) -> Result<()> {
        self.verify_until(&crate::Never)
    }

    /// [`Dataset::verify`] that stops early, with [`Error::Interrupted`], once `stop`
    /// says so.
    pub fn verify_until(&self, stop: &dyn crate::Interrupt) -> Result<()> {
        self.inner
            .stores
            .iter()
            .flatten()
            .try_for_each(|s| s.verify_range_until(0..s.len(), stop))
    }

    /// The stores' files, shard by shard, field by field.
    pub fn store_paths(&self) -> Vec<PathBuf> {
        self.inner
            .stores
            .iter()
            .flatten()
            .map(|s| s.path().to_path_buf())
            .collect()
    }
}

/// A shard's store must hold its field's schema and the shard's record count.
fn check_store(
    store: &Store,
    field: &Field,
    records: u64,
) -> std::result::Result<(), StoreMismatch> {
    let got = store.schema();
    let want = &field.schema;
    let same_layout = match (&got.layout, &want.layout) {
        (Layout::Dense { item_shape: a }, Layout::Dense { item_shape: b }) => a == b,
        (Layout::Ragged { ndim: a }, Layout::Ragged { ndim: b }) => a == b,
        _ => false,
    };
    if got.dtype != want.dtype || !same_layout {
        return Err(StoreMismatch::Schema {
            store_dtype: got.dtype,
            store_layout: got.layout.clone(),
            manifest_dtype: want.dtype,
            manifest_layout: want.layout.clone(),
        });
    }
    if store.len() != records {
        return Err(StoreMismatch::Records {
            store: store.len(),
            manifest: records,
        });
    }
    Ok(())
}

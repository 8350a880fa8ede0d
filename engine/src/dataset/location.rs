//! Where a dataset's manifest and stores come from. Reading a manifest and opening a
//! shard's store go through this one trait, so a remote source (object storage) is
//! one more implementation, and nothing above it changes.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::error::{Error, ManifestProblem, Result};
use crate::read::ReadOptions;
use crate::store::Store;

use super::manifest::{MANIFEST_FILE, VERSIONS_DIR};

/// A manifest larger than this is refused before it is read (a manifest of a
/// million shards is about 100 MiB).
pub(crate) const MAX_MANIFEST_BYTES: u64 = 1 << 30;

/// A place that holds a dataset.
pub trait Location: Send + Sync + fmt::Debug {
    /// The path or URL, for error messages and `info`.
    fn describe(&self) -> &Path;

    /// The text of the current manifest (`None`) or of an exact published version.
    fn read_manifest(&self, version: Option<u64>) -> Result<Vec<u8>>;

    /// Opens the store at `rel`, a path relative to the dataset (already checked to
    /// stay inside it).
    fn open_store(&self, rel: &str, opts: &ReadOptions) -> Result<Store>;
}

/// A dataset in a local directory.
#[derive(Clone, Debug)]
pub struct LocalDir {
    dir: PathBuf,
}

impl LocalDir {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }
}

/// The path of version `version`'s manifest inside `dir`.
pub fn version_path(dir: &Path, version: u64) -> PathBuf {
    dir.join(VERSIONS_DIR).join(format!("{version:010}.json"))
}

impl Location for LocalDir {
    fn describe(&self) -> &Path {
        &self.dir
    }

    fn read_manifest(&self, version: Option<u64>) -> Result<Vec<u8>> {
        let path = match version {
            None => self.dir.join(MANIFEST_FILE),
            Some(v) => version_path(&self.dir, v),
        };
        let len = std::fs::metadata(&path)
            .map_err(|e| Error::io(&path, "reading the dataset manifest", e))?
            .len();
        if len > MAX_MANIFEST_BYTES {
            return Err(Error::manifest(
                path,
                ManifestProblem::TooLarge { bytes: len },
            ));
        }
        std::fs::read(&path).map_err(|e| Error::io(&path, "reading the dataset manifest", e))
    }

    fn open_store(&self, rel: &str, opts: &ReadOptions) -> Result<Store> {
        Store::open(self.dir.join(rel), opts.clone())
    }
}

//! Where a dataset's manifest and stores come from. Reading a manifest and opening a
//! shard's store go through this one trait, so a remote source (object storage) is
//! one more implementation, and nothing above it changes.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::error::{Error, ManifestProblem, Result};
use crate::read::ReadSetup;
use crate::store::Store;

use super::manifest::{Manifest, MANIFEST_FILE, VERSIONS_DIR};

/// A manifest larger than this is refused before it is read (a manifest of a
/// million shards is about 100 MiB).
pub(crate) const MAX_MANIFEST_BYTES: u64 = 1 << 30;

/// A place that holds a dataset.
pub trait Location: Send + Sync + fmt::Debug {
    /// The path or URL, for error messages and `info`.
    fn describe(&self) -> &Path;

    /// The text of the current manifest (`None`) or of an exact published version.
    fn read_manifest(&self, version: Option<u64>) -> Result<Vec<u8>>;

    /// Whether version `version`'s manifest (`manifests/<version>.json`) exists.
    fn has_version(&self, version: u64) -> Result<bool>;

    /// Opens the store at `rel`, a path relative to the dataset (already checked to
    /// stay inside it).
    fn open_store(&self, rel: &str, opts: &ReadSetup) -> Result<Store>;
}

/// A dataset in a local directory.
///
/// Its stores are opened where the manifest names them, inside the directory, but
/// a name can be a symbolic link (or under a linked `data/`) that leads anywhere.
/// Unless the read setting `follow_links_out` says the links are wanted, each
/// store's path is resolved (every link followed) and must stay under the
/// directory, resolved too (the directory itself may be a link), else the open is
/// [`Error::LinkOutOfDataset`]. The resolved path is the one opened, so what was
/// checked is what is read; the store keeps its name in the dataset for messages.
/// This is checked once per open: a directory changed meanwhile by someone who can
/// write it is out of scope (docs/security.md).
#[derive(Clone, Debug)]
pub struct LocalDir {
    dir: PathBuf,
    /// `dir` resolved, once, by the first store open that needs it.
    root: OnceLock<PathBuf>,
}

impl LocalDir {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        let dir = dir.into();
        // The working directory spelled as the empty path: a store's relative name
        // joined to it must stay a path (`file:/x.zr` joined to "" would read as a URL).
        let dir = match dir.as_os_str().is_empty() {
            true => PathBuf::from("."),
            false => dir,
        };
        Self {
            dir,
            root: OnceLock::new(),
        }
    }

    /// The dataset directory with every symbolic link on its path followed.
    fn root(&self) -> Result<&Path> {
        if let Some(root) = self.root.get() {
            return Ok(root);
        }
        let root = std::fs::canonicalize(&self.dir)
            .map_err(|e| Error::io(&self.dir, "resolving the dataset directory", e))?;
        Ok(self.root.get_or_init(|| root))
    }
}

impl LocalDir {
    /// `path` (a store's path in the dataset) with every link followed, or
    /// [`Error::LinkOutOfDataset`] when that leads out of the dataset directory.
    pub(crate) fn resolve_inside(&self, path: &Path) -> Result<PathBuf> {
        // A link to nothing fails here as the open would: not found, naming the store.
        let target =
            std::fs::canonicalize(path).map_err(|e| Error::io(path, "opening the store", e))?;
        let root = self.root()?;
        if !target.starts_with(root) {
            return Err(Error::LinkOutOfDataset {
                path: path.to_path_buf(),
                target,
                dataset: root.to_path_buf(),
            });
        }
        Ok(target)
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

    fn has_version(&self, version: u64) -> Result<bool> {
        let path = version_path(&self.dir, version);
        path.try_exists()
            .map_err(|e| Error::io(&path, "looking for a newer dataset manifest", e))
    }

    fn open_store(&self, rel: &str, opts: &ReadSetup) -> Result<Store> {
        let path = self.dir.join(rel);
        if opts.follow_links_out {
            return Store::open(path, opts.clone());
        }
        let target = self.resolve_inside(&path)?;
        Store::open_file(&target, path, opts)
    }
}

/// The current manifest of the dataset at `location`, parsed.
///
/// A publication is committed when its `manifests/<version>.json` is created (only if
/// absent, so each version has one writer); `manifest.json` follows it. That pointer
/// can lag: a writer killed between the two steps leaves it one version behind, and
/// two writers that publish in quick succession may replace it in the other order.
/// So the current version is the pointer's, followed forward while the next version's
/// manifest exists: one more existence check per open when nothing lags.
pub(crate) fn read_current(location: &dyn Location) -> Result<Manifest> {
    let parse = |text: &[u8]| {
        Manifest::from_json(text).map_err(|problem| Error::manifest(location.describe(), problem))
    };
    let mut manifest = match location.read_manifest(None) {
        Ok(text) => parse(&text)?,
        // No pointer yet, but a first version committed (its writer was killed before
        // the pointer was written): the versions are the record. A pointer that is
        // there but cannot be read (too large, refused) is an error, never skipped.
        Err(e) if is_not_found(&e) && location.has_version(1)? => {
            parse(&location.read_manifest(Some(1))?)?
        }
        Err(e) => return Err(e),
    };
    let mut newest = manifest.version;
    while location.has_version(newest + 1)? {
        newest += 1;
    }
    if newest != manifest.version {
        let text = location.read_manifest(Some(newest))?;
        manifest = parse(&text).map_err(|e| in_version(e, newest))?;
        if manifest.version != newest {
            return Err(Error::manifest(
                location.describe(),
                ManifestProblem::VersionMismatch {
                    asked: newest,
                    found: manifest.version,
                },
            ));
        }
    }
    Ok(manifest)
}

/// Whether `e` says the file or object is not there (by its kind, not its text).
fn is_not_found(e: &Error) -> bool {
    match e {
        Error::Io { source, .. } => source.kind() == std::io::ErrorKind::NotFound,
        Error::Remote { kind, .. } => *kind == std::io::ErrorKind::NotFound,
        _ => false,
    }
}

/// `e`, a problem found in the manifest of `version`, said to be of that version.
fn in_version(e: Error, version: u64) -> Error {
    match e {
        Error::Manifest { path, problem } => Error::manifest(
            path,
            ManifestProblem::InVersion {
                version,
                problem: Box::new(problem),
            },
        ),
        other => other,
    }
}

//! Datasets at a URL: the manifest and every shard's stores are objects under one
//! prefix (`s3://bucket/datasets/name/manifest.json`, `.../shard-0.image.zr`), read
//! through one [`ObjectDir`] (one client shared by all of them).

use std::path::Path;

use crate::error::{Error, ManifestProblem, Result};
use crate::read::ReadSetup;
use crate::remote::{ObjectDir, TooLarge};
use crate::store::Store;

use super::location::{Location, MAX_MANIFEST_BYTES};
use super::manifest::{MANIFEST_FILE, VERSIONS_DIR};

impl ObjectDir {
    /// Whether the prefix holds a dataset manifest (one HEAD request).
    pub fn exists(&self) -> Result<bool> {
        self.has(MANIFEST_FILE, "looking for a dataset manifest")
    }
}

impl Location for ObjectDir {
    fn describe(&self) -> &Path {
        self.described()
    }

    fn read_manifest(&self, version: Option<u64>) -> Result<Vec<u8>> {
        let rel = match version {
            None => MANIFEST_FILE.to_string(),
            Some(v) => format!("{VERSIONS_DIR}/{v:010}.json"),
        };
        self.get_at_most(&rel, MAX_MANIFEST_BYTES, "reading the dataset manifest")?
            .map_err(|TooLarge { url, bytes }| {
                Error::manifest(url, ManifestProblem::TooLarge { bytes })
            })
    }

    fn has_version(&self, version: u64) -> Result<bool> {
        self.has(
            &format!("{VERSIONS_DIR}/{version:010}.json"),
            "looking for a newer dataset manifest",
        )
    }

    fn open_store(&self, rel: &str, opts: &ReadSetup) -> Result<Store> {
        Store::open_at(self.object(rel)?, opts)
    }
}

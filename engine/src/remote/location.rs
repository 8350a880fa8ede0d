//! Datasets at a URL: the manifest and every shard's stores are objects under one
//! prefix (`s3://bucket/datasets/name/manifest.json`, `.../shard-0.image.zr`), read
//! with one client shared by all of them.

use std::path::{Path, PathBuf};

use object_store::path::Path as ObjectPath;
use object_store::{GetOptions, ObjectStoreExt};

use crate::dataset::{Location, MANIFEST_FILE, VERSIONS_DIR};
use crate::error::{Error, ManifestProblem, Result, UrlProblem};
use crate::read::ReadOptions;
use crate::store::Store;

use super::object::{remote_err, Connector};
use super::open::open_with;
use super::options::RemoteOptions;
use super::runtime;

/// A dataset under a URL prefix.
#[derive(Debug)]
pub struct ObjectDir {
    /// The prefix URL, without a trailing `/`.
    url: String,
    described: PathBuf,
    /// The client, pointed at the prefix (siblings point at its objects).
    conn: Connector,
}

impl ObjectDir {
    /// The dataset at `url` (credentials and endpoint from the environment and
    /// `opts`, as for stores).
    pub fn new(url: &str, opts: &RemoteOptions) -> Result<Self> {
        let url = url.trim_end_matches('/').to_string();
        let conn = Connector::from_url(&url, opts)?;
        Ok(Self {
            described: PathBuf::from(&url),
            url,
            conn,
        })
    }

    /// The connector of the object `rel` under the prefix.
    fn object(&self, rel: &str) -> Result<Connector> {
        let path =
            ObjectPath::parse(format!("{}/{rel}", self.conn.location.as_ref())).map_err(|e| {
                super::object::url_err(
                    &self.url,
                    UrlProblem::ObjectPath {
                        path: rel.to_string(),
                        reason: e.to_string(),
                    },
                )
            })?;
        Ok(self.conn.sibling(&format!("{}/{rel}", self.url), path))
    }

    /// Whether the prefix holds a dataset manifest (one HEAD request).
    pub fn exists(&self) -> Result<bool> {
        let conn = self.object(MANIFEST_FILE)?;
        let store = conn.store()?;
        let location = conn.location.clone();
        match runtime::run(async move { store.head(&location).await })? {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(remote_err(&conn.url, "looking for a dataset manifest", e)),
        }
    }
}

impl Location for ObjectDir {
    fn describe(&self) -> &Path {
        &self.described
    }

    fn read_manifest(&self, version: Option<u64>) -> Result<Vec<u8>> {
        let rel = match version {
            None => MANIFEST_FILE.to_string(),
            Some(v) => format!("{VERSIONS_DIR}/{v:010}.json"),
        };
        let conn = self.object(&rel)?;
        let store = conn.store()?;
        let location = conn.location.clone();
        let url = conn.url.clone();
        runtime::run(async move {
            let r = store
                .get_opts(&location, GetOptions::default())
                .await
                .map_err(|e| remote_err(&url, "reading the dataset manifest", e))?;
            if r.meta.size > crate::dataset::MAX_MANIFEST_BYTES {
                return Err(Error::manifest(
                    url.clone(),
                    ManifestProblem::TooLarge { bytes: r.meta.size },
                ));
            }
            let bytes = r
                .bytes()
                .await
                .map_err(|e| remote_err(&url, "reading the dataset manifest", e))?;
            Ok(bytes.to_vec())
        })?
    }

    fn open_store(&self, rel: &str, opts: &ReadOptions) -> Result<Store> {
        open_with(self.object(rel)?, opts)
    }
}

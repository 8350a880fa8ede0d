//! Objects under one URL prefix, read with one client shared by all of them: a
//! dataset at a URL (`dataset/object_dir.rs`) keeps its manifest and every shard's
//! stores there (`s3://bucket/datasets/name/manifest.json`, `.../shard-0.image.zr`).

use std::path::{Path, PathBuf};

use object_store::path::Path as ObjectPath;
use object_store::{GetOptions, ObjectStore, ObjectStoreExt};

use crate::error::{Result, UrlProblem};

use super::object::Connector;
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

    /// The prefix as a path, for messages.
    pub(crate) fn described(&self) -> &Path {
        &self.described
    }

    /// The connector of the object `rel` under the prefix.
    pub(crate) fn object(&self, rel: &str) -> Result<Connector> {
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

    /// Whether the object `rel` under the prefix exists (one HEAD request); a
    /// failed request is an error naming `what` was being done.
    pub(crate) fn has(&self, rel: &str, what: &'static str) -> Result<bool> {
        let conn = self.object(rel)?;
        let store = conn.store()?;
        let location = conn.location.clone();
        match runtime::run(async move { store.head(&location).await })? {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(conn.site().err(what, e)),
        }
    }

    /// The bytes of the object `rel` under the prefix, in one GET; `Ok(Err(size))`
    /// without its body when it is larger than `max` bytes. A failed request is an
    /// error naming `what` was being done.
    pub(crate) fn get_at_most(
        &self,
        rel: &str,
        max: u64,
        what: &'static str,
    ) -> Result<std::result::Result<Vec<u8>, TooLarge>> {
        let conn = self.object(rel)?;
        let store = conn.store()?;
        let location = conn.location.clone();
        let site = conn.site();
        runtime::run(async move {
            let r = store
                .get_opts(&location, GetOptions::default())
                .await
                .map_err(|e| site.err(what, e))?;
            if r.meta.size > max {
                return Ok(Err(TooLarge {
                    url: site.url,
                    bytes: r.meta.size,
                }));
            }
            let bytes = r.bytes().await.map_err(|e| site.err(what, e))?;
            Ok(Ok(bytes.to_vec()))
        })?
    }
}

impl ObjectDir {
    /// The objects directly under `rel_dir/` (names and sizes; none when nothing is
    /// there): object stores list by prefix, with `/` as the delimiter.
    pub(crate) fn list(&self, rel_dir: &str, what: &'static str) -> Result<Vec<(String, u64)>> {
        let conn = self.object(rel_dir)?;
        let store = conn.store()?;
        let prefix = conn.location.clone();
        let site = conn.site();
        runtime::run(async move {
            let listed = store
                .list_with_delimiter(Some(&prefix))
                .await
                .map_err(|e| site.err(what, e))?;
            Ok(listed
                .objects
                .into_iter()
                .filter_map(|m| Some((m.location.filename()?.to_string(), m.size)))
                .collect())
        })?
    }

    /// Deletes the object `rel` under the prefix (one already gone is not an error).
    pub(crate) fn delete(&self, rel: &str, what: &'static str) -> Result<()> {
        let conn = self.object(rel)?;
        let store = conn.store()?;
        let location = conn.location.clone();
        match runtime::run(async move { store.delete(&location).await })? {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(conn.site().err(what, e)),
        }
    }

    /// The URL of the object `rel` under the prefix.
    pub(crate) fn url_of(&self, rel: &str) -> PathBuf {
        PathBuf::from(format!("{}/{rel}", self.url))
    }
}

/// An object larger than the caller's bound (see [`ObjectDir::get_at_most`]).
#[derive(Debug)]
pub(crate) struct TooLarge {
    /// The object's URL.
    pub(crate) url: PathBuf,
    /// Its size.
    pub(crate) bytes: u64,
}

//! A store bound for a URL: written in a private staging directory by the same
//! local writer as any store, and uploaded as one object, which appears complete or
//! not at all. Its parts go up while it is written: after each append, every whole
//! part of the data written so far is sent, and `close` sends the rest (the last
//! data, the metadata and the footer) and completes the upload. The staged file is
//! not fsynced for the upload (the object is the durable copy). Once uploaded, it
//! becomes the object's whole-object cache entry where the cache keeps it whole
//! (made durable first, as a download is). The staging directory is removed when
//! the writer is done, whatever happened; one left by a killed process is removed
//! by the next writer that finds its process gone.
//!
//! Staging in `$TMPDIR` (not in memory) keeps the writer's memory what it is for a
//! local store; the upload's is a few parts. The disk needs room for the store (the
//! file is kept whole: it becomes the cache entry).

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

use super::WriteOptions;

/// The staging directory and destination of one store written to a URL.
pub(super) struct Staged {
    dir: PathBuf,
    file: PathBuf,
    #[cfg(feature = "remote")]
    conn: crate::remote::Connector,
    #[cfg(feature = "remote")]
    remote: crate::remote::RemoteOptions,
    #[cfg(feature = "remote")]
    parts: crate::remote::PartUpload,
}

/// Staging directories are `zring-upload.<pid>.<n>` in the temporary directory.
#[cfg(feature = "remote")]
const PREFIX: &str = "zring-upload.";

impl Staged {
    /// Checks the destination `url` (without `overwrite`, an existing object is
    /// `AlreadyExists` now rather than after the whole store is written) and makes
    /// the staging directory.
    #[cfg(feature = "remote")]
    pub(super) fn new(url: &str, opts: &WriteOptions) -> Result<Self> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let conn = crate::remote::Connector::from_url(url, &opts.remote)?;
        if !opts.overwrite && crate::remote::exists(&conn)? {
            return Err(Error::AlreadyExists { path: url.into() });
        }
        let tmp = std::env::temp_dir();
        remove_stale(&tmp);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir = tmp.join(format!("{PREFIX}{}.{n}", std::process::id()));
        std::fs::create_dir_all(&dir)
            .map_err(|e| Error::io(&dir, "creating the upload's staging directory", e))?;
        // The object's own name, so messages about the staged file are recognisable.
        let name = url
            .rsplit('/')
            .find(|s| !s.is_empty())
            .unwrap_or("store.zr");
        Ok(Self {
            file: dir.join(sanitized(name)),
            dir,
            parts: crate::remote::PartUpload::new(conn.clone(), opts.overwrite, &opts.remote),
            conn,
            remote: opts.remote.clone(),
        })
    }

    #[cfg(not(feature = "remote"))]
    pub(super) fn new(url: &str, _: &WriteOptions) -> Result<Self> {
        Err(Error::InvalidArgument(
            crate::error::ArgumentError::RemoteNotBuilt {
                url: url.to_string(),
            },
        ))
    }

    /// Where the store is written and published before the upload.
    pub(super) fn local_path(&self) -> &Path {
        &self.file
    }

    /// Sends the parts of `file` (the store being written at `path`) that lie below
    /// `ready`, the end of its data so far, and were not sent yet.
    #[cfg(feature = "remote")]
    pub(super) fn send_ready(
        &mut self,
        file: &std::fs::File,
        path: &Path,
        ready: u64,
    ) -> Result<()> {
        self.parts.send_ready(file, path, ready)
    }

    #[cfg(not(feature = "remote"))]
    pub(super) fn send_ready(&mut self, _: &std::fs::File, _: &Path, _: u64) -> Result<()> {
        Ok(())
    }

    /// Aborts what was sent (the writer failed).
    pub(super) fn abandon(&mut self) {
        #[cfg(feature = "remote")]
        self.parts.abandon();
    }

    /// Uploads the rest of the published staged store and completes the object,
    /// then hands the file to the cache as the object's whole-object entry (when the
    /// cache would keep it whole), so that reading it back on this machine does not
    /// download it.
    #[cfg(feature = "remote")]
    pub(super) fn upload(&mut self) -> Result<()> {
        let e_tag = self.parts.finish(&self.file)?;
        crate::remote::seed_whole(&self.conn, &self.remote, &self.file, e_tag.as_deref());
        Ok(())
    }

    #[cfg(not(feature = "remote"))]
    pub(super) fn upload(&mut self) -> Result<()> {
        Ok(())
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A file name from an object name: path separators and a leading dot removed.
#[cfg(feature = "remote")]
fn sanitized(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| if c == '/' || c == '\\' { '_' } else { c })
        .collect();
    match s.trim_start_matches('.') {
        "" => "store.zr".to_string(),
        t => t.to_string(),
    }
}

/// Removes staging directories of processes that no longer exist.
#[cfg(feature = "remote")]
fn remove_stale(tmp: &Path) {
    let Ok(listing) = std::fs::read_dir(tmp) else {
        return;
    };
    for entry in listing.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(PREFIX)
            .and_then(|rest| rest.split('.').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if super::left_by_dead_process(&entry, pid) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

#[cfg(all(test, feature = "remote"))]
mod tests {
    use super::sanitized;

    #[test]
    fn staged_names_stay_one_plain_file_name() {
        assert_eq!(sanitized("images.zr"), "images.zr");
        assert_eq!(sanitized("..zr"), "zr");
        assert_eq!(sanitized("."), "store.zr");
        assert_eq!(sanitized("a\\b"), "a_b");
    }
}

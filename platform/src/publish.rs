//! Writing a file under a temporary name and publishing it crash-safely: the final
//! path is either absent (or its old file) or the complete new file, also after a
//! power cut at any moment.
//!
//! The protocol: write everything into a new file beside the destination, `fsync` it
//! (its data and size are durable), give it the final name (a hard link, which fails
//! if the name exists; where hard links are refused, `renameat2` with
//! `RENAME_NOREPLACE`; when replacing was asked for, `rename`, which replaces
//! atomically), remove the temporary name, and `fsync` the directory (the new name is
//! durable). Every step goes through [`crate::faults`], so tests can fail or record it.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use crate::faults::{check, Op};

/// A file being written under a temporary name.
#[derive(Debug)]
pub struct PendingFile {
    file: File,
    path: PathBuf,
}

/// Which step of [`PendingFile::publish`] failed, and whether the file is at its final
/// path anyway.
#[derive(Debug)]
#[non_exhaustive]
pub enum PublishError {
    /// The destination exists and replacing it was not asked for.
    Exists,
    /// `step` failed on `path`.
    Io {
        step: &'static str,
        path: PathBuf,
        source: io::Error,
        /// The new file is at the final path already (only the directory fsync
        /// failed): its name may not survive a crash.
        in_place: bool,
    },
}

impl std::fmt::Display for PublishError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PublishError::Exists => f.write_str("the destination exists"),
            PublishError::Io {
                step,
                path,
                source,
                in_place,
            } => {
                write!(f, "{}: {step} failed: {source}", path.display())?;
                if *in_place {
                    f.write_str(" (the file is in place, but its name may not survive a crash)")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for PublishError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PublishError::Exists => None,
            PublishError::Io { source, .. } => Some(source),
        }
    }
}

impl PendingFile {
    /// Creates the new file `path` (which must not exist), readable and writable.
    pub fn create(path: &Path) -> io::Result<Self> {
        check(&Op::Create { path })?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)?;
        Ok(Self {
            file,
            path: path.to_path_buf(),
        })
    }

    /// The temporary path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The open file, for reading back.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Writes all of `data` at `offset`.
    pub fn write_all_at(&self, data: &[u8], offset: u64) -> io::Result<()> {
        check(&Op::Write {
            path: &self.path,
            offset,
            data,
        })?;
        crate::file::write_all_at(&self.file, data, offset)
    }

    /// Asks the kernel to start writing back `offset .. offset + len` now, without
    /// waiting (Linux `sync_file_range(SYNC_FILE_RANGE_WRITE)`), so the device works
    /// while the caller keeps writing. Only a hint about timing: it makes nothing
    /// durable. A no-op on other platforms and where the file cannot take the hint.
    pub fn start_writeback(&self, offset: u64, len: u64) -> io::Result<()> {
        crate::file::start_writeback(&self.file, offset, len)
    }

    /// Makes the file durable and gives it the name `dest` (replacing a file there
    /// only with `replace`), then makes the name durable. On an error before the file
    /// is in place, the temporary file is still there (the caller removes it, see
    /// [`PendingFile::discard`]).
    pub fn publish(self, dest: &Path, replace: bool) -> Result<(), PublishError> {
        let io_err = |step, path: &Path, source, in_place| PublishError::Io {
            step,
            path: path.to_path_buf(),
            source,
            in_place,
        };
        check(&Op::Sync { path: &self.path })
            .and_then(|()| self.file.sync_all())
            .map_err(|e| io_err("fsync of the new file", &self.path, e, false))?;
        drop(self.file);
        let tmp = self.path;
        let mut linked = false;
        let mut renamed = false;
        if !replace {
            match check(&Op::Link {
                from: &tmp,
                to: dest,
            })
            .and_then(|()| fs::hard_link(&tmp, dest))
            {
                Ok(()) => linked = true,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    return Err(PublishError::Exists)
                }
                // File systems without hard links: a rename that does not replace,
                // as atomic as the link.
                Err(_) => match check(&Op::Rename {
                    from: &tmp,
                    to: dest,
                })
                .and_then(|()| crate::file::rename_noreplace(&tmp, dest))
                {
                    Ok(()) => renamed = true,
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                        return Err(PublishError::Exists)
                    }
                    // Neither can be done atomically here: check, then rename. Two
                    // publications racing for one name can both pass the check on such
                    // a file system (docs/format.md says which ones).
                    Err(e) if e.kind() == io::ErrorKind::Unsupported => {
                        if dest.exists() {
                            return Err(PublishError::Exists);
                        }
                    }
                    Err(e) => {
                        return Err(io_err("renaming the new file into place", dest, e, false))
                    }
                },
            }
        }
        if linked {
            // The final name is in place; the temporary one is only clutter now.
            let _ = check(&Op::Remove { path: &tmp }).and_then(|()| fs::remove_file(&tmp));
        } else if !renamed {
            check(&Op::Rename {
                from: &tmp,
                to: dest,
            })
            .and_then(|()| fs::rename(&tmp, dest))
            .map_err(|e| io_err("renaming the new file into place", dest, e, false))?;
        }
        let dir = parent_dir(dest);
        check(&Op::SyncDir { path: &dir })
            .and_then(|()| crate::file::sync_dir(&dir))
            .map_err(|e| io_err("fsync of the directory", &dir, e, true))
    }

    /// Gives the file the name `dest` (replacing a file there) without making
    /// anything durable: for a file whose durable copy is elsewhere (a store staged
    /// for an upload). The file is closed; on an error it is still at its
    /// temporary path.
    pub fn rename_unsynced(self, dest: &Path) -> io::Result<()> {
        drop(self.file);
        check(&Op::Rename {
            from: &self.path,
            to: dest,
        })
        .and_then(|()| fs::rename(&self.path, dest))
    }

    /// Closes and removes the temporary file.
    pub fn discard(self) {
        drop(self.file);
        let _ = check(&Op::Remove { path: &self.path }).and_then(|()| fs::remove_file(&self.path));
    }
}

/// The directory holding `path` (`.` for a bare file name).
pub fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

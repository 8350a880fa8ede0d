//! A test seam for the write path: every file-system operation of [`crate::publish`]
//! is shown to the hooks installed here before it runs, and a hook may fail it with
//! an error of its choice (ENOSPC in a write, EIO in an fsync or a rename) or record
//! it (a power-loss model replays only what was made durable).
//!
//! Hooks apply to paths under the directory they were installed for, so tests in
//! parallel threads do not see each other's operations. With no hook installed the
//! cost is one atomic load per operation.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// One operation on the way to a published store.
#[derive(Debug)]
#[non_exhaustive]
pub enum Op<'a> {
    /// Create a new, empty file.
    Create { path: &'a Path },
    /// Write `data` at `offset` into the file at `path`.
    Write {
        path: &'a Path,
        offset: u64,
        data: &'a [u8],
    },
    /// Make the file's data and size durable (`fsync`).
    Sync { path: &'a Path },
    /// Give the file at `from` a second name `to` (fails if `to` exists).
    Link { from: &'a Path, to: &'a Path },
    /// Move `from` to `to`: replacing `to`, or (where hard links are refused and the
    /// publication must not replace) only if `to` does not exist.
    Rename { from: &'a Path, to: &'a Path },
    /// Remove the name `path`.
    Remove { path: &'a Path },
    /// Make the names in directory `path` durable (`fsync` of the directory).
    SyncDir { path: &'a Path },
}

impl Op<'_> {
    /// The path the operation is about (its source for links and renames).
    pub fn path(&self) -> &Path {
        match *self {
            Op::Create { path }
            | Op::Write { path, .. }
            | Op::Sync { path }
            | Op::Remove { path }
            | Op::SyncDir { path } => path,
            Op::Link { from, .. } | Op::Rename { from, .. } => from,
        }
    }
}

/// Sees each operation before it runs; `Some(error)` fails it (nothing is done).
pub type Hook = Arc<dyn Fn(&Op<'_>) -> Option<io::Error> + Send + Sync>;

static INSTALLED: AtomicUsize = AtomicUsize::new(0);
static HOOKS: Mutex<Vec<(u64, PathBuf, Hook)>> = Mutex::new(Vec::new());

/// Removes its hook when dropped.
#[must_use = "the hook is removed when the guard is dropped"]
pub struct Installed(u64);

impl Drop for Installed {
    fn drop(&mut self) {
        if let Ok(mut hooks) = HOOKS.lock() {
            hooks.retain(|(id, _, _)| *id != self.0);
            INSTALLED.store(hooks.len(), Ordering::Release);
        }
    }
}

/// Installs `hook` for operations on paths inside `dir`, until the guard is dropped.
pub fn install(dir: &Path, hook: Hook) -> Installed {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    let mut hooks = HOOKS.lock().unwrap_or_else(|p| p.into_inner());
    hooks.push((id, dir.to_path_buf(), hook));
    INSTALLED.store(hooks.len(), Ordering::Release);
    Installed(id)
}

/// Shows `op` to the hooks for its path; the first error one returns fails it.
pub(crate) fn check(op: &Op<'_>) -> io::Result<()> {
    if INSTALLED.load(Ordering::Acquire) == 0 {
        return Ok(());
    }
    let hooks: Vec<Hook> = match HOOKS.lock() {
        Ok(hooks) => hooks
            .iter()
            .filter(|(_, dir, _)| op.path().starts_with(dir))
            .map(|(_, _, h)| Arc::clone(h))
            .collect(),
        Err(_) => return Ok(()),
    };
    match hooks.iter().find_map(|h| h(op)) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Where a read fault can be injected (the read-side seam): `pread` and each
/// io_uring completion of a file's read, and each `io_uring_enter` of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReadSite {
    /// A `pread` of `len` bytes at `offset` is about to run.
    Pread { offset: u64, len: usize },
    /// An io_uring read of `len` bytes at `offset` has completed (`direct`: the file
    /// was opened with O_DIRECT).
    Uring {
        offset: u64,
        len: usize,
        direct: bool,
    },
    /// A batch is about to call `io_uring_enter` to submit and wait.
    Enter,
}

/// What an injected read fault does.
#[derive(Debug)]
#[non_exhaustive]
pub enum ReadFault {
    /// The read (or the enter) fails with this error (EIO, EINTR, EAGAIN, ...).
    Fail(io::Error),
    /// The read returns only this many bytes (at least 1; fewer than asked).
    Short(usize),
}

/// Sees each read of a file it was installed for; `Some(fault)` injects one.
pub type ReadHook = Arc<dyn Fn(&ReadSite) -> Option<ReadFault> + Send + Sync>;

/// A file as the kernel knows it: device and inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FileKey(u64, u64);

static READ_INSTALLED: AtomicUsize = AtomicUsize::new(0);
#[allow(clippy::type_complexity)]
static READ_HOOKS: Mutex<Vec<(u64, FileKey, ReadHook)>> = Mutex::new(Vec::new());

/// Removes its read hook when dropped.
#[must_use = "the hook is removed when the guard is dropped"]
pub struct ReadInstalled(u64);

impl Drop for ReadInstalled {
    fn drop(&mut self) {
        if let Ok(mut hooks) = READ_HOOKS.lock() {
            hooks.retain(|(id, _, _)| *id != self.0);
            READ_INSTALLED.store(hooks.len(), Ordering::Release);
        }
    }
}

#[cfg(unix)]
fn key_of(meta: &std::fs::Metadata) -> FileKey {
    use std::os::unix::fs::MetadataExt;
    FileKey(meta.dev(), meta.ino())
}

#[cfg(not(unix))]
fn key_of(_meta: &std::fs::Metadata) -> FileKey {
    FileKey(0, 0)
}

/// Installs `hook` for reads of the file at `path` (by identity: every descriptor of
/// that file, opened before or after), until the guard is dropped.
pub fn install_read(path: &Path, hook: ReadHook) -> io::Result<ReadInstalled> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let key = key_of(&std::fs::metadata(path)?);
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    let mut hooks = READ_HOOKS.lock().unwrap_or_else(|p| p.into_inner());
    hooks.push((id, key, hook));
    READ_INSTALLED.store(hooks.len(), Ordering::Release);
    Ok(ReadInstalled(id))
}

/// The hooks installed for `file`, if any (one atomic load when none is installed
/// anywhere; an `fstat` otherwise).
pub(crate) fn read_hooks(file: &std::fs::File) -> Option<Vec<ReadHook>> {
    if READ_INSTALLED.load(Ordering::Acquire) == 0 {
        return None;
    }
    let key = key_of(&file.metadata().ok()?);
    let hooks: Vec<ReadHook> = READ_HOOKS
        .lock()
        .ok()?
        .iter()
        .filter(|(_, k, _)| *k == key)
        .map(|(_, _, h)| Arc::clone(h))
        .collect();
    (!hooks.is_empty()).then_some(hooks)
}

/// Shows `site` to `hooks`; the first fault one returns is injected.
pub(crate) fn read_fault(hooks: Option<&[ReadHook]>, site: &ReadSite) -> Option<ReadFault> {
    hooks?.iter().find_map(|h| h(site))
}

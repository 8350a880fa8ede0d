//! What a writer promises about the destination path when the disk fails or the power
//! goes: the path holds the old store, nothing, or the complete new store, never a torn
//! one; a failed step is a clear error and leaves no temporary file behind.
//!
//! Both tests drive a real writer through `zring_platform::faults`, which shows every
//! create, write, fsync, link, rename, remove and directory fsync of publishing to a
//! hook. One hook fails the step of its choice (ENOSPC for writes, EIO otherwise); the
//! other records the steps, and a model of a file system then replays, for a power cut
//! after each step, only what had been made durable (redb's crash-test backend works
//! the same way): file contents survive only up to their last fsync, names only up to
//! the last fsync of their directory (or, in the second view, every name change made).

use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use zring_engine::{Codec, DType, Error, Schema, WriteOptions, Writer};
use zring_platform::{install_fs_hook, FsOp};

/// Writes a small store of `n` records (several chunks, so appends run in parallel
/// tasks) and returns what close said.
fn write_store(path: &Path, n: usize, seed: u8, overwrite: bool) -> Result<u64, Error> {
    let opts = WriteOptions::with_codec(Codec::Zstd)
        .overwrite(overwrite)
        .threads(2)
        .chunk_bytes(8 << 10);
    let mut w = Writer::create(path, Schema::dense(DType::U8, &[256]), opts)?;
    let rows: Vec<u8> = (0..n * 256)
        .map(|i| (i / 7) as u8 ^ seed.wrapping_mul(i as u8))
        .collect();
    for batch in rows.chunks(256 * 64) {
        w.append_dense(batch)?;
    }
    w.close()
}

/// One recorded step, with the bytes of writes.
#[derive(Clone, Debug)]
enum Step {
    Create(PathBuf),
    Write(PathBuf, u64, Vec<u8>),
    Sync(PathBuf),
    Link(PathBuf, PathBuf),
    Rename(PathBuf, PathBuf),
    Remove(PathBuf),
    SyncDir,
}

fn step_of(op: &FsOp<'_>) -> Step {
    match *op {
        FsOp::Create { path } => Step::Create(path.into()),
        FsOp::Write { path, offset, data } => Step::Write(path.into(), offset, data.to_vec()),
        FsOp::Sync { path } => Step::Sync(path.into()),
        FsOp::Link { from, to } => Step::Link(from.into(), to.into()),
        FsOp::Rename { from, to } => Step::Rename(from.into(), to.into()),
        FsOp::Remove { path } => Step::Remove(path.into()),
        FsOp::SyncDir { .. } => Step::SyncDir,
        ref other => panic!("a step this model does not know: {other:?}"),
    }
}

fn record(dir: &Path, run: impl FnOnce()) -> Vec<Step> {
    let steps = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&steps);
    let guard = install_fs_hook(
        dir,
        Arc::new(move |op: &FsOp<'_>| {
            sink.lock().expect("steps").push(step_of(op));
            None
        }),
    );
    run();
    drop(guard);
    let steps = steps.lock().expect("steps").clone();
    steps
}

#[derive(Default, Clone)]
struct Inode {
    written: Vec<u8>,
    durable: Vec<u8>,
}

/// A file system after some steps: what was written, and what a power cut keeps.
#[derive(Default, Clone)]
struct Model {
    inodes: Vec<Inode>,
    names: HashMap<PathBuf, usize>,
    durable_names: HashMap<PathBuf, usize>,
}

impl Model {
    /// A file system where `path` durably holds `bytes`.
    fn with_file(path: &Path, bytes: Vec<u8>) -> Self {
        let mut m = Model::default();
        m.inodes.push(Inode {
            written: bytes.clone(),
            durable: bytes,
        });
        m.names.insert(path.into(), 0);
        m.durable_names.insert(path.into(), 0);
        m
    }

    fn apply(&mut self, step: &Step) {
        match step {
            Step::Create(p) => {
                self.inodes.push(Inode::default());
                self.names.insert(p.clone(), self.inodes.len() - 1);
            }
            Step::Write(p, offset, data) => {
                let file = &mut self.inodes[self.names[p]].written;
                let (at, end) = (*offset as usize, *offset as usize + data.len());
                if file.len() < end {
                    file.resize(end, 0);
                }
                file[at..end].copy_from_slice(data);
            }
            Step::Sync(p) => {
                let inode = &mut self.inodes[self.names[p]];
                inode.durable = inode.written.clone();
            }
            Step::Link(from, to) => {
                let id = self.names[from];
                self.names.insert(to.clone(), id);
            }
            Step::Rename(from, to) => {
                let id = self.names.remove(from).expect("renamed file exists");
                self.names.insert(to.clone(), id);
            }
            Step::Remove(p) => {
                self.names.remove(p);
            }
            Step::SyncDir => self.durable_names = self.names.clone(),
        }
    }

    /// What `path` holds after a power cut now: names as of the last directory fsync
    /// (`all_names`: every name change reached the disk), contents as of each file's
    /// last fsync.
    fn after_power_cut(&self, path: &Path, all_names: bool) -> Option<&[u8]> {
        let names = if all_names {
            &self.names
        } else {
            &self.durable_names
        };
        names.get(path).map(|&id| &self.inodes[id].durable[..])
    }
}

/// Replays `steps` on `start` and checks every power cut; `new` is the finished store.
fn check_every_power_cut(
    start: Model,
    steps: &[Step],
    dest: &Path,
    old: Option<&[u8]>,
    new: &[u8],
) {
    let mut model = start;
    let describe = |b: Option<&[u8]>| match b {
        None => "nothing".to_string(),
        Some(b) if b == new => "the new store".to_string(),
        Some(b) if Some(b) == old => "the old store".to_string(),
        Some(b) => format!(
            "a torn file of {} bytes (new store: {})",
            b.len(),
            new.len()
        ),
    };
    for k in 0..=steps.len() {
        if k > 0 {
            model.apply(&steps[k - 1]);
        }
        for all_names in [false, true] {
            let got = model.after_power_cut(dest, all_names);
            let fine = got.is_none() || got == Some(new) || (old.is_some() && got == old);
            assert!(
                fine,
                "power cut after step {k} of {} ({:?}), names {}: the path holds {}",
                steps.len(),
                steps.get(k.wrapping_sub(1)).map(short),
                if all_names {
                    "all kept"
                } else {
                    "as of the last directory fsync"
                },
                describe(got)
            );
        }
    }
    // Once close has returned, the new store must survive a power cut.
    assert_eq!(
        describe(model.after_power_cut(dest, false)),
        "the new store",
        "after close returned"
    );
}

fn short(s: &Step) -> String {
    match s {
        Step::Write(p, o, d) => format!("write {} bytes at {o} to {}", d.len(), name(p)),
        Step::Create(p) => format!("create {}", name(p)),
        Step::Sync(p) => format!("fsync {}", name(p)),
        Step::Link(a, b) => format!("link {} -> {}", name(a), name(b)),
        Step::Rename(a, b) => format!("rename {} -> {}", name(a), name(b)),
        Step::Remove(p) => format!("remove {}", name(p)),
        Step::SyncDir => "fsync the directory".into(),
    }
}

fn name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

#[test]
fn a_power_cut_at_any_step_leaves_nothing_or_the_complete_new_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dest = dir.path().join("new.zr");
    let steps = record(dir.path(), || {
        write_store(&dest, 500, 1, false).expect("write");
    });
    assert!(
        steps.iter().any(|s| matches!(s, Step::Sync(_))),
        "{steps:?}"
    );
    let new = fs::read(&dest).expect("published");
    check_every_power_cut(Model::default(), &steps, &dest, None, &new);
}

#[test]
fn a_power_cut_while_replacing_leaves_the_old_or_the_complete_new_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dest = dir.path().join("replaced.zr");
    write_store(&dest, 300, 2, false).expect("old store");
    let old = fs::read(&dest).expect("old");
    let steps = record(dir.path(), || {
        write_store(&dest, 500, 3, true).expect("write");
    });
    let new = fs::read(&dest).expect("published");
    assert_ne!(old, new);
    check_every_power_cut(
        Model::with_file(&dest, old.clone()),
        &steps,
        &dest,
        Some(&old),
        &new,
    );
}

fn leftovers(dir: &Path) -> Vec<String> {
    fs::read_dir(dir)
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn a_failure_at_any_step_is_a_clear_error_and_publishes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let probe = dir.path().join("probe.zr");
    let steps = record(dir.path(), || {
        write_store(&probe, 200, 4, false).expect("write");
    });
    fs::remove_file(&probe).expect("clean");
    for (k, step) in steps.iter().enumerate() {
        // Removing the temporary name is clean-up after the store is in place; a
        // failure there is ignored by design (the store is complete).
        if matches!(step, Step::Remove(_)) {
            continue;
        }
        let errno = match step {
            Step::Write(..) => libc::ENOSPC,
            _ => libc::EIO,
        };
        let run = tempfile::tempdir().expect("tempdir");
        let dest = run.path().join("s.zr");
        let seen = Arc::new(Mutex::new(0usize));
        let counter = Arc::clone(&seen);
        let guard = install_fs_hook(
            run.path(),
            Arc::new(move |_op: &FsOp<'_>| {
                let mut n = counter.lock().expect("count");
                *n += 1;
                (*n == k + 1).then(|| io::Error::from_raw_os_error(errno))
            }),
        );
        let result = write_store(&dest, 200, 4, false);
        drop(guard);
        let what = short(step);
        match (step, result) {
            // A file system without hard links: the writer renames instead.
            (Step::Link(..), Ok(_)) => assert!(dest.exists(), "{what}"),
            (
                Step::SyncDir,
                Err(Error::Io {
                    source, what: w, ..
                }),
            ) => {
                // The store is in place; the error says its name may not survive.
                assert_eq!(source.raw_os_error(), Some(errno), "{what}");
                assert!(w.contains("in place"), "{what}: {w}");
                assert!(dest.exists(), "{what}");
            }
            (_, Err(Error::Io { source, path, .. })) => {
                assert_eq!(source.raw_os_error(), Some(errno), "{what}");
                assert!(path.starts_with(run.path()), "{what}: {path:?}");
                assert!(!dest.exists(), "{what}: a store was published");
            }
            (_, other) => panic!("{what}: expected an I/O error, got {other:?}"),
        }
        let left: Vec<String> = leftovers(run.path())
            .into_iter()
            .filter(|n| n != "s.zr")
            .collect();
        assert!(left.is_empty(), "{what}: left behind {left:?}");
    }
}

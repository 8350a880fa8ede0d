//! Fixtures shared by the security tests (`security.rs`, `security_remote.rs`): a
//! small labelled dataset, its manifest read and rewritten, a directory listing, and
//! the typed error of a call that must fail.
#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};

use zring_engine::dataset::{version_path, Manifest};
use zring_engine::Error;

/// A dataset at `root/ds`: one field, `label` (int64), 2 shards of 5 records
/// (`common::label_dataset_of`).
pub fn label_dataset(root: &Path) -> PathBuf {
    crate::common::label_dataset_of(root, 2)
}

/// The dataset's current manifest.
pub fn manifest_of(ds: &Path) -> Manifest {
    Manifest::from_json(&fs::read(ds.join("manifest.json")).expect("read")).expect("parse")
}

/// Writes `m` (whatever it says, with a correct checksum) as the dataset's current
/// manifest and as its version file: what a hostile writer of the directory can do.
pub fn write_manifest(ds: &Path, m: &Manifest) {
    let text = m.to_json();
    fs::write(ds.join("manifest.json"), &text).expect("write manifest");
    fs::write(version_path(ds, m.version), &text).expect("write version");
}

/// Every file and directory under `dir` (symlinks not followed), sorted.
pub fn tree(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in fs::read_dir(&d).expect("list").flatten() {
            let p = e.path();
            if e.file_type().expect("type").is_dir() {
                todo.push(p.clone());
            }
            out.push(p);
        }
    }
    out.sort();
    out
}

#[track_caller]
pub fn expect_err<T>(r: zring_engine::Result<T>, what: &str) -> Error {
    match r {
        Err(e) => e,
        Ok(_) => panic!("{what}: expected an error, got Ok"),
    }
}

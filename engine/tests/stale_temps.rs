#![cfg(unix)]
//! A writer removes the temporary files that earlier writers of the same destination
//! left when their process died, and only those.

use std::path::Path;
use std::time::{Duration, SystemTime};

use zring_engine::{DType, Schema, WriteOptions, Writer};

fn temp(dir: &Path, name: &str, pid: u32, n: u32, age: Duration) -> std::path::PathBuf {
    let p = dir.join(format!(".{name}.{pid}.{n}.zr-tmp"));
    let f = std::fs::File::create(&p).expect("create");
    f.set_modified(SystemTime::now() - age).expect("set mtime");
    p
}

#[test]
fn temp_files_of_dead_writers_are_removed_and_live_ones_kept() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut child = std::process::Command::new("true").spawn().expect("spawn");
    let dead = child.id();
    child.wait().expect("wait");
    let old = Duration::from_secs(3600);
    let stale = temp(dir.path(), "s.zr", dead, 0, old);
    // Kept: a live process's (this one's parent is alive), a dead process's that
    // changed just now, and another destination's.
    let live = temp(
        dir.path(),
        "s.zr",
        std::os::unix::process::parent_id(),
        1,
        old,
    );
    let recent = temp(dir.path(), "s.zr", dead, 2, Duration::ZERO);
    let other = temp(dir.path(), "t.zr", dead, 3, old);
    let path = dir.path().join("s.zr");
    let mut w = Writer::create(
        &path,
        Schema::dense(DType::U8, &[]),
        WriteOptions::default(),
    )
    .expect("create");
    let tmp = w.temp_path().expect("a temporary file").to_path_buf();
    assert!(tmp.exists());
    w.append_dense(&[1, 2, 3]).expect("append");
    w.close().expect("close");
    assert!(!tmp.exists());
    assert!(!stale.exists(), "a dead writer's temporary file was kept");
    for kept in [&live, &recent, &other] {
        assert!(kept.exists(), "{kept:?} was removed");
    }
}

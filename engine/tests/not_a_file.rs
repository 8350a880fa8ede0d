//! A store path that is not a regular file is refused at once with an error naming
//! the path and what it is; a FIFO in particular must not block the open forever.
#![cfg(unix)]

use std::io;
use std::path::Path;

use zring_engine::{Error, ReadOptions, Store};

fn open_err(path: &Path) -> Error {
    match Store::open(path, ReadOptions::default()) {
        Ok(_) => panic!("{} opened as a store", path.display()),
        Err(e) => e,
    }
}

fn assert_refused(path: &Path, kind: io::ErrorKind, what: &str) {
    let err = open_err(path);
    let msg = err.to_string();
    assert!(msg.contains(&path.display().to_string()), "{msg}");
    assert!(msg.contains(what), "{msg}");
    match err {
        Error::Io { source, .. } => assert_eq!(source.kind(), kind, "{msg}"),
        other => panic!("not an I/O error: {other:?}"),
    }
}

#[test]
fn a_directory_a_fifo_and_a_device_are_refused_without_blocking() {
    let dir = tempfile::tempdir().expect("tempdir");
    assert_refused(dir.path(), io::ErrorKind::IsADirectory, "a directory");
    let fifo = dir.path().join("store.zr");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("run mkfifo");
    assert!(made.success(), "mkfifo failed");
    // Runs on a thread so that a regression shows up as a failure, not a hung test.
    let (tx, rx) = std::sync::mpsc::channel();
    let p = fifo.clone();
    std::thread::spawn(move || {
        let _ = tx.send(open_err(&p).to_string());
    });
    let msg = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("opening a FIFO blocked");
    assert!(msg.contains("FIFO"), "{msg}");
    assert_refused(
        Path::new("/dev/null"),
        io::ErrorKind::InvalidInput,
        "character device",
    );
}

//! The `zring` binary's errors a user acts on: usage errors exit 2 and name the flag,
//! paths that cannot be written say why, and an interrupted `pack` leaves no
//! temporary file.
#![cfg(unix)]

use std::path::Path;
use std::process::{Command, Output, Stdio};

fn zring(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_zring"))
        .args(args)
        .output()
        .expect("run zring")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A .npy file of `n` rows of `width` u8 elements.
fn u8_rows_npy(path: &Path, n: usize, width: usize) {
    let data = zring_testkit::data::ramp(n * width, 7);
    zring_testkit::npy::write_npy(path, "|u1", &[n, width], &data).expect("write npy");
}

#[test]
fn usage_errors_exit_2_and_name_the_flag() {
    let dir = tempfile::tempdir().expect("tempdir");
    let npy = dir.path().join("x.npy");
    u8_rows_npy(&npy, 4, 8);
    let out = dir.path().join("x.zr");
    let (npy, out) = (npy.to_str().expect("utf8"), out.to_str().expect("utf8"));
    for (args, flag, words) in [
        (vec!["--level", "99"], "--level", "zstd levels run from"),
        (vec!["--align", "3"], "--align", "power of two"),
        (vec!["--dict", npy], "--dict", "zstd-dict"),
    ] {
        let mut all = vec!["pack", out, "--npy", npy];
        all.extend(args);
        let o = zring(&all);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{all:?}: {err}");
        assert!(err.contains(flag) && err.contains(words), "{all:?}: {err}");
        assert!(!err.contains("..="), "{all:?}: Rust range syntax: {err}");
    }
}

#[test]
fn a_missing_directory_and_a_directory_are_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let npy = dir.path().join("x.npy");
    u8_rows_npy(&npy, 4, 8);
    let npy = npy.to_str().expect("utf8");
    let missing = dir.path().join("nope").join("x.zr");
    let o = zring(&["pack", missing.to_str().expect("utf8"), "--npy", npy]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("directory") && err.contains("nope") && err.contains("does not exist"),
        "{err}"
    );
    assert!(!err.contains("zr-tmp"), "names the temporary file: {err}");
    let o = zring(&["pack", dir.path().to_str().expect("utf8"), "--npy", npy]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("is a directory"), "{err}");
}

#[test]
fn an_interrupted_pack_leaves_no_temporary_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let npy = dir.path().join("big.npy");
    // Big and slow enough (zstd-19) that the signal arrives while it packs.
    u8_rows_npy(&npy, 64 << 10, 1024);
    let out = dir.path().join("big.zr");
    for sig in [libc::SIGINT, libc::SIGTERM] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_zring"))
            .args([
                "pack",
                out.to_str().expect("utf8"),
                "--npy",
                npy.to_str().expect("utf8"),
            ])
            .args(["--level", "19", "--threads", "1", "--batch-bytes", "65536"])
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        // Wait (event-based) until the temporary file exists, then interrupt.
        let started = std::time::Instant::now();
        let tmp_exists = || {
            std::fs::read_dir(dir.path())
                .expect("list")
                .flatten()
                .any(|e| e.file_name().to_string_lossy().ends_with(".zr-tmp"))
        };
        while !tmp_exists() {
            assert!(
                started.elapsed().as_secs() < 120,
                "pack never started writing"
            );
            assert!(
                child.try_wait().expect("poll").is_none(),
                "pack finished too early"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let pid = i32::try_from(child.id()).expect("pid");
        assert_eq!(
            Command::new("kill")
                .arg(format!("-{}", sig))
                .arg(pid.to_string())
                .status()
                .map(|s| s.success())
                .ok(),
            Some(true)
        );
        let status = child.wait().expect("wait");
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(sig), "pack did not die of the signal");
        assert!(!tmp_exists(), "signal {sig} left the temporary file");
        assert!(!out.exists());
    }
}

#[test]
fn a_fifo_given_as_a_store_or_an_input_fails_at_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("f");
    let made = Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("run mkfifo");
    assert!(made.success());
    let f = fifo.to_str().expect("utf8");
    let out = dir.path().join("o.zr");
    let out = out.to_str().expect("utf8");
    let o2 = dir.path().join("d.bin");
    let o2 = o2.to_str().expect("utf8");
    for args in [
        vec!["info", f],
        vec!["verify", f],
        vec!["train-dict", f, "-o", o2],
        vec!["pack", out, "--npy", f],
    ] {
        // Nobody ever writes to the FIFO: a blocking open would hang; the outer
        // timeout turns that into a failure.
        let mut child = Command::new(env!("CARGO_BIN_EXE_zring"))
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        let started = std::time::Instant::now();
        while child.try_wait().expect("poll").is_none() {
            if started.elapsed().as_secs() > 60 {
                let _ = child.kill();
                panic!("zring {args:?} blocked on a FIFO");
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let o = child.wait_with_output().expect("output");
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains("FIFO") && err.contains(f), "{args:?}: {err}");
    }
}

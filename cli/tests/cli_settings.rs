//! `--read KEY=VALUE`: the engine's rule set, so a bad value gives, on stderr, the
//! message Rust's `ReadOptions` gives (engine/tests/settings.rs) and Python raises
//! (python/tests/test_settings.py); the same table is in all three.
#![cfg(unix)]

use std::process::{Command, Output};

fn zring(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_zring"))
        .args(args)
        .output()
        .expect("run zring")
}

/// Bad settings and the engine's message for each.
const BAD: [(&str, &str, &str); 6] = [
    ("queue_depth", "0", "a whole number from 1 to 256"),
    ("remote.in_flight", "0", "a whole number from 1 to 1024"),
    (
        "remote.in_flight",
        "100000",
        "a whole number from 1 to 1024",
    ),
    ("backend", "disk", "auto, pread, mmap or uring"),
    (
        "remote.cache_bytes",
        "-5",
        "a byte count (e.g. 65536, 64K, 2G)",
    ),
    (
        "threads",
        "-1",
        "a whole number of threads (0: the caller and every pool worker)",
    ),
];

#[test]
fn a_bad_read_setting_is_a_usage_error_with_the_engines_message() {
    let dir = tempfile::tempdir().expect("tempdir");
    let npy = dir.path().join("x.npy");
    let data = zring_testkit::data::ramp(4 * 8, 7);
    zring_testkit::npy::write_npy(&npy, "|u1", &[4, 8], &data).expect("write npy");
    let store = dir.path().join("x.zr");
    let store = store.to_str().expect("utf8");
    let packed = zring(&["pack", store, "--npy", npy.to_str().expect("utf8")]);
    assert!(packed.status.success(), "{packed:?}");
    for (key, value, expected) in BAD {
        let setting = format!("{key}={value}");
        for command in ["verify", "info"] {
            let o = zring(&[command, store, "--read", &setting]);
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(2), "{command} {setting}: {err}");
            assert_eq!(
                err,
                format!(
                    "zring: invalid argument: read setting {key}={value:?}: expected {expected}\n"
                )
            );
        }
    }
    let o = zring(&["verify", store, "--read", "thread=2"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with("zring: invalid argument: no read setting \"thread\" (settings: backend, "),
        "{err}"
    );
}

#[test]
fn good_read_settings_are_used() {
    let dir = tempfile::tempdir().expect("tempdir");
    let npy = dir.path().join("x.npy");
    let data = zring_testkit::data::ramp(4 * 8, 7);
    zring_testkit::npy::write_npy(&npy, "|u1", &[4, 8], &data).expect("write npy");
    let store = dir.path().join("x.zr");
    let store = store.to_str().expect("utf8");
    assert!(
        zring(&["pack", store, "--npy", npy.to_str().expect("utf8")])
            .status
            .success()
    );
    let o = zring(&[
        "verify",
        store,
        "--read",
        "backend=pread",
        "--read",
        "threads=1",
        "--read",
        "queue_depth=8",
    ]);
    assert!(o.status.success(), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stdout).contains("4 records verified"));
}

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
    ("remote.cache_bytes", "-5", "a size (e.g. 65536, 64k, 2G)"),
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

#[test]
fn bench_takes_its_read_flags_and_read_settings_through_the_same_rules() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path().to_str().expect("utf8");
    let tiny = [
        "--count",
        "64",
        "--record-bytes",
        "256",
        "--duration",
        "0.05",
        "--dir",
        d,
    ];
    // Each read flag takes exactly its setting's values: a bad one is refused as
    // `--read KEY=VALUE` refuses it, with the same message after the flag's name.
    for (flag, value, key) in [
        ("--qd", "0", "queue_depth"),
        ("--queue-depth", "0", "queue_depth"),
        ("--queue-depth", "300", "queue_depth"),
        ("--qd", "deep", "queue_depth"),
        ("--threads", "-1", "threads"),
        ("--backend", "disk", "backend"),
    ] {
        let by_flag = zring(&[&["bench", flag, value][..], &tiny[..]].concat());
        let setting = format!("{key}={value}");
        let by_read = zring(&[&["bench", "--read", &setting][..], &tiny[..]].concat());
        assert_eq!(
            by_flag.status.code(),
            Some(2),
            "{flag} {value}: {by_flag:?}"
        );
        assert_eq!(by_read.status.code(), Some(2), "{setting}: {by_read:?}");
        let message = String::from_utf8_lossy(&by_read.stderr);
        let message = message.strip_prefix("zring: ").expect("zring's prefix");
        assert!(
            message.starts_with(&format!("invalid argument: read setting {key}=\"{value}\"")),
            "{message}"
        );
        assert_eq!(
            String::from_utf8_lossy(&by_flag.stderr),
            format!("zring: {flag} {value}: {message}"),
            "the flag's error names the flag, then the message --read gives"
        );
    }
    let read = zring(&[&["bench", "--read", "queue_depth=0"][..], &tiny[..]].concat());
    assert_eq!(
        String::from_utf8_lossy(&read.stderr),
        "zring: invalid argument: read setting queue_depth=\"0\": expected a whole number from 1 to 256\n"
    );
    // Valid settings reach the run and its report, each --read after the flags;
    // the report carries every setting the run used.
    let o = zring(
        &[
            &[
                "bench",
                "--json",
                "--threads",
                "2",
                "--queue-depth",
                "9",
                "--no-verify-checksums",
                "--read",
                "queue_depth=17",
                "--read",
                "threads=1",
                "--read",
                "remote.in_flight=5",
            ][..],
            &tiny[..],
        ]
        .concat(),
    );
    assert!(o.status.success(), "{o:?}");
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    let config = &report["config"];
    assert_eq!(config["queue_depth"], 17);
    assert_eq!(config["threads"], 1);
    assert_eq!(config["read"]["queue_depth"], 17);
    assert_eq!(config["read"]["threads"], 1);
    assert_eq!(config["read"]["verify_checksums"], false);
    assert_eq!(config["read"]["remote"]["in_flight"], 5);
    // The text report shows them too.
    let o = zring(
        &[
            &["bench", "--qd", "12", "--read", "threads=1"][..],
            &tiny[..],
        ]
        .concat(),
    );
    assert!(o.status.success(), "{o:?}");
    let text = String::from_utf8_lossy(&o.stdout);
    let settings = text
        .lines()
        .find_map(|l| l.strip_prefix("settings  "))
        .expect("a settings line");
    let used: serde_json::Value = serde_json::from_str(settings).expect("settings json");
    assert_eq!(used["queue_depth"], 12);
    assert_eq!(used["threads"], 1);
}

//! The promises of docs/security.md, one test each: hostile manifests, dataset
//! directories, store files and object-store answers never crash or hang the
//! reader, never make it read or remove anything outside where it should, and end
//! in a typed error that names the path.
//!
//! Tests marked `#[ignore = "security gap: ..."]` state a promise that does not hold
//! yet (docs/security.md lists them as gaps); `cargo test -- --ignored` shows them
//! failing. The remote promises are in `security_remote.rs`.

mod common;
mod security_support;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use zring_engine::dataset::{collect_garbage, version_path, Dataset, DatasetBuilder, Manifest};
use zring_engine::format;
use zring_engine::{
    DType, Error, ManifestProblem, ReadOptions, RecordCodec, RecordProblem, Schema, Store,
    WriteOptions,
};

/// Set in a child run of this binary (see [`child`]): what the child test should do.
const CHILD_ENV: &str = "ZRING_SECURITY_CHILD";

use security_support::*;

/// Runs test `name` of this binary in a child process with [`CHILD_ENV`] = `arg`,
/// in directory `cwd`; returns its stdout.
fn child(name: &str, arg: &str, cwd: &Path) -> String {
    let out = Command::new(std::env::current_exe().expect("exe"))
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, arg)
        .current_dir(cwd)
        .output()
        .expect("run the child");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "child {name} failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The line the child printed after `RESULT `.
fn child_result(stdout: &str) -> &str {
    stdout
        .lines()
        .find_map(|l| l.split_once("RESULT ").map(|(_, r)| r))
        .unwrap_or_else(|| panic!("no RESULT line in {stdout}"))
}

// ---------------------------------------------------------------------------------
// Manifests: store paths.

#[test]
fn manifest_store_paths_that_leave_the_dataset_are_refused_naming_the_path() {
    let root = tempfile::tempdir().expect("tempdir");
    let ds = label_dataset(root.path());
    let good = manifest_of(&ds);
    // A valid store outside the dataset, where the escaping paths lead: a path that
    // got through would open it rather than fail to find it.
    let outside = root.path().join("x.zr");
    fs::copy(ds.join(&good.shards[0].files[0]), &outside).expect("copy");
    let abs_outside = outside.to_str().expect("utf-8").to_string();
    let bad_paths = [
        "../x.zr",
        "data/../../x.zr",
        "data/../x.zr",
        "./../x.zr",
        "..",
        "/etc/passwd",
        abs_outside.as_str(),
        "",
        ".",
    ];
    for bad in bad_paths {
        let mut m = good.clone();
        m.shards[1].files[0] = bad.to_string();
        write_manifest(&ds, &m);
        for (how, r) in [
            ("open", Dataset::open(&ds, ReadOptions::default()).map(drop)),
            (
                "open_version",
                Dataset::open_version(&ds, m.version, ReadOptions::default()).map(drop),
            ),
            ("gc", collect_garbage(&ds, 1, false).map(drop)),
        ] {
            let err = expect_err(r, bad);
            match &err {
                Error::Manifest { problem, .. } => {
                    let inner = match problem {
                        ManifestProblem::InVersion { problem, .. } => problem.as_ref(),
                        p => p,
                    };
                    assert!(
                        matches!(inner, ManifestProblem::StorePath { shard: 1, path } if path == bad),
                        "{how} {bad:?}: {err:?}"
                    );
                }
                other => panic!("{how} {bad:?}: expected a manifest error, got {other:?}"),
            }
            assert!(
                err.to_string().contains(&format!("{bad:?}")),
                "{how}: the message names the path: {err}"
            );
        }
        // The manifest parser alone refuses it too.
        let err = Manifest::from_json(m.to_json().as_bytes()).expect_err(bad);
        assert!(matches!(err, ManifestProblem::StorePath { .. }), "{err}");
    }
    assert!(outside.exists(), "gc left the outside store alone");
}

#[test]
fn a_url_in_a_local_manifest_is_a_path_inside_the_dataset() {
    let root = tempfile::tempdir().expect("tempdir");
    let ds = label_dataset(root.path());
    let good = manifest_of(&ds);
    let outside = root.path().join("x.zr");
    fs::copy(ds.join(&good.shards[0].files[0]), &outside).expect("copy");
    let file_url = format!("file://{}", outside.display());
    for url in [
        "s3://other-bucket/x.zr",
        "https://example.invalid/x.zr",
        file_url.as_str(),
    ] {
        let mut m = good.clone();
        m.shards[0].files[0] = url.to_string();
        write_manifest(&ds, &m);
        // Never a request (no network here: a request would fail slowly or with a
        // remote error), never the outside file: a local path under the dataset,
        // which does not exist.
        let t = Instant::now();
        let err = expect_err(Dataset::open(&ds, ReadOptions::default()), url);
        assert!(t.elapsed() < Duration::from_secs(10), "{url}: no request");
        match &err {
            Error::Io { path, source, .. } => {
                assert!(path.starts_with(&ds), "{url}: {}", path.display());
                assert_eq!(source.kind(), std::io::ErrorKind::NotFound, "{url}");
            }
            other => panic!("{url}: expected a local not-found error, got {other:?}"),
        }
    }
}

#[test]
fn a_url_in_the_manifest_of_a_dataset_opened_as_the_empty_path_stays_local() {
    let root = tempfile::tempdir().expect("tempdir");
    let ds = label_dataset(root.path());
    let good = manifest_of(&ds);
    let outside = root.path().join("x.zr");
    fs::copy(ds.join(&good.shards[0].files[0]), &outside).expect("copy");
    let mut m = good.clone();
    m.shards[0].files[0] = format!("file://{}", outside.display());
    write_manifest(&ds, &m);
    let out = child("child_opens_the_empty_path", "open", &ds);
    let result = child_result(&out);
    assert!(
        result.starts_with("local-not-found"),
        "the manifest's URL was followed out of the dataset: {result}"
    );
}

/// Child of the test above: opens the dataset at `""` (its working directory).
#[test]
fn child_opens_the_empty_path() {
    if std::env::var(CHILD_ENV).as_deref() != Ok("open") {
        return;
    }
    let result = match Dataset::open("", ReadOptions::default()) {
        Ok(d) => format!("opened {} records", d.len()),
        Err(Error::Io { path, source, .. })
            if source.kind() == std::io::ErrorKind::NotFound && path.is_relative() =>
        {
            format!("local-not-found {}", path.display())
        }
        Err(e) => format!("error {e:?}"),
    };
    println!("RESULT {result}");
}

#[test]
fn field_names_that_would_be_paths_are_refused() {
    let root = tempfile::tempdir().expect("tempdir");
    let ds = label_dataset(root.path());
    let good = manifest_of(&ds);
    for bad in ["../evil", "/abs", "a/b", "..", ".hidden", "a\\b", "é", ""] {
        // In a manifest.
        let mut m = good.clone();
        m.fields[0].name = bad.to_string();
        write_manifest(&ds, &m);
        let err = expect_err(Dataset::open(&ds, ReadOptions::default()), bad);
        assert!(
            matches!(
                &err,
                Error::Manifest {
                    problem: ManifestProblem::Fields(_),
                    ..
                }
            ),
            "{bad:?}: {err:?}"
        );
        // In a new dataset, whose store names hold the field names.
        let dir = root.path().join("new");
        let fields = vec![(bad.to_string(), Schema::dense(DType::I64, &[]))];
        let err = expect_err(DatasetBuilder::create(&dir, fields, false), bad);
        assert!(matches!(err, Error::Schema(_)), "{bad:?}: {err:?}");
    }
    assert_eq!(
        tree(root.path())
            .iter()
            .filter(|p| !p.starts_with(&ds))
            .count(),
        0,
        "nothing created beside the dataset"
    );
}

// ---------------------------------------------------------------------------------
// Symlinks.

/// `err` is the refusal of the store at `inside`, which leads to `target`, out of the
/// dataset `ds`.
#[track_caller]
fn assert_link_out(err: &Error, inside: &Path, target: &Path, ds: &Path) {
    match err {
        Error::LinkOutOfDataset {
            path,
            target: to,
            dataset,
        } => {
            assert_eq!(path, inside, "{err}");
            assert_eq!(to, &fs::canonicalize(target).expect("target"), "{err}");
            assert_eq!(dataset, &fs::canonicalize(ds).expect("dataset"), "{err}");
        }
        other => panic!("expected LinkOutOfDataset, got {other:?}"),
    }
    assert_eq!(err.path(), Some(inside), "{err}");
}

#[test]
fn a_symlink_in_data_leading_out_of_the_dataset_is_refused() {
    let root = tempfile::tempdir().expect("tempdir");
    let ds = label_dataset(root.path());
    let m = manifest_of(&ds);
    let rel = &m.shards[0].files[0];
    let inside = ds.join(rel);
    let outside = root.path().join("elsewhere.zr");
    fs::rename(&inside, &outside).expect("move the store out");
    // An absolute link and a relative one: both resolve outside.
    let relative = Path::new("../..").join("elsewhere.zr");
    for to in [outside.as_path(), relative.as_path()] {
        let _ = fs::remove_file(&inside);
        std::os::unix::fs::symlink(to, &inside).expect("symlink");
        for (how, r) in [
            ("open", Dataset::open(&ds, ReadOptions::default()).map(drop)),
            (
                "open_version",
                Dataset::open_version(&ds, m.version, ReadOptions::default()).map(drop),
            ),
            (
                "an append's check",
                DatasetBuilder::append(&ds).and_then(|b| b.check_links_stay_inside()),
            ),
        ] {
            let err = expect_err(r, how);
            assert_link_out(&err, &inside, &outside, &ds);
        }
    }
    // The store back in place, but `data/` itself a link to a directory outside.
    fs::remove_file(&inside).expect("remove the link");
    let moved = root.path().join("other-disk");
    fs::rename(ds.join("data"), &moved).expect("move data/");
    std::os::unix::fs::symlink(&moved, ds.join("data")).expect("symlink data/");
    fs::rename(&outside, ds.join(rel)).expect("store back");
    let err = expect_err(Dataset::open(&ds, ReadOptions::default()), "linked data/");
    assert_link_out(
        &err,
        &inside,
        &moved.join(Path::new(rel).strip_prefix("data").expect("data/")),
        &ds,
    );
}

#[test]
fn a_symlink_in_data_staying_inside_the_dataset_still_opens() {
    let root = tempfile::tempdir().expect("tempdir");
    let ds = label_dataset(root.path());
    let m = manifest_of(&ds);
    let rel = &m.shards[1].files[0];
    let inside = ds.join(rel);
    fs::create_dir(ds.join("kept")).expect("mkdir");
    fs::rename(&inside, ds.join("kept/s.zr")).expect("move inside");
    std::os::unix::fs::symlink("../kept/s.zr", &inside).expect("symlink");
    // Opened through a link to the dataset directory too: the root is resolved.
    let via = root.path().join("via");
    std::os::unix::fs::symlink(&ds, &via).expect("symlink the dataset");
    for dir in [&ds, &via] {
        let opened = Dataset::open(dir, ReadOptions::default()).expect("open");
        assert_eq!(common::labels_at(&opened, &[9, 0, 5]), vec![9, 0, 5]);
        opened.verify().expect("verify");
        // The store keeps its name in the dataset.
        assert_eq!(opened.store_paths()[1], dir.join(rel));
        DatasetBuilder::append(dir)
            .and_then(|b| b.check_links_stay_inside())
            .expect("an append's check passes links that stay inside");
    }
    // A link inside to something that is not a store: an error naming the store.
    fs::remove_file(&inside).expect("remove");
    std::os::unix::fs::symlink("../manifest.json", &inside).expect("symlink");
    let err = expect_err(Dataset::open(&ds, ReadOptions::default()), "a manifest");
    assert!(matches!(err, Error::Corrupt { .. }), "{err:?}");
    assert_eq!(err.path(), Some(inside.as_path()), "{err}");
}

#[test]
fn follow_links_out_opens_stores_linked_in_from_elsewhere() {
    let root = tempfile::tempdir().expect("tempdir");
    let ds = label_dataset(root.path());
    let m = manifest_of(&ds);
    let shared = root.path().join("shared");
    fs::create_dir(&shared).expect("mkdir");
    for (s, shard) in m.shards.iter().enumerate() {
        let inside = ds.join(&shard.files[0]);
        let out = shared.join(format!("{s}.zr"));
        fs::rename(&inside, &out).expect("move out");
        std::os::unix::fs::symlink(&out, &inside).expect("symlink");
    }
    let refused = expect_err(Dataset::open(&ds, ReadOptions::default()), "default");
    assert!(
        matches!(refused, Error::LinkOutOfDataset { .. }),
        "{refused:?}"
    );
    // By the field and by its name as text (what Python and the CLI give).
    let mut by_name = ReadOptions::default();
    by_name.set("follow_links_out", "true").expect("set");
    for opts in [ReadOptions::default().follow_links_out(true), by_name] {
        let opened = Dataset::open(&ds, opts.clone()).expect("open with the option");
        assert_eq!(
            common::labels_at(&opened, &(0..10).rev().collect::<Vec<_>>()),
            (0..10).rev().collect::<Vec<i64>>()
        );
        opened.verify().expect("verify");
        let again = Dataset::open_version(&ds, m.version, opts).expect("open_version");
        assert_eq!(common::labels_at(&again, &[7]), vec![7]);
    }
}

#[test]
fn a_symlink_in_data_to_a_non_store_is_a_typed_error_naming_it() {
    let root = tempfile::tempdir().expect("tempdir");
    let ds = label_dataset(root.path());
    let m = manifest_of(&ds);
    let inside = ds.join(&m.shards[0].files[0]);
    for target in ["/etc/passwd", "/dev/zero", "/nonexistent/x.zr", "/"] {
        fs::remove_file(&inside).expect("remove");
        std::os::unix::fs::symlink(target, &inside).expect("symlink");
        let t = Instant::now();
        let err = expect_err(Dataset::open(&ds, ReadOptions::default()), target);
        assert!(t.elapsed() < Duration::from_secs(10), "{target}: no hang");
        assert_eq!(err.path(), Some(inside.as_path()), "{target}: {err}");
    }
}

// ---------------------------------------------------------------------------------
// Garbage collection.

#[test]
fn gc_removes_nothing_outside_the_dataset_and_only_unlinks_symlinks() {
    let root = tempfile::tempdir().expect("tempdir");
    let ds = label_dataset(root.path());
    let outside = root.path().join("outside");
    fs::create_dir(&outside).expect("mkdir");
    // Victims outside, named like what gc removes.
    let victims = [
        "v000001-000000-0123456789abcdef.label.zr",
        "v1-0.zr",
        "0000000001.json",
        ".x.1.0.zr-tmp",
    ];
    for v in victims {
        fs::write(outside.join(v), b"victim").expect("victim");
    }
    // Links inside the dataset, named like garbage, pointing at them.
    let link = |at: PathBuf, to: &str| {
        std::os::unix::fs::symlink(outside.join(to), at).expect("symlink");
    };
    link(ds.join("data/v000001-000099.label.zr"), victims[0]);
    link(ds.join("data/v1-7.zr"), victims[1]);
    link(ds.join("manifests/0000000002.json"), victims[2]);
    // Orphans inside, which gc does remove: it ran.
    fs::write(ds.join("data/v000001-000077.label.zr"), b"orphan").expect("orphan");
    // The current version moves to 3, so versions 1 and 2 are old.
    let mut m = manifest_of(&ds);
    m.version = 3;
    write_manifest(&ds, &m);
    let report = collect_garbage(&ds, 1, false).expect("gc");
    assert!(
        report
            .stores
            .contains(&ds.join("data/v000001-000077.label.zr")),
        "{report:?}"
    );
    for p in report
        .stores
        .iter()
        .chain(&report.manifests)
        .chain(&report.temps)
    {
        assert!(p.starts_with(&ds), "gc removed {}", p.display());
    }
    for v in victims {
        assert_eq!(
            fs::read(outside.join(v)).expect("the victim survives"),
            b"victim",
            "{v}"
        );
    }
    // The dataset still opens.
    assert_eq!(
        Dataset::open(&ds, ReadOptions::default())
            .expect("open")
            .len(),
        10
    );
}

/// A dataset whose `dir_name` (`data` or `manifests`) is a symlink to `outside`
/// holding a victim file named like garbage; returns the victim's path.
fn gc_through_a_symlinked_dir(dir_name: &str, victim: &str) -> (tempfile::TempDir, PathBuf) {
    let root = tempfile::tempdir().expect("tempdir");
    let ds = label_dataset(root.path());
    let outside = root.path().join("outside");
    fs::create_dir(&outside).expect("mkdir");
    // The directory's own files move along with it, so the dataset stays readable.
    for e in fs::read_dir(ds.join(dir_name)).expect("list").flatten() {
        fs::rename(e.path(), outside.join(e.file_name())).expect("move");
    }
    fs::remove_dir(ds.join(dir_name)).expect("rmdir");
    std::os::unix::fs::symlink(&outside, ds.join(dir_name)).expect("symlink");
    fs::write(outside.join(victim), b"victim").expect("victim");
    let mut m = manifest_of(&ds);
    m.version = 5;
    write_manifest(&ds, &m);
    // Refused, naming the link, before anything is removed.
    let err = collect_garbage(&ds, 1, false).expect_err("gc through a symlink");
    assert!(
        matches!(&err, Error::Io { path, source, .. }
            if path == &ds.join(dir_name) && source.kind() == std::io::ErrorKind::InvalidInput),
        "{err:?}"
    );
    assert!(err.to_string().contains("symbolic link"), "{err}");
    let path = outside.join(victim);
    (root, path)
}

#[test]
fn gc_does_not_remove_through_a_symlinked_data_directory() {
    let (_root, victim) = gc_through_a_symlinked_dir("data", "v000001-victim.zr");
    assert!(victim.exists(), "gc removed {}", victim.display());
}

#[test]
fn gc_does_not_remove_through_a_symlinked_manifests_directory() {
    let (_root, victim) = gc_through_a_symlinked_dir("manifests", "0000000001.json");
    assert!(victim.exists(), "gc removed {}", victim.display());
}

// ---------------------------------------------------------------------------------
// JSON bombs.

/// A manifest file around `body` (JSON text), with a checksum that cannot match.
fn file_around(body: &str) -> String {
    format!("{{\"checksum\": \"0000000000000000\", \"manifest\": {body}}}")
}

#[test]
fn json_bombs_in_a_manifest_are_refused_quickly() {
    let deep_arrays = "[".repeat(100_000) + &"]".repeat(100_000);
    let deep_objects = "{\"a\":".repeat(100_000) + "1" + &"}".repeat(100_000);
    let digits = format!("1{}", "0".repeat(400));
    let cases = [
        ("100k nested arrays", file_around(&deep_arrays)),
        ("100k nested objects", file_around(&deep_objects)),
        // The whole file nested, not just the manifest value.
        ("nested file", deep_arrays.clone()),
        ("10^400 as an integer", file_around(&digits)),
        ("10^400 as a float", file_around("1e400")),
        (
            "10^400 version",
            file_around(&format!(
                "{{\"format\": \"zring-dataset\", \"version\": {digits}}}"
            )),
        ),
        ("a lone surrogate", file_around("\"\\ud800\"")),
        ("an unterminated string", file_around("\"abc")),
        ("NUL bytes", "\0".repeat(1000)),
        (
            "not UTF-8",
            String::from_utf8_lossy(&[0xff; 64]).into_owned(),
        ),
    ];
    let root = tempfile::tempdir().expect("tempdir");
    let ds = label_dataset(root.path());
    for (what, text) in cases {
        let t = Instant::now();
        let err = Manifest::from_json(text.as_bytes()).expect_err(what);
        println!("{what}: {err}");
        fs::write(ds.join("manifest.json"), &text).expect("write");
        let err = expect_err(Dataset::open(&ds, ReadOptions::default()), what);
        assert!(
            matches!(err, Error::Manifest { .. }),
            "{what}: a manifest error, got {err:?}"
        );
        assert_eq!(err.path(), Some(ds.as_path()), "{what}");
        assert!(t.elapsed() < Duration::from_secs(10), "{what}: quickly");
    }
}

#[test]
fn a_manifest_past_the_size_limit_is_refused_before_it_is_read() {
    const LIMIT: u64 = 1 << 30;
    let root = tempfile::tempdir().expect("tempdir");
    let ds = label_dataset(root.path());
    let current = manifest_of(&ds).version;
    // Sparse: no disk, and a reader that read it would take seconds and a GiB.
    let sparse = |path: &Path| {
        let f = fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .open(path)
            .expect("open");
        f.set_len(LIMIT + 1).expect("set_len");
    };
    let too_large = |err: &Error| {
        let problem = match err {
            Error::Manifest { problem, .. } => problem,
            _ => return false,
        };
        matches!(problem, ManifestProblem::TooLarge { bytes } if *bytes == LIMIT + 1)
    };
    // The next version, which a reader follows from the current one.
    let next = version_path(&ds, current + 1);
    sparse(&next);
    let t = Instant::now();
    let err = expect_err(Dataset::open(&ds, ReadOptions::default()), "next version");
    assert!(too_large(&err), "{err:?}");
    assert_eq!(err.path(), Some(next.as_path()));
    let err = expect_err(collect_garbage(&ds, 1, false), "gc");
    assert!(too_large(&err), "{err:?}");
    fs::remove_file(&next).expect("rm");
    // An exact version.
    let exact = version_path(&ds, current);
    sparse(&exact);
    let err = expect_err(
        Dataset::open_version(&ds, current, ReadOptions::default()),
        "version",
    );
    assert!(too_large(&err), "{err:?}");
    assert_eq!(err.path(), Some(exact.as_path()));
    // The current manifest itself, with no version files to fall back on (with
    // them, a reader that cannot read the pointer starts from version 1).
    fs::remove_file(&exact).expect("rm");
    sparse(&ds.join("manifest.json"));
    let err = expect_err(Dataset::open(&ds, ReadOptions::default()), "manifest");
    assert!(too_large(&err), "{err:?}");
    assert!(t.elapsed() < Duration::from_secs(10), "refused unread");
}

#[test]
fn json_bombs_in_a_store_schema_are_refused_at_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("s.zr");
    let data = common::dense_records(8, 8, 1, |_| false);
    common::write_dense(
        &path,
        &Schema::dense(DType::U8, &[8]),
        WriteOptions::default(),
        &data,
        1,
    )
    .expect("write");
    let bytes = fs::read(&path).expect("read");
    let deep = "[".repeat(100_000) + &"]".repeat(100_000);
    let deep_meta = format!(
        "{{\"dtype\":\"uint8\",\"layout\":\"dense\",\"item_shape\":[8],\"metadata\":{{\"a\":{deep}}}}}"
    );
    let huge_dim = format!(
        "{{\"dtype\":\"uint8\",\"layout\":\"dense\",\"item_shape\":[1{}]}}",
        "0".repeat(400)
    );
    for (what, json) in [
        ("nested", deep.clone()),
        ("nested metadata", deep_meta),
        ("10^400 dimension", huge_dim),
    ] {
        let hostile = dir.path().join("hostile.zr");
        common::put(&hostile, &common::replace_schema(&bytes, json.as_bytes()));
        let t = Instant::now();
        let err = expect_err(Store::open(&hostile, ReadOptions::default()), what);
        println!("{what}: {err}");
        assert_eq!(err.path(), Some(hostile.as_path()), "{what}: {err:?}");
        assert!(t.elapsed() < Duration::from_secs(10), "{what}: quickly");
    }
}

// ---------------------------------------------------------------------------------
// Decompression bombs.

/// A zstd frame header declaring `content` bytes (8-byte size field, a window
/// descriptor), then an empty last raw block: a few bytes that claim any size.
fn frame_claiming(content: u64) -> Vec<u8> {
    let mut frame = vec![0x28, 0xB5, 0x2F, 0xFD, 0xC0, 0x00];
    frame.extend_from_slice(&content.to_le_bytes());
    frame.extend_from_slice(&[0x01, 0x00, 0x00]);
    frame
}

/// A ragged u8 zstd store with record `index`'s stored bytes replaced by `frame`,
/// and (when `logical` is given) its shape and entry claiming `logical` bytes; every
/// checksum recomputed so reads reach the decoder.
fn store_with_frame(dir: &Path, frame: &[u8], logical: Option<u32>) -> (PathBuf, u64) {
    let path = dir.join(format!("bomb-{}.zr", logical.unwrap_or(0)));
    let r = common::ragged_records(8, 1, DType::U8, 400, 5);
    common::write_ragged(
        &path,
        DType::U8,
        WriteOptions::with_codec(zring_engine::Codec::Zstd),
        &r,
        1,
    )
    .expect("write");
    let mut bytes = fs::read(&path).expect("read");
    let index = (0..8u64)
        .find(|&i| common::entry_of(&bytes, i).stored_len as usize >= frame.len())
        .expect("a record with room for the frame");
    let e = common::entry_of(&bytes, index);
    let at = e.offset as usize;
    bytes[at..at + frame.len()].copy_from_slice(frame);
    if let Some(claim) = logical {
        let f = common::footer_of(&bytes);
        let shape = format::shape_range(f.shapes, 1, index);
        bytes[shape.start as usize..shape.end as usize].copy_from_slice(&claim.to_le_bytes());
    }
    common::patch_entry(&mut bytes, index, |e| {
        e.codec = RecordCodec::Zstd;
        e.stored_len = frame.len() as u32;
        if let Some(claim) = logical {
            e.logical_len = claim;
        }
        e.checksum = format::checksum(frame);
    });
    common::put(&path, &bytes);
    (path, index)
}

#[test]
fn a_frame_claiming_more_than_its_entry_is_refused_without_allocating_the_claim() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, index) = store_with_frame(dir.path(), &frame_claiming(1 << 60), None);
    let store = Store::open(&path, ReadOptions::default()).expect("open");
    let t = Instant::now();
    let is_record = |e: &Error| matches!(e, Error::CorruptRecord { index: i, path: p, .. } if *i == index && *p == path);
    let err = expect_err(store.get(index), "get");
    assert!(is_record(&err), "{err:?}");
    let err = expect_err(store.verify(), "verify");
    assert!(
        matches!(
            &err,
            Error::CorruptRecord {
                problem: RecordProblem::FrameSize {
                    declared: Some(d),
                    ..
                },
                ..
            } if *d == 1 << 60
        ),
        "{err:?}"
    );
    let err = expect_err(store.gather_ragged(&[index, 0]), "gather");
    assert!(is_record(&err), "{err:?}");
    assert!(t.elapsed() < Duration::from_secs(10));
    // The other records read.
    let other = (index + 1) % 8;
    store.get(other).expect("a neighbour reads");
}

/// The peak resident memory of this process, in bytes.
fn max_rss() -> u64 {
    // SAFETY: rusage is plain integers, for which all zeroes is a value.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid rusage to fill; RUSAGE_SELF is a valid target.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    assert_eq!(rc, 0);
    u.ru_maxrss as u64 * 1024
}

/// A record claiming 1 GiB (entry, shape and frame agree) whose frame holds nothing:
/// reading it must fail without touching the claimed GiB. Run in a child (`mode` =
/// `get` or `verify`) so the peak memory is its own.
fn bomb_peak(mode: &str) -> (String, u64) {
    let dir = tempfile::tempdir().expect("tempdir");
    const CLAIM: u32 = 1 << 30;
    let (path, index) =
        store_with_frame(dir.path(), &frame_claiming(u64::from(CLAIM)), Some(CLAIM));
    let arg = format!("{mode}:{index}:{}", path.display());
    let out = child("child_reads_a_bomb", &arg, dir.path());
    let result = child_result(&out).to_string();
    let (result, peak) = result.rsplit_once(" peak=").expect("peak");
    (result.to_string(), peak.parse().expect("number"))
}

#[test]
fn child_reads_a_bomb() {
    let Ok(arg) = std::env::var(CHILD_ENV) else {
        return;
    };
    let mut parts = arg.splitn(3, ':');
    let (Some(mode), Some(index), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
        return;
    };
    let index: u64 = index.parse().expect("index");
    let store = Store::open(path, ReadOptions::default()).expect("open");
    let before = max_rss();
    let r = match mode {
        "get" => store.get(index).map(drop),
        _ => store.verify(),
    };
    let grew = max_rss().saturating_sub(before);
    let result = match r {
        Ok(()) => "ok".to_string(),
        Err(e) => format!("error {e}"),
    };
    println!("RESULT {result} peak={grew}");
}

#[test]
fn a_record_claiming_a_gib_fails_its_get_without_touching_the_gib() {
    let (result, grew) = bomb_peak("get");
    assert!(result.starts_with("error "), "{result}");
    assert!(grew < 256 << 20, "get touched {grew} bytes: {result}");
}

#[test]
fn a_record_claiming_a_gib_fails_verify_without_touching_the_gib() {
    let (result, grew) = bomb_peak("verify");
    assert!(result.starts_with("error "), "{result}");
    assert!(grew < 256 << 20, "verify touched {grew} bytes: {result}");
}

//! Stores written to URLs: built in a staging directory and uploaded as one object
//! (a single PUT, or past one part a multipart upload whose parts go up while the
//! store is written), complete or not at all; an existing object is refused without `overwrite`; the staging directory is
//! gone afterwards, whatever happened. `file://` URLs go through object_store's
//! local backend, multipart included (tests/remote.rs and the Python suite use an
//! S3-compatible server).

// Built with the `remote` feature only (`cargo test -p zring-engine --features remote`).
#![cfg(feature = "remote")]

mod common;

use std::path::{Path, PathBuf};

use zring_engine::{Codec, DType, Error, ReadOptions, Schema, Store, WriteOptions, Writer};

fn raw() -> WriteOptions {
    WriteOptions::with_codec(Codec::Raw)
}

/// The staging directory of a writer to a URL (where its temporary file is).
fn staging_dir(w: &Writer) -> PathBuf {
    let tmp = w.temp_path().expect("a temporary file");
    let dir = tmp.parent().expect("in a directory").to_path_buf();
    assert!(
        dir.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("zring-upload.")),
        "{dir:?}"
    );
    dir
}

/// Writes `data` as a store at `url` in two appends; returns the staging directory.
fn write(
    url: &str,
    schema: &Schema,
    opts: WriteOptions,
    data: &[u8],
) -> zring_engine::Result<PathBuf> {
    let width = schema.item_bytes().expect("dense") as usize;
    let mut w = Writer::create(url, schema.clone(), opts)?;
    let stage = staging_dir(&w);
    let half = data.len() / width / 2 * width;
    w.append_dense(&data[..half])?;
    w.append_dense(&data[half..])?;
    w.close()?;
    Ok(stage)
}

fn url_of(path: &Path) -> String {
    format!("file://{}", path.display())
}

fn check_reads_back(url: &str, data: &[u8], width: usize) {
    let store = Store::open(url, ReadOptions::default()).expect("open the uploaded store");
    let n = data.len() / width;
    assert_eq!(store.len(), n as u64);
    let idx: Vec<u64> = (0..n as u64).rev().step_by(7).collect();
    let got = store.gather_vec(&idx).expect("gather");
    for (k, &i) in idx.iter().enumerate() {
        let i = i as usize;
        assert_eq!(
            &got[k * width..(k + 1) * width],
            &data[i * width..(i + 1) * width]
        );
    }
    store.verify().expect("every checksum");
}

#[test]
fn a_store_larger_than_a_part_uploads_in_parts_and_reads_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let width = 64 << 10;
    // 20 MiB of noise: three 8 MiB parts, the last one short.
    let data = common::dense_records(320, width, 3, |_| true);
    let schema = Schema::dense(DType::U8, &[width as u64]);
    let url = url_of(&dir.path().join("big.zr"));
    let stage = write(&url, &schema, raw(), &data).expect("write");
    assert!(dir.path().join("big.zr").is_file());
    check_reads_back(&url, &data, width);
    assert!(!stage.exists(), "the staging directory is removed");
}

/// Bytes under `dir` in files whose names start with `prefix`.
fn bytes_named(dir: &Path, prefix: &str) -> u64 {
    std::fs::read_dir(dir)
        .expect("list")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
        .map(|e| e.metadata().map_or(0, |m| m.len()))
        .sum()
}

/// Puts another writer's object at `path` (a store file behind a `file://` URL),
/// then closes `w`, which was writing the same URL without `overwrite`: the close is
/// refused and the other object is left as it was.
fn close_beside_another(w: Writer, path: &Path) {
    std::fs::write(path, b"someone else's").expect("write");
    match w.close() {
        Err(Error::AlreadyExists { .. }) => {}
        other => panic!("expected AlreadyExists, got {other:?}"),
    }
    assert_eq!(std::fs::read(path).expect("read"), b"someone else's");
}

/// Waits (up to 20 s) until the multipart upload to `<dir>/<name>` holds `bytes`:
/// object_store's local backend writes the parts of an upload in progress into
/// `<name>#<upload id>` beside the object.
fn wait_for_parts(dir: &Path, name: &str, bytes: u64) {
    let prefix = format!("{name}#");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while bytes_named(dir, &prefix) < bytes {
        assert!(
            std::time::Instant::now() < deadline,
            "the parts of {name} did not go up before close ({} bytes)",
            bytes_named(dir, &prefix)
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn parts_go_up_while_the_store_is_written_and_an_abandoned_upload_leaves_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let width = 64 << 10;
    // 20 MiB of noise: after one append two whole 8 MiB parts are final.
    let data = common::dense_records(320, width, 6, |_| true);
    let schema = Schema::dense(DType::U8, &[width as u64]);
    let url = url_of(&dir.path().join("streamed.zr"));
    let mut w = Writer::create(&url, schema.clone(), raw()).expect("create");
    w.append_dense(&data).expect("append");
    wait_for_parts(dir.path(), "streamed.zr", 16 << 20);
    assert!(
        !dir.path().join("streamed.zr").exists(),
        "nothing is visible before close"
    );
    w.close().expect("close");
    check_reads_back(&url, &data, width);
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .expect("list")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(names, ["streamed.zr"], "only the object is left");

    // A writer dropped (or failed) after parts went up aborts the upload.
    let url = url_of(&dir.path().join("dropped.zr"));
    let mut w = Writer::create(&url, schema, raw()).expect("create");
    w.append_dense(&data).expect("append");
    wait_for_parts(dir.path(), "dropped.zr", 16 << 20);
    drop(w);
    assert_eq!(bytes_named(dir.path(), "dropped.zr"), 0);
    assert!(
        std::fs::read_dir(dir.path())
            .expect("list")
            .flatten()
            .all(|e| !e.file_name().to_string_lossy().starts_with("dropped.zr")),
        "the aborted upload leaves no file"
    );
}

#[test]
fn a_large_append_to_a_url_is_written_in_runs_into_the_same_bytes_as_a_local_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    // ~24 MiB of 2-d ragged records in one append: the writer to a URL writes it a
    // run of about one part at a time (sending the parts between runs); the store
    // must be byte for byte the one a local writer makes of the same append.
    let r = common::ragged_records(4_500, 2, DType::F32, 1_400, 11);
    assert!(r.values.len() > 20 << 20, "{}", r.values.len());
    let local = dir.path().join("local.zr");
    common::write_ragged(&local, DType::F32, WriteOptions::default(), &r, 1).expect("local");
    let remote = dir.path().join("remote.zr");
    let url = url_of(&remote);
    common::write_ragged(Path::new(&url), DType::F32, WriteOptions::default(), &r, 1)
        .expect("to the URL");
    assert!(
        std::fs::read(&local).expect("read") == std::fs::read(&remote).expect("read"),
        "the uploaded store differs from the local one"
    );
    let store = Store::open(&url, ReadOptions::default()).expect("open");
    assert_eq!(store.len(), r.len() as u64);
    store.verify().expect("every checksum");
}

#[test]
fn a_small_store_is_one_put_and_an_existing_object_is_refused_without_overwrite() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = common::dense_records(100, 24, 4, |i| i % 3 == 0);
    let schema = Schema::dense(DType::U8, &[24]);
    let url = url_of(&dir.path().join("small.zr"));
    let stage = write(&url, &schema, WriteOptions::default(), &data).expect("write");
    check_reads_back(&url, &data, 24);
    assert!(!stage.exists());

    // Refused at create, before anything is written.
    match Writer::create(&url, schema.clone(), WriteOptions::default()) {
        Err(Error::AlreadyExists { path }) => assert_eq!(path, Path::new(&url)),
        other => panic!("expected AlreadyExists, got {other:?}"),
    }
    // An object that appears while the store is written is not replaced either.
    let late = url_of(&dir.path().join("late.zr"));
    let mut w = Writer::create(&late, schema.clone(), WriteOptions::default()).expect("create");
    w.append_dense(&data).expect("append");
    close_beside_another(w, &dir.path().join("late.zr"));

    // The same for a multipart upload (parts already sent): checked just before its
    // completion, and the parts are aborted.
    let width = 64 << 10;
    let big = common::dense_records(200, width, 9, |_| true);
    let wide = Schema::dense(DType::U8, &[width as u64]);
    let late_big = url_of(&dir.path().join("late-big.zr"));
    let mut w = Writer::create(&late_big, wide, raw()).expect("create");
    w.append_dense(&big).expect("append");
    wait_for_parts(dir.path(), "late-big.zr", 8 << 20);
    close_beside_another(w, &dir.path().join("late-big.zr"));
    assert_eq!(
        bytes_named(dir.path(), "late-big.zr#"),
        0,
        "the parts are aborted"
    );

    // With overwrite the object is replaced.
    let other = common::dense_records(50, 24, 5, |_| false);
    let opts = WriteOptions::default().overwrite(true);
    write(&url, &schema, opts, &other).expect("overwrite");
    check_reads_back(&url, &other, 24);
}

#[test]
fn a_failed_upload_publishes_nothing_and_names_the_url() {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = url_of(&dir.path().join("blocker/s.zr"));
    let schema = Schema::dense(DType::U8, &[8]);
    let mut w = Writer::create(&url, schema.clone(), raw()).expect("create (nothing there yet)");
    w.append_dense(&[7u8; 800]).expect("append");
    let stage = staging_dir(&w);
    // The destination's "directory" becomes a file: the upload cannot create the
    // object.
    std::fs::write(dir.path().join("blocker"), b"").expect("write");
    let e = w.close().expect_err("the upload fails");
    assert!(e.to_string().contains(&url), "{e}");
    assert!(std::fs::read(dir.path().join("blocker"))
        .expect("read")
        .is_empty());
    assert!(
        !stage.exists(),
        "the staging directory is removed after a failure too"
    );
    // A destination that cannot be checked is refused at create, naming the URL.
    let e = Writer::create(&url, schema, raw()).expect_err("cannot check the destination");
    assert!(e.to_string().contains(&url), "{e}");
}

/// Adds one shard of 5 labels starting at `first` to `b` (its next shard).
fn add_labels(b: &mut zring_engine::dataset::DatasetBuilder, first: i64) {
    let schema = Schema::dense(DType::I64, &[]);
    let files = b.shard_paths(b.added());
    let mut w = Writer::create(&files[0], schema, WriteOptions::default()).expect("writer");
    let labels: Vec<u8> = (first..first + 5).flat_map(i64::to_le_bytes).collect();
    w.append_dense(&labels).expect("append");
    w.close().expect("close");
    b.add_shard(5).expect("shard");
}

#[test]
fn datasets_are_built_at_a_url_and_one_of_two_writers_publishes_each_version() {
    use zring_engine::dataset::{Dataset, DatasetBuilder};
    use zring_engine::ManifestProblem;
    let dir = tempfile::tempdir().expect("tempdir");
    let url = url_of(&dir.path().join("ds"));
    let fields = vec![("label".to_string(), Schema::dense(DType::I64, &[]))];
    let mut b = DatasetBuilder::create(&url, fields.clone(), false).expect("builder");
    add_labels(&mut b, 0);
    add_labels(&mut b, 5);
    assert_eq!(b.publish().expect("publish").version, 1);
    assert!(dir.path().join("ds/manifests/0000000001.json").is_file());

    // Two writers append to version 1: exactly one publishes version 2.
    let (mut one, mut two) = (
        DatasetBuilder::append(&url).expect("one"),
        DatasetBuilder::append(&url).expect("two"),
    );
    add_labels(&mut one, 10);
    add_labels(&mut two, 100);
    assert_eq!(one.publish().expect("the first publishes").version, 2);
    match two.publish() {
        Err(Error::Manifest { problem, .. }) => {
            assert!(
                matches!(
                    problem,
                    ManifestProblem::Conflict {
                        published: 2,
                        base: 1
                    }
                ),
                "{problem:?}"
            )
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    let ds = Dataset::open(&url, ReadOptions::default()).expect("open");
    assert_eq!((ds.version(), ds.len()), (2, 15));
    assert_eq!(common::labels_at(&ds, &[14, 0, 7]), vec![14, 0, 7]);
    // An existing dataset is refused without overwrite.
    assert!(matches!(
        DatasetBuilder::create(&url, fields, false),
        Err(Error::AlreadyExists { .. })
    ));
}

#[test]
fn gc_at_a_url_removes_old_manifests_and_unnamed_stores_only() {
    use zring_engine::dataset::{collect_garbage, Dataset, DatasetBuilder};
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("ds");
    let url = url_of(&root);
    let fields = vec![("label".to_string(), Schema::dense(DType::I64, &[]))];
    let mut b = DatasetBuilder::create(&url, fields.clone(), false).expect("builder");
    add_labels(&mut b, 0);
    b.publish().expect("v1");
    // Version 2 replaces everything: version 1's store is named by no kept manifest.
    let mut b = DatasetBuilder::create(&url, fields, true).expect("overwrite");
    add_labels(&mut b, 100);
    add_labels(&mut b, 105);
    b.publish().expect("v2");
    // What killed writers left: one built on version 1 (unnamed: goes), one
    // building version 3 (may still publish: stays).
    let data = root.join("data");
    std::fs::write(data.join("v000002-000000-dead.label.zr"), b"x").expect("write");
    std::fs::write(data.join("v000003-000000-busy.label.zr"), b"x").expect("write");

    let dry = collect_garbage(&url, 1, true).expect("dry run");
    assert_eq!((dry.current, dry.kept_versions.clone()), (2, vec![2]));
    assert_eq!(
        dry.manifests,
        vec![PathBuf::from(format!("{url}/manifests/0000000001.json"))]
    );
    assert_eq!(dry.stores.len(), 2, "{:?}", dry.stores);
    assert!(
        root.join("manifests/0000000001.json").exists(),
        "a dry run removes nothing"
    );

    let done = collect_garbage(&url, 1, false).expect("gc");
    assert_eq!(
        (done.manifests.clone(), done.stores.clone()),
        (dry.manifests, dry.stores)
    );
    assert!(!root.join("manifests/0000000001.json").exists());
    assert!(!data.join("v000002-000000-dead.label.zr").exists());
    assert!(data.join("v000003-000000-busy.label.zr").exists());
    let ds = Dataset::open(&url, ReadOptions::default()).expect("open");
    assert_eq!(common::labels_at(&ds, &[0, 9]), vec![100, 109]);
}

/// A store written to a URL is handed to the cache as its whole-object entry once
/// uploaded, so opening it on the same machine downloads nothing; without a cache,
/// or with one too small to keep it whole, nothing is put there and it is fetched.
#[test]
fn a_store_written_to_a_url_is_cached_whole_and_opens_without_a_download() {
    use zring_engine::remote::{CacheOptions, RemoteOptions};

    let dir = tempfile::tempdir().expect("tempdir");
    let width = 64 << 10;
    let data = common::dense_records(320, width, 5, |_| true);
    let schema = Schema::dense(DType::U8, &[width as u64]);
    let entries = |cache: &Path| -> usize {
        walk(cache)
            .iter()
            .filter(|p| p.file_name().is_some_and(|n| n == "object"))
            .count()
    };
    let stats = |url: &str, cache: &Path| {
        let read = RemoteOptions::default().cache(CacheOptions::new(cache, 1 << 30));
        let s = Store::open(url, ReadOptions::default().remote(read)).expect("open");
        let got = s.gather_vec(&[0, 319]).expect("gather");
        assert_eq!(&got[..width], &data[..width]);
        assert_eq!(&got[width..], &data[319 * width..]);
        s.remote_stats().expect("remote stats")
    };
    for (name, bound, seeded) in [
        ("kept.zr", 1u64 << 30, true),
        ("too-big.zr", 20 << 20, false),
    ] {
        let cache = dir.path().join(format!("cache-{name}"));
        let mut opts = raw();
        opts.remote = RemoteOptions::default().cache(CacheOptions::new(&cache, bound));
        let url = url_of(&dir.path().join(name));
        let stage = write(&url, &schema, opts, &data).expect("write");
        assert!(!stage.exists(), "the staging directory is removed");
        assert_eq!(entries(&cache), usize::from(seeded), "{name}");
        if seeded {
            let st = stats(&url, &cache);
            assert_eq!((st.whole_fetches, st.whole_hits), (0, 1), "{name}");
        }
    }
    // The cache switched off for the writer: the first open downloads the store.
    let cache = dir.path().join("cache-off");
    let mut opts = raw();
    opts.remote = RemoteOptions::default().no_cache(true);
    let url = url_of(&dir.path().join("uncached.zr"));
    write(&url, &schema, opts, &data).expect("write");
    let st = stats(&url, &cache);
    assert_eq!((st.whole_fetches, st.whole_hits), (1, 0));
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        match p.is_dir() {
            true => out.extend(walk(&p)),
            false => out.push(p),
        }
    }
    out
}

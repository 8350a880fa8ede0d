//! Datasets: fields x shards read as one, grown by new manifests that earlier
//! readers do not see, and refused when the manifest or a store is damaged.
#![allow(clippy::unwrap_used)]

use std::path::Path;

use zring_engine::dataset::{Dataset, DatasetBuilder, FieldBatch, FieldDest};
use zring_engine::{
    Backend, Codec, DType, Error, ManifestProblem, ReadOptions, Schema, StoreMismatch,
    WriteOptions, Writer,
};

/// Record `i`'s tokens: `i % 7 + 1` int32 values derived from `i`.
fn tokens(i: u64) -> Vec<i32> {
    (0..(i % 7 + 1)).map(|k| (i * 10 + k) as i32).collect()
}
fn pixels(i: u64) -> [u8; 4] {
    [i as u8, (i >> 8) as u8, 3, 4]
}

fn fields() -> Vec<(String, Schema)> {
    vec![
        ("tokens".into(), Schema::ragged(DType::I32, 1)),
        ("pixels".into(), Schema::dense(DType::U8, &[4])),
        ("label".into(), Schema::dense(DType::I64, &[])),
    ]
}

/// Writes records `range` as the next shard of `b`.
fn write_shard(b: &mut DatasetBuilder, range: std::ops::Range<u64>, codec: Codec) {
    let paths = b.shard_paths(b.added());
    let opts = WriteOptions::with_codec(codec);
    let mut t = Writer::create(&paths[0], Schema::ragged(DType::I32, 1), opts.clone()).unwrap();
    let mut p = Writer::create(&paths[1], Schema::dense(DType::U8, &[4]), opts.clone()).unwrap();
    let mut l = Writer::create(&paths[2], Schema::dense(DType::I64, &[]), opts).unwrap();
    let mut values = Vec::new();
    let mut cu = vec![0u64];
    let mut shapes = Vec::new();
    for i in range.clone() {
        let tk = tokens(i);
        values.extend(tk.iter().flat_map(|v| v.to_le_bytes()));
        cu.push(cu.last().unwrap() + tk.len() as u64);
        shapes.push(tk.len() as u32);
    }
    t.append_ragged(&values, &cu, &shapes).unwrap();
    let px: Vec<u8> = range.clone().flat_map(pixels).collect();
    p.append_dense(&px).unwrap();
    let lb: Vec<u8> = range
        .clone()
        .flat_map(|i| (i as i64).to_le_bytes())
        .collect();
    l.append_dense(&lb).unwrap();
    t.close().unwrap();
    p.close().unwrap();
    l.close().unwrap();
    b.add_shard(range.end - range.start).unwrap();
}

fn build(dir: &Path, cuts: &[u64], codec: Codec) {
    let mut b = DatasetBuilder::create(dir, fields(), false).unwrap();
    for w in cuts.windows(2) {
        write_shard(&mut b, w[0]..w[1], codec);
    }
    b.publish().unwrap();
}

fn check_batch(ds: &Dataset, indices: &[u64]) {
    let out = ds.gather_vec(indices, &[0, 1, 2]).unwrap();
    let [FieldBatch::Ragged(tk), FieldBatch::Dense(px), FieldBatch::Dense(lb)] = &out[..] else {
        panic!("unexpected batch kinds");
    };
    assert_eq!(tk.len(), indices.len());
    for (k, &i) in indices.iter().enumerate() {
        let want: Vec<u8> = tokens(i).iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(tk.record(k, 4).unwrap(), &want[..], "tokens of {i}");
        assert_eq!(tk.shapes[k] as usize, tokens(i).len());
        assert_eq!(&px[k * 4..k * 4 + 4], &pixels(i), "pixels of {i}");
        assert_eq!(
            &lb[k * 8..k * 8 + 8],
            &(i as i64).to_le_bytes(),
            "label of {i}"
        );
    }
}

#[test]
fn gathers_every_field_across_shards_with_every_backend() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ds");
    // Shard 1 is empty: global indices skip it.
    build(&path, &[0, 300, 300, 1000, 1001, 5000], Codec::Zstd);
    let indices: Vec<u64> = (0..2000u64)
        .map(|k| (k * 7919) % 5000)
        .chain([0, 4999, 300, 1000])
        .collect();
    for backend in [Backend::Mmap, Backend::Pread, Backend::Uring] {
        let opts = ReadOptions::default()
            .backend(backend)
            .verify_checksums(true);
        let ds = Dataset::open(&path, opts).unwrap();
        assert_eq!((ds.len(), ds.shards(), ds.version()), (5000, 5, 1));
        check_batch(&ds, &indices);
        check_batch(&ds, &indices[..3]);
        check_batch(&ds, &[]);
        assert_eq!(ds.locate(300).unwrap(), (2, 0));
        assert_eq!(ds.locate(1000).unwrap(), (3, 0));
    }
    let ds = Dataset::open(&path, ReadOptions::default()).unwrap();
    ds.verify().unwrap();
    // One field through the store-like view the loader uses.
    let label = ds.field(ds.field_index("label").unwrap()).unwrap();
    let mut out = vec![0u8; 16];
    label.gather(&[4321, 7], &mut out).unwrap();
    assert_eq!(&out[..8], &4321i64.to_le_bytes());
    assert!(matches!(
        ds.gather_vec(&[5000], &[2]),
        Err(Error::IndexOutOfRange {
            index: 5000,
            len: 5000,
            ..
        })
    ));
    assert!(ds
        .field_index("nope")
        .unwrap_err()
        .to_string()
        .contains("tokens"));
    // Wrong destination kinds and sizes are argument errors, not panics.
    let mut small = vec![0u8; 8];
    assert!(ds
        .gather(&[1, 2], &[2], &mut [FieldDest::Dense(&mut small)])
        .is_err());
    assert!(ds
        .gather(&[1], &[0], &mut [FieldDest::Dense(&mut small)])
        .is_err());
}

#[test]
fn growing_publishes_a_new_version_and_old_readers_keep_theirs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ds");
    build(&path, &[0, 100, 250], Codec::Raw);
    let v1 = Dataset::open(&path, ReadOptions::default()).unwrap();
    let mut b = DatasetBuilder::append(&path).unwrap();
    write_shard(&mut b, 250..400, Codec::Zstd);
    // Not yet published: a new reader still sees version 1.
    assert_eq!(
        Dataset::open(&path, ReadOptions::default()).unwrap().len(),
        250
    );
    assert_eq!(b.publish().unwrap().version, 2);
    let v2 = Dataset::open(&path, ReadOptions::default()).unwrap();
    assert_eq!((v1.version(), v1.len()), (1, 250));
    assert_eq!((v2.version(), v2.len()), (2, 400));
    check_batch(&v1, &[0, 249, 100]);
    check_batch(&v2, &[0, 399, 250, 100]);
    // Exactly version 1 reopens (what an unpickled reader does).
    let again = Dataset::open_version(&path, 1, ReadOptions::default()).unwrap();
    assert_eq!(again.len(), 250);
    // Two builders on the same version: the second publication is refused.
    let mut b1 = DatasetBuilder::append(&path).unwrap();
    let b2 = DatasetBuilder::append(&path).unwrap();
    write_shard(&mut b1, 400..410, Codec::Raw);
    b1.publish().unwrap();
    assert!(matches!(b2.publish(), Err(Error::Manifest { .. })));
    // create() on an existing dataset needs overwrite; then it replaces the
    // fields and shards in a new version.
    assert!(matches!(
        DatasetBuilder::create(&path, fields(), false),
        Err(Error::AlreadyExists { .. })
    ));
    let mut b = DatasetBuilder::create(&path, fields(), true).unwrap();
    write_shard(&mut b, 0..5, Codec::Raw);
    assert_eq!(b.publish().unwrap().version, 4);
    assert_eq!(
        Dataset::open(&path, ReadOptions::default()).unwrap().len(),
        5
    );
    check_batch(&v2, &[399]);
}

#[test]
fn damaged_manifests_and_mismatched_stores_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ds");
    build(&path, &[0, 10, 20], Codec::Zstd);
    let manifest = path.join("manifest.json");
    let text = std::fs::read_to_string(&manifest).unwrap();

    let open = || Dataset::open(&path, ReadOptions::default());
    std::fs::write(&manifest, text.replace("\"records\": 10", "\"records\": 9")).unwrap();
    let err = open().unwrap_err();
    assert!(
        matches!(
            err,
            Error::Manifest {
                problem: ManifestProblem::ChecksumMismatch { .. },
                ..
            }
        ),
        "{err:?}"
    );

    std::fs::write(&manifest, &text[..text.len() / 2]).unwrap();
    assert!(matches!(open(), Err(Error::Manifest { .. })));

    // A store that went missing is an I/O error naming it.
    std::fs::write(&manifest, &text).unwrap();
    let ds = open().unwrap();
    let victim = ds.store(1, 2).unwrap().path().to_path_buf();
    drop(ds);
    std::fs::rename(&victim, dir.path().join("moved")).unwrap();
    match open() {
        Err(Error::Io { path, .. }) => assert_eq!(path, victim),
        other => panic!("expected an I/O error, got {other:?}"),
    }
    // A store of another field's schema in its place is refused.
    let pixels_store = victim.with_file_name(
        victim
            .file_name()
            .unwrap()
            .to_string_lossy()
            .replace("label", "pixels"),
    );
    std::fs::copy(&pixels_store, &victim).unwrap();
    let err = open().unwrap_err();
    match &err {
        Error::Manifest {
            problem: ManifestProblem::Store(m),
            ..
        } => {
            assert_eq!(m.field, "label", "{err}");
            assert!(
                matches!(m.mismatch, StoreMismatch::Schema { .. }),
                "{err:?}"
            );
        }
        other => panic!("expected a store mismatch, got {other:?}"),
    }
    // How it reads: the field is named.
    assert!(err.to_string().contains("label"), "{err}");

    // No manifest at all.
    assert!(matches!(
        Dataset::open(dir.path(), ReadOptions::default()),
        Err(Error::Io { .. })
    ));
}

/// The stores and manifests in `dir` (relative names, sorted).
fn listing(dir: &Path, sub: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir.join(sub))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn gc_keeps_the_newest_versions_and_what_they_name_and_removes_the_rest() {
    use zring_engine::dataset::collect_garbage;

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ds");
    // v1: 2 shards; v2 appends one; v3 overwrites with one; v4 appends one.
    build(&path, &[0, 100, 250], Codec::Raw);
    let mut b = DatasetBuilder::append(&path).unwrap();
    write_shard(&mut b, 250..300, Codec::Zstd);
    b.publish().unwrap();
    // Readers of v2 on both kinds of backend: they must outlive the collection.
    let v2_readers: Vec<Dataset> = [Backend::Mmap, Backend::Pread]
        .into_iter()
        .map(|b| Dataset::open(&path, ReadOptions::with_backend(b)).unwrap())
        .collect();
    let mut b = DatasetBuilder::create(&path, fields(), true).unwrap();
    write_shard(&mut b, 0..30, Codec::Raw);
    b.publish().unwrap();
    let mut b = DatasetBuilder::append(&path).unwrap();
    write_shard(&mut b, 30..40, Codec::Raw);
    b.publish().unwrap();
    // A killed writer of v5 left a store; a dead process's temporary files (pid 2^31
    // - 2 is never alive here), one old enough and one fresh; a live process's.
    let v5 = path.join("data/v000005-000000-0123456789abcdef.tokens.zr");
    let v4_tokens = listing(&path, "data")
        .into_iter()
        .find(|n| n.starts_with("v000004-000000-") && n.ends_with(".tokens.zr"))
        .unwrap();
    std::fs::copy(path.join("data").join(v4_tokens), &v5).unwrap();
    let dead = 2_147_483_646u32;
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(120);
    let stale = [
        path.join(format!("data/.v000005-000001.label.zr.{dead}.0.zr-tmp")),
        path.join(format!(".manifest.json.{dead}.tmp")),
        path.join(format!("manifests/.0000000005.json.{dead}.tmp")),
        path.join(format!("manifests/.0000000005.json.{dead}.3.tmp")),
    ];
    let fresh = path.join(format!("data/.v000005-000002.label.zr.{dead}.1.zr-tmp"));
    let live = path.join(format!(
        "data/.v000005-000003.label.zr.{}.0.zr-tmp",
        std::process::id()
    ));
    for p in stale.iter().chain([&fresh, &live]) {
        std::fs::write(p, b"partial").unwrap();
        let f = std::fs::File::options().write(true).open(p).unwrap();
        if p != &fresh {
            f.set_modified(old).unwrap();
        }
    }
    assert!(matches!(
        collect_garbage(&path, 0, false),
        Err(Error::InvalidArgument(_))
    ));
    // keep 2 = v3 + v4: v3's one shard and v4's; v1 and v2's stores go.
    let dry = collect_garbage(&path, 2, true).unwrap();
    assert_eq!(listing(&path, "data").len(), 3 * 5 + 1 + 3);
    let report = collect_garbage(&path, 2, false).unwrap();
    assert_eq!(report, dry);
    assert_eq!(report.current, 4);
    assert_eq!(report.kept_versions, vec![3, 4]);
    assert_eq!(report.manifests.len(), 2);
    assert_eq!(
        report.stores.len(),
        3 * 3,
        "v1's 2 shards and v2's 1, 3 fields"
    );
    assert_eq!(report.temps.len(), 4);
    assert!(report.bytes > 0);
    assert_eq!(
        listing(&path, "manifests"),
        ["0000000003.json", "0000000004.json"]
    );
    let data = listing(&path, "data");
    assert!(data
        .iter()
        .all(|n| !n.starts_with("v000001") && !n.starts_with("v000002")));
    assert!(
        v5.exists(),
        "a store of a version newer than the current one is kept"
    );
    assert!(fresh.exists() && live.exists());
    assert!(stale.iter().all(|p| !p.exists()));
    // The current and kept versions read as before; the removed ones do not reopen.
    let v4 = Dataset::open(&path, ReadOptions::default()).unwrap();
    assert_eq!((v4.version(), v4.len()), (4, 40));
    v4.verify().unwrap();
    assert_eq!(
        Dataset::open_version(&path, 3, ReadOptions::default())
            .unwrap()
            .len(),
        30
    );
    assert!(Dataset::open_version(&path, 2, ReadOptions::default()).is_err());
    // A reader that opened v2 before holds its stores open and keeps reading them
    // (local file system: the files live until their last descriptor closes).
    for v2 in &v2_readers {
        assert_eq!(v2.version(), 2);
        check_batch(v2, &[0, 299, 250, 100]);
        v2.verify().unwrap();
    }
    // keep 1: v3's manifest goes, but v4 still names v3's shard; a second run finds
    // nothing.
    let report = collect_garbage(&path, 1, false).unwrap();
    assert_eq!((report.manifests.len(), report.stores.len()), (1, 0));
    assert_eq!(listing(&path, "manifests"), ["0000000004.json"]);
    let again = collect_garbage(&path, 1, false).unwrap();
    assert!(again.manifests.is_empty() && again.stores.is_empty() && again.temps.is_empty());
    assert_eq!(
        Dataset::open(&path, ReadOptions::default()).unwrap().len(),
        40
    );
    // keep larger than the history keeps everything.
    assert_eq!(
        collect_garbage(&path, 100, false).unwrap().kept_versions,
        vec![4]
    );
}

#[test]
fn joined_datasets_read_as_one_numbered_one_after_another() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    build(&a, &[0, 10, 30], Codec::Raw);
    // The second dataset holds records 30..50 of the same functions, so the join's
    // record i is the function's record i.
    let mut builder = DatasetBuilder::create(&b, fields(), false).unwrap();
    write_shard(&mut builder, 30..50, Codec::Zstd);
    builder.publish().unwrap();
    let parts = [
        Dataset::open(&a, ReadOptions::default()).unwrap(),
        Dataset::open(&b, ReadOptions::default()).unwrap(),
    ];
    let joined = Dataset::join(&parts).unwrap();
    assert_eq!(joined.len(), 50);
    assert_eq!(joined.shards(), 3);
    check_batch(&joined, &[49, 0, 31, 12, 29, 30, 30]);
    assert_eq!(joined.store_paths().len(), 9);
    assert!(matches!(
        joined.gather_vec(&[50], &[2]),
        Err(Error::IndexOutOfRange {
            index: 50,
            len: 50,
            ..
        })
    ));

    // Other fields, or none at all, are refused.
    let other = dir.path().join("other");
    let mut builder = DatasetBuilder::create(
        &other,
        vec![("label".into(), Schema::dense(DType::I64, &[]))],
        false,
    )
    .unwrap();
    let path = &builder.shard_paths(0)[0];
    let mut w = Writer::create(
        path,
        Schema::dense(DType::I64, &[]),
        WriteOptions::default(),
    )
    .unwrap();
    w.append_dense(&7i64.to_le_bytes()).unwrap();
    w.close().unwrap();
    builder.add_shard(1).unwrap();
    builder.publish().unwrap();
    let other = Dataset::open(&other, ReadOptions::default()).unwrap();
    let err = Dataset::join(&[parts[0].clone(), other]).err().unwrap();
    assert!(
        err.to_string().contains("dataset 1 has fields [label: I64"),
        "{err}"
    );
    assert!(Dataset::join(&[]).is_err());
}

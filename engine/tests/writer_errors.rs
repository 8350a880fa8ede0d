//! The writer's contract on mistakes: creating over an existing file, abort and
//! drop, invalid batches and codec options. Errors are typed and name the problem,
//! a refused batch adds nothing, and nothing half-done is ever published.

mod common;

use std::fs;
use std::path::Path;

use common::*;
use zring_engine::{
    ArgumentError as A, Codec, DType, Error, Schema, SchemaError, WriteOptions, Writer,
};

/// Names in `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn is_temp(name: &str) -> bool {
    name.starts_with('.') && name.ends_with(".zr-tmp")
}

/// Asserts `r` is `Error::InvalidArgument` whose typed detail `want` accepts.
#[track_caller]
fn expect_invalid<T: std::fmt::Debug>(r: zring_engine::Result<T>, want: fn(&A) -> bool) {
    match r {
        Err(Error::InvalidArgument(d)) => assert!(want(&d), "not the wanted detail: {d:?}"),
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
}

fn u8_schema() -> Schema {
    Schema::dense(DType::U8, &[64])
}

#[test]
fn create_over_an_existing_file_is_refused_and_leaves_it_untouched() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("taken.zr");
    fs::write(&path, b"somebody else's bytes").expect("write");
    let err = Writer::create(&path, u8_schema(), WriteOptions::default()).expect_err("exists");
    assert!(
        matches!(&err, Error::AlreadyExists { path: p } if p == &path),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("taken.zr") && msg.contains("overwrite"),
        "{msg}"
    );
    assert_eq!(fs::read(&path).expect("read"), b"somebody else's bytes");
    assert_eq!(listing(dir.path()), vec!["taken.zr"]);
}

#[test]
fn a_file_that_appears_before_close_is_not_replaced() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("raced.zr");
    let mut w = Writer::create(&path, u8_schema(), WriteOptions::default()).expect("create");
    w.append_dense(&compressible(64 * 10, 1)).expect("append");
    fs::write(&path, b"arrived meanwhile").expect("write");
    let err = w.close().expect_err("the path was taken meanwhile");
    assert!(matches!(err, Error::AlreadyExists { .. }), "{err:?}");
    assert_eq!(fs::read(&path).expect("read"), b"arrived meanwhile");
    assert_eq!(
        listing(dir.path()),
        vec!["raced.zr"],
        "the temporary file is removed"
    );
}

#[test]
fn overwrite_replaces_a_store_while_open_readers_keep_the_old_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("store.zr");
    let old = dense_records(10, 64, 1, |_| false);
    write_dense(&path, &u8_schema(), WriteOptions::default(), &old, 1).expect("first");
    let reader = open(&path).expect("open the first store");

    let new = dense_records(5, 64, 2, |i| i == 0);
    let opts = WriteOptions::default().overwrite(true);
    write_dense(&path, &u8_schema(), opts, &new, 2).expect("overwrite");
    let replaced = open(&path).expect("open the replacement");
    assert_eq!(replaced.len(), 5);
    assert_eq!(replaced.gather_vec(&[0, 1, 2, 3, 4]).expect("read"), new);
    // The reader opened before still sees the old file, whole.
    assert_eq!(reader.len(), 10);
    reader.verify().expect("old store intact");
    assert_eq!(
        reader
            .gather_vec(&(0..10).collect::<Vec<_>>())
            .expect("read"),
        old
    );
    assert_eq!(listing(dir.path()), vec!["store.zr"]);
}

#[test]
fn abort_and_drop_leave_neither_a_temporary_nor_a_final_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("gone.zr");
    let data = compressible(64 * 100, 3);

    let mut w = Writer::create(&path, u8_schema(), WriteOptions::default()).expect("create");
    w.append_dense(&data).expect("append");
    // While the writer works, only a hidden temporary file exists.
    let names = listing(dir.path());
    assert!(names.len() == 1 && is_temp(&names[0]), "{names:?}");
    assert!(names[0].contains("gone.zr"), "{names:?}");
    assert!(!path.exists());
    w.abort();
    assert!(listing(dir.path()).is_empty());

    let mut w = Writer::create(&path, u8_schema(), WriteOptions::default()).expect("create");
    w.append_dense(&data).expect("append");
    drop(w);
    assert!(listing(dir.path()).is_empty());

    drop(Writer::create(&path, u8_schema(), WriteOptions::default()).expect("create"));
    assert!(listing(dir.path()).is_empty());
}

#[test]
fn invalid_ragged_batches_are_refused_and_add_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("ragged.zr");
    let mut w = Writer::create(
        &path,
        Schema::ragged(DType::I32, 1),
        WriteOptions::default(),
    )
    .expect("create");
    let good = ragged_records(20, 1, DType::I32, 30, 9);
    w.append_ragged(&good.values, &good.cu_seqlens, &good.shapes)
        .expect("good batch");
    let v = vec![0u8; 6 * 4];
    // (cu_seqlens, shapes, values, what the error must be)
    type Case<'a> = (&'a [u64], &'a [u32], &'a [u8], fn(&A) -> bool);
    let cases: [Case; 7] = [
        (&[], &[], &v, |a| matches!(a, A::CuSeqlensEmpty)),
        (&[1, 3, 6], &[2, 3], &v, |a| {
            matches!(a, A::CuSeqlensStart { first: 1 })
        }),
        (&[0, 3, 3, 6], &[3, 1, 3], &v, |a| {
            matches!(a, A::ShapeMismatch { record: 1, .. })
        }),
        (&[0, 4, 2, 6], &[4, 2, 4], &v, |a| {
            matches!(a, A::CuSeqlensDecreasing { record: 1, .. })
        }),
        (&[0, 2, 6], &[2, 5], &v, |a| {
            matches!(a, A::ShapeMismatch { record: 1, .. })
        }),
        (&[0, 2, 6], &[2, 4], &v[..20], |a| {
            matches!(a, A::ValuesLen { values: 20, .. })
        }),
        (&[0, 2, 6], &[2], &v, |a| {
            matches!(
                a,
                A::ShapesLen {
                    len: 1,
                    records: 2,
                    ndim: 1
                }
            )
        }),
    ];
    for (k, (cu, shapes, values, want)) in cases.into_iter().enumerate() {
        // check_ragged (what a caller appending in slices runs first) refuses the
        // same batches with the same error, and appends nothing either.
        expect_invalid(w.check_ragged(values.len(), cu, shapes), want);
        expect_invalid(w.append_ragged(values, cu, shapes), want);
        assert_eq!(w.len(), 20, "a refused batch (case {k}) added records");
    }
    let more = ragged_records(5, 1, DType::I32, 30, 10);
    w.check_ragged(more.values.len(), &more.cu_seqlens, &more.shapes)
        .expect("a good batch passes the check");
    assert_eq!(w.len(), 20, "check_ragged appended");
    // Refusals do not poison the writer: it goes on and publishes only good batches.
    let ids = w
        .append_ragged(&more.values, &more.cu_seqlens, &more.shapes)
        .expect("writer still usable");
    assert_eq!(ids, 20..25);
    assert_eq!(w.close().expect("close"), 25);
    let store = open(&path).expect("open");
    store.verify().expect("verify");
    let batch = store.gather_ragged(&[19, 20, 24]).expect("gather");
    assert_eq!(batch.record(0, 4), Some(good.record(19)));
    assert_eq!(batch.record(1, 4), Some(more.record(0)));
    assert_eq!(batch.record(2, 4), Some(more.record(4)));

    // A writer dropped after a refusal publishes nothing.
    let path2 = dir.path().join("never.zr");
    let mut w = Writer::create(
        &path2,
        Schema::ragged(DType::I32, 1),
        WriteOptions::default(),
    )
    .expect("create");
    expect_invalid(w.append_ragged(&v, &[0, 2, 1, 6], &[2, 1, 5]), |a| {
        matches!(a, A::CuSeqlensDecreasing { record: 1, .. })
    });
    drop(w);
    assert!(!path2.exists());
    assert_eq!(listing(dir.path()), vec!["ragged.zr"]);
}

#[test]
fn invalid_dense_batches_and_layout_mix_ups_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("dense.zr");
    let mut w = Writer::create(&path, u8_schema(), WriteOptions::default()).expect("create");
    expect_invalid(w.append_dense(&[0u8; 100]), |a| {
        matches!(
            a,
            A::DenseBatchSize {
                len: 100,
                width: 64
            }
        )
    });
    match w.append_ragged(&[0u8; 4], &[0, 1], &[1]) {
        Err(Error::Schema(SchemaError::WrongLayout {
            operation: "append_ragged",
            ragged: false,
            instead: "append_dense",
        })) => {}
        other => panic!("expected Schema, got {other:?}"),
    }
    assert_eq!(w.append_dense(&[]).expect("an empty batch"), 0..0);
    assert_eq!(w.append_dense(&[7u8; 128]).expect("good"), 0..2);
    assert_eq!(w.close().expect("close"), 2);

    let mut r = Writer::create(
        dir.path().join("r.zr"),
        Schema::ragged(DType::U8, 1),
        WriteOptions::default(),
    )
    .expect("create");
    match r.append_dense(&[0u8; 64]) {
        Err(Error::Schema(SchemaError::WrongLayout {
            operation: "append_dense",
            ragged: true,
            instead: "append_ragged",
        })) => {}
        other => panic!("expected Schema, got {other:?}"),
    }
}

#[test]
fn bad_codec_alignment_and_schema_options_are_refused_before_any_file_exists() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("opts.zr");
    let create = |schema: Schema, opts: WriteOptions| Writer::create(&path, schema, opts);
    let with = |f: &dyn Fn(&mut WriteOptions)| {
        let mut o = WriteOptions::default();
        f(&mut o);
        o
    };
    let dict = test_dictionary();
    expect_invalid(
        create(u8_schema(), WriteOptions::with_codec(Codec::ZstdDict)),
        |a| matches!(a, A::DictMissing),
    );
    expect_invalid(
        create(
            u8_schema(),
            with(&|o| {
                o.codec = Codec::Raw;
                o.dictionary = Some(dict.clone());
            }),
        ),
        |a| matches!(a, A::DictUnused { codec: Codec::Raw }),
    );
    expect_invalid(
        create(u8_schema(), with(&|o| o.dictionary = Some(dict.clone()))),
        |a| matches!(a, A::DictUnused { codec: Codec::Zstd }),
    );
    expect_invalid(
        create(
            u8_schema(),
            with(&|o| {
                o.codec = Codec::ZstdDict;
                o.dictionary = Some(Vec::new());
            }),
        ),
        |a| matches!(a, A::DictEmpty),
    );
    expect_invalid(create(u8_schema(), with(&|o| o.level = 100)), |a| {
        matches!(a, A::Level { level: 100, .. })
    });
    for align in [0u32, 3, 12, 2 << 20] {
        let err = create(u8_schema(), with(&|o| o.align = align)).expect_err("align");
        match err {
            Error::InvalidArgument(A::Align { align: a, .. }) => assert_eq!(a, align),
            other => panic!("expected Align, got {other:?}"),
        }
    }
    for schema in [
        Schema::ragged(DType::U8, 0),
        Schema::dense(DType::F32, &[4, 0]),
        Schema::dense(DType::U64, &[1 << 31, 4]),
    ] {
        let err = create(schema.clone(), WriteOptions::default()).expect_err("bad schema");
        assert!(matches!(err, Error::Schema(_)), "{schema:?}: {err:?}");
    }
    assert!(
        listing(dir.path()).is_empty(),
        "a refused create left a file"
    );
}

#[test]
fn creating_in_a_missing_directory_is_an_io_error_naming_the_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("no-such-dir").join("s.zr");
    let err = Writer::create(&path, u8_schema(), WriteOptions::default()).expect_err("no dir");
    assert!(matches!(err, Error::Io { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains("no-such-dir") && msg.contains("s.zr"), "{msg}");
    assert!(listing(dir.path()).is_empty());
}

#[test]
fn a_path_without_a_file_name_or_held_by_a_directory_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let overwrite = WriteOptions::default().overwrite(true);
    expect_invalid(
        Writer::create(dir.path().join(".."), u8_schema(), overwrite.clone()),
        |a| matches!(a, A::NotAFileName { .. }),
    );
    // A directory where the store should go: refused without overwrite; with it,
    // publishing fails (a store never replaces a directory) and nothing is left.
    let taken = dir.path().join("taken.zr");
    fs::create_dir(&taken).expect("mkdir");
    let err = Writer::create(&taken, u8_schema(), WriteOptions::default()).expect_err("dir");
    assert!(matches!(err, Error::AlreadyExists { .. }), "{err:?}");
    let mut w = Writer::create(&taken, u8_schema(), overwrite).expect("create");
    w.append_dense(&[1u8; 64]).expect("append");
    let err = w.close().expect_err("cannot rename over a directory");
    assert!(matches!(err, Error::Io { .. }), "{err:?}");
    assert!(err.to_string().contains("taken.zr"), "{err}");
    assert!(taken.is_dir());
    assert_eq!(listing(dir.path()), vec!["taken.zr"]);
}

/// An error made in process (no OS error number), injected into the writer's writes.
#[derive(Debug)]
struct Injected {
    id: u64,
}

impl std::fmt::Display for Injected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "injected failure {}", self.id)
    }
}

impl std::error::Error for Injected {}

/// The `Injected` error in `e`'s `source()` chain (directly, or as the payload of an
/// `io::Error` there), by downcast.
fn injected_in<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a Injected> {
    std::iter::successors(Some(e), |e| e.source()).find_map(|e| {
        e.downcast_ref::<Injected>().or_else(|| {
            e.downcast_ref::<std::io::Error>()
                .and_then(|io| io.get_ref())
                .and_then(|inner| inner.downcast_ref::<Injected>())
        })
    })
}

#[test]
fn a_poisoned_writer_re_raises_the_first_error_with_its_original_source() {
    use std::sync::Arc;
    use zring_platform::{install_fs_hook, FsOp};

    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("poisoned.zr");
    // Every write into the data region fails (the superblock at 0 is written).
    let _guard = install_fs_hook(
        dir.path(),
        Arc::new(|op: &FsOp<'_>| match op {
            FsOp::Write { offset, .. } if *offset >= 4096 => {
                Some(std::io::Error::other(Injected { id: 7 }))
            }
            _ => None,
        }),
    );
    let schema = Schema::dense(DType::U8, &[16]);
    let mut w =
        Writer::create(&path, schema, WriteOptions::with_codec(Codec::Raw)).expect("create");
    let first = w.append_dense(&[1u8; 64]).expect_err("the write fails");
    let Error::Io { source, .. } = &first else {
        panic!("expected Io, got {first:?}");
    };
    assert_eq!(source.kind(), std::io::ErrorKind::Other);
    assert_eq!(source.raw_os_error(), None);
    let original = injected_in(&first).expect("the first error reaches the injected one");
    assert_eq!(original.id, 7);
    assert!(first.to_string().contains("injected failure 7"), "{first}");

    for later in [
        w.append_dense(&[2u8; 16]).expect_err("poisoned"),
        w.close().expect_err("poisoned"),
    ] {
        let Error::WriterPoisoned {
            first_error: Some(kept),
            ..
        } = &later
        else {
            panic!("expected WriterPoisoned with the first error, got {later:?}");
        };
        assert!(matches!(kept.as_ref(), Error::Io { .. }), "{kept:?}");
        let again = injected_in(&later).expect("the later error reaches the injected one");
        // The very object the first error holds, not a copy of its text.
        assert!(std::ptr::eq(again, original));
        assert!(later.to_string().contains("injected failure 7"), "{later}");
    }
    drop(first);
    assert_eq!(listing(dir.path()), Vec::<String>::new());
}

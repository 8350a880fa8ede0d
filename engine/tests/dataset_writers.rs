//! Concurrent writers of one dataset: every publication that returns success is a
//! distinct version whose records the dataset keeps; the loser of a race gets a
//! conflict and publishes nothing; readers find the newest committed version even
//! where `manifest.json` lags behind it.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};

use zring_engine::dataset::{version_path, Dataset, DatasetBuilder};
use zring_engine::{DType, Error, ManifestProblem, ReadOptions, Schema, WriteOptions, Writer};

fn fields() -> Vec<(String, Schema)> {
    vec![("id".into(), Schema::dense(DType::I64, &[]))]
}

/// Writes `ids` as a store of the `id` field at `path`.
fn write_ids(path: &Path, ids: &[i64]) {
    let mut w = Writer::create(
        path,
        Schema::dense(DType::I64, &[]),
        WriteOptions::default(),
    )
    .unwrap();
    let bytes: Vec<u8> = ids.iter().flat_map(|v| v.to_le_bytes()).collect();
    w.append_dense(&bytes).unwrap();
    w.close().unwrap();
}

/// Writes `ids` as the next shard of `b`.
fn add_ids(b: &mut DatasetBuilder, ids: &[i64]) {
    write_ids(&b.shard_paths(b.added()).remove(0), ids);
    b.add_shard(ids.len() as u64).unwrap();
}

/// Every id of the current version, sorted.
fn ids_of(path: &Path) -> (u64, Vec<i64>) {
    let ds = Dataset::open(path, ReadOptions::default()).unwrap();
    let field = ds.field(0).unwrap();
    let mut out = vec![0u8; ds.len() as usize * 8];
    let all: Vec<u64> = (0..ds.len()).collect();
    field.gather(&all, &mut out).unwrap();
    let mut ids: Vec<i64> = out
        .chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    ids.sort_unstable();
    (ds.version(), ids)
}

fn is_conflict(e: &Error) -> bool {
    matches!(
        e,
        Error::Manifest {
            problem: ManifestProblem::Conflict { .. },
            ..
        }
    )
}

#[test]
fn racing_appends_keep_every_acknowledged_record_and_refuse_the_losers() {
    let dir = tempfile::tempdir().unwrap();
    race_appends(dir.path().join("ds"));
}

/// The same race at a URL: the version's manifest is created by a create-if-absent
/// PUT (object_store's local backend here), which must decide between the writers.
#[cfg(feature = "remote")]
#[test]
fn racing_appends_at_a_url_keep_every_acknowledged_record() {
    let dir = tempfile::tempdir().unwrap();
    race_appends(PathBuf::from(format!(
        "file://{}",
        dir.path().join("ds").display()
    )));
}

/// 4 threads append 25 times each to the dataset at `path` (a directory or a URL):
/// every success is its own version and holds exactly the acknowledged records.
fn race_appends(path: PathBuf) {
    const THREADS: usize = 4;
    const APPENDS: usize = 25;
    const RECORDS: i64 = 3;
    let mut b = DatasetBuilder::create(&path, fields(), false).unwrap();
    add_ids(&mut b, &[-1]);
    b.publish().unwrap();

    let start = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (path, start) = (path.clone(), Arc::clone(&start));
            std::thread::spawn(move || {
                start.wait();
                let mut won = Vec::new();
                let mut lost = 0;
                for k in 0..APPENDS {
                    let first = ((t * APPENDS + k) as i64) * RECORDS;
                    let ids: Vec<i64> = (first..first + RECORDS).collect();
                    let mut b = DatasetBuilder::append(&path).unwrap();
                    add_ids(&mut b, &ids);
                    match b.publish() {
                        Ok(m) => won.push((m.version, ids)),
                        Err(e) if is_conflict(&e) => {
                            assert!(e.to_string().contains("write again"), "{e}");
                            lost += 1;
                        }
                        Err(e) => panic!("append {t}/{k}: {e}"),
                    }
                }
                (won, lost)
            })
        })
        .collect();
    let mut versions = BTreeSet::new();
    let mut expected = vec![-1i64];
    let mut acknowledged = 0;
    for h in handles {
        let (won, _lost) = h.join().unwrap();
        for (version, ids) in won {
            assert!(
                versions.insert(version),
                "version {version} published twice"
            );
            expected.extend(ids);
            acknowledged += 1;
        }
    }
    expected.sort_unstable();
    let (version, ids) = ids_of(&path);
    // Every success is its own version, one after another from version 2.
    assert_eq!(version, 1 + acknowledged);
    assert_eq!(versions, (2..=version).collect::<BTreeSet<u64>>());
    assert_eq!(
        ids, expected,
        "the records of exactly the acknowledged appends"
    );
}

#[test]
fn a_lagging_pointer_or_none_still_opens_the_newest_committed_version() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ds");
    let mut b = DatasetBuilder::create(&path, fields(), false).unwrap();
    add_ids(&mut b, &[1, 2]);
    b.publish().unwrap();
    // A writer killed before it wrote the first pointer: the version is the record.
    std::fs::remove_file(path.join("manifest.json")).unwrap();
    assert_eq!(ids_of(&path), (1, vec![1, 2]));
    let mut b = DatasetBuilder::append(&path).unwrap();
    add_ids(&mut b, &[3]);
    assert_eq!(b.publish().unwrap().version, 2);
    // The pointer left at version 1 (a writer killed between the two steps, or two
    // writers that replaced it in the other order): readers and writers go forward.
    std::fs::copy(version_path(&path, 1), path.join("manifest.json")).unwrap();
    assert_eq!(ids_of(&path), (2, vec![1, 2, 3]));
    let stale = DatasetBuilder::append(&path).unwrap();
    assert_eq!(stale.version(), 3, "builds on the newest committed version");
    let mut b = DatasetBuilder::append(&path).unwrap();
    add_ids(&mut b, &[4]);
    assert_eq!(b.publish().unwrap().version, 3);
    // The other builder of version 3 loses, and publishes nothing.
    let err = stale.publish().unwrap_err();
    assert!(is_conflict(&err), "{err}");
    assert_eq!(ids_of(&path), (3, vec![1, 2, 3, 4]));
}

#[test]
fn builders_of_one_version_never_share_a_store_name() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ds");
    let mut b = DatasetBuilder::create(&path, fields(), false).unwrap();
    add_ids(&mut b, &[0]);
    b.publish().unwrap();
    let (a, b) = (
        DatasetBuilder::append(&path).unwrap(),
        DatasetBuilder::append(&path).unwrap(),
    );
    assert_eq!(a.version(), b.version());
    assert_ne!(a.shard_paths(0), b.shard_paths(0));
    let name = a.shard_paths(0)[0]
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert!(
        name.starts_with("v000002-000000-") && name.ends_with(".id.zr"),
        "{name}"
    );
}

#[test]
fn shards_written_under_names_of_their_own_are_added_and_bad_names_refused() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    let mut b = DatasetBuilder::create(&ds, fields(), false).unwrap();
    write_ids(&ds.join("data/task-1.id.zr"), &[1, 2, 3]);
    write_ids(&ds.join("data/task-0.id.zr"), &[0]);
    let bad = |b: &mut DatasetBuilder, files: Vec<&str>| {
        let files = files.into_iter().map(String::from).collect();
        match b.add_shard_files(1, files) {
            Err(Error::Manifest { problem, .. }) => {
                assert!(
                    matches!(problem, ManifestProblem::NewShardFiles { .. }),
                    "{problem:?}"
                )
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
    };
    for files in [
        vec!["../task-0.id.zr"],
        vec!["data/../../x.zr"],
        vec!["data/"],
        vec!["data/.hidden.zr"],
        vec!["task-0.id.zr"],
        vec!["data/task-0.id.zr", "data/task-1.id.zr"],
    ] {
        bad(&mut b, files);
    }
    b.add_shard_files(1, vec!["data/task-0.id.zr".into()])
        .unwrap();
    bad(&mut b, vec!["data/task-0.id.zr"]);
    // A count the store does not hold is the usual mismatch.
    assert!(b
        .add_shard_files(2, vec!["data/task-1.id.zr".into()])
        .is_err());
    b.add_shard_files(3, vec!["data/task-1.id.zr".into()])
        .unwrap();
    b.publish().unwrap();
    let d = Dataset::open(&ds, ReadOptions::default()).unwrap();
    assert_eq!(d.len(), 4);
}

/// `add_shards` checks many new shards' stores side by side: the same dataset as
/// adding them one at a time; a wrong count names the first bad shard, and nothing
/// is added then.
#[test]
fn shards_added_together_are_checked_and_a_bad_one_adds_none() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    let mut b = DatasetBuilder::create(&ds, fields(), false).unwrap();
    let shards: Vec<Vec<i64>> = (0..40)
        .map(|s| (s * 100..s * 100 + s % 7 + 1).collect())
        .collect();
    for (k, ids) in shards.iter().enumerate() {
        write_ids(&b.shard_paths(k).remove(0), ids);
    }
    let counts: Vec<u64> = shards.iter().map(|s| s.len() as u64).collect();
    // Shards 21 and 33 claim a record too many: shard 21 is named, none is added.
    let mut wrong = counts.clone();
    wrong[21] += 1;
    wrong[33] += 1;
    match b.add_shards(&wrong) {
        Err(Error::Manifest {
            problem: ManifestProblem::Store(m),
            ..
        }) => assert_eq!(m.shard, 21, "{m:?}"),
        other => panic!("expected shard 21's mismatch, got {other:?}"),
    }
    assert_eq!(b.added(), 0);
    b.add_shards(&counts).unwrap();
    assert_eq!(b.added(), 40);
    b.publish().unwrap();
    let want: Vec<i64> = shards.concat();
    assert_eq!(ids_of(&ds), (1, want));
}

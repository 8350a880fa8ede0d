//! Fork safety at the Store level: a child forked from a process whose store is warm
//! (pool threads running, per-thread io_uring rings and decoders made), or forked
//! before the store's first read, reads correct data through every backend, and so
//! does the parent afterwards. One test, so no other test thread runs at the forks.

mod common;

use common::*;
use zring_engine::{Backend, ReadOptions, Store};
use zring_testkit::child_succeeds;

/// A forked child runs `f`; a hang counts as a failure after two minutes.
fn in_child(f: impl FnOnce() -> bool) -> bool {
    child_succeeds(std::time::Duration::from_secs(120), f)
}

/// Gathers the records `idx` of `fx` and compares them with what was written.
fn gathers_correctly(store: &Store, fx: &Fixture, idx: &[u64]) -> bool {
    if fx.ragged {
        let Ok(batch) = store.gather_ragged(idx) else {
            return false;
        };
        let itemsize = store.schema().dtype.itemsize();
        idx.iter()
            .enumerate()
            .all(|(k, &i)| batch.record(k, itemsize) == Some(&fx.records[i as usize][..]))
    } else {
        let Ok(got) = store.gather_vec(idx) else {
            return false;
        };
        let w = fx.records[0].len();
        idx.iter()
            .enumerate()
            .all(|(k, &i)| got[k * w..(k + 1) * w] == fx.records[i as usize][..])
    }
}

/// Gathers (on the pool) and gets every record of `fx` in a scrambled order and
/// compares them with what was written.
fn reads_correctly(store: &Store, fx: &Fixture) -> bool {
    let n = fx.records.len() as u64;
    let idx: Vec<u64> = (0..n).map(|i| (i * 7 + 3) % n).chain(0..n).collect();
    gathers_correctly(store, fx, &idx)
        && (0..n).all(|i| store.get(i).ok().as_deref() == Some(&fx.records[i as usize][..]))
}

/// A gather of at least 4 MiB (every record, repeated), large enough to be cut into
/// tasks for the pool rather than run on the caller alone.
fn large_gather_is_correct(store: &Store, fx: &Fixture) -> bool {
    let n = fx.records.len() as u64;
    let bytes: usize = fx.records.iter().map(Vec::len).sum::<usize>().max(1);
    let rounds = (4 << 20) / bytes + 1;
    let idx: Vec<u64> = (0..rounds).flat_map(|_| 0..n).collect();
    gathers_correctly(store, fx, &idx)
}

/// Pool worker threads alive in this process (named `zring-worker-*`). A child
/// inherits none of the parent's threads: a pool it uses must be its own.
fn pool_workers_here() -> usize {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with("zring-worker"))
        .count()
}

#[test]
fn forked_children_read_correct_data_through_every_backend() {
    let _hang = zring_testkit::watchdog("the fork test");
    let dir = tempfile::tempdir().expect("tempdir");
    let fixtures = [
        dense_mixed(dir.path(), 400),
        dense_dict(dir.path(), 300),
        ragged_zstd(dir.path(), 300),
    ];
    for fx in &fixtures {
        for backend in Backend::CONCRETE {
            if backend == Backend::Uring && !uring_here() {
                continue;
            }
            let opts = ReadOptions::with_backend(backend).threads(2);
            let ctx = format!("{} {backend}", fx.path.display());
            // Forked before the store's first read: the child makes its own rings,
            // decoders and pool.
            let cold = Store::open(&fx.path, opts.clone()).expect("open");
            assert!(in_child(|| reads_correctly(&cold, fx)), "{ctx}: cold child");
            // Forked with the store warm in the parent.
            let warm = Store::open(&fx.path, opts.clone()).expect("open");
            assert!(reads_correctly(&warm, fx), "{ctx}: parent before fork");
            assert!(in_child(|| reads_correctly(&warm, fx)), "{ctx}: warm child");
            // ... on a pool of its own: the parent's workers do not exist in a child,
            // and a gather that finds none runs on the caller alone (correct, but
            // without the parallelism asked for).
            assert!(
                in_child(|| large_gather_is_correct(&warm, fx) && pool_workers_here() > 0),
                "{ctx}: the warm child has no pool workers of its own"
            );
            // A child's child, and the parent after its children.
            assert!(
                in_child(|| reads_correctly(&warm, fx) && in_child(|| reads_correctly(&warm, fx))),
                "{ctx}: grandchild"
            );
            assert!(reads_correctly(&warm, fx), "{ctx}: parent after fork");
            assert!(reads_correctly(&cold, fx), "{ctx}: cold parent after fork");
            // The backend that served the child's reads is the one asked for.
            let served = in_child(|| {
                let before = warm.reads_served();
                reads_correctly(&warm, fx) && {
                    let after = warm.reads_served();
                    match backend {
                        Backend::Uring => after.uring > before.uring,
                        Backend::Mmap => after.mmap > before.mmap,
                        _ => after.pread > before.pread,
                    }
                }
            });
            assert!(served, "{ctx}: the child did not read through {backend}");
        }
    }
}

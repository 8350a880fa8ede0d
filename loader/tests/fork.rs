//! Fork safety at the Loader level (PyTorch's DataLoader forks its workers while the
//! parent's loader runs): a child forked while a loader is running, or before any
//! step was made, runs loaders of its own over the same stores and gets exactly the
//! steps the sampler asks for, through every backend; the parent's loader carries on
//! unharmed. One test, so no other test thread runs at the forks.

mod common;

use common::{dense_store, indices_of, ragged_store};
use zring_engine::{Backend, Codec, ReadOptions, Store};
use zring_loader::{Loader, LoaderOptions};
use zring_sampler::{Mode, Sampler};
use zring_testkit::child_succeeds;

/// A forked child runs `f`; a hang counts as a failure after two minutes.
fn in_child(f: impl FnOnce() -> bool) -> bool {
    child_succeeds(std::time::Duration::from_secs(120), f)
}

const N: u64 = 2000;

/// Runs `steps` steps of `loader` and checks each against its sampler: every tensor
/// holds exactly the records the step's batch names.
fn steps_are_right(loader: &mut Loader, sampler: &Sampler, steps: usize) -> bool {
    (0..steps).all(|_| {
        let Some(Ok(step)) = loader.next() else {
            return false;
        };
        let want = sampler.batch(step.step);
        let ok = step.shard(0).all(|(_, t)| indices_of(t) == want);
        ok
    })
}

fn new_loader(stores: &[Store], sampler: &Sampler, workers: usize) -> Loader {
    Loader::new(
        [
            ("d", vec![stores[0].clone()]),
            ("r", vec![stores[1].clone()]),
        ],
        sampler.clone(),
        LoaderOptions::new(workers, 2),
    )
    .expect("loader")
}

#[test]
fn forked_children_run_loaders_of_their_own_through_every_backend() {
    let _hang = zring_testkit::watchdog("the fork test");
    let dir = tempfile::tempdir().expect("tempdir");
    let dense = dense_store(dir.path(), "d.zr", N);
    let ragged = ragged_store(dir.path(), "r.zr", N, Codec::Zstd);
    for backend in Backend::CONCRETE {
        if backend == Backend::Uring
            && !zring_testkit::require_uring("io_uring", zring_platform::uring_unavailable_reason())
        {
            continue;
        }
        let opts = ReadOptions::with_backend(backend);
        let stores = [
            Store::open(dense.path(), opts.clone()).expect("open"),
            Store::open(ragged.path(), opts).expect("open"),
        ];
        let sampler = Sampler::new(N, 256, Mode::Iid, 9).expect("sampler");
        // Children with 0 and 2 workers of their own get the right steps.
        let children_are_right = |what: &str| {
            for workers in [0, 2] {
                let own = || new_loader(&stores, &sampler, workers);
                assert!(
                    in_child(|| steps_are_right(&mut own(), &sampler, 6)),
                    "{backend}: child of a {what} loader, {workers} workers"
                );
            }
        };
        // During first use: the loader exists but has made no step yet.
        let mut fresh = new_loader(&stores, &sampler, 2);
        children_are_right("fresh");
        assert!(
            steps_are_right(&mut fresh, &sampler, 4),
            "{backend}: fresh parent"
        );
        // With a running loader: its workers are busy (or blocked on a full buffer)
        // at the fork.
        let mut running = new_loader(&stores, &sampler, 2);
        assert!(
            steps_are_right(&mut running, &sampler, 3),
            "{backend}: parent"
        );
        children_are_right("running");
        assert!(
            steps_are_right(&mut running, &sampler, 10),
            "{backend}: parent after fork"
        );
    }
}

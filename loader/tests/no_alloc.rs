//! Counting every allocation of the process (Rust's and C's, see zring_testkit::alloc):
//! once warm, making and delivering steps performs none at all, with or without workers.

mod common;

use common::{dense_store, ragged_store, wait_until};
use zring_engine::Codec;
use zring_loader::{Loader, LoaderOptions};
use zring_sampler::{Mode, Sampler};

// Every malloc of the process, zstd's C allocations included (see zring_testkit::alloc).
zring_testkit::count_allocations!();

#[test]
fn a_warm_loader_makes_steps_without_allocating() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dense = dense_store(dir.path(), "d.zr", 64);
    let ragged = ragged_store(dir.path(), "r.zr", 64, Codec::Zstd);
    for workers in [0, 2] {
        let sampler = Sampler::new(64, 8, Mode::Iid, 4).expect("sampler");
        let mut loader = Loader::new(
            [
                ("d", vec![dense.clone(), dense.clone()]),
                ("r", vec![ragged.clone(), ragged.clone()]),
            ],
            sampler,
            LoaderOptions::new(workers, 2),
        )
        .expect("loader");
        // Warm up with every buffer the bound allows alive at once (see memory.rs).
        let bound = LoaderOptions::new(workers, 2).max_live_steps() as u64 * 4;
        let held = loader.next().expect("endless").expect("step");
        wait_until(|| loader.stats().buffers.allocations >= bound);
        let mut checksum = held.step;
        drop(held);
        for step in loader.by_ref().take(300) {
            checksum += step.expect("step").step;
        }
        let stats_before = loader.stats();
        let before = allocations();
        for step in loader.by_ref().take(3000) {
            let step = step.expect("step");
            checksum += step.step + step.get("r", 1).map_or(0, |t| t.records() as u64);
        }
        let during = allocations() - before;
        assert!(checksum > 0);
        assert_eq!(
            during,
            0,
            "workers {workers}: {during} allocations in 3000 steps; stats {stats_before:?} -> {:?}",
            loader.stats()
        );
    }
}

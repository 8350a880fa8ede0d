//! Live batch memory is bounded by workers + prefetch steps (+ the consumer's), and
//! a steady run recycles every buffer and vector.

mod common;

use std::time::Duration;

use common::{dense_store, ragged_store, wait_until};
use zring_engine::{Codec, Store};
use zring_loader::{Delivery, Loader, LoaderOptions};
use zring_sampler::{Mode, Sampler};

fn stores(dir: &std::path::Path, n: u64) -> (Store, Store) {
    (
        dense_store(dir, "d.zr", n),
        ragged_store(dir, "r.zr", n, Codec::Raw),
    )
}

#[test]
fn live_buffers_never_exceed_workers_plus_prefetch_plus_the_consumers_step() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (dense, ragged) = stores(dir.path(), 400);
    for (workers, prefetch) in [(1, 1), (2, 3), (4, 2)] {
        for (delivery, helps) in [
            (Delivery::StepOrder, true),
            (Delivery::StepOrder, false),
            (Delivery::CompletionOrder, true),
            (Delivery::CompletionOrder, false),
        ] {
            let sampler = Sampler::new(400, 16, Mode::Iid, 2).expect("sampler");
            let opts = LoaderOptions::new(workers, prefetch)
                .with_delivery(delivery)
                .with_consumer_helps(helps);
            let mut loader = Loader::new(
                [
                    ("d", vec![dense.clone(), dense.clone()]),
                    ("r", vec![ragged.clone(), ragged.clone()]),
                ],
                sampler,
                opts,
            )
            .expect("loader");
            let per_step = 4; // 2 streams x 2 shards
            let bound = (workers + prefetch + 1) * per_step;
            for k in 0..150 {
                let step = loader.next().expect("endless").expect("step");
                if k == 0 {
                    // The workers read ahead while this step is held: waited for as an
                    // event, so the read-ahead check below cannot lose to the clock.
                    wait_until(|| loader.stats().buffers.live > per_step);
                }
                if k % 10 == 0 {
                    // A slow consumer: the workers run ahead as far as they may.
                    std::thread::sleep(Duration::from_millis(3));
                }
                let live = loader.stats().buffers.live;
                assert!(live <= bound, "{workers}+{prefetch}: {live} live > {bound}");
                drop(step);
            }
            let s = loader.stats();
            assert!(
                s.buffers.live_high_water <= bound,
                "{workers}+{prefetch}: high water {} > {bound}",
                s.buffers.live_high_water
            );
            // The bound is reached: the loader does read ahead.
            assert!(
                s.buffers.live_high_water > per_step,
                "no read-ahead happened"
            );
            assert!(s.buffers.allocations as usize <= bound + per_step);
        }
    }
}

#[test]
fn a_10k_step_run_stops_allocating_after_warm_up() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (dense, ragged) = stores(dir.path(), 64);
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
        // Warm up: hold one step while the workers fill everything they may, so
        // that the most buffers ever alive at once are alive now.
        let bound = LoaderOptions::new(workers, 2).max_live_steps() as u64 * 4;
        let held = loader.next().expect("endless").expect("step");
        wait_until(|| loader.stats().buffers.allocations >= bound);
        drop(held);
        for step in loader.by_ref().take(200) {
            step.expect("step");
        }
        let warm = loader.stats();
        assert_eq!(warm.buffers.allocations, bound, "warm-up reached the bound");
        let mut records = 0usize;
        for step in loader.by_ref().take(10_000) {
            let step = step.expect("step");
            records += step
                .stream("r")
                .expect("r")
                .iter()
                .map(|t| t.records())
                .sum::<usize>();
        }
        assert_eq!(records, 10_000 * 8);
        let after = loader.stats();
        assert_eq!(
            after.buffers.allocations, warm.buffers.allocations,
            "buffers grew"
        );
        assert_eq!(after.vecs_created, warm.vecs_created, "vectors grew");
        assert_eq!(
            after.buffers.released, 0,
            "the pool dropped buffers it should keep"
        );
        assert!(after.buffers.reuses >= 10_000 * 4);
    }
}

/// Ragged records of 4,800-6,399 u64s (38-51 KB): random batches of 8 differ by up
/// to a third, and straddle several of the pool's size classes (steps of 64 KiB here).
fn wide_ragged_store(dir: &std::path::Path, n: u64) -> Store {
    use zring_engine::{DType, ReadOptions, Schema, WriteOptions, Writer};
    let path = dir.join("wide.zr");
    let mut w = Writer::create(
        &path,
        Schema::ragged(DType::U64, 1),
        WriteOptions::with_codec(Codec::Raw),
    )
    .expect("create");
    let (mut cu, mut shapes, mut values) = (vec![0u64], Vec::new(), Vec::new());
    for i in 0..n {
        let len = 4_800 + (i * 7_919) % 1_600;
        shapes.push(len as u32);
        cu.push(cu[cu.len() - 1] + len);
        values.extend(std::iter::repeat_n(i.to_le_bytes(), len as usize).flatten());
    }
    w.append_ragged(&values, &cu, &shapes).expect("append");
    w.close().expect("close");
    Store::open(&path, ReadOptions::default()).expect("open")
}

#[test]
fn ragged_buffers_keep_their_first_capacity_when_later_batches_are_larger() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ragged = wide_ragged_store(dir.path(), 512);
    for workers in [0, 2] {
        let sampler = Sampler::new(512, 8, Mode::Iid, 11).expect("sampler");
        let mut loader = Loader::new(
            [("r", vec![ragged.clone()])],
            sampler,
            LoaderOptions::new(workers, 2),
        )
        .expect("loader");
        // Only the first steps before measuring: the batches that come later (a
        // third larger, some of them) must fit the buffers made for these.
        let bound = LoaderOptions::new(workers, 2).max_live_steps() as u64;
        let held = loader.next().expect("endless").expect("step");
        wait_until(|| loader.stats().buffers.allocations >= bound);
        drop(held);
        let warm = loader.stats();
        let mut bytes = Vec::new();
        for step in loader.by_ref().take(3_000) {
            let step = step.expect("step");
            let r = step.stream("r").expect("r");
            bytes.push(r.iter().map(|t| t.bytes().len()).sum::<usize>());
        }
        let (least, most) = (bytes.iter().min(), bytes.iter().max());
        let after = loader.stats();
        assert_eq!(
            after.buffers.allocations, warm.buffers.allocations,
            "workers {workers}: buffers were allocated after the first steps \
             (batches of {least:?} to {most:?} bytes); {warm:?} -> {after:?}"
        );
        assert_eq!(after.buffers.released, 0, "workers {workers}: {after:?}");
    }
}

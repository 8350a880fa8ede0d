//! The default look-ahead: workers and prefetch sized from a memory budget and the
//! device, live steps within the budget, steps identical to a fixed loader's.

mod common;

use common::dense_store;
use zring_loader::{Loader, LoaderOptions, Lookahead, Tensor};
use zring_sampler::{Mode, Sampler};

const RECORDS: u64 = 400;
const BATCH: usize = 16;

fn loader(store: &zring_engine::Store, opts: LoaderOptions) -> Loader {
    let sampler = Sampler::new(RECORDS, BATCH, Mode::Iid, 9).expect("sampler");
    Loader::new([("d", vec![store.clone()])], sampler, opts).expect("loader")
}

fn bytes(step: &zring_loader::Step<zring_loader::Batch>) -> Vec<u8> {
    match step.data.get("d", 0) {
        Some(Tensor::Dense { data, .. }) => data.to_vec(),
        _ => panic!("dense stream expected"),
    }
}

#[test]
fn the_default_sizes_the_look_ahead_and_delivers_what_a_fixed_loader_does() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dense_store(dir.path(), "d.zr", RECORDS);
    assert_eq!(LoaderOptions::default().lookahead, Lookahead::DEFAULT);
    let mut auto = loader(&store, LoaderOptions::default());
    let chosen = auto.options().clone();
    // Never below the default floors, and one step made ahead at least covers the
    // step boundary.
    assert!(
        chosen.workers >= 2 && chosen.prefetch >= chosen.workers,
        "{chosen:?}"
    );
    let mut fixed = loader(&store, LoaderOptions::new(1, 1));
    assert_eq!(fixed.options().workers, 1);
    for _ in 0..40 {
        let a = auto.next().expect("endless").expect("step");
        let b = fixed.next().expect("endless").expect("step");
        assert_eq!(a.step, b.step);
        assert_eq!(bytes(&a), bytes(&b));
    }
}

#[test]
fn live_steps_stay_within_the_budget() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dense_store(dir.path(), "d.zr", RECORDS);
    let step_bytes = {
        let mut l = loader(&store, LoaderOptions::new(0, 1));
        bytes(&l.next().expect("endless").expect("step")).len() as u64
    };
    for steps in [3u64, 5, 9, 40] {
        let budget = steps * step_bytes;
        let opts = LoaderOptions::new(1, 1).with_lookahead(Lookahead::Budget { bytes: budget });
        let mut l = loader(&store, opts);
        let o = l.options().clone();
        assert!(
            (o.workers + o.prefetch + 1) as u64 <= steps,
            "{steps} steps: {o:?}"
        );
        for _ in 0..30 {
            let s = l.next().expect("endless").expect("step");
            let live = l.stats().buffers.live_high_water as u64;
            assert!(live * step_bytes <= budget, "{steps} steps: {live} live");
            drop(s);
        }
    }
}

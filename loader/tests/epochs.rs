//! Loaders over an epoch plan: a finite plan ends after its last step and delivers
//! exactly the planned records (short last steps included) in every mode; seek
//! works; a short step that cannot split into the views is refused.

mod common;

use common::{data, indices_of, Data};
use zring_loader::{Delivery, Loader, LoaderError, LoaderOptions, Tensor};
use zring_sampler::{EpochPlan, Mode};

/// A delivered step: (step, dense ids, ragged ids).
type Delivered = (u64, Vec<u64>, Vec<u64>);

/// Every delivered step as (step, dense ids, ragged ids), checking the dense shape.
fn drain(mut l: Loader) -> Vec<Delivered> {
    let mut out = Vec::new();
    for s in l.by_ref() {
        let s = s.expect("step");
        let dense = s.data.get("dense", 0).expect("dense");
        let ragged = s.data.get("ragged", 0).expect("ragged");
        let ids = indices_of(dense);
        if let Tensor::Dense { shape, .. } = dense {
            assert_eq!(&shape[..], &[ids.len(), 2], "step {}", s.step);
        }
        out.push((s.step, ids, indices_of(ragged)));
    }
    // Ended for good, and at the end.
    assert!(l.next().is_none());
    out
}

fn loader(d: &Data, plan: EpochPlan, opts: LoaderOptions) -> Loader {
    Loader::new(
        [
            ("dense", vec![d.dense.clone()]),
            ("ragged", vec![d.ragged.clone()]),
        ],
        plan,
        opts,
    )
    .expect("loader")
}

fn planned(plan: &EpochPlan) -> Vec<Delivered> {
    (0..plan.steps().expect("finite"))
        .map(|s| {
            let ids = plan.batch(s).expect("step");
            (s, ids.clone(), ids)
        })
        .collect()
}

#[test]
fn a_finite_plan_ends_after_delivering_exactly_its_steps() {
    let d = data(53);
    // Rank 2 of 3, batch 4: global steps of 12, the last (5 records) split 1/2/2;
    // two epochs of 5 steps.
    let plan = EpochPlan::new(53, 4, Mode::Cyclic, 3)
        .expect("plan")
        .shard(2, 3)
        .expect("shard")
        .with_epochs(Some(2));
    let want = planned(&plan);
    assert_eq!(want.len(), 10);
    assert_eq!(want[4].1.len(), 2, "the short last step of the epoch");
    for opts in [
        LoaderOptions::new(0, 1),
        LoaderOptions::new(1, 1),
        LoaderOptions::new(3, 2),
        LoaderOptions::new(2, 4).with_consumer_helps(false),
        LoaderOptions::default(),
    ] {
        assert_eq!(
            drain(loader(&d, plan.clone(), opts.clone())),
            want,
            "{opts:?}"
        );
    }
    // Completion order: the same steps, in some order.
    let mut got = drain(loader(
        &d,
        plan.clone(),
        LoaderOptions::new(3, 2).with_delivery(Delivery::CompletionOrder),
    ));
    got.sort();
    assert_eq!(got, want);
}

#[test]
fn seek_and_the_start_counter_resume_a_finite_plan() {
    let d = data(30);
    let plan = EpochPlan::new(30, 7, Mode::Sequential, 0)
        .expect("plan")
        .with_epochs(Some(1));
    let want = planned(&plan);
    let mut l = loader(&d, plan.clone(), LoaderOptions::new(2, 2));
    l.seek(3).expect("seek");
    assert_eq!(drain(l), want[3..].to_vec());
    let mut at = plan.clone();
    at.seek(4);
    let l = loader(&d, at, LoaderOptions::new(0, 1));
    assert_eq!(l.step(), 4);
    assert_eq!(drain(l), want[4..].to_vec());
    // Past the end: nothing.
    let mut l = loader(&d, plan, LoaderOptions::new(2, 2));
    l.seek(99).expect("seek");
    assert!(l.next().is_none());
}

#[test]
fn worker_strided_loaders_together_deliver_every_step_once() {
    let d = data(41);
    let base = EpochPlan::new(41, 5, Mode::Iid, 8)
        .expect("plan")
        .with_epochs(Some(3));
    let want = planned(&base);
    let workers = 3;
    let parts: Vec<Vec<Delivered>> = (0..workers)
        .map(|w| {
            let p = base.clone().strided(w, workers).expect("stride");
            drain(loader(&d, p, LoaderOptions::new(1, 2)))
        })
        .collect();
    // Round-robin: worker w's step s is plan step w + s * workers.
    let mut merged = Vec::new();
    for k in 0..want.len() as u64 {
        let (w, s) = ((k % workers) as usize, (k / workers) as usize);
        let (_, dense, ragged) = parts[w][s].clone();
        merged.push((k, dense, ragged));
    }
    assert_eq!(merged, want);
    assert_eq!(parts.iter().map(Vec::len).sum::<usize>(), want.len());
}

#[test]
fn an_endless_plan_keeps_going_and_empty_steps_are_delivered() {
    let d = data(7);
    // 7 records, batch 2, world 3: the last global step holds 1 record, and rank 0
    // takes none of it: an empty step every epoch.
    let plan = EpochPlan::new(7, 2, Mode::Sequential, 0)
        .expect("plan")
        .shard(0, 3)
        .expect("shard");
    let l = loader(&d, plan, LoaderOptions::new(2, 2));
    let got: Vec<Vec<u64>> = l
        .take(6)
        .map(|s| {
            let s = s.expect("step");
            indices_of(s.data.get("dense", 0).expect("dense"))
        })
        .collect();
    assert_eq!(
        got,
        vec![vec![0, 1], vec![], vec![0, 1], vec![], vec![0, 1], vec![]]
    );
}

#[test]
fn a_short_step_that_cannot_split_into_the_views_is_refused() {
    let d = data(10);
    let plan = EpochPlan::new(10, 4, Mode::Sequential, 0).expect("plan");
    let two = |plan: EpochPlan| {
        Loader::new(
            [("dense", vec![d.dense.clone(), d.dense.clone()])],
            plan,
            LoaderOptions::new(1, 1),
        )
    };
    // The last step holds 2 records: 1 per view, fine.
    let l = two(plan.clone()).expect("splits");
    drop(l);
    let odd = EpochPlan::new(9, 4, Mode::Sequential, 0).expect("plan");
    assert!(matches!(
        two(odd.clone()),
        Err(LoaderError::StepNotDivisible {
            records: 1,
            views: 2
        })
    ));
    // Dropping the short step makes it fine, and the shards split each step.
    let l = two(odd.with_drop_last(true).expect("plan").with_epochs(Some(1))).expect("loader");
    let steps: Vec<Vec<Vec<u64>>> = l
        .map(|s| {
            let s = s.expect("step");
            (0..2)
                .map(|k| indices_of(s.data.get("dense", k).expect("dense")))
                .collect()
        })
        .collect();
    assert_eq!(
        steps,
        vec![vec![vec![0, 1], vec![2, 3]], vec![vec![4, 5], vec![6, 7]]]
    );
}

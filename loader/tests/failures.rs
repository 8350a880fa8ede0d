//! A failed step is delivered at its step, after every earlier step, and then
//! iteration ends; nothing hangs.

mod common;

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;

use common::{dense_store, ragged_store};
use zring_engine::{Codec, Error as EngineError, ReadOptions, Store};
use zring_loader::{Delivery, Loader, LoaderError, LoaderOptions};
use zring_sampler::{Mode, Sampler};

fn options() -> Vec<LoaderOptions> {
    vec![
        LoaderOptions::new(0, 1),
        LoaderOptions::new(1, 1),
        LoaderOptions::new(3, 2),
        LoaderOptions::new(4, 4),
    ]
}

#[test]
fn a_transform_error_at_step_5_arrives_at_step_5_and_ends_iteration() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dense = dense_store(dir.path(), "d.zr", 100);
    for opts in options() {
        let sampler = Sampler::new(100, 4, Mode::Iid, 3).expect("sampler");
        let mut loader = Loader::with_transform(
            [("d", vec![dense.clone()])],
            sampler,
            opts.clone(),
            |step| {
                if step.step == 5 {
                    return Err("bad record in step 5".into());
                }
                // Later steps are quick, so they finish before step 5 is delivered.
                Ok(step.step)
            },
        )
        .expect("loader");
        let _hang = zring_testkit::watchdog("iterating up to a failing step");
        for want in 0..5 {
            let got = loader.next().expect("step before the failure").expect("ok");
            assert_eq!(got.data, want, "{opts:?}");
        }
        match loader.next() {
            Some(Err(e @ LoaderError::Transform { step: 5, .. })) => {
                assert_eq!(e.step(), Some(5));
                assert!(e.to_string().contains("bad record in step 5"), "{e}");
            }
            other => panic!("{opts:?}: expected the step 5 failure, got {other:?}"),
        }
        assert!(loader.next().is_none(), "{opts:?}: iteration goes on");
        assert!(loader.next().is_none());
        drop(loader);
    }
}

#[test]
fn a_panicking_transform_is_delivered_as_an_error_of_its_step() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dense = dense_store(dir.path(), "d.zr", 100);
    for opts in options() {
        let sampler = Sampler::new(100, 4, Mode::Iid, 3).expect("sampler");
        let loader = Loader::with_transform(
            [("d", vec![dense.clone()])],
            sampler,
            opts.clone(),
            |step| {
                assert!(step.step != 2, "boom at step 2");
                Ok(step.step)
            },
        )
        .expect("loader");
        let results: Vec<_> = loader.collect();
        assert_eq!(results.len(), 3, "{opts:?}");
        match &results[2] {
            Err(LoaderError::Panicked { step: 2, message }) => {
                assert!(message.contains("boom at step 2"), "{message}")
            }
            other => panic!("{other:?}"),
        }
    }
}

/// Flips one stored byte of record `index`.
fn corrupt(store: &Store, index: u64) {
    let at = store.entry(index).expect("entry").offset;
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(store.path())
        .expect("open for writing");
    let mut b = [0u8];
    f.read_exact_at(&mut b, at).expect("read");
    f.write_all_at(&[b[0] ^ 0x55], at).expect("write");
}

/// The shard (of two) that reads record 37 in `step` of the sequential sampler over
/// 100 records in batches of 8 the corruption test uses, if the step reads it.
fn record_37_shard(step: u64) -> Option<usize> {
    (0..8u64)
        .position(|k| (step * 8 + k) % 100 == 37)
        .map(|k| k / 4)
}

#[test]
fn a_gather_error_from_a_corrupted_store_is_delivered_at_its_step() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dense = dense_store(dir.path(), "d.zr", 100);
    let ragged = ragged_store(dir.path(), "r.zr", 100, Codec::Raw);
    // Record 37 lies in step 37 / 8 = 4 of a sequential run over both shards.
    corrupt(&ragged, 37);
    let checked = ReadOptions::default().verify_checksums(true);
    let ragged = Store::open(ragged.path(), checked).expect("open");
    for opts in options() {
        for delivery in [Delivery::StepOrder, Delivery::CompletionOrder] {
            let opts = opts.clone().with_delivery(delivery);
            let sampler = Sampler::new(100, 8, Mode::Sequential, 0).expect("sampler");
            let loader = Loader::new(
                [
                    ("d", vec![dense.clone(), dense.clone()]),
                    ("r", vec![ragged.clone(), ragged.clone()]),
                ],
                sampler,
                opts.clone(),
            )
            .expect("loader");
            let results: Vec<_> = loader.collect();
            let (last, before) = results.split_last().expect("something delivered");
            // In step order the failure is step 4's. In completion order it is the
            // first failed step to complete: step 4's, or (on a loaded machine, where
            // step 4's worker can stall while the consumer makes later steps itself)
            // a later step that reads record 37 again after the sampler wraps.
            match last {
                Err(LoaderError::Gather {
                    step,
                    stream,
                    shard,
                    source: EngineError::CorruptRecord { index: 37, .. },
                }) if (delivery == Delivery::CompletionOrder || *step == 4)
                    && record_37_shard(*step) == Some(*shard) =>
                {
                    assert_eq!(stream, "r")
                }
                other => panic!("{opts:?}: expected the record 37 failure, got {other:?}"),
            }
            let mut steps: Vec<u64> = before
                .iter()
                .map(|r| r.as_ref().expect("only the last fails").step)
                .collect();
            steps.sort_unstable();
            match delivery {
                Delivery::StepOrder => assert_eq!(steps, [0, 1, 2, 3], "{opts:?}"),
                // The failure arrives when it completes: steps finished earlier
                // (possibly later ones) arrive once each before it, none twice.
                Delivery::CompletionOrder => {
                    let mut unique = steps.clone();
                    unique.dedup();
                    assert_eq!(unique, steps, "{opts:?}");
                    assert!(
                        steps.iter().all(|&s| record_37_shard(s).is_none()),
                        "a step reading record 37 succeeded: {steps:?}"
                    );
                }
            }
        }
    }
}

//! Delivery order: threaded runs equal the single-threaded run step for step;
//! completion order delivers the same steps; seek resumes exactly.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use common::{data, fingerprint, Data, Fingerprint};
use zring_loader::{Delivery, Loader, LoaderOptions};
use zring_sampler::{Mode, Sampler};

/// A loader whose transform fingerprints the step, after a delay that depends on
/// the step so that workers finish out of order.
fn loader(d: &Data, sampler: Sampler, opts: LoaderOptions, jitter: bool) -> Loader<Fingerprint> {
    Loader::with_transform(
        [
            ("dense", vec![d.dense.clone(), d.dense.clone()]),
            ("ragged", vec![d.ragged.clone(), d.ragged.clone()]),
        ],
        sampler,
        opts,
        move |step| {
            if jitter {
                std::thread::sleep(Duration::from_micros((step.step * 7919) % 5 * 300));
            }
            Ok(fingerprint(&step.data))
        },
    )
    .expect("loader")
}

fn run(l: &mut Loader<Fingerprint>, steps: usize) -> Vec<(u64, Fingerprint)> {
    l.take(steps)
        .map(|s| {
            let s = s.expect("step");
            (s.step, s.data)
        })
        .collect()
}

#[test]
fn step_order_with_1_2_and_4_workers_equals_the_single_threaded_run() {
    let d = data(300);
    let sampler = Sampler::new(300, 16, Mode::Iid, 5).expect("sampler");
    let reference = run(
        &mut loader(&d, sampler.clone(), LoaderOptions::new(0, 1), false),
        60,
    );
    assert_eq!(
        reference.iter().map(|r| r.0).collect::<Vec<_>>(),
        (0..60).collect::<Vec<u64>>()
    );
    for workers in [1, 2, 4] {
        for prefetch in [1, 3] {
            for helps in [true, false] {
                let opts = LoaderOptions::new(workers, prefetch).with_consumer_helps(helps);
                let got = run(&mut loader(&d, sampler.clone(), opts, true), 60);
                assert!(
                    got == reference,
                    "workers {workers} prefetch {prefetch} helps {helps}"
                );
            }
        }
    }
}

#[test]
fn completion_order_delivers_every_step_once_and_does_not_wait_for_a_slow_one() {
    let d = data(300);
    let sampler = Sampler::new(300, 16, Mode::Cyclic, 5).expect("sampler");
    let reference: BTreeMap<u64, Fingerprint> = run(
        &mut loader(&d, sampler.clone(), LoaderOptions::new(0, 1), false),
        40,
    )
    .into_iter()
    .collect();
    for helps in [true, false] {
        let opts = LoaderOptions::new(3, 4)
            .with_delivery(Delivery::CompletionOrder)
            .with_consumer_helps(helps);
        let mut l = loader(&d, sampler.clone(), opts, true);
        let mut got: BTreeMap<u64, Fingerprint> = BTreeMap::new();
        while (0..40).any(|s| !got.contains_key(&s)) {
            let s = l.next().expect("endless").expect("step");
            assert!(got.insert(s.step, s.data).is_none(), "step delivered twice");
            assert!(got.len() < 40 + 3 + 4 + 1, "steps below 40 are missing");
        }
        for (step, fp) in &reference {
            assert!(
                got.get(step) == Some(fp),
                "step {step} differs (helps {helps})"
            );
        }
    }

    // Step 0 is made only once another step was delivered (or after 60 s, so that a
    // loader waiting for step 0 fails instead of hanging): other steps overtake it
    // and the position stays at 0.
    let overtaken = Arc::new(AtomicBool::new(false));
    let step0_waits = Arc::clone(&overtaken);
    let slow = Loader::with_transform(
        [("dense", vec![d.dense.clone()])],
        sampler,
        // The consumer must not make step 0 itself here: it would be the slow one.
        LoaderOptions::new(2, 4)
            .with_delivery(Delivery::CompletionOrder)
            .with_consumer_helps(false),
        move |step| {
            if step.step == 0 {
                let give_up = Instant::now() + Duration::from_secs(60);
                while !step0_waits.load(Ordering::Acquire) && Instant::now() < give_up {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            Ok(step.step)
        },
    );
    let mut slow = slow.expect("loader");
    let first = slow.next().expect("endless").expect("step");
    overtaken.store(true, Ordering::Release);
    assert_ne!(first.data, 0, "completion order waited for the slow step");
    assert_eq!(slow.step(), 0, "step 0 is not delivered yet");
    let mut seen = vec![first.data];
    while !seen.contains(&0) {
        seen.push(slow.next().expect("endless").expect("step").data);
    }
    seen.sort_unstable();
    let expected: Vec<u64> = (0..seen.len() as u64).collect();
    assert_eq!(seen, expected);
    assert_eq!(slow.step(), seen.len() as u64);
}

#[test]
fn seek_resumes_exactly_where_an_uninterrupted_run_would_be() {
    let d = data(200);
    let sampler = Sampler::new(200, 8, Mode::Iid, 11).expect("sampler");
    for workers in [0, 3] {
        let opts = LoaderOptions::new(workers, 2);
        let full = run(&mut loader(&d, sampler.clone(), opts.clone(), false), 50);

        // Stop after 20 steps, remember the position, resume in a new loader.
        let mut first = loader(&d, sampler.clone(), opts.clone(), false);
        let head = run(&mut first, 20);
        let at = first.step();
        assert_eq!(at, 20);
        drop(first);
        let mut resumed = loader(&d, sampler.clone(), opts.clone(), true);
        resumed.seek(at).expect("seek");
        assert_eq!(resumed.step(), 20);
        let tail = run(&mut resumed, 30);
        assert!(
            head.iter().chain(&tail).eq(full.iter()),
            "workers {workers}"
        );

        // Seeking back in place replays; a sampler positioned beforehand starts there.
        resumed.seek(5).expect("seek back");
        assert!(run(&mut resumed, 10) == full[5..15], "workers {workers}");
        let mut positioned = sampler.clone();
        positioned.seek(42);
        let mut l = loader(&d, positioned, opts, false);
        assert_eq!(l.step(), 42);
        assert!(run(&mut l, 8) == full[42..50], "workers {workers}");
    }
}

#[test]
fn a_starved_consumer_makes_steps_itself_only_when_allowed() {
    let d = data(100);
    let sampler = Sampler::new(100, 8, Mode::Iid, 1).expect("sampler");
    let me = std::thread::current().id();
    for helps in [true, false] {
        // Steps made in the consumer's thread, and a wake-up for the worker waiting on
        // them: the worker's first step stalls until the consumer has made steps of
        // its own, so the consumer is starved by construction, not by a sleep.
        let consumer_steps = Arc::new((Mutex::new(0usize), Condvar::new()));
        let stalled = AtomicBool::new(false);
        let mut l = Loader::with_transform(
            [("dense", vec![d.dense.clone()])],
            sampler.clone(),
            // Four places: while the worker holds one step, three others fit.
            LoaderOptions::new(1, 4).with_consumer_helps(helps),
            move |step| {
                let (count, changed) = &*consumer_steps;
                let this = std::thread::current().id();
                if this == me {
                    *count.lock().unwrap_or_else(PoisonError::into_inner) += 1;
                    changed.notify_all();
                } else if !stalled.swap(true, Ordering::SeqCst) {
                    // A helping consumer makes the three steps that fit beside this
                    // one (the long limit only turns a hang into a failure below). One
                    // that must not help makes none; the short limit bounds the wait
                    // for a step that never comes, and a consumer that helped anyway
                    // would be seen within it.
                    let (want, limit) = if helps {
                        (3, Duration::from_secs(300))
                    } else {
                        (1, Duration::from_millis(200))
                    };
                    let n = count.lock().unwrap_or_else(PoisonError::into_inner);
                    drop(
                        changed
                            .wait_timeout_while(n, limit, |n| *n < want)
                            .unwrap_or_else(PoisonError::into_inner),
                    );
                }
                Ok((step.step, this))
            },
        )
        .expect("loader");
        let made: Vec<(u64, std::thread::ThreadId)> =
            l.by_ref().take(12).map(|s| s.expect("step").data).collect();
        assert_eq!(
            made.iter().map(|m| m.0).collect::<Vec<_>>(),
            (0..12).collect::<Vec<u64>>(),
            "step order holds either way"
        );
        let by_consumer = made.iter().filter(|m| m.1 == me).count();
        if helps {
            assert!(
                by_consumer >= 3,
                "the consumer made only {by_consumer} steps"
            );
        } else {
            assert_eq!(by_consumer, 0);
        }
    }
}

//! close() and drop stop and join every thread, whatever the workers and the
//! consumer are doing. Each test asserts the events (close returned, so every worker
//! was woken and joined; no step runs afterwards; the buffers came back), never a
//! duration: a watchdog turns a hang into a failure.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::dense_store;
use zring_loader::{Batch, Delivery, Loader, LoaderOptions};
use zring_sampler::{Mode, Sampler};
use zring_testkit::watchdog;

/// Steps whose transform is running right now, and steps whose transform began.
#[derive(Default)]
struct Counts {
    running: AtomicUsize,
    begun: AtomicUsize,
}

/// A loader whose transform counts the steps it runs (one buffer per step: one
/// stream, one view).
fn loader(
    dir: &std::path::Path,
    opts: LoaderOptions,
    counts: &Arc<Counts>,
    delay: Duration,
) -> Loader<Batch> {
    let dense = dense_store(dir, "d.zr", 1000);
    let sampler = Sampler::new(1000, 64, Mode::Iid, 1).expect("sampler");
    let counts = Arc::clone(counts);
    Loader::with_transform([("d", vec![dense])], sampler, opts, move |step| {
        counts.begun.fetch_add(1, Ordering::SeqCst);
        counts.running.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(delay);
        counts.running.fetch_sub(1, Ordering::SeqCst);
        // Keep the batch: the steps hold their buffers until the consumer drops them.
        Ok(step.data)
    })
    .expect("loader")
}

#[test]
fn close_is_prompt_while_workers_are_blocked_on_a_full_buffer() {
    let dir = tempfile::tempdir().expect("tempdir");
    for delivery in [Delivery::StepOrder, Delivery::CompletionOrder] {
        let counts = Arc::new(Counts::default());
        let opts = LoaderOptions::new(4, 2).with_delivery(delivery);
        let mut l = loader(dir.path(), opts, &counts, Duration::ZERO);
        // Nobody consumes: 2 steps fill the buffer and 4 workers block holding one each.
        {
            let _hang = watchdog("workers filling the buffer");
            while l.stats().buffers.live < 6 {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        assert_eq!(
            l.stats().buffers.live,
            6,
            "more than workers + prefetch steps"
        );
        // Returning at all means every blocked worker was woken and joined.
        let hang = watchdog("close with workers blocked on a full buffer");
        l.close();
        drop(hang);
        // With every worker joined the count is final: nobody consumed, so exactly
        // the 2 buffered steps and the 4 the workers held ever began (a bound checked
        // on the event, not after a pause).
        assert_eq!(
            counts.begun.load(Ordering::SeqCst),
            6,
            "more steps began than workers + prefetch"
        );
        // Joined, and every step they held went back to the pool.
        assert_eq!(l.stats().buffers.live, 0);
        assert!(l.next().is_none());
        l.close();
        std::fs::remove_file(dir.path().join("d.zr")).expect("rm");
    }
}

#[test]
fn drop_is_prompt_when_the_consumer_stopped_mid_way_holding_a_step() {
    let dir = tempfile::tempdir().expect("tempdir");
    let counts = Arc::new(Counts::default());
    let mut l = loader(
        dir.path(),
        LoaderOptions::new(3, 3),
        &counts,
        Duration::from_millis(2),
    );
    let mut held = None;
    for _ in 0..10 {
        held = Some(l.next().expect("endless").expect("step"));
    }
    let pool = l.buffer_pool().clone();
    let hang = watchdog("drop while the consumer holds a step");
    drop(l);
    drop(hang);
    let begun = counts.begun.load(Ordering::SeqCst);
    assert_eq!(
        counts.running.load(Ordering::SeqCst),
        0,
        "a worker still runs"
    );
    // The transform (which holds the other reference to `counts`) lives in the
    // workers: its release is the event that no worker can begin a step any more.
    assert_eq!(
        Arc::strong_count(&counts),
        1,
        "the transform is still held after drop: a worker was not joined"
    );
    assert_eq!(
        counts.begun.load(Ordering::SeqCst),
        begun,
        "a step began after drop"
    );
    // Only the step the consumer still holds is alive.
    assert_eq!(pool.stats().live, 1);
    assert_eq!(held.map(|s| s.step), Some(9));
    assert_eq!(pool.stats().live, 0);
}

#[test]
fn close_waits_only_for_the_gathers_in_progress() {
    let dir = tempfile::tempdir().expect("tempdir");
    let counts = Arc::new(Counts::default());
    // Slow steps: close must not drain the pipeline, only let the steps whose
    // transform already began finish.
    let mut l = loader(
        dir.path(),
        LoaderOptions::new(4, 4),
        &counts,
        Duration::from_millis(200),
    );
    let _first = l.next().expect("endless").expect("step");
    let hang = watchdog("close with slow steps in progress");
    let begun = counts.begun.load(Ordering::SeqCst);
    l.close();
    drop(hang);
    assert_eq!(counts.running.load(Ordering::SeqCst), 0);
    // Workers between their gather and their transform may still begin one step
    // each; a close that drained the prefetch queue would begin more.
    let after = counts.begun.load(Ordering::SeqCst);
    assert!(
        after - begun <= 4,
        "{} steps began during close",
        after - begun
    );
    // seek reopens a closed loader at the asked step.
    l.seek(7).expect("seek");
    assert_eq!(l.next().expect("reopened").expect("step").step, 7);
}

#[test]
fn dropping_a_loader_that_never_delivered_is_prompt() {
    let dir = tempfile::tempdir().expect("tempdir");
    let counts = Arc::new(Counts::default());
    for workers in [1, 2, 8] {
        let l = loader(
            dir.path(),
            LoaderOptions::new(workers, 1),
            &counts,
            Duration::ZERO,
        );
        let hang = watchdog("drop of a loader that never delivered");
        drop(l);
        drop(hang);
        assert_eq!(counts.running.load(Ordering::SeqCst), 0);
        std::fs::remove_file(dir.path().join("d.zr")).expect("rm");
    }
}

#[test]
fn next_within_times_out_without_losing_a_step() {
    let dir = tempfile::tempdir().expect("tempdir");
    let counts = Arc::new(Counts::default());
    // Steps take 300 ms, so a 1 ms wait times out (a timeout is an event here: the
    // call returns Pending, and the steps then arrive in order, none skipped).
    let mut l = loader(
        dir.path(),
        // The consumer does not make steps itself: it only waits.
        LoaderOptions::new(2, 2).with_consumer_helps(false),
        &counts,
        Duration::from_millis(300),
    );
    let _hang = watchdog("next_within and the steps after it");
    let mut timed_out = 0;
    let mut steps = Vec::new();
    while steps.len() < 3 {
        match l.next_within(Duration::from_millis(1)) {
            Err(zring_loader::Pending) => timed_out += 1,
            Ok(Some(step)) => steps.push(step.expect("step").step),
            Ok(None) => panic!("the endless loader ended"),
        }
    }
    assert!(timed_out > 0, "no wait timed out");
    assert_eq!(steps, vec![0, 1, 2]);
    l.close();
    assert!(matches!(l.next_within(Duration::from_millis(1)), Ok(None)));
}

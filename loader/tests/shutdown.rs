//! close() and drop stop and join every thread promptly, whatever the workers and
//! the consumer are doing.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::dense_store;
use zring_loader::{Batch, Delivery, Loader, LoaderOptions};
use zring_sampler::{Mode, Sampler};

const PROMPT: Duration = Duration::from_secs(1);

/// A loader whose transform counts the steps it is running right now (one buffer
/// per step: one stream, one view).
fn loader(
    dir: &std::path::Path,
    opts: LoaderOptions,
    running: &Arc<AtomicUsize>,
    delay: Duration,
) -> Loader<Batch> {
    let dense = dense_store(dir, "d.zr", 1000);
    let sampler = Sampler::new(1000, 64, Mode::Iid, 1).expect("sampler");
    let running = Arc::clone(running);
    Loader::with_transform([("d", vec![dense])], sampler, opts, move |step| {
        running.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(delay);
        running.fetch_sub(1, Ordering::SeqCst);
        // Keep the batch: the steps hold their buffers until the consumer drops them.
        Ok(step.data)
    })
    .expect("loader")
}

#[test]
fn close_is_prompt_while_workers_are_blocked_on_a_full_buffer() {
    let dir = tempfile::tempdir().expect("tempdir");
    for delivery in [Delivery::StepOrder, Delivery::CompletionOrder] {
        let running = Arc::new(AtomicUsize::new(0));
        let opts = LoaderOptions::new(4, 2).with_delivery(delivery);
        let mut l = loader(dir.path(), opts, &running, Duration::ZERO);
        // Nobody consumes: 2 steps fill the buffer and 4 workers block holding one each.
        let deadline = Instant::now() + Duration::from_secs(5);
        while l.stats().buffers.live < 6 {
            assert!(Instant::now() < deadline, "workers never filled the buffer");
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(
            l.stats().buffers.live,
            6,
            "more than workers + prefetch steps"
        );
        let started = Instant::now();
        l.close();
        assert!(
            started.elapsed() < PROMPT,
            "close took {:?}",
            started.elapsed()
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
    let running = Arc::new(AtomicUsize::new(0));
    let mut l = loader(
        dir.path(),
        LoaderOptions::new(3, 3),
        &running,
        Duration::from_millis(2),
    );
    let mut held = None;
    for _ in 0..10 {
        held = Some(l.next().expect("endless").expect("step"));
    }
    let pool = l.buffer_pool().clone();
    let started = Instant::now();
    drop(l);
    assert!(
        started.elapsed() < PROMPT,
        "drop took {:?}",
        started.elapsed()
    );
    assert_eq!(running.load(Ordering::SeqCst), 0, "a worker still runs");
    // Only the step the consumer still holds is alive.
    assert_eq!(pool.stats().live, 1);
    assert_eq!(held.map(|s| s.step), Some(9));
    assert_eq!(pool.stats().live, 0);
}

#[test]
fn close_waits_only_for_the_gathers_in_progress() {
    let dir = tempfile::tempdir().expect("tempdir");
    let running = Arc::new(AtomicUsize::new(0));
    // Slow steps (200 ms each): close must not drain the pipeline, only let the
    // current ones finish.
    let mut l = loader(
        dir.path(),
        LoaderOptions::new(4, 4),
        &running,
        Duration::from_millis(200),
    );
    let _first = l.next().expect("endless").expect("step");
    let started = Instant::now();
    l.close();
    let took = started.elapsed();
    assert!(took < Duration::from_millis(600), "close took {took:?}");
    assert_eq!(running.load(Ordering::SeqCst), 0);
    // seek reopens a closed loader at the asked step.
    l.seek(7).expect("seek");
    assert_eq!(l.next().expect("reopened").expect("step").step, 7);
}

#[test]
fn dropping_a_loader_that_never_delivered_is_prompt() {
    let dir = tempfile::tempdir().expect("tempdir");
    let running = Arc::new(AtomicUsize::new(0));
    for workers in [1, 2, 8] {
        let l = loader(
            dir.path(),
            LoaderOptions::new(workers, 1),
            &running,
            Duration::ZERO,
        );
        let started = Instant::now();
        drop(l);
        assert!(started.elapsed() < PROMPT);
        std::fs::remove_file(dir.path().join("d.zr")).expect("rm");
    }
}

//! The worker threads and the hand-off to the consumer.
//!
//! Workers claim step numbers with one atomic increment and make their steps with no
//! lock held (the sampler is stateless, so a step is a pure function of its number).
//! A finished step is handed over under one mutex into a bounded buffer of `prefetch`
//! places: in step order, place `i` holds step `next + i` (a reorder buffer), so a
//! worker whose step lies `prefetch` or more ahead of the consumer waits, holding it;
//! in completion order, the buffer is a plain queue. Each worker holds at most one
//! step, so at most `workers + prefetch` steps are alive besides the consumer's.
//!
//! A consumer that finds nothing ready claims the next step itself, if its result
//! has a place (in step order: inside the reorder buffer), makes it in its own
//! thread and places it, instead of sleeping until a worker wakes it: the caller
//! works too, as in the engine. Only when no such step is left does it sleep. This
//! keeps the bound (steps inside the reorder buffer's window are at most `prefetch`)
//! and saves a cross-thread wake-up per step when the workers cannot keep up.
//!
//! Over a finite schedule, no step at or past its end is claimed: a worker that
//! draws such a number exits, and the consumer's iteration ends once every earlier
//! step was delivered.
//!
//! A failed step is handed over like any other. Once it exists, no worker starts a
//! later step and later finished steps are dropped; the consumer receives every step
//! before the failure, then the failure, then the end. Stopping sets a flag and wakes
//! everyone; a worker then drops what it holds and exits, after its current gather.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::batch::Step;
use crate::error::{LoaderError, Result};
use crate::options::{Delivery, LoaderOptions};
use crate::produce::{Factory, Scratch};

/// No step has failed.
const NO_FAILURE: u64 = u64::MAX;

type Slot<T> = Result<Step<T>>;

struct State<T> {
    /// Step order: the next step the consumer receives; `ready[i]` is step `next + i`.
    next: u64,
    ready: VecDeque<Option<Slot<T>>>,
    /// Completion order: finished steps in the order they were handed over.
    queue: VecDeque<Slot<T>>,
    /// Completion order: the lowest step not yet delivered, and which steps from it
    /// on were delivered (`delivered[i]` is step `watermark + i`).
    watermark: u64,
    delivered: VecDeque<bool>,
    /// The consumer received a failure: nothing more is delivered.
    finished: bool,
    /// Workers must drop what they hold and exit.
    stopped: bool,
    /// Workers that have not exited.
    alive: usize,
    consumer_waiting: bool,
    workers_waiting: usize,
}

struct Shared<T> {
    state: Mutex<State<T>>,
    /// The consumer waits here for a step.
    ready: Condvar,
    /// Workers wait here for a free place.
    space: Condvar,
    /// The next step a worker claims.
    claim: AtomicU64,
    /// The lowest step known to have failed (`NO_FAILURE` if none).
    failed: AtomicU64,
    stop: AtomicBool,
    prefetch: usize,
    delivery: Delivery,
    /// The step after a finite schedule's last (`None`: endless). No step at or
    /// past it is claimed, and the consumer's iteration ends there.
    end: Option<u64>,
}

impl<T> Shared<T> {
    fn past_end(&self, step: u64) -> bool {
        self.end.is_some_and(|end| step >= end)
    }

    /// Whether every step of a finite schedule was delivered.
    fn delivered_all(&self, st: &State<T>) -> bool {
        self.past_end(match self.delivery {
            Delivery::StepOrder => st.next,
            Delivery::CompletionOrder => st.watermark,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        // Every critical section leaves the state consistent, and none can panic
        // while holding it except by a bug; keep going rather than cascade.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn wait<'a>(&self, cv: &Condvar, guard: MutexGuard<'a, State<T>>) -> MutexGuard<'a, State<T>> {
        cv.wait(guard).unwrap_or_else(PoisonError::into_inner)
    }

    /// Hands a finished step over; returns whether the worker should go on.
    fn hand_over(&self, step: u64, slot: Slot<T>) -> bool {
        let mut st = self.lock();
        loop {
            if st.stopped || step > self.failed.load(Ordering::Acquire) {
                // Dropped after the guard (parameters outlive locals), off the lock.
                return false;
            }
            if let Some(i) = self.place_for(&st, step) {
                match self.delivery {
                    Delivery::StepOrder => {
                        if let Some(place) = st.ready.get_mut(i) {
                            *place = Some(slot);
                        }
                    }
                    Delivery::CompletionOrder => st.queue.push_back(slot),
                }
                // In step order the consumer can only be waiting for place 0.
                let deliverable = i == 0 || self.delivery == Delivery::CompletionOrder;
                if deliverable && st.consumer_waiting {
                    self.ready.notify_one();
                }
                return true;
            }
            st.workers_waiting += 1;
            st = self.wait(&self.space, st);
            st.workers_waiting -= 1;
        }
    }

    /// Where a finished `step` may wait for the consumer now, if anywhere.
    fn place_for(&self, st: &State<T>, step: u64) -> Option<usize> {
        match self.delivery {
            Delivery::StepOrder => usize::try_from(step.wrapping_sub(st.next))
                .ok()
                .filter(|&i| i < self.prefetch),
            Delivery::CompletionOrder => Some(st.queue.len()).filter(|&n| n < self.prefetch),
        }
    }

    /// Claims a step for the consumer to make itself, if one is free and its result
    /// would have a place: in step order it must fall inside the reorder buffer
    /// (`next .. next + prefetch`), so the consumer never waits for room and the
    /// steps alive stay within `workers + prefetch` plus the consumer's own.
    fn claim_for_consumer(&self, st: &State<T>) -> Option<u64> {
        let mut step = self.claim.load(Ordering::Relaxed);
        loop {
            let fits = match self.delivery {
                Delivery::StepOrder => step.wrapping_sub(st.next) < self.prefetch as u64,
                Delivery::CompletionOrder => true,
            };
            if !fits || step > self.failed.load(Ordering::Acquire) || self.past_end(step) {
                return None;
            }
            match self.claim.compare_exchange_weak(
                step,
                step.wrapping_add(1),
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Some(step),
                Err(now) => step = now,
            }
        }
    }

    /// Takes the next deliverable step, if there is one now.
    fn pop(&self, st: &mut State<T>) -> Option<Slot<T>> {
        match self.delivery {
            Delivery::StepOrder => {
                if !st.ready.front().is_some_and(Option::is_some) {
                    return None;
                }
                let slot = st.ready.pop_front().flatten();
                st.ready.push_back(None);
                st.next = st.next.wrapping_add(1);
                slot
            }
            Delivery::CompletionOrder => {
                let slot = st.queue.pop_front()?;
                let step = match &slot {
                    Ok(s) => Some(s.step),
                    Err(e) => e.step(),
                };
                if let Some(step) = step {
                    mark_delivered(st, step);
                }
                Some(slot)
            }
        }
    }

    fn stop_all(&self, st: &mut State<T>) {
        st.stopped = true;
        self.stop.store(true, Ordering::Release);
        self.space.notify_all();
        self.ready.notify_all();
    }
}

fn mark_delivered<T>(st: &mut State<T>, step: u64) {
    let Some(i) = step
        .checked_sub(st.watermark)
        .and_then(|d| usize::try_from(d).ok())
    else {
        return;
    };
    if st.delivered.len() <= i {
        st.delivered.resize(i + 1, false);
    }
    st.delivered[i] = true;
    while st.delivered.front() == Some(&true) {
        st.delivered.pop_front();
        st.watermark += 1;
    }
}

/// Running worker threads from step `start` on.
pub(crate) struct Threads<T> {
    shared: Arc<Shared<T>>,
    handles: Vec<JoinHandle<()>>,
    factory: Arc<Factory<T>>,
    /// Whether the consumer makes steps itself instead of sleeping.
    helps: bool,
    /// The consumer's memory for the steps it makes.
    scratch: Scratch,
}

impl<T: Send + 'static> Threads<T> {
    pub(crate) fn start(
        factory: &Arc<Factory<T>>,
        opts: &LoaderOptions,
        start: u64,
    ) -> Result<Self> {
        let (workers, prefetch, delivery) = (opts.workers, opts.prefetch, opts.delivery);
        let end = factory.schedule.end();
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                next: start,
                ready: (0..prefetch).map(|_| None).collect(),
                queue: VecDeque::with_capacity(prefetch),
                watermark: start,
                delivered: VecDeque::new(),
                finished: false,
                stopped: false,
                alive: workers,
                consumer_waiting: false,
                workers_waiting: 0,
            }),
            ready: Condvar::new(),
            space: Condvar::new(),
            claim: AtomicU64::new(start),
            failed: AtomicU64::new(NO_FAILURE),
            stop: AtomicBool::new(false),
            prefetch,
            delivery,
            end,
        });
        let mut threads = Self {
            shared,
            handles: Vec::with_capacity(workers),
            factory: Arc::clone(factory),
            helps: opts.consumer_helps,
            scratch: factory.scratch(),
        };
        for k in 0..workers {
            let shared = Arc::clone(&threads.shared);
            let factory = Arc::clone(factory);
            let spawned = thread::Builder::new()
                .name(format!("zring-loader-{k}"))
                .spawn(move || work(&shared, &factory));
            match spawned {
                Ok(h) => threads.handles.push(h),
                Err(e) => {
                    // The threads that did start are stopped and joined by drop.
                    threads.shared.lock().alive -= workers - k;
                    return Err(LoaderError::Spawn(e));
                }
            }
        }
        Ok(threads)
    }
}

impl<T> Threads<T> {
    /// The next step the consumer receives (step order), or the lowest step not
    /// yet delivered (completion order).
    pub(crate) fn position(&self) -> u64 {
        let st = self.shared.lock();
        match self.shared.delivery {
            Delivery::StepOrder => st.next,
            Delivery::CompletionOrder => st.watermark,
        }
    }

    /// Waits for the next step (making one itself meanwhile if allowed); `None` once
    /// a failure was delivered or the threads were stopped.
    pub(crate) fn next(&mut self) -> Option<Slot<T>> {
        loop {
            if let Some(next) = self.next_within(None) {
                return next;
            }
        }
    }

    /// [`Threads::next`] that stops waiting after `limit` (outer `None`: no step
    /// yet; nothing was consumed, so a later call picks up where this one left).
    /// A step the consumer is making itself is finished first.
    pub(crate) fn next_within(&mut self, limit: Option<Duration>) -> Option<Option<Slot<T>>> {
        let deadline = limit.map(|l| Instant::now() + l);
        let shared = &*self.shared;
        let mut st = shared.lock();
        loop {
            if st.finished || st.stopped || shared.delivered_all(&st) {
                return Some(None);
            }
            if let Some(slot) = shared.pop(&mut st) {
                if slot.is_err() {
                    st.finished = true;
                    shared.stop_all(&mut st);
                } else if st.workers_waiting > 0 {
                    // In step order only the worker holding the step that now fits
                    // can go on, and a condvar cannot pick it: wake them all (there
                    // are `workers` at most).
                    shared.space.notify_all();
                }
                return Some(Some(slot));
            }
            if self.helps {
                if let Some(step) = shared.claim_for_consumer(&st) {
                    drop(st);
                    let slot = self.factory.make(step, &mut self.scratch);
                    if slot.is_err() {
                        shared.failed.fetch_min(step, Ordering::AcqRel);
                    }
                    st = shared.lock();
                    if step > shared.failed.load(Ordering::Acquire) {
                        // An earlier step failed meanwhile: this one is never delivered.
                        drop(st);
                        drop(slot);
                        st = shared.lock();
                        continue;
                    }
                    match shared.delivery {
                        Delivery::StepOrder => {
                            // `next` only moves in this function, so the place that
                            // was free when the step was claimed is still free.
                            let i = step.wrapping_sub(st.next) as usize;
                            if let Some(place) = st.ready.get_mut(i) {
                                *place = Some(slot);
                            }
                            continue;
                        }
                        Delivery::CompletionOrder => {
                            mark_delivered(&mut st, step);
                            if slot.is_err() {
                                st.finished = true;
                                shared.stop_all(&mut st);
                            }
                            return Some(Some(slot));
                        }
                    }
                }
            }
            if st.alive == 0 {
                return Some(None);
            }
            st.consumer_waiting = true;
            st = match deadline {
                None => shared.wait(&shared.ready, st),
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        st.consumer_waiting = false;
                        return None;
                    }
                    shared
                        .ready
                        .wait_timeout(st, left)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0
                }
            };
            st.consumer_waiting = false;
        }
    }

    /// Stops and joins every worker, and drops every undelivered step.
    pub(crate) fn shut_down(&mut self) {
        {
            let mut st = self.shared.lock();
            self.shared.stop_all(&mut st);
        }
        for h in self.handles.drain(..) {
            // A worker never panics (steps are made under catch_unwind); if one did,
            // there is nothing left to clean up for it.
            let _ = h.join();
        }
        let (ready, queue) = {
            let mut st = self.shared.lock();
            (std::mem::take(&mut st.ready), std::mem::take(&mut st.queue))
        };
        drop((ready, queue));
    }
}

impl<T> Drop for Threads<T> {
    fn drop(&mut self) {
        self.shut_down();
    }
}

/// A worker: claim a step, make it, hand it over, until told to stop.
fn work<T>(shared: &Shared<T>, factory: &Factory<T>) {
    let mut scratch = factory.scratch();
    while !shared.stop.load(Ordering::Acquire) {
        let step = shared.claim.fetch_add(1, Ordering::Relaxed);
        if step > shared.failed.load(Ordering::Acquire) || shared.past_end(step) {
            break;
        }
        let slot = factory.make(step, &mut scratch);
        if slot.is_err() {
            shared.failed.fetch_min(step, Ordering::AcqRel);
        }
        if !shared.hand_over(step, slot) {
            break;
        }
    }
    let mut st = shared.lock();
    st.alive -= 1;
    if st.consumer_waiting {
        shared.ready.notify_one();
    }
}

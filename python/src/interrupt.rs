//! Long engine calls that Ctrl-C can stop.
//!
//! Python runs signal handlers (Ctrl-C's `KeyboardInterrupt`) only in the main
//! thread, with the GIL. A gather or an append of hundreds of MiB is one engine call
//! made without the GIL, so Ctrl-C would wait for all of it (seconds).
//!
//! - Batch reads (gathers, verifies) are one engine call each, given the engine's
//!   stop signal ([`read`]): between records, the calling thread takes the GIL for
//!   a moment every 20 ms to run pending signal handlers, and an exception from one
//!   stops the batch in the engine. The caller drops its partial output, so a
//!   partial result is never returned as a success.
//! - Appends are cut into consecutive slices, each one engine call sized
//!   from the measured rate to take about 40 ms, with the handlers run between
//!   slices ([`slicing`], [`slices`]): an exception stops the work there and the
//!   caller aborts the writer.
//!
//! Only the main thread asks: Python runs handlers nowhere else, so elsewhere the
//! work is one engine call as before.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use pyo3::prelude::*;
use zring_platform::fork_generation;

/// How long one append slice should take: appends start threads and wait for the
/// slowest at the end of every call, so they pay more per slice than reads.
const APPEND_SLICE_TIME: Duration = Duration::from_millis(40);

/// How to size slices. Costs are in the units of the work's `cost` function.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    /// Cost of the first slice, before a rate is measured. Work costing no more
    /// runs as one call.
    pub first: u64,
    /// The smallest slice: below it the engine call would not use every thread.
    pub min: u64,
    /// How long a slice should take once the rate is known.
    pub time: Duration,
}

impl Plan {
    /// A plan for engine calls that parallelise in units of `unit` bytes: slices
    /// give every core at least one unit, start at 4 MiB and aim at `time`.
    fn parallel(unit: u64, time: Duration) -> Self {
        let cores = zring_platform::available_cores() as u64;
        let min = cores.saturating_mul(unit);
        Plan {
            first: min.max(4 << 20),
            min,
            time,
        }
    }

    /// The plan for appends: the engine compresses chunks of `chunk_bytes` in
    /// parallel.
    pub fn append(chunk_bytes: u64) -> Self {
        Plan::parallel(chunk_bytes, APPEND_SLICE_TIME)
    }
}

/// Why [`read`] or [`slices`] stopped early.
pub enum Halt<E> {
    /// The work failed.
    Failed(E),
    /// A signal handler raised (`KeyboardInterrupt`, or whatever a handler raises).
    Signal(PyErr),
}

impl Halt<zring_engine::Error> {
    /// The Python exception: the engine error's class, or the handler's exception.
    pub fn into_py(self, py: Python<'_>) -> PyErr {
        match self {
            Halt::Failed(e) => crate::errors::engine(py, e),
            Halt::Signal(e) => e,
        }
    }
}

/// Runs one engine batch read (a gather, a verify, an image decode) without the GIL. From the main
/// thread, the engine's stop signal ([`zring_engine::Interrupt`], asked between
/// records by every thread of the batch) takes the GIL for a moment every
/// [`CHECK_EVERY`] to run pending signal handlers; an exception from one
/// (`KeyboardInterrupt`) stops the batch, which the engine reports as
/// `Error::Interrupted`, and is returned instead. Elsewhere Python runs no handlers,
/// so nothing is asked.
pub fn read<E: Send>(
    py: Python<'_>,
    work: impl FnOnce(&dyn zring_engine::Interrupt) -> Result<(), E> + Send,
) -> Result<(), Halt<E>> {
    if !on_main_thread(py) {
        return py
            .detach(|| work(&zring_engine::Never))
            .map_err(Halt::Failed);
    }
    let watch = SignalWatch {
        caller: std::thread::current().id(),
        last: Mutex::new(Instant::now()),
        raised: Mutex::new(None),
        stopped: AtomicBool::new(false),
    };
    let result = py.detach(|| work(&watch));
    let raised = watch
        .raised
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner);
    match (result, raised) {
        (_, Some(signal)) => Err(Halt::Signal(signal)),
        (Err(e), None) => Err(Halt::Failed(e)),
        (Ok(()), None) => Ok(()),
    }
}

/// The engine's stop signal for a batch read run from the main thread (see [`read`]).
struct SignalWatch {
    /// The thread that may run Python's signal handlers (the engine asks every
    /// thread of the batch; the others only follow the batch's stop).
    caller: std::thread::ThreadId,
    /// When the handlers last ran.
    last: Mutex<Instant>,
    /// What a handler raised.
    raised: Mutex<Option<PyErr>>,
    /// Set once a handler raised: every later question, from any thread of the
    /// batch, is answered yes (the handler ran once and will not raise again, and
    /// work asked per record, like a decode, must stop at its next record).
    stopped: AtomicBool,
}

impl zring_engine::Interrupt for SignalWatch {
    fn interrupted(&self) -> bool {
        if self.stopped.load(Ordering::Relaxed) {
            return true;
        }
        if std::thread::current().id() != self.caller {
            return false;
        }
        {
            let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
            if last.elapsed() < CHECK_EVERY {
                return false;
            }
            *last = Instant::now();
        }
        match Python::attach(|py| py.check_signals()) {
            Ok(()) => false,
            Err(e) => {
                *self.raised.lock().unwrap_or_else(PoisonError::into_inner) = Some(e);
                self.stopped.store(true, Ordering::Relaxed);
                true
            }
        }
    }
}

/// Whether work of `total` cost, run from this thread, is worth slicing.
pub fn slicing(py: Python<'_>, total: u64, plan: Plan) -> bool {
    total > plan.first && on_main_thread(py)
}

/// Runs `work` over items `0..n` in consecutive ranges (an append's slices), for a
/// caller that has already released the GIL (and may hold locks that it must keep
/// across slices: they must never be taken by a thread holding the GIL), checking
/// for signals between ranges. `cost(k)` is the cost of items `0..k`
/// (non-decreasing). `work` is called at least once (with `0..0` when `n` is 0), so
/// that it reports its own errors for empty work too. With `sliced` false, one call
/// does all the work.
pub fn slices<E>(
    sliced: bool,
    n: usize,
    cost: impl Fn(usize) -> u64,
    plan: Plan,
    mut work: impl FnMut(Range<usize>) -> Result<(), E>,
) -> Result<(), Halt<E>> {
    if !sliced {
        return work(0..n).map_err(Halt::Failed);
    }
    let mut target = plan.first.max(1);
    let mut start = 0;
    while start < n {
        let end = slice_end(start, n, target, &cost);
        let began = Instant::now();
        work(start..end).map_err(Halt::Failed)?;
        let spent = began.elapsed().as_secs_f64().max(1e-6);
        let done = cost(end) - cost(start);
        start = end;
        if start < n {
            Python::attach(|py| py.check_signals()).map_err(Halt::Signal)?;
            // Aim the next slice at the plan's time from the rate just measured,
            // growing at most 4x per slice (the first may have run cold).
            let aimed = (done as f64 * plan.time.as_secs_f64() / spent) as u64;
            target = aimed.clamp(plan.min.max(1), target.saturating_mul(4).max(plan.min));
        }
    }
    Ok(())
}

/// The end of the longest range from `start` whose cost is at most `target` (at
/// least one item).
fn slice_end(start: usize, n: usize, target: u64, cost: impl Fn(usize) -> u64) -> usize {
    let base = cost(start);
    let (mut lo, mut hi) = (start + 1, n);
    if cost(lo) - base > target {
        return lo;
    }
    // Invariant: cost(lo) - base <= target; the answer is in lo..=hi.
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if cost(mid) - base <= target {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    lo
}

/// Whether this is the thread Python runs signal handlers in.
fn on_main_thread(py: Python<'_>) -> bool {
    let me = py
        .import("_thread")
        .and_then(|t| t.call_method0("get_ident"))
        .and_then(|id| id.extract::<u64>());
    // If either cannot be known, slicing is the safe choice: it only adds checks.
    match (main_thread(py), me) {
        (Ok(main), Ok(me)) => main == me,
        _ => true,
    }
}

/// The ident of Python's main thread, looked up once per fork generation (a child
/// forked from another thread has that thread as its main thread). Two atomics, not
/// a once cell: a child forked while another thread was filling a once cell (this
/// lookup imports, so it can release the GIL midway) would wait forever for a filler
/// it does not have. Threads racing here store the same value.
fn main_thread(py: Python<'_>) -> PyResult<u64> {
    static IDENT: AtomicU64 = AtomicU64::new(0);
    static GENERATION: AtomicU64 = AtomicU64::new(u64::MAX);
    let generation = fork_generation();
    if GENERATION.load(Ordering::Acquire) == generation {
        return Ok(IDENT.load(Ordering::Relaxed));
    }
    let ident = py
        .import("threading")?
        .call_method0("main_thread")?
        .getattr("ident")?
        .extract::<u64>()?;
    IDENT.store(ident, Ordering::Relaxed);
    GENERATION.store(generation, Ordering::Release);
    Ok(ident)
}

/// How often a caller waiting without the GIL looks for signals: well under the
/// ~50 ms after which Ctrl-C feels ignored.
pub const CHECK_EVERY: Duration = Duration::from_millis(20);

/// Waits for `poll` to give a result, calling it without the GIL with a time limit
/// of [`CHECK_EVERY`] and running pending signal handlers between calls (on the main
/// thread; elsewhere Python runs none, so `poll` is called with a long limit). An
/// exception from a handler (`KeyboardInterrupt`) is returned: `poll` must leave its
/// work resumable when it times out (nothing consumed).
pub fn wait<T: Send>(
    py: Python<'_>,
    mut poll: impl FnMut(Duration) -> Option<T> + Send,
) -> PyResult<T> {
    let limit = if on_main_thread(py) {
        CHECK_EVERY
    } else {
        Duration::from_secs(3600)
    };
    loop {
        if let Some(t) = py.detach(|| poll(limit)) {
            return Ok(t);
        }
        if limit == CHECK_EVERY {
            py.check_signals()?;
        }
    }
}

/// Runs `work` on a thread of its own and waits for it as [`wait`] does. On a
/// signal the exception is returned at once and `work` runs to its end in the
/// background, its result dropped: `work` must own everything it touches, and
/// must leave nothing half done that the caller could see (close a loader already
/// taken from its owner, train a dictionary from copied records).
pub fn wait_for_thread<T: Send + 'static>(
    py: Python<'_>,
    name: &str,
    work: impl FnOnce() -> T + Send + 'static,
) -> PyResult<T> {
    if !on_main_thread(py) {
        return Ok(py.detach(work));
    }
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let thread = std::thread::Builder::new()
        .name(format!("zring-{name}"))
        .spawn(move || {
            let _ = tx.send(work());
        })
        .map_err(|e| pyo3::exceptions::PyOSError::new_err(format!("cannot start a thread: {e}")))?;
    let mut thread = Some(thread);
    wait(py, move |limit| {
        let got = match rx.recv_timeout(limit) {
            Ok(t) => Some(t),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => return None,
            // The thread panicked before sending.
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => None,
        };
        // It has sent (or died): joining is prompt, and no thread of this call
        // outlives it unless a signal cut the wait short.
        if let Some(t) = thread.take() {
            let _ = t.join();
        }
        Some(got)
    })?
    .ok_or_else(|| {
        pyo3::exceptions::PyRuntimeError::new_err(format!(
            "internal error (a zring bug): the {name} thread panicked"
        ))
    })
}

//! The one batch executor. Every batch read (a store's dense or ragged gather, a
//! dataset's fields across its shards, a verify) is cut into tasks here, by one
//! rule that asks each store for its policy, and run here on the caller and the
//! pool's workers, with one way of collecting the first error and one stop signal
//! checked between records.
//!
//! ```text
//! store gather    ─┐                    ┌─► task: one store's records into their slots
//! ragged gather   ─┼─► cut (per store) ─┼─► task ...          (caller + pool workers)
//! dataset gather  ─┤     policy:        └─► task ...
//! verify          ─┘     remote? streams reads? compressed?
//! ```
//!
//! The cutting rule, per store's share of a batch (its *bucket*):
//! - a remote store's bucket is one task: one request plan, neighbours coalesced
//!   across the whole bucket, `in_flight` GETs deep;
//! - a store read by io_uring gets at most one task per thread, so each thread's
//!   ring keeps its whole share `queue_depth` deep;
//! - otherwise tasks of about [`TASK_BYTES`] of output, [`COMPRESSED_WORK_FACTOR`]
//!   times smaller for compressed stores (a byte decoded costs that much more than a
//!   byte copied).
//!
//! A batch of fewer than [`INLINE_BYTES`] (scaled the same way) runs on the caller
//! alone: waking a worker costs more than the copy.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

use zring_platform::Pool;

use crate::error::{Error, InternalError, Result};

/// Aim for tasks of about this many output bytes: small enough that a caller whose
/// helper wakes late still takes most of a small batch (W2: 64 KiB tasks gave
/// 3.5-4.1 M records/s against 3.0-3.6 M with 256 KiB), large enough to amortise
/// the claim.
pub(crate) const TASK_BYTES: usize = 64 << 10;
/// Below this many output bytes a batch runs on the caller alone: waking a worker
/// costs more than the copy.
pub(crate) const INLINE_BYTES: usize = 64 << 10;
/// Decoding a byte costs roughly this many times copying it, so compressed batches
/// are cut into tasks (and wake helpers at sizes) this much smaller: a 180 KiB ragged
/// zstd batch is otherwise one task and the second core idles (measured in
/// docs/benchmarks/gathers.md: W3 zstd-dict 2-thread scaling 1.03-1.09x ->
/// 1.40-1.71x).
pub(crate) const COMPRESSED_WORK_FACTOR: usize = 8;
/// A task asks the stop signal at least this often, in records and in output bytes:
/// often enough that a stop lands within about a millisecond, rarely enough that the
/// question costs nothing next to the reads.
const CHECK_RECORDS: usize = 32;
const CHECK_BYTES: usize = 256 << 10;

/// Asked between records whether a batch should stop early: Python's Ctrl-C, a
/// dropped async request, a service's deadline. A batch that stops returns
/// [`Error::Interrupted`] and its destination holds no result.
pub trait Interrupt: Sync {
    /// Whether to stop. Called on every thread working on the batch, between
    /// records (at most every 32 records or 256 KiB of output), so it must be
    /// cheap and thread-safe.
    fn interrupted(&self) -> bool;
}

impl Interrupt for AtomicBool {
    fn interrupted(&self) -> bool {
        self.load(Ordering::Relaxed)
    }
}

/// Never stops: what every gather without a stop signal runs with.
#[derive(Clone, Copy, Debug, Default)]
pub struct Never;

impl Interrupt for Never {
    fn interrupted(&self) -> bool {
        false
    }
}

/// How one store's share of a batch is cut into tasks (see the module documentation).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Policy {
    /// One request plan per bucket (object storage).
    pub remote: bool,
    /// One task per thread keeps a ring deep (io_uring).
    pub streams_reads: bool,
    /// How much more a byte costs to produce than to copy.
    pub work_factor: usize,
}

impl Policy {
    /// Cuts `n` records of about `avg_bytes` each into `(tasks, records per task)`
    /// for a batch run by `threads` threads.
    pub fn cut(&self, n: usize, avg_bytes: usize, threads: usize) -> (usize, usize) {
        if self.remote {
            return (usize::from(n > 0), n.max(1));
        }
        let mut per_task = TASK_BYTES / self.work_factor / avg_bytes.max(1);
        if self.streams_reads {
            per_task = per_task.max(n.div_ceil(threads.max(1)));
        }
        let per_task = per_task.clamp(1, n.max(1));
        if self.streams_reads || threads < 2 || n == 0 {
            return (n.div_ceil(per_task), per_task);
        }
        // As many tasks as a multiple of the threads, evened out, so no thread is
        // left an odd task at the end: W3's 157 KiB batches were three tasks of 106,
        // 106 and 44 records, two of them on one thread.
        let tasks = n.div_ceil(per_task).next_multiple_of(threads).min(n);
        let per_task = n.div_ceil(tasks);
        (n.div_ceil(per_task), per_task)
    }
}

/// Threads a batch runs on, counting the caller: `setting` (`ReadOptions::threads`),
/// where 0 means the caller and every worker of `pool`.
pub(crate) fn threads(setting: usize, pool: &Pool) -> usize {
    match setting {
        0 => pool.workers() + 1,
        t => t,
    }
}

/// Pool workers that help a batch of `out_bytes` whose costliest store has
/// `work_factor`, run by `threads` threads (the caller counted).
pub(crate) fn helpers_for(out_bytes: usize, work_factor: usize, threads: usize) -> usize {
    if out_bytes < INLINE_BYTES / work_factor.max(1) {
        0
    } else {
        threads.saturating_sub(1)
    }
}

/// What a running task is given: the batch's stop signal, watched between records.
pub(crate) struct Watch<'b> {
    stop: &'b dyn Interrupt,
    stopped: &'b AtomicBool,
}

impl<'b> Watch<'b> {
    /// `items` (record, slot) until the batch is stopped: the stop signal is asked
    /// every [`CHECK_RECORDS`] records or [`CHECK_BYTES`] of output, and once it
    /// answers yes (here or in another task) no more items are yielded.
    pub fn items<I>(&self, items: I) -> WatchedItems<'_, 'b, I> {
        WatchedItems {
            items,
            watch: self,
            records: 0,
            bytes: 0,
        }
    }

    /// Whether the batch should stop now (asks the signal).
    pub fn stop_now(&self) -> bool {
        if self.stopped.load(Ordering::Relaxed) {
            return true;
        }
        if self.stop.interrupted() {
            self.stopped.store(true, Ordering::Relaxed);
            return true;
        }
        false
    }
}

/// The iterator of [`Watch::items`].
pub(crate) struct WatchedItems<'w, 'b, I> {
    items: I,
    watch: &'w Watch<'b>,
    records: usize,
    bytes: usize,
}

impl<'d, I> Iterator for WatchedItems<'_, '_, I>
where
    I: Iterator<Item = (u64, &'d mut [u8])>,
{
    type Item = (u64, &'d mut [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        if self.records >= CHECK_RECORDS || self.bytes >= CHECK_BYTES {
            self.records = 0;
            self.bytes = 0;
            if self.watch.stop_now() {
                return None;
            }
        }
        let item = self.items.next()?;
        self.records += 1;
        self.bytes += item.1.len();
        Some(item)
    }

    /// The items' own hint, so readers size their buffers once (a stopped batch
    /// yields fewer, and is an error whatever it filled).
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.items.size_hint()
    }
}

/// Runs `tasks` tasks, each on the next part taken from `parts`, on the caller and up
/// to `helpers` of `pool`'s workers; returns the first error a task reported, or
/// [`Error::Interrupted`] when `stop` stopped the batch.
///
/// Parts are taken from one shared iterator under a lock held only for the split
/// itself, never during a read, so every thread writes a `&mut` part of its own.
pub(crate) fn run<P, I, F>(
    pool: &Pool,
    tasks: usize,
    helpers: usize,
    parts: I,
    stop: &dyn Interrupt,
    task: F,
) -> Result<()>
where
    I: Iterator<Item = P> + Send,
    F: Fn(P, &Watch<'_>) -> Result<()> + Sync,
{
    let first_err: OnceLock<Error> = OnceLock::new();
    let stopped = AtomicBool::new(false);
    let watch = Watch {
        stop,
        stopped: &stopped,
    };
    if watch.stop_now() {
        return Err(Error::Interrupted);
    }
    let parts = Mutex::new(parts);
    pool.run(tasks, helpers, |_| {
        if first_err.get().is_some() || watch.stop_now() {
            return;
        }
        // Held for the split only; a panicking task never holds it.
        let part = parts.lock().unwrap_or_else(PoisonError::into_inner).next();
        let r = match part {
            Some(part) => task(part, &watch),
            None => Err(Error::Internal(InternalError::Missing {
                what: "a batch task's part",
            })),
        };
        if let Err(e) = r {
            let _ = first_err.set(e);
        }
    });
    match first_err.into_inner() {
        Some(e) => Err(e),
        None if stopped.load(Ordering::Relaxed) => Err(Error::Interrupted),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cutting_follows_each_store_policy() {
        let local = Policy {
            remote: false,
            streams_reads: false,
            work_factor: 1,
        };
        // 64 KiB tasks of 4 KiB records, evened out to a multiple of the threads.
        assert_eq!(local.cut(100, 4096, 2), (8, 13));
        assert_eq!(local.cut(100, 4096, 1), (7, 16));
        // W3: 256 records of ~615 B are four tasks of 64 on two threads, not three.
        assert_eq!(local.cut(256, 615, 2), (4, 64));
        // Compressed: 8x smaller tasks.
        let zstd = Policy {
            work_factor: COMPRESSED_WORK_FACTOR,
            ..local
        };
        assert_eq!(zstd.cut(100, 4096, 2), (50, 2));
        // io_uring: one task per thread holding its whole share.
        let uring = Policy {
            streams_reads: true,
            ..local
        };
        assert_eq!(uring.cut(100, 4096, 2), (2, 50));
        assert_eq!(uring.cut(100, 4096, 3), (3, 34));
        // Remote: one plan for the bucket; nothing for an empty one.
        let remote = Policy {
            remote: true,
            ..local
        };
        assert_eq!(remote.cut(100, 4096, 2), (1, 100));
        assert_eq!(remote.cut(0, 4096, 2), (0, 1));
        // Records larger than a task: one per task.
        assert_eq!(local.cut(3, 1 << 20, 2), (3, 1));
        assert_eq!(local.cut(0, 0, 2), (0, 1));
    }

    #[test]
    fn small_batches_run_inline() {
        assert_eq!(helpers_for(1000, 1, 4), 0);
        assert_eq!(helpers_for(INLINE_BYTES, 1, 4), 3);
        assert_eq!(helpers_for(INLINE_BYTES / 8, COMPRESSED_WORK_FACTOR, 4), 3);
        assert_eq!(helpers_for(INLINE_BYTES, 1, 1), 0);
    }
}

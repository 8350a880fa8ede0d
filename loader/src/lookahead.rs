//! How far ahead the loader reads: enough future steps in flight to keep the
//! device's queue full across step boundaries, no more than a memory budget holds.
//!
//! The sampler is a pure function of the step number, so the records of every future
//! step are known now. Each worker makes one whole step (its reads go to the device
//! together, neighbours merged by the engine's planner), so the reads in flight are
//! about `steps being made x reads each step keeps in flight`. The depth is chosen
//! from three figures, all measured at construction:
//!
//! - the reads one step needs: step `start`'s records planned with
//!   [`Store::plan`](zring_engine::Store::plan) under the rule the store's source
//!   executes (block-aligned merging for O_DIRECT, touching neighbours otherwise);
//! - the device's queue depth (what the block device under the store works on at
//!   once, [`zring_platform::device_queue_depth`]: its hardware queue's tags, not
//!   the larger scheduler queue in front of them; [`DEFAULT_DEVICE_DEPTH`] where
//!   there is none, e.g. tmpfs); none at all when
//!   every store is read through its memory mapping (`auto` maps a store that is
//!   resident in the page cache): no read waits for a device there, and threads
//!   beyond the ones asked for would only compete for the cores;
//! - the bytes one step's batch buffers take, against the budget.
//!
//! Steps made at once = `ceil(device depth / reads in flight per step) + 1`: the
//! `+ 1` is the step whose reads are queued while another step's last reads drain,
//! which is what keeps the queue full at a step boundary. Each step made ahead needs
//! a place in the reorder buffer, so `prefetch` is at least that many; and
//! `workers + prefetch + 1` live steps must fit the budget, which wins over the
//! queue (memory is the hard limit; at least one worker and one place remain).
//!
//! The planning only reads table entries, so it is the same for any source: a
//! remote object-store reader sizes its look-ahead the same way from its own depth.

use std::fs::File;

use zring_engine::{Backend, Coalesce, Store};

use crate::options::{LoaderOptions, Lookahead};
use crate::view::{Kind, Plan};

/// The queue depth assumed where the store is not on a block device.
pub const DEFAULT_DEVICE_DEPTH: usize = 64;

/// What the depth is computed from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Figures {
    /// Bytes of one step's batch buffers (all streams, all shards).
    pub(crate) step_bytes: u64,
    /// Reads one step's records plan into (after merging).
    pub(crate) reads_per_step: usize,
    /// Reads one step's gather keeps in flight at most.
    pub(crate) gather_depth: usize,
    /// Requests the device queues (0: no read goes to a device).
    pub(crate) device_depth: usize,
}

/// Workers and prefetch for `budget` bytes given `figures`, never below the
/// `workers` and `prefetch` asked for unless the budget says so.
pub(crate) fn depth(f: Figures, budget: u64, workers: usize, prefetch: usize) -> (usize, usize) {
    let per_step = f.reads_per_step.min(f.gather_depth).max(1);
    let for_queue = f.device_depth.div_ceil(per_step) + 1;
    // Live steps are workers + prefetch + 1 (the consumer's): at least 3.
    let fit = usize::try_from(budget / f.step_bytes.max(1))
        .unwrap_or(usize::MAX)
        .max(3);
    let w = workers.max(for_queue).min((fit - 1) / 2).max(1);
    let p = prefetch.max(w).min(fit - 1 - w).max(1);
    (w, p)
}

/// The options the loader runs with: `opts` as given with [`Lookahead::Fixed`] or
/// no workers, else workers and prefetch sized by [`depth`].
pub(crate) fn resolve(opts: &LoaderOptions, plan: &Plan, indices: &[u64]) -> LoaderOptions {
    let Lookahead::Budget { bytes } = opts.lookahead else {
        return opts.clone();
    };
    if opts.workers == 0 {
        return opts.clone();
    }
    let f = figures(plan, indices);
    let (workers, prefetch) = depth(f, bytes, opts.workers, opts.prefetch);
    LoaderOptions {
        workers,
        prefetch,
        ..opts.clone()
    }
}

/// Measures the figures on the step whose global batch is `indices`.
pub(crate) fn figures(plan: &Plan, indices: &[u64]) -> Figures {
    let mut step_bytes = 0u64;
    let mut reads_per_step = 0usize;
    let mut device_depth = None;
    let mut gather_depth = 1;
    let mut reads_a_device = false;
    for stream in &plan.streams {
        for (k, shard) in indices.chunks_exact(plan.shard_len.max(1)).enumerate() {
            let Some(view) = stream.views.get(k) else {
                continue;
            };
            // A dataset field is measured on its first shard's store (its indices are
            // global, so its reads are counted one per record).
            let records = view.source();
            let (store, planned) = match (records.as_store(), records.sample_store()) {
                (Some(s), _) => (s, true),
                (None, Some(s)) => (s, false),
                (None, None) => continue,
            };
            step_bytes += match &stream.kind {
                Kind::Dense { shard_bytes, .. } => *shard_bytes as u64,
                // A ragged shard's size is known only once gathered: estimate it from
                // the store's mean record (stored bytes; larger once decompressed).
                Kind::Ragged { .. } => store.file_bytes() / store.len().max(1) * shard.len() as u64,
                // Decoded pixels, and the encoded records gathered on the way.
                Kind::Image { decode, .. } => {
                    (decode.out_bytes() as u64 + store.file_bytes() / store.len().max(1))
                        * shard.len() as u64
                }
            };
            reads_per_step += if planned {
                reads(store, shard)
            } else {
                shard.len()
            };
            gather_depth = gather_depth.max(store.reads_in_flight());
            reads_a_device |= store.backend() != Backend::Mmap;
            device_depth = device_depth.or_else(|| queue_depth(store));
        }
    }
    Figures {
        step_bytes,
        reads_per_step,
        gather_depth,
        device_depth: match reads_a_device {
            true => device_depth.unwrap_or(DEFAULT_DEVICE_DEPTH),
            false => 0,
        },
    }
}

/// The reads `shard`'s records plan into on `store` (one per record if the plan
/// fails: the step itself will report why).
fn reads(store: &Store, shard: &[u64]) -> usize {
    let rule = if store.is_direct() {
        Coalesce::DIRECT
    } else {
        Coalesce::BUFFERED
    };
    store
        .plan(shard, rule)
        .map_or(shard.len(), |p| p.reads.len())
}

/// The queue depth of the device under `store`'s file, if it is on one.
fn queue_depth(store: &Store) -> Option<usize> {
    File::open(store.path())
        .ok()
        .and_then(|f| zring_platform::device_queue_depth(&f))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fig(step_bytes: u64, reads_per_step: usize, device_depth: usize) -> Figures {
        Figures {
            step_bytes,
            reads_per_step,
            gather_depth: 128,
            device_depth,
        }
    }

    #[test]
    fn enough_steps_to_fill_the_device_queue_plus_one_for_the_boundary() {
        // 256 reads a step, 128 in flight per gather, a queue of 256: 2 steps fill
        // it, a third covers the boundary.
        assert_eq!(depth(fig(1 << 20, 256, 256), 1 << 30, 1, 1), (3, 3));
        // Merged reads: 8 reads a step need many steps for a queue of 256.
        assert_eq!(depth(fig(1 << 20, 8, 256), 1 << 30, 1, 1), (33, 33));
        // A shallow queue needs only the boundary step.
        assert_eq!(depth(fig(1 << 20, 256, 32), 1 << 30, 1, 1), (2, 2));
    }

    #[test]
    fn the_budget_wins_over_the_queue_and_live_steps_fit_it() {
        // 32 MiB steps in a 256 MiB budget: 8 live steps at most.
        let (w, p) = depth(fig(32 << 20, 8, 256), 256 << 20, 1, 1);
        assert!(w + p < 8, "{w} {p}");
        assert_eq!((w, p), (3, 3));
        // A budget smaller than one step still runs: one worker, one place.
        assert_eq!(depth(fig(1 << 30, 8, 256), 1 << 20, 4, 4), (1, 1));
    }

    #[test]
    fn stores_read_through_their_mapping_keep_the_asked_depth() {
        // No device queue to fill (a resident store, mapped): exactly what was asked.
        assert_eq!(depth(fig(1 << 20, 256, 0), 1 << 30, 2, 4), (2, 4));
        assert_eq!(depth(fig(1 << 20, 2, 0), 1 << 30, 1, 1), (1, 1));
    }

    #[test]
    fn asked_workers_and_prefetch_are_a_floor_within_the_budget() {
        assert_eq!(depth(fig(1 << 20, 256, 32), 1 << 30, 6, 10), (6, 10));
        // Prefetch never below the steps made ahead (each needs a place).
        assert_eq!(depth(fig(1 << 20, 256, 256), 1 << 30, 1, 1).1, 3);
    }
}

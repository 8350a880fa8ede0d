//! The `Loader`: construction, iteration, position, seek and close.

use std::sync::Arc;

use zring_platform::{BufPool, BufPoolStats};
use zring_sampler::Sampler;

use crate::batch::{Batch, Step};
use crate::error::{LoaderError, OptionsError, Result, TransformError};
use crate::lookahead;
use crate::options::LoaderOptions;
use crate::pipeline::Threads;
use crate::produce::{Factory, Scratch, TransformFn};
use crate::schedule::Schedule;
use crate::view::{Plan, View};

/// A step-based loader over several aligned streams; see the [crate docs](crate).
/// Iterate it (`Iterator<Item = Result<Step<T>>>`). Over a [`Sampler`] it is endless;
/// over a finite [`EpochPlan`](zring_sampler::EpochPlan) it ends after the plan's
/// last step. It also ends after a failed step is delivered or after
/// [`close`](Self::close).
pub struct Loader<T = Batch> {
    factory: Arc<Factory<T>>,
    options: LoaderOptions,
    run: Run<T>,
}

enum Run<T> {
    /// `workers = 0`: steps are made in `next`.
    Inline {
        next: u64,
        finished: bool,
        scratch: Scratch,
    },
    Threads(Threads<T>),
    /// After `close`: remembers where it was.
    Closed {
        at: u64,
    },
}

/// Buffer and vector counters of a loader (see [`Loader::stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoaderStats {
    /// The pool of ordinary batch buffers.
    pub buffers: BufPoolStats,
    /// The pool of pinned batch buffers (all zero when no view is pinned).
    pub pinned_buffers: BufPoolStats,
    /// Small vectors (`cu_seqlens`, ragged shapes, a step's list of tensors) the
    /// loader had to create because none was free to recycle.
    pub vecs_created: u64,
    /// Records left out of the steps delivered so far because their images could
    /// not be decoded ([`OnError::Skip`](crate::OnError::Skip)); steps the workers
    /// made ahead count once delivered.
    pub images_skipped: u64,
    /// Records read in place of a bad image in the steps delivered so far
    /// ([`OnError::Substitute`](crate::OnError::Substitute)).
    pub images_substituted: u64,
}

fn collect_streams<I, K, V>(streams: I) -> Vec<(String, Vec<View>)>
where
    I: IntoIterator<Item = (K, V)>,
    K: Into<String>,
    V: IntoIterator,
    V::Item: Into<View>,
{
    streams
        .into_iter()
        .map(|(k, v)| (k.into(), v.into_iter().map(Into::into).collect()))
        .collect()
}

impl Loader<Batch> {
    /// A loader that delivers the gathered [`Batch`] of every step.
    ///
    /// `streams` maps each name to its views, one per placement (`Store`s convert
    /// into pageable views). Every stream has the same number of views, every store
    /// holds the same number of records (record `i` of every stream belongs
    /// together), and the schedule's batch is divisible by the number of views (for
    /// an epoch plan, its short last step too); otherwise this fails with the
    /// matching [`LoaderError`]. The schedule may draw from fewer records than the
    /// stores hold, not more. `schedule` is a [`Sampler`] (endless, a full batch
    /// every step) or an [`EpochPlan`](zring_sampler::EpochPlan) (see
    /// [`Schedule`]); the loader starts at its current step.
    pub fn new<I, K, V>(
        streams: I,
        schedule: impl Into<Schedule>,
        options: LoaderOptions,
    ) -> Result<Self>
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: IntoIterator,
        V::Item: Into<View>,
    {
        Self::build(
            collect_streams(streams),
            schedule.into(),
            options,
            Arc::new(|s: Step<Batch>| Ok(s.data)),
        )
    }
}

impl<T: Send + 'static> Loader<T> {
    /// A loader that runs `transform` on every gathered step (in the worker that
    /// gathered it) and delivers what it returns. An `Err` (or a panic) is delivered
    /// as [`LoaderError::Transform`] (or [`LoaderError::Panicked`]) at its step.
    pub fn with_transform<I, K, V, F>(
        streams: I,
        schedule: impl Into<Schedule>,
        options: LoaderOptions,
        transform: F,
    ) -> Result<Self>
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: IntoIterator,
        V::Item: Into<View>,
        F: Fn(Step<Batch>) -> Result<T, TransformError> + Send + Sync + 'static,
    {
        Self::build(
            collect_streams(streams),
            schedule.into(),
            options,
            Arc::new(transform),
        )
    }

    fn build(
        streams: Vec<(String, Vec<View>)>,
        schedule: Schedule,
        options: LoaderOptions,
        transform: Arc<TransformFn<T>>,
    ) -> Result<Self> {
        if options.workers > 0 && options.prefetch == 0 {
            return Err(LoaderError::InvalidOptions(OptionsError::ZeroPrefetch {
                workers: options.workers,
            }));
        }
        let plan = Plan::new(streams, &schedule)?;
        let start = schedule.start();
        let options = lookahead::resolve(&options, &plan, &schedule.indices(start));
        let factory = Arc::new(Factory::new(plan, schedule, &options, transform)?);
        let run = Self::start(&factory, &options, start)?;
        Ok(Self {
            factory,
            options,
            run,
        })
    }

    fn start(factory: &Arc<Factory<T>>, options: &LoaderOptions, at: u64) -> Result<Run<T>> {
        Ok(if options.workers == 0 {
            Run::Inline {
                next: at,
                finished: false,
                scratch: factory.scratch(),
            }
        } else {
            Run::Threads(Threads::start(factory, options, at)?)
        })
    }

    /// Moves to `step`: the next steps delivered are `step`, `step + 1`, ... exactly
    /// as in an uninterrupted run from the same schedule (past the end of a finite
    /// one, iteration simply ends). Steps made ahead are dropped
    /// and the workers restarted. Also restarts a loader that delivered a failure or
    /// was closed. Fails only if a worker thread cannot be started.
    pub fn seek(&mut self, step: u64) -> Result<()> {
        // Stop the old workers before starting new ones (their buffers return first).
        self.run = Run::Closed { at: step };
        self.run = Self::start(&self.factory, &self.options, step)?;
        Ok(())
    }
}

impl<T> Loader<T> {
    /// Where the loader is: the step the next delivery will carry (in step order),
    /// i.e. the step to `seek` to when resuming after the steps delivered so far. In
    /// completion order: the lowest step not yet delivered.
    pub fn step(&self) -> u64 {
        match &self.run {
            Run::Inline { next, .. } => *next,
            Run::Threads(t) => t.position(),
            Run::Closed { at } => *at,
        }
    }

    /// Stops and joins every worker thread (each finishes at most its current
    /// gather) and drops the steps made ahead. Iteration then yields `None`.
    /// Idempotent; dropping the loader does the same.
    pub fn close(&mut self) {
        let at = self.step();
        // Dropping `Threads` stops and joins them.
        self.run = Run::Closed { at };
    }

    /// The loader's options, with the workers and prefetch the look-ahead chose.
    pub fn options(&self) -> &LoaderOptions {
        &self.options
    }

    /// The sampler the steps are drawn from (its own step counter is not used).
    /// For an epoch plan, the stream its positions are read from (batch 1); `None`
    /// for a mixture, which draws from one sampler per source (see
    /// [`schedule`](Self::schedule)).
    pub fn sampler(&self) -> Option<&Sampler> {
        match &self.factory.schedule {
            Schedule::Sampler(s) => Some(s),
            Schedule::Epochs(p) => Some(p.stream()),
            Schedule::Mixture(_) | Schedule::MixedEpochs(_) => None,
        }
    }

    /// The schedule the steps are drawn from (its own step counter is not used).
    pub fn schedule(&self) -> &Schedule {
        &self.factory.schedule
    }

    /// Stream names, in delivery order.
    pub fn stream_names(&self) -> impl Iterator<Item = &str> {
        self.factory.plan.names.iter().map(|n| &**n)
    }

    /// Shards per step (views per stream).
    pub fn shards(&self) -> usize {
        self.factory.plan.shards
    }

    /// The pool that ordinary batch buffers come from.
    pub fn buffer_pool(&self) -> &BufPool {
        &self.factory.pageable
    }

    /// Buffer and vector counters: `buffers.live_high_water` shows the memory bound
    /// at work, and `buffers.allocations` / `vecs_created` stop growing once the run
    /// is steady.
    pub fn stats(&self) -> LoaderStats {
        let (images_skipped, images_substituted) = self.factory.bad_images.totals();
        LoaderStats {
            buffers: self.factory.pageable.stats(),
            pinned_buffers: self
                .factory
                .pinned
                .as_ref()
                .map(BufPool::stats)
                .unwrap_or_default(),
            vecs_created: self.factory.vecs_created(),
            images_skipped,
            images_substituted,
        }
    }

    /// Counts what `item`, about to be handed to the caller, delivers.
    fn delivering(&self, item: Option<Result<Step<T>>>) -> Option<Result<Step<T>>> {
        if let Some(Ok(step)) = &item {
            self.factory.bad_images.delivered(step.step);
        }
        item
    }
}

impl<T: Send + 'static> Loader<T> {
    /// [`Iterator::next`] that waits at most about `timeout` for a step made by the
    /// workers: `Err(Pending)` if none is ready by then. Nothing is consumed by a
    /// call that times out, so the next call delivers the same step an uninterrupted
    /// `next` would have (a caller waits in slices to stay responsive, e.g. to
    /// Ctrl-C). A step the caller makes itself (`consumer_helps`, or no workers) is
    /// finished before this returns, whatever the timeout.
    pub fn next_within(
        &mut self,
        timeout: std::time::Duration,
    ) -> std::result::Result<Option<Result<Step<T>>>, Pending> {
        match &mut self.run {
            Run::Threads(t) => {
                let item = t.next_within(Some(timeout)).ok_or(Pending)?;
                Ok(self.delivering(item))
            }
            _ => Ok(self.next()),
        }
    }
}

/// No step was ready within the time [`Loader::next_within`] was given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pending;

impl<T: Send + 'static> Iterator for Loader<T> {
    type Item = Result<Step<T>>;

    /// The next step, waiting for it if needed. After the last step of a finite
    /// schedule, after a failed step has been delivered, or after `close`, returns
    /// `None`.
    fn next(&mut self) -> Option<Self::Item> {
        let item = match &mut self.run {
            Run::Inline {
                next,
                finished,
                scratch,
            } => {
                if *finished || self.factory.schedule.is_past_end(*next) {
                    return None;
                }
                let slot = self.factory.make(*next, scratch);
                *next = next.wrapping_add(1);
                *finished = slot.is_err();
                Some(slot)
            }
            Run::Threads(t) => t.next(),
            Run::Closed { .. } => None,
        };
        self.delivering(item)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, None)
    }
}

impl<T> std::fmt::Debug for Loader<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loader")
            .field("streams", &self.factory.plan.names)
            .field("shards", &self.factory.plan.shards)
            .field("options", &self.options)
            .field("step", &self.step())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::Tensor;

    fn send_and_sync<X: Send + Sync>() {}
    fn send<X: Send>() {}

    #[test]
    fn loaders_move_between_threads_and_steps_are_shareable() {
        // A Python binding or a trainer hands the loader to another thread, and
        // shares delivered steps with device-copy threads.
        send::<Loader<Batch>>();
        send::<Loader<Vec<u8>>>();
        send_and_sync::<Step<Batch>>();
        send_and_sync::<Tensor>();
        send_and_sync::<LoaderError>();
    }
}

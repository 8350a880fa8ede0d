//! How a loader runs: threads, read-ahead and delivery order.

/// The order in which steps reach the consumer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Delivery {
    /// Steps arrive in step order whatever the workers' timing (a reorder buffer of
    /// `prefetch` slots): a run is reproducible, and `seek` resumes it exactly.
    #[default]
    StepOrder,
    /// Steps arrive as workers finish them: a slow gather does not hold back the
    /// others. Every step still arrives once; [`Loader::step`](crate::Loader::step)
    /// is then the lowest step not yet delivered. A failed step is delivered when it
    /// completes, and steps still being made at that moment are dropped.
    CompletionOrder,
}

/// How far ahead the loader reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookahead {
    /// `workers` steps made at once and `prefetch` ready places, exactly as given.
    Fixed,
    /// As many steps made at once as keep the device's queue full across step
    /// boundaries (measured at construction: the reads one step plans into and the
    /// device's queue depth), within `bytes` of step memory; `workers` and
    /// `prefetch` are floors. See [`Loader::options`](crate::Loader::options) for
    /// what was chosen.
    Budget {
        /// The most bytes the loader's live steps may take.
        bytes: u64,
    },
}

impl Lookahead {
    /// The default budget: 512 MiB of live steps.
    pub const DEFAULT: Lookahead = Lookahead::Budget { bytes: 512 << 20 };
}

impl Default for Lookahead {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// Loader settings. `Default` sizes the look-ahead from a 512 MiB budget and the
/// device (at least 2 workers and 4 ready steps), step order, the consumer helping;
/// [`LoaderOptions::new`] fixes workers and prefetch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoaderOptions {
    /// Threads that each make whole steps (draw, gather, transform) in parallel;
    /// every gather also uses the engine's pool. 0 makes each step in the
    /// consumer's thread when it asks for it (no threads, no read-ahead).
    pub workers: usize,
    /// Finished steps kept ready for the consumer (at least 1 with workers). Live
    /// batch memory is at most `workers + prefetch` steps, plus the steps the
    /// consumer still holds.
    pub prefetch: usize,
    /// Step order (default) or completion order.
    pub delivery: Delivery,
    /// When the consumer asks for a step and none is ready, its thread makes the
    /// next unclaimed step itself instead of sleeping (the caller works too, as in
    /// the engine's gathers), when that step has a place in the reorder buffer.
    /// This saves a cross-thread wake-up per step when the workers cannot keep up,
    /// and keeps the memory bound. `false` leaves all making to the workers, so a
    /// `next` never takes longer than waiting for the workers would.
    pub consumer_helps: bool,
    /// Whether `workers` and `prefetch` are used as given or sized from a memory
    /// budget and the device's queue (the default).
    pub lookahead: Lookahead,
}

impl Default for LoaderOptions {
    fn default() -> Self {
        Self {
            workers: 2,
            prefetch: 4,
            delivery: Delivery::StepOrder,
            consumer_helps: true,
            lookahead: Lookahead::DEFAULT,
        }
    }
}

impl LoaderOptions {
    /// Default options with exactly `workers` threads and `prefetch` ready steps
    /// ([`Lookahead::Fixed`]).
    pub fn new(workers: usize, prefetch: usize) -> Self {
        Self {
            workers,
            prefetch,
            lookahead: Lookahead::Fixed,
            ..Self::default()
        }
    }

    /// The same options with `lookahead`.
    pub fn with_lookahead(self, lookahead: Lookahead) -> Self {
        Self { lookahead, ..self }
    }

    /// The same options with `delivery`.
    pub fn with_delivery(self, delivery: Delivery) -> Self {
        Self { delivery, ..self }
    }

    /// The same options with `consumer_helps`.
    pub fn with_consumer_helps(self, consumer_helps: bool) -> Self {
        Self {
            consumer_helps,
            ..self
        }
    }

    /// The most steps alive at once while the consumer holds one step at a time:
    /// `workers + prefetch + 1` (1 with `workers = 0`). Steps the consumer keeps
    /// come on top.
    pub fn max_live_steps(&self) -> usize {
        if self.workers == 0 {
            1
        } else {
            self.workers + self.prefetch + 1
        }
    }
}

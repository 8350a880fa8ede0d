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

/// Loader settings. `Default` is 2 workers, 4 steps of read-ahead, step order, the
/// consumer helping.
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
}

impl Default for LoaderOptions {
    fn default() -> Self {
        Self {
            workers: 2,
            prefetch: 4,
            delivery: Delivery::StepOrder,
            consumer_helps: true,
        }
    }
}

impl LoaderOptions {
    /// Default options with `workers` threads and `prefetch` ready steps.
    pub fn new(workers: usize, prefetch: usize) -> Self {
        Self {
            workers,
            prefetch,
            ..Self::default()
        }
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

//! Packed batches made ahead on a thread of their own, so a training loop (and
//! Python, which releases the GIL while it waits) never waits for a plan, a
//! gather or a layout that could have been done before it asked.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::Arc;
use std::thread::JoinHandle;

use super::{PackError, PackState, PackedBatch, PackedReader, Token};

/// One made batch and the packer's state after it.
type Made<T> = Result<(PackedBatch<T>, PackState), PackError>;

/// An endless iterator of packed batches made up to `prefetch` ahead; see
/// [`PackedLoader::new`].
pub struct PackedLoader<T: Token> {
    batches: Option<Receiver<Made<T>>>,
    /// The state after the last batch delivered (not the last made).
    state: PackState,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    failed: bool,
}

impl<T: Token> PackedLoader<T> {
    /// Starts a thread that makes `reader`'s batches in order, at most `prefetch`
    /// (at least 1) ahead of the consumer.
    ///
    /// [`state`](Self::state) is the state after the last batch *delivered*, so a
    /// checkpoint taken between batches resumes exactly, whatever was made ahead.
    pub fn new(mut reader: PackedReader<T>, prefetch: usize) -> Result<Self, PackError> {
        let state = reader.state().clone();
        let (tx, rx) = sync_channel::<Made<T>>(prefetch.max(1));
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("zring-pack".into())
            .spawn(move || {
                while !stopped.load(Ordering::Relaxed) {
                    let made = reader
                        .next_batch()
                        .map(|batch| (batch, reader.state().clone()));
                    let failed = made.is_err();
                    // A closed channel means the consumer is gone.
                    if tx.send(made).is_err() || failed {
                        return;
                    }
                }
            })
            .map_err(PackError::Spawn)?;
        Ok(Self {
            batches: Some(rx),
            state,
            stop,
            thread: Some(thread),
            failed: false,
        })
    }

    /// The packer's state after the last batch delivered.
    pub fn state(&self) -> &PackState {
        &self.state
    }

    /// Stops the thread and waits for it (it finishes at most the batch it is
    /// making). Dropping the loader does the same.
    pub fn close(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Dropping the receiver wakes a thread blocked on a full channel.
        self.batches = None;
        if let Some(thread) = self.thread.take() {
            // A panic in the thread has nothing left to deliver to.
            let _ = thread.join();
        }
    }
}

impl<T: Token> Iterator for PackedLoader<T> {
    type Item = Result<PackedBatch<T>, PackError>;

    /// The next batch; after an error, `None`.
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        match self.batches.as_ref()?.recv() {
            Ok(Ok((batch, state))) => {
                self.state = state;
                Some(Ok(batch))
            }
            Ok(Err(e)) => {
                self.failed = true;
                Some(Err(e))
            }
            // The thread ended without an error: it panicked.
            Err(_) => {
                self.failed = true;
                Some(Err(PackError::Stopped))
            }
        }
    }
}

impl<T: Token> Drop for PackedLoader<T> {
    fn drop(&mut self) {
        self.close();
    }
}

//! The async API: reads that complete a `Future` from a pool worker.
//!
//! Serving stacks call `get_async` / `gather_async` from their own runtime; the read
//! runs on a zring worker (never on the runtime's threads, which must not block) and
//! completes the future through its waker. zring owns no runtime and needs none.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use zring_platform::{oneshot_channel, OneshotReceiver};

use crate::error::{Error, InternalError, Result};
use crate::read::RaggedBatch;
use crate::store::Store;

/// A read in flight. Resolves to the read's result. Dropping it does not cancel the
/// read (it finishes on its worker and its result is discarded); the store stays
/// alive until then, because the read holds its own handle.
#[must_use = "a Pending read does nothing unless awaited or waited for"]
pub struct Pending<T> {
    rx: OneshotReceiver<Result<T>>,
}

impl<T: Send + 'static> Pending<T> {
    fn spawn(store: &Store, read: impl FnOnce() -> Result<T> + Send + 'static) -> Self {
        let (tx, rx) = oneshot_channel();
        store
            .inner
            .opened_with
            .pool
            .get()
            .spawn(move || tx.send(read()));
        Self { rx }
    }

    /// Blocks the calling thread until the read completes (outside async code).
    pub fn wait(self) -> Result<T> {
        self.rx.wait().unwrap_or_else(|| Err(dropped()))
    }
}

fn dropped() -> Error {
    Error::Internal(InternalError::Panicked {
        task: "the worker of an asynchronous read",
    })
}

impl<T> Future for Pending<T> {
    type Output = Result<T>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<T>> {
        Pin::new(&mut self.rx)
            .poll(cx)
            .map(|r| r.unwrap_or_else(|| Err(dropped())))
    }
}

impl Store {
    /// Reads record `index` on a zring worker; see [`Pending`].
    pub fn get_async(&self, index: u64) -> Pending<Vec<u8>> {
        let store = self.clone();
        Pending::spawn(self, move || store.get(index))
    }

    /// Gathers dense records on a zring worker; see [`Store::gather`].
    pub fn gather_async(&self, indices: Vec<u64>) -> Pending<Vec<u8>> {
        let store = self.clone();
        Pending::spawn(self, move || store.gather_vec(&indices))
    }

    /// Gathers ragged records on a zring worker; see [`Store::gather_ragged`].
    pub fn gather_ragged_async(&self, indices: Vec<u64>) -> Pending<RaggedBatch> {
        let store = self.clone();
        Pending::spawn(self, move || store.gather_ragged(&indices))
    }
}

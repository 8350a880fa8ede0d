//! A lock-free one-shot channel whose receiver is a `Future`.
//!
//! The engine's async API runs a read on a pool worker and completes the caller's
//! future from there, through the task's `Waker`, without a mutex and without owning
//! any runtime: it works under tokio, async-std, a hand-written executor, or
//! `block_on` alike.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use crate::sync::{AtomicU8, UnsafeCell};

const PENDING: u8 = 0;
const SENT: u8 = 1;
const CLOSED: u8 = 2;

/// Waker slot states (the protocol of `futures::task::AtomicWaker`).
const WAITING: u8 = 0;
const REGISTERING: u8 = 1;
const WAKING: u8 = 2;

struct Shared<T> {
    state: AtomicU8,
    value: UnsafeCell<Option<T>>,
    waker_state: AtomicU8,
    waker: UnsafeCell<Option<Waker>>,
}

// SAFETY: `value` is written only by the single Sender before it publishes SENT with
// Release, and read only by the single Receiver after it observes SENT with Acquire.
// `waker` is accessed only by whoever holds the REGISTERING or WAKING bit of
// `waker_state`, which the state machine grants to one thread at a time.
unsafe impl<T: Send> Send for Shared<T> {}
// SAFETY: see Send.
unsafe impl<T: Send> Sync for Shared<T> {}

impl<T> Shared<T> {
    fn register(&self, waker: &Waker) {
        match self.waker_state.compare_exchange(
            WAITING,
            REGISTERING,
            Ordering::Acquire,
            Ordering::Acquire,
        ) {
            Ok(_) => {
                // SAFETY: we hold REGISTERING, so no other thread touches the slot.
                self.waker.with_mut(|slot| {
                    // SAFETY: as above; the pointer is valid for the closure.
                    let slot = unsafe { &mut *slot };
                    match slot {
                        Some(old) if old.will_wake(waker) => {}
                        _ => *slot = Some(waker.clone()),
                    }
                });
                if self
                    .waker_state
                    .compare_exchange(REGISTERING, WAITING, Ordering::AcqRel, Ordering::Acquire)
                    .is_err()
                {
                    // A wake arrived while registering: the waker set WAKING and left
                    // the slot to us. Take it, reset, and wake now.
                    // SAFETY: still exclusive: the waking side saw REGISTERING and did
                    // not touch the slot.
                    let w = self.waker.with_mut(|slot| unsafe { (*slot).take() });
                    self.waker_state.swap(WAITING, Ordering::AcqRel);
                    if let Some(w) = w {
                        w.wake();
                    }
                }
            }
            // A wake is in progress or another registration races: wake at once so
            // the task polls again and sees the new state.
            Err(_) => waker.wake_by_ref(),
        }
    }

    fn wake(&self) {
        if self.waker_state.fetch_or(WAKING, Ordering::AcqRel) == WAITING {
            // SAFETY: we moved WAITING -> WAKING, which grants exclusive slot access.
            let w = self.waker.with_mut(|slot| unsafe { (*slot).take() });
            self.waker_state.fetch_and(!WAKING, Ordering::Release);
            if let Some(w) = w {
                w.wake();
            }
        }
    }
}

/// The sending half: `send` once, or drop to close.
pub struct Sender<T> {
    shared: Arc<Shared<T>>,
    sent: bool,
}

/// The receiving half: a future resolving to `Some(value)`, or `None` when the sender
/// was dropped without sending.
pub struct Receiver<T> {
    shared: Arc<Shared<T>>,
    taken: bool,
}

/// A new channel.
pub fn channel<T>() -> (Sender<T>, Receiver<T>) {
    let shared = Arc::new(Shared {
        state: AtomicU8::new(PENDING),
        value: UnsafeCell::new(None),
        waker_state: AtomicU8::new(WAITING),
        waker: UnsafeCell::new(None),
    });
    (
        Sender {
            shared: Arc::clone(&shared),
            sent: false,
        },
        Receiver {
            shared,
            taken: false,
        },
    )
}

impl<T> Sender<T> {
    /// Delivers `value` and wakes the receiver's task.
    pub fn send(mut self, value: T) {
        // SAFETY: the only write, before SENT is published; the receiver reads only
        // after observing SENT.
        self.shared
            .value
            .with_mut(|slot| unsafe { *slot = Some(value) });
        self.shared.state.store(SENT, Ordering::Release);
        self.sent = true;
        self.shared.wake();
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        if !self.sent {
            self.shared.state.store(CLOSED, Ordering::Release);
            self.shared.wake();
        }
    }
}

impl<T> Receiver<T> {
    fn try_take(&mut self) -> Option<Option<T>> {
        match self.shared.state.load(Ordering::Acquire) {
            PENDING => None,
            SENT if !self.taken => {
                self.taken = true;
                // SAFETY: SENT was observed with Acquire, so the sender's write is
                // visible and finished; `taken` makes this the only read.
                Some(self.shared.value.with_mut(|slot| unsafe { (*slot).take() }))
            }
            _ => Some(None),
        }
    }

    /// Blocks the current thread until the value arrives (for non-async callers).
    pub fn wait(mut self) -> Option<T> {
        loop {
            if let Some(v) = self.try_take() {
                return v;
            }
            let thread = std::thread::current();
            let waker = Waker::from(Arc::new(ThreadWaker(thread)));
            self.shared.register(&waker);
            if let Some(v) = self.try_take() {
                return v;
            }
            std::thread::park_timeout(std::time::Duration::from_millis(10));
        }
    }
}

struct ThreadWaker(std::thread::Thread);

impl std::task::Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

impl<T> Future for Receiver<T> {
    type Output = Option<T>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        if let Some(v) = self.try_take() {
            return Poll::Ready(v);
        }
        self.shared.register(cx.waker());
        // Re-check: a send between the first check and the registration would
        // otherwise be missed.
        match self.try_take() {
            Some(v) => Poll::Ready(v),
            None => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_sent_from_another_thread_arrives() {
        for _ in 0..1000 {
            let (tx, rx) = channel();
            std::thread::spawn(move || tx.send(42u64));
            assert_eq!(rx.wait(), Some(42));
        }
    }

    #[test]
    fn a_dropped_sender_closes_the_channel() {
        let (tx, rx) = channel::<u8>();
        drop(tx);
        assert_eq!(rx.wait(), None);
    }

    #[test]
    fn polling_before_and_after_the_send_works() {
        let (tx, mut rx) = channel();
        let waker = Waker::from(Arc::new(ThreadWaker(std::thread::current())));
        let mut cx = Context::from_waker(&waker);
        assert!(Pin::new(&mut rx).poll(&mut cx).is_pending());
        tx.send(String::from("done"));
        assert_eq!(
            Pin::new(&mut rx).poll(&mut cx),
            Poll::Ready(Some("done".into()))
        );
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;

    #[test]
    fn loom_oneshot_send_and_poll_race() {
        loom::model(|| {
            let (tx, rx) = channel::<u32>();
            let sender = loom::thread::spawn(move || tx.send(7));
            assert_eq!(loom::future::block_on(rx), Some(7));
            sender.join().expect("sender");
        });
    }

    #[test]
    fn loom_oneshot_dropped_sender_closes() {
        loom::model(|| {
            let (tx, rx) = channel::<u32>();
            let sender = loom::thread::spawn(move || drop(tx));
            assert_eq!(loom::future::block_on(rx), None);
            sender.join().expect("sender");
        });
    }
}

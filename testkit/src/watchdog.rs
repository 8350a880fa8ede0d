//! Turning a hang into a failure without timing anything.
//!
//! Tests assert events (the thread was joined, the waiter was woken), never that
//! something took less than some time: on a loaded 2-core machine any threshold
//! flakes. A hang, though, must still fail rather than stall CI: a [`Watchdog`] kills
//! the test process with a message if it is still armed after a generous timeout.

use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::time::Duration;

/// How long anything a test waits for may take before it counts as a hang: far above
/// any real duration, so it only ever fires on a deadlock.
pub const HANG: Duration = Duration::from_secs(300);

/// Aborts the process if not dropped within its timeout.
pub struct Watchdog {
    _disarm: Sender<()>,
}

/// Arms a watchdog for `what` with the [`HANG`] timeout.
pub fn watchdog(what: &str) -> Watchdog {
    watchdog_for(what, HANG)
}

/// Arms a watchdog for `what`: if it is not dropped within `timeout`, prints that
/// `what` hung and aborts the process (a hung thread cannot be unwound).
pub fn watchdog_for(what: &str, timeout: Duration) -> Watchdog {
    let (tx, rx) = mpsc::channel::<()>();
    let what = what.to_string();
    std::thread::spawn(move || {
        if let Err(RecvTimeoutError::Timeout) = rx.recv_timeout(timeout) {
            eprintln!("HANG: {what} did not finish within {timeout:?}; aborting the test process");
            std::process::abort();
        }
    });
    Watchdog { _disarm: tx }
}

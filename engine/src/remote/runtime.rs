//! The tokio runtime zring owns for object_store's async clients, so that callers
//! (a training loop, the CLI, Python) need no runtime of their own and may call from
//! any thread, inside another runtime or not.
//!
//! A forked child inherits the runtime's memory but none of its threads: the first
//! use in a new process builds a new runtime (the parent's is leaked, never dropped:
//! dropping would wait for threads that do not exist in the child).

use std::sync::{Arc, Mutex, PoisonError};

use tokio::runtime::{Builder, Runtime};

use crate::error::{Error, InternalError, Result};

/// Worker threads of the runtime: the I/O of every request runs there (TLS, HTTP
/// framing, copying bodies); checksums and decoding run on the calling threads.
const WORKERS: usize = 2;

static RUNTIME: Mutex<Option<(u32, Arc<Runtime>)>> = Mutex::new(None);

/// This process's runtime (built on first use, and again after a fork).
pub(crate) fn get() -> Result<Arc<Runtime>> {
    let pid = std::process::id();
    let mut slot = RUNTIME.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((owner, rt)) = slot.as_ref() {
        if *owner == pid {
            return Ok(rt.clone());
        }
    }
    if let Some((_, inherited)) = slot.take() {
        // The parent's: its threads are gone in this process.
        std::mem::forget(inherited);
    }
    let rt = Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .thread_name("zring-remote")
        .enable_all()
        .build()
        .map_err(|e| {
            Error::Internal(InternalError::RemoteRuntime {
                source: Arc::new(e),
            })
        })?;
    let rt = Arc::new(rt);
    *slot = Some((pid, rt.clone()));
    Ok(rt)
}

/// Runs `fut` on the runtime and waits for its output on the calling thread (which
/// may itself be inside another runtime: nothing here enters this one).
pub(crate) fn run<T: Send + 'static>(
    fut: impl std::future::Future<Output = T> + Send + 'static,
) -> Result<T> {
    let rt = get()?;
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    rt.spawn(async move {
        let _ = tx.send(fut.await);
    });
    rx.recv().map_err(|_| {
        Error::Internal(InternalError::Remote {
            what: "a request task stopped without an answer",
        })
    })
}

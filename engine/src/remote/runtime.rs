//! The tokio runtime zring owns for object_store's async clients, so that callers
//! (a training loop, the CLI, Python) need no runtime of their own and may call from
//! any thread, inside another runtime or not.
//!
//! A forked child inherits the runtime's memory but none of its threads: the first
//! use in a new process builds a new runtime (the parent's is leaked, never dropped:
//! dropping would wait for threads that do not exist in the child). No lock is held
//! while the runtime starts its threads, so a child forked meanwhile (PyTorch's
//! DataLoader forks while the parent may be in its first read) waits for nothing.

use std::sync::Arc;

use tokio::runtime::{Builder, Runtime};
use zring_platform::{ForkOnce, InChild};

use crate::error::{Error, InternalError, Result};

/// Worker threads of the runtime: the I/O of every request runs there (TLS, HTTP
/// framing, copying bodies); checksums and decoding run on the calling threads.
const WORKERS: usize = 2;

static RUNTIME: ForkOnce<Arc<Runtime>> = ForkOnce::new(InChild::Recreate);

/// This process's runtime (built on first use, and again after a fork).
pub(crate) fn get() -> Result<Arc<Runtime>> {
    if let Some(rt) = RUNTIME.get() {
        return Ok(rt.clone());
    }
    // Built outside `get_or_init`, so that a build that fails (no threads to be had)
    // is an error now and tried again at the next use rather than remembered, and so
    // that nothing is held while threads start. Threads racing the first use may each
    // build one: one is kept, the others are shut down without waiting (a blocking
    // drop would panic inside a caller's own runtime).
    let built = Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .thread_name("zring-remote")
        .enable_all()
        .build()
        .map_err(|e| {
            Error::Internal(InternalError::RemoteRuntime {
                source: Arc::new(e),
            })
        })?;
    let built = Arc::new(built);
    let kept = RUNTIME.get_or_init(|| built.clone()).clone();
    if !Arc::ptr_eq(&kept, &built) {
        if let Ok(spare) = Arc::try_unwrap(built) {
            spare.shutdown_background();
        }
    }
    Ok(kept)
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

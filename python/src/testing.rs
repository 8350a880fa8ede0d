//! Hooks for the package's own tests, private (underscore) and inert until called.
//!
//! A test of Ctrl-C during `close()` needs the publish to be still running when the
//! signal lands. On a fast disk (or tmpfs, whose fsync does nothing) the publish can
//! end before any signal is delivered, so a test that merely hopes to be in time
//! passes or fails by luck. `_hold_publish` holds every publish under a directory at
//! the step that names the store, until the test releases it: the test sees the
//! publish running, interrupts it, and then lets it finish.

use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex};

use pyo3::prelude::*;
use zring_platform::{install_fs_hook, FsHookGuard, FsOp};

#[derive(Default)]
struct Gate {
    /// (a publish is waiting at the gate, the gate is open)
    state: Mutex<(bool, bool)>,
    opened: Condvar,
}

impl Gate {
    fn lock(&self) -> std::sync::MutexGuard<'_, (bool, bool)> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Holds publishes under one directory until released (or dropped).
#[pyclass(name = "_PublishHold", module = "zring._zring")]
pub struct PublishHold {
    gate: Arc<Gate>,
    installed: Option<FsHookGuard>,
}

#[pymethods]
impl PublishHold {
    /// Whether a publish is waiting at the gate now (or has passed it).
    fn reached(&self) -> bool {
        self.gate.lock().0
    }

    /// Lets every held publish go on, and holds no more.
    fn release(&mut self, py: Python<'_>) {
        let gate = Arc::clone(&self.gate);
        py.detach(|| {
            gate.lock().1 = true;
            gate.opened.notify_all();
        });
        self.installed = None;
    }
}

impl Drop for PublishHold {
    fn drop(&mut self) {
        // A test that forgot to release must not leave a closer thread waiting forever.
        self.gate.lock().1 = true;
        self.gate.opened.notify_all();
    }
}

/// Holds every publish of a store under `dir` just before the store gets its name,
/// until `release()` is called on the returned object.
#[pyfunction]
pub fn _hold_publish(dir: PathBuf) -> PublishHold {
    let gate = Arc::new(Gate::default());
    let hook_gate = Arc::clone(&gate);
    let installed = install_fs_hook(
        &dir,
        Arc::new(move |op: &FsOp<'_>| {
            if matches!(op, FsOp::Link { .. } | FsOp::Rename { .. }) {
                let mut state = hook_gate.lock();
                state.0 = true;
                while !state.1 {
                    state = hook_gate
                        .opened
                        .wait(state)
                        .unwrap_or_else(|p| p.into_inner());
                }
            }
            None
        }),
    );
    PublishHold {
        gate,
        installed: Some(installed),
    }
}

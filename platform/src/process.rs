//! Noticing `fork`: state that belongs to the parent (io_uring rings, pool threads)
//! must not be used by a forked child, and PyTorch's DataLoader forks.

use std::sync::atomic::{AtomicU64, Ordering};

static GENERATION: AtomicU64 = AtomicU64::new(0);

/// The fork handler's registration: 0 before it, [`REGISTERED`] after it, and the id of
/// the registering process while it is under way (so that a child forked meanwhile
/// knows that nobody in it will finish).
static HOOK: AtomicU64 = AtomicU64::new(0);
const REGISTERED: u64 = u64::MAX;

#[cfg(unix)]
extern "C" fn in_child() {
    GENERATION.fetch_add(1, Ordering::Relaxed);
    // The handler ran, so it is registered in this process too.
    HOOK.store(REGISTERED, Ordering::Relaxed);
}

/// Registers the fork handler when the library is loaded, before any thread can use
/// zring. Registering on first use alone leaves a gap: glibc's `fork` notes how
/// many handlers there are before it runs the prepare handlers (releasing its lock
/// while each runs), and in the child runs only those. A handler registered in that
/// window, by another thread's first use of zring during the fork, is in place in
/// the parent before the child is made, so the child finds it registered, yet it
/// never ran there: the child keeps its parent's generation and waits for the
/// parent's initialisers, which it does not have (a child forked by CPython 3.10
/// during another thread's first gather on the pool hung in 18 of 30 tries, with
/// NumPy's OpenBLAS holding prepare handlers).
#[cfg(target_os = "linux")]
#[used]
// SAFETY: the loader (or a static binary's C runtime) calls each `.init_array`
// entry once at load, without arguments; `register_at_load` is an `extern "C"
// fn()` that only calls `register`, which needs nothing set up before `main`
// (getpid, atomics, pthread_atfork).
#[link_section = ".init_array"]
static REGISTER_AT_LOAD: extern "C" fn() = register_at_load;

#[cfg(target_os = "linux")]
extern "C" fn register_at_load() {
    register();
}

/// A number that changes in a child each time the process forks (0 in the original
/// process). Comparing it costs one atomic load, unlike `getpid`, which is a system
/// call on current glibc.
pub fn generation() -> u64 {
    if HOOK.load(Ordering::Acquire) != REGISTERED {
        register();
    }
    GENERATION.load(Ordering::Relaxed)
}

/// Registers the fork handler once. Unlike `std::sync::Once`, a child forked while
/// another thread of the parent was registering does not wait for that thread (which
/// does not exist in the child): it registers the handler itself.
#[cfg(unix)]
fn register() {
    // SAFETY: getpid has no preconditions.
    let me = u64::from(unsafe { libc::getpid() }.unsigned_abs());
    loop {
        match HOOK.compare_exchange(0, me, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => {
                // SAFETY: registers a handler that only updates atomics, which is
                // async-signal-safe and valid in a forked child.
                unsafe {
                    libc::pthread_atfork(None, None, Some(in_child));
                }
                HOOK.store(REGISTERED, Ordering::Release);
                return;
            }
            Err(REGISTERED) => return,
            Err(registrar) if registrar != me => {
                // Forked while the parent was registering, before the handler was in
                // place (else it would have run and said REGISTERED): a fork the
                // counter missed. Count it and register here.
                if HOOK
                    .compare_exchange(registrar, 0, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                {
                    GENERATION.fetch_add(1, Ordering::Relaxed);
                }
            }
            Err(_) => std::thread::yield_now(),
        }
    }
}

#[cfg(not(unix))]
fn register() {
    HOOK.store(REGISTERED, Ordering::Release);
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use zring_testkit::child_succeeds;

    #[cfg(target_os = "linux")]
    #[test]
    fn the_fork_handler_is_registered_when_the_library_is_loaded() {
        // Read before anything here calls `generation`: the constructor did it.
        assert_eq!(HOOK.load(Ordering::Acquire), REGISTERED);
    }

    #[test]
    fn a_forked_child_sees_a_new_generation() {
        let parent = generation();
        assert!(child_succeeds(std::time::Duration::from_secs(60), || {
            generation() != parent
        }));
        assert_eq!(generation(), parent, "the parent's generation is unchanged");
    }
}

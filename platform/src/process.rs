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

/// How a child run by [`run_forked`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChildEnd {
    /// It returned (or exited) with this code.
    Exited(i32),
    /// A signal killed it (an abort, a crash).
    Signaled(i32),
    /// It was still running when the timeout passed, and was killed.
    Hung,
}

/// Forks, runs `f` in the child and leaves the child with `f`'s return value as its
/// exit code (without running the parent's destructors or atexit handlers); the parent
/// waits up to `timeout` and kills a child that is still running then. For tests of
/// what a forked child can do: `f` runs in a copy of a possibly multi-threaded process
/// in which only the forking thread exists.
#[cfg(unix)]
#[doc(hidden)]
pub fn run_forked(timeout: std::time::Duration, f: impl FnOnce() -> i32) -> ChildEnd {
    // SAFETY: the child runs `f` and then leaves with _exit; what `f` may do in a
    // forked child is the caller's responsibility (documented above).
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(101);
        // SAFETY: terminates the child at once, as documented.
        unsafe { libc::_exit(code) };
    }
    assert!(pid > 0, "fork failed: {}", std::io::Error::last_os_error());
    let start = std::time::Instant::now();
    let mut pause = std::time::Duration::from_micros(100);
    loop {
        let mut status = 0;
        // SAFETY: waits (without blocking) for our own child.
        let rc = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if rc == pid {
            if libc::WIFEXITED(status) {
                return ChildEnd::Exited(libc::WEXITSTATUS(status));
            }
            if libc::WIFSIGNALED(status) {
                return ChildEnd::Signaled(libc::WTERMSIG(status));
            }
        }
        if start.elapsed() > timeout {
            // SAFETY: kills and reaps our own child.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
            }
            return ChildEnd::Hung;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(std::time::Duration::from_millis(20));
    }
}

/// Runs `child` in a forked child (as [`run_forked`], with `timeout`) and says
/// whether it returned true; a panic, a crash or a hang is false.
#[cfg(unix)]
#[doc(hidden)]
pub fn child_succeeds(timeout: std::time::Duration, child: impl FnOnce() -> bool) -> bool {
    run_forked(timeout, || i32::from(!child())) == ChildEnd::Exited(0)
}

/// Runs `first_use` in a fresh child process on a new thread and, as that thread
/// starts, forks a grandchild that runs `first_use` too: the fork lands while the
/// child is (probably) inside its first use of lazily created state. `Exited(0)` when
/// both returned true; the grandchild's hang is `Exited(2)`, its failure `Exited(3)`,
/// the first user's failure `Exited(4)`. `timeout` bounds each wait (the grandchild's
/// is half, so a hung grandchild is killed by its parent, not orphaned).
#[cfg(unix)]
#[doc(hidden)]
pub fn fork_during_first_use(
    timeout: std::time::Duration,
    first_use: impl Fn() -> bool + Sync,
) -> ChildEnd {
    use std::sync::atomic::AtomicBool;
    run_forked(timeout, || {
        let entering = AtomicBool::new(false);
        std::thread::scope(|s| {
            let first = s.spawn(|| {
                entering.store(true, Ordering::Release);
                first_use()
            });
            while !entering.load(Ordering::Acquire) {
                std::hint::spin_loop();
            }
            let grandchild = run_forked(timeout / 2, || i32::from(!first_use()));
            match (grandchild, first.join().unwrap_or(false)) {
                (ChildEnd::Exited(0), true) => 0,
                (_, false) => 4,
                (ChildEnd::Hung, _) => 2,
                _ => 3,
            }
        })
    })
}

/// Limits this process's address space to `bytes` more than it uses now
/// (`RLIMIT_AS`), so that a test can make large allocations fail. Returns the limit.
#[cfg(target_os = "linux")]
#[doc(hidden)]
pub fn limit_address_space_to_current_plus(bytes: u64) -> std::io::Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmSize:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| std::io::Error::other("no VmSize in /proc/self/status"))?;
    let limit = kib * 1024 + bytes;
    let rl = libc::rlimit {
        rlim_cur: limit,
        rlim_max: limit,
    };
    // SAFETY: setrlimit reads the struct, which lives on this stack for the call.
    if unsafe { libc::setrlimit(libc::RLIMIT_AS, &rl) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(limit)
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn a_forked_child_sees_a_new_generation() {
        let parent = generation();
        assert!(child_succeeds(std::time::Duration::from_secs(60), || {
            generation() != parent
        }));
        assert_eq!(generation(), parent, "the parent's generation is unchanged");
    }
}

//! The fork runner: running a closure in a forked child with a timeout, for tests of
//! what a forked child can do (PyTorch's DataLoader forks a process that may hold
//! io_uring rings, pool threads and half-initialised lazy state).

use std::sync::atomic::Ordering;

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

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_child_s_exit_code_crash_and_hang_are_told_apart() {
        let t = Duration::from_secs(60);
        assert_eq!(run_forked(t, || 7), ChildEnd::Exited(7));
        assert!(child_succeeds(t, || true));
        assert!(!child_succeeds(t, || false));
        assert!(!child_succeeds(t, || panic!("in the child")));
        assert_eq!(
            run_forked(Duration::from_millis(200), || loop {
                std::thread::sleep(Duration::from_millis(10));
            }),
            ChildEnd::Hung
        );
    }
}

//! Noticing `fork`: state that belongs to the parent (io_uring rings, pool threads)
//! must not be used by a forked child, and PyTorch's DataLoader forks.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Once;

static GENERATION: AtomicU64 = AtomicU64::new(0);
static HOOK: Once = Once::new();

#[cfg(unix)]
extern "C" fn in_child() {
    GENERATION.fetch_add(1, Ordering::Relaxed);
}

/// A number that changes in a child each time the process forks (0 in the original
/// process). Comparing it costs one atomic load, unlike `getpid`, which is a system
/// call on current glibc.
pub fn generation() -> u64 {
    HOOK.call_once(|| {
        #[cfg(unix)]
        // SAFETY: registers a handler that only increments an atomic, which is
        // async-signal-safe and valid in a forked child.
        unsafe {
            libc::pthread_atfork(None, None, Some(in_child));
        }
    });
    GENERATION.load(Ordering::Relaxed)
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn a_forked_child_sees_a_new_generation() {
        let parent = generation();
        // SAFETY: the child only reads an atomic and leaves with _exit.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let code = if generation() != parent { 0 } else { 1 };
            // SAFETY: terminate the child without running the parent's destructors.
            unsafe { libc::_exit(code) };
        }
        assert!(pid > 0);
        let mut status = 0;
        // SAFETY: waiting for our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
        assert_eq!(generation(), parent, "the parent's generation is unchanged");
    }
}

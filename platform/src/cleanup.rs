//! Removing temporary files when a process is interrupted or has died.
//!
//! A command-line tool that writes a store under a temporary name registers that name
//! with [`remove_on_signal`]; SIGINT or SIGTERM then unlinks it before the process
//! dies of the signal as it would have. (Libraries do not install signal handlers:
//! only the `zring` binary calls this.) [`is_alive`] lets a later writer tell the
//! temporary files of dead processes from those of live ones.

use std::ffi::CString;
use std::path::Path;
use std::sync::atomic::{AtomicPtr, Ordering};

/// How many paths can be registered at once.
const SLOTS: usize = 16;

static PATHS: [AtomicPtr<libc::c_char>; SLOTS] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; SLOTS];

/// Unregisters (and frees) its path when dropped.
#[must_use = "the path is unregistered when the guard is dropped"]
pub struct Registered(Option<usize>);

impl Drop for Registered {
    fn drop(&mut self) {
        if let Some(k) = self.0 {
            let p = PATHS[k].swap(std::ptr::null_mut(), Ordering::AcqRel);
            if !p.is_null() {
                // SAFETY: `p` came from CString::into_raw below and was removed from the
                // table, so the handler can no longer read it.
                drop(unsafe { CString::from_raw(p) });
            }
        }
    }
}

#[cfg(unix)]
extern "C" fn on_signal(sig: libc::c_int) {
    for slot in &PATHS {
        let p = slot.load(Ordering::Acquire);
        if !p.is_null() {
            // SAFETY: unlink is async-signal-safe and reads a NUL-terminated string that
            // stays allocated while it is in the table.
            unsafe { libc::unlink(p) };
        }
    }
    // SAFETY: restore the default action and re-raise, so the process dies of the
    // signal as it would have (exit status 128 + sig in a shell); both are
    // async-signal-safe.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        libc::raise(sig);
    }
}

/// Removes `path` if the process gets SIGINT or SIGTERM while the guard lives. At most
/// 16 paths at once; more are not registered (the guard does nothing).
pub fn remove_on_signal(path: &Path) -> Registered {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        static INSTALL: std::sync::Once = std::sync::Once::new();
        INSTALL.call_once(|| {
            for sig in [libc::SIGINT, libc::SIGTERM] {
                // SAFETY: installs a handler that only calls async-signal-safe
                // functions on data that stays valid (see on_signal).
                unsafe {
                    libc::signal(
                        sig,
                        on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t,
                    )
                };
            }
        });
        let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
            return Registered(None);
        };
        let raw = c.into_raw();
        for (k, slot) in PATHS.iter().enumerate() {
            if slot
                .compare_exchange(
                    std::ptr::null_mut(),
                    raw,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
                .is_ok()
            {
                return Registered(Some(k));
            }
        }
        // SAFETY: not stored anywhere; take it back.
        drop(unsafe { CString::from_raw(raw) });
    }
    #[cfg(not(unix))]
    let _ = path;
    Registered(None)
}

/// Whether a process with this id exists (on this machine's pid namespace). Errs on
/// the side of "alive" when it cannot tell.
pub fn is_alive(pid: u32) -> bool {
    #[cfg(unix)]
    {
        let Ok(pid) = libc::pid_t::try_from(pid) else {
            return true;
        };
        if pid <= 0 {
            return true;
        }
        // SAFETY: signal 0 sends nothing; it only checks that the process exists.
        let rc = unsafe { libc::kill(pid, 0) };
        rc == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
    }
    #[cfg(not(unix))]
    {
        let _ = pid;
        true
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_a_reaped_child_is_not() {
        assert!(is_alive(std::process::id()));
        let mut child = std::process::Command::new("true").spawn().expect("spawn");
        let pid = child.id();
        child.wait().expect("wait");
        assert!(!is_alive(pid));
    }

    #[test]
    fn sigterm_removes_registered_paths_and_still_kills() {
        use zring_testkit::{run_forked, ChildEnd};
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(".x.zr.tmp");
        std::fs::write(&path, b"partial").expect("write");
        let end = run_forked(std::time::Duration::from_secs(60), || {
            let _guard = remove_on_signal(&path);
            // SAFETY: sends SIGTERM to this (child) process.
            unsafe { libc::raise(libc::SIGTERM) };
            0
        });
        assert_eq!(end, ChildEnd::Signaled(libc::SIGTERM));
        assert!(!path.exists(), "the temporary file survived SIGTERM");
    }
}

//! Lazily created process-wide values that survive `fork`.
//!
//! `std::sync::OnceLock` is not fork-safe: a child forked while another thread of the
//! parent is inside `get_or_init` inherits the "in progress" state but not the thread
//! that would finish it, and its own first use waits forever. PyTorch's DataLoader
//! forks its workers exactly while the parent may be doing its first read. [`ForkOnce`]
//! lets such a child redo the initialisation, and can also give each forked child a
//! value of its own (the worker pool: the parent's threads do not exist in a child).

use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

use crate::process::generation;

/// What a forked child does with a value its parent created.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum InChild {
    /// Keep using it (a probe result, a configuration).
    Inherit,
    /// Create its own on first use (anything holding threads, rings or descriptors
    /// shared with the parent). The parent's value is leaked in the child, since
    /// references to it may still be held there.
    Recreate,
}

struct Slot<T> {
    generation: u64,
    value: T,
}

/// A value created on first use, once per process (or per fork generation).
///
/// Values are never dropped: a `ForkOnce` is meant for `static`s.
pub struct ForkOnce<T> {
    value: AtomicPtr<Slot<T>>,
    /// 0 when nobody is initialising; else `generation + 1` of the initialiser.
    busy: AtomicU64,
    in_child: InChild,
}

// SAFETY: the value is created by one thread and then only shared by reference, like
// OnceLock<T>, which is Sync when T is Send + Sync.
unsafe impl<T: Send + Sync> Sync for ForkOnce<T> {}
// SAFETY: see Sync.
unsafe impl<T: Send> Send for ForkOnce<T> {}

impl<T> ForkOnce<T> {
    pub const fn new(in_child: InChild) -> Self {
        Self {
            value: AtomicPtr::new(ptr::null_mut()),
            busy: AtomicU64::new(0),
            in_child,
        }
    }

    /// The value, if it has been created (for this fork generation with
    /// [`InChild::Recreate`]).
    pub fn get(&self) -> Option<&T> {
        self.current(generation())
    }

    fn current(&self, generation: u64) -> Option<&T> {
        let p = self.value.load(Ordering::Acquire);
        // SAFETY: a non-null pointer came from Box::into_raw below and is never freed.
        let slot = unsafe { p.as_ref() }?;
        (self.in_child == InChild::Inherit || slot.generation == generation).then_some(&slot.value)
    }

    /// The value, created by `init` if this is its first use. Concurrent first uses
    /// wait for one `init`; a child forked during the parent's `init` runs its own.
    /// If `init` panics, the next use tries again.
    pub fn get_or_init(&self, init: impl FnOnce() -> T) -> &T {
        let mut init = Some(init);
        loop {
            let gen = generation();
            if let Some(v) = self.current(gen) {
                return v;
            }
            let mine = gen + 1;
            let busy = self.busy.load(Ordering::Acquire);
            if busy == mine {
                // Another thread of this process is initialising.
                std::thread::yield_now();
                continue;
            }
            // Idle, or a marker left by a parent's initialiser that this child lacks.
            if self
                .busy
                .compare_exchange(busy, mine, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
            {
                continue;
            }
            let release = Release(&self.busy);
            if let Some(v) = self.current(gen) {
                return v;
            }
            let Some(f) = init.take() else {
                unreachable!("init runs at most once per call");
            };
            let slot = Box::into_raw(Box::new(Slot {
                generation: gen,
                value: f(),
            }));
            // A replaced slot (the parent's, in a child) is leaked on purpose.
            self.value.store(slot, Ordering::Release);
            drop(release);
            // SAFETY: just created from a Box and never freed.
            return unsafe { &(*slot).value };
        }
    }
}

/// Clears the initialiser's marker when dropped, also when `init` panics.
struct Release<'a>(&'a AtomicU64);

impl Drop for Release<'_> {
    fn drop(&mut self) {
        self.0.store(0, Ordering::Release);
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn concurrent_first_uses_share_one_value() {
        static CELL: ForkOnce<usize> = ForkOnce::new(InChild::Inherit);
        static CALLS: AtomicUsize = AtomicUsize::new(0);
        let seen: Vec<usize> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..8)
                .map(|_| {
                    s.spawn(|| {
                        *CELL.get_or_init(|| {
                            std::thread::sleep(std::time::Duration::from_millis(5));
                            CALLS.fetch_add(1, Ordering::Relaxed) + 100
                        })
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().expect("thread")).collect()
        });
        assert!(seen.iter().all(|&v| v == 100));
        assert_eq!(CALLS.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_panicking_init_is_retried() {
        static CELL: ForkOnce<u8> = ForkOnce::new(InChild::Inherit);
        let r = std::panic::catch_unwind(|| *CELL.get_or_init(|| panic!("first")));
        assert!(r.is_err());
        assert_eq!(*CELL.get_or_init(|| 7), 7);
    }

    /// Forks while another thread is inside `init` (which waits until the fork has
    /// happened); the child must not wait for that thread.
    fn fork_during_init(in_child: InChild) -> (u64, u64) {
        let cell: &'static ForkOnce<u64> = Box::leak(Box::new(ForkOnce::new(in_child)));
        let (entered_tx, entered_rx) = std::sync::mpsc::channel();
        let (forked_tx, forked_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            *cell.get_or_init(|| {
                let _ = entered_tx.send(());
                let _ = forked_rx.recv();
                1
            })
        });
        entered_rx.recv().expect("init entered");
        // The child answers with its value as exit code, while the parent's init is
        // still waiting (released only after the child is done).
        let end = zring_testkit::run_forked(std::time::Duration::from_secs(60), || {
            *cell.get_or_init(|| 2) as i32
        });
        forked_tx.send(()).expect("release init");
        let parent = t.join().expect("init thread");
        match end {
            zring_testkit::ChildEnd::Exited(v) => (parent, v as u64),
            other => panic!("the child forked during init ended with {other:?}"),
        }
    }

    #[test]
    fn a_child_forked_during_init_initialises_its_own() {
        assert_eq!(fork_during_init(InChild::Inherit), (1, 2));
        assert_eq!(fork_during_init(InChild::Recreate), (1, 2));
    }

    #[test]
    fn recreate_gives_a_child_its_own_value_and_inherit_keeps_the_parents() {
        static KEEP: ForkOnce<u32> = ForkOnce::new(InChild::Inherit);
        static NEW: ForkOnce<u32> = ForkOnce::new(InChild::Recreate);
        KEEP.get_or_init(|| 1);
        NEW.get_or_init(|| 1);
        let end = zring_testkit::run_forked(std::time::Duration::from_secs(60), || {
            let ok =
                *KEEP.get_or_init(|| 2) == 1 && NEW.get().is_none() && *NEW.get_or_init(|| 2) == 2;
            i32::from(!ok)
        });
        assert_eq!(end, zring_testkit::ChildEnd::Exited(0));
        assert_eq!(*NEW.get_or_init(|| 3), 1, "the parent keeps its value");
    }
}

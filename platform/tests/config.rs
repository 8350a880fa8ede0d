//! Explicit configuration: a program's own `Config`, installed for the process with
//! `Config::set_global` or given to one pool with `Pool::with_config`.
//!
//! The process's settings can be installed only once, before their first use, so
//! every check that installs or reads them runs in a forked child of its own (this
//! test process never touches them, so each child starts with them unset).
#![cfg(unix)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use zring_platform::{uring_available, Config, Pool, UringMode};
use zring_testkit::{run_forked, ChildEnd};

const TIMEOUT: Duration = Duration::from_secs(60);

/// Runs `check` in a forked child; its assertion failures fail the test.
fn in_child(check: impl FnOnce()) {
    let end = run_forked(TIMEOUT, || {
        check();
        0
    });
    assert_eq!(
        end,
        ChildEnd::Exited(0),
        "the child's check failed (its stderr says why)"
    );
}

fn three_threads_no_uring() -> Config {
    let mut c = Config::default();
    c.threads = Some(3);
    c.uring = UringMode::Off;
    c
}

#[test]
fn set_global_before_first_use_configures_the_global_pool_and_io_uring() {
    in_child(|| {
        let mine = three_threads_no_uring();
        assert_eq!(mine.clone().set_global(), Ok(()));
        assert_eq!(Config::global(), &mine);
        // The global pool is built from it: 3 threads counting the caller.
        assert_eq!(Pool::global().workers(), 2);
        // io_uring reads only the process's settings: off means never.
        assert!(
            !uring_available(),
            "io_uring is on although the global config says off"
        );
    });
}

#[test]
fn set_global_after_first_use_hands_the_config_back() {
    in_child(|| {
        let used = Config::global().clone();
        let mine = three_threads_no_uring();
        assert_eq!(mine.clone().set_global(), Err(mine));
        assert_eq!(
            Config::global(),
            &used,
            "a refused config changed the settings"
        );
    });
    in_child(|| {
        assert_eq!(three_threads_no_uring().set_global(), Ok(()));
        let again = Config::default();
        assert_eq!(again.clone().set_global(), Err(again), "installed twice");
    });
}

#[test]
fn a_pool_s_own_config_sizes_that_pool_and_nothing_else() {
    let mut c = Config::default();
    c.threads = Some(3);
    let pool = Pool::with_config(&c).expect("a pool of 3 threads");
    assert_eq!(pool.workers(), 2, "3 threads count the caller");
    let ran = AtomicUsize::new(0);
    pool.run(16, usize::MAX, |_| {
        ran.fetch_add(1, Ordering::Relaxed);
    });
    assert_eq!(ran.load(Ordering::Relaxed), 16, "the pool skipped tasks");

    c.threads = Some(1);
    assert_eq!(Pool::with_config(&c).expect("inline").workers(), 0);

    // A pool's config is that pool's: the process's settings (which io_uring reads)
    // stay what the environment gives, and can still be installed.
    in_child(|| {
        let pool = Pool::with_config(&three_threads_no_uring()).expect("pool");
        assert_eq!(pool.workers(), 2);
        assert_eq!(Pool::global().workers(), {
            let env = Config::from_env();
            Pool::with_config(&env).expect("pool").workers()
        });
        assert_eq!(Config::global(), &Config::from_env());
    });
    in_child(|| {
        let _pool = Pool::with_config(&three_threads_no_uring()).expect("pool");
        assert_eq!(three_threads_no_uring().set_global(), Ok(()));
    });
}

//! `Pool::share_global`: a process that is one of several (a data loader's worker
//! processes) caps the global pool it has not built yet. Its own test binary, so
//! that no other test builds the global pool first.

use zring_platform::Pool;

#[test]
fn a_share_caps_the_pool_built_after_it_and_not_one_built_before() {
    if std::env::var_os("ZRING_THREADS").is_some() {
        // A configured thread count wins over a share; nothing to check here.
        assert!(!Pool::share_global(1));
        return;
    }
    assert!(Pool::share_global(1), "the pool is not built yet");
    assert_eq!(Pool::global().workers(), 0, "one thread: the caller alone");
    assert!(
        !Pool::share_global(2),
        "built already: a later share changes nothing"
    );
    assert_eq!(Pool::global().workers(), 0);
}

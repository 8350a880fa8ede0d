//! A store opened with a pool of its own runs its reads there, not on the global pool.
//!
//! Alone in its test binary: the global pool's counter must see no other test's work.

mod common;

use std::sync::Arc;

use common::*;
use zring_engine::dataset::Dataset;
use zring_engine::{Backend, ReadOptions, Store};
use zring_platform::Pool;

#[test]
fn gathers_verifies_and_async_reads_run_on_the_store_s_own_pool() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fx = dense_mixed(dir.path(), 4096);
    let own = Arc::new(Pool::new(1, false).expect("a 1-worker pool"));
    let global = Pool::global();
    let opts = ReadOptions::with_backend(Backend::Pread).with_pool(Arc::clone(&own));
    let store = Store::open(&fx.path, opts.clone()).expect("open");
    let plain = Store::open(&fx.path, ReadOptions::with_backend(Backend::Pread)).expect("open");
    let all: Vec<u64> = (0..4096).rev().collect();

    let (g0, o0) = (global.runs(), own.runs());
    let batch = store.gather_vec(&all).expect("gather");
    store.verify().expect("verify");
    store
        .gather_async(vec![1, 2, 3])
        .wait()
        .expect("async gather");
    let (g1, o1) = (global.runs(), own.runs());
    assert_eq!(
        g1, g0,
        "the global pool ran work of a store with its own pool"
    );
    assert!(o1 >= o0 + 2, "the own pool ran {} batches", o1 - o0);

    // The same bytes as through the global pool, which a default store uses.
    assert_eq!(batch, plain.gather_vec(&all).expect("gather"));
    assert!(
        global.runs() > g1,
        "a default store runs on the global pool"
    );
    assert_eq!(own.runs(), o1);

    // A dataset of that store gathers on the pool of its options.
    let ds = Dataset::from_store("x", store).expect("dataset");
    let o2 = own.runs();
    let g2 = global.runs();
    let mut dest = vec![0u8; all.len() * 256];
    ds.gather(
        &all,
        &[0],
        &mut [zring_engine::dataset::FieldDest::Dense(&mut dest)],
    )
    .expect("dataset gather");
    assert_eq!(dest, batch);
    assert!(own.runs() > o2);
    assert_eq!(global.runs(), g2);
}

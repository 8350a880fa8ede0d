//! A writer given a pool of its own runs its appends' tasks there, not on the global
//! pool, and writes the same store.
//!
//! Alone in its test binary: the global pool's counter must see no other test's work.

mod common;

use std::sync::Arc;

use common::*;
use zring_engine::{Codec, DType, Schema, WriteOptions};
use zring_platform::Pool;

#[test]
fn appends_run_on_the_writer_s_own_pool_and_write_the_same_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let schema = Schema::dense(DType::U8, &[4096]);
    // Several chunks of work (above the size an append does on the caller alone).
    let data = dense_records(1024, 4096, 7, |i| i % 3 == 0);
    let opts = WriteOptions::with_codec(Codec::Zstd).chunk_bytes(64 << 10);
    let own = Arc::new(Pool::new(1, false).expect("a 1-worker pool"));
    let global = Pool::global();

    let (g0, o0) = (global.runs(), own.runs());
    let mine = dir.path().join("own.zr");
    let n = write_dense(
        &mine,
        &schema,
        opts.clone().with_pool(Arc::clone(&own)),
        &data,
        4,
    )
    .expect("write on the own pool");
    assert_eq!(n, 1024);
    let (g1, o1) = (global.runs(), own.runs());
    assert_eq!(
        g1, g0,
        "the global pool ran a writer's work with its own pool"
    );
    assert_eq!(o1, o0 + 4, "one batch of tasks per append on the own pool");

    let plain = dir.path().join("global.zr");
    write_dense(&plain, &schema, opts, &data, 4).expect("write on the global pool");
    assert!(
        global.runs() >= g1 + 4,
        "a default writer runs on the global pool"
    );
    assert_eq!(own.runs(), o1);

    let a = std::fs::read(&mine).expect("read");
    let b = std::fs::read(&plain).expect("read");
    assert!(a == b, "the stores differ");
    let store = open(&mine).expect("open");
    assert_eq!(
        store.gather_vec(&[0, 511, 1023]).expect("gather").len(),
        3 * 4096
    );
}

//! An embedding program configures zring through this crate alone: its pool, built
//! from its own `Config`, is what `ReadOptions` and `WriteOptions` take.

use std::sync::Arc;

use zring_engine::{
    Backend, Config, DType, Pool, PoolHandle, ReadOptions, Schema, Store, WriteOptions, Writer,
};

#[test]
fn a_pool_built_from_the_crate_s_own_config_runs_reads_and_writes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("x.zr");
    let mut config = Config::default();
    config.threads = Some(2);
    let pool = Arc::new(Pool::with_config(&config).expect("a pool of 2 threads"));
    assert_eq!(pool.workers(), 1);

    let opts = WriteOptions::default().with_pool(PoolHandle::own(Arc::clone(&pool)));
    let mut w = Writer::create(&path, Schema::dense(DType::U8, &[8]), opts).expect("create");
    let rows: Vec<u8> = (0..64 * 8).map(|x| (x % 251) as u8).collect();
    w.append_dense(&rows).expect("append");
    w.close().expect("close");
    let written = pool.runs();
    assert!(written > 0, "the writer did not run on its pool");

    let opts = ReadOptions::with_backend(Backend::Pread).with_pool(Arc::clone(&pool));
    let store = Store::open(&path, opts).expect("open");
    let batch = store.gather_vec(&[63, 0, 5]).expect("gather");
    assert_eq!(&batch[..8], &rows[63 * 8..64 * 8]);
    assert!(
        pool.runs() > written,
        "the gather did not run on the store's pool"
    );
}

//! A child forked while another thread is in the process's first gather (the worker
//! pool, the thread's io_uring ring and scratch being created) reads correct data and
//! does not hang: PyTorch's DataLoader forks its workers exactly then. Every backend,
//! many rounds, each in a fresh child process whose first gather has not happened.
#![cfg(unix)]

use std::path::Path;
use std::time::Duration;

use zring_engine::{Backend, Codec, DType, ReadOptions, Schema, Store, WriteOptions, Writer};
use zring_testkit::{fork_during_first_use, ChildEnd};

const RECORDS: u64 = 2048;
const WIDTH: usize = 512;

fn row(i: u64) -> Vec<u8> {
    (0..WIDTH)
        .map(|k| (i as usize * 31 + k * 7) as u8)
        .collect()
}

fn write(path: &Path) {
    let opts = WriteOptions::with_codec(Codec::Zstd);
    let mut w =
        Writer::create(path, Schema::dense(DType::U8, &[WIDTH as u64]), opts).expect("create");
    let rows: Vec<u8> = (0..RECORDS).flat_map(row).collect();
    w.append_dense(&rows).expect("append");
    w.close().expect("close");
}

/// Gathers a spread of records with every thread of the pool; true if all are right.
fn gather_ok(store: &Store) -> bool {
    let indices: Vec<u64> = (0..256).map(|k| (k * 997) % RECORDS).collect();
    match store.gather_vec(&indices) {
        Ok(out) => indices
            .iter()
            .zip(out.chunks(WIDTH))
            .all(|(&i, got)| got == row(i).as_slice()),
        Err(_) => false,
    }
}

#[test]
fn children_forked_during_the_first_gather_read_correctly_on_every_backend() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("s.zr");
    write(&path);
    for backend in Backend::CONCRETE {
        let mut failures = Vec::new();
        for round in 0..100 {
            let end = fork_during_first_use(Duration::from_secs(120), || {
                Store::open(&path, ReadOptions::with_backend(backend))
                    .is_ok_and(|store| gather_ok(&store))
            });
            if end != ChildEnd::Exited(0) {
                failures.push((round, end));
            }
        }
        assert!(
            failures.is_empty(),
            "{backend:?}: rounds that failed or hung: {failures:?}"
        );
    }
}

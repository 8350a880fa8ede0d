//! The one records abstraction and the one batch executor: a store and a dataset's
//! field give the same records through `dyn Records` on every backend, a dataset
//! gather over io_uring is read by io_uring, and a stop signal ends a long gather
//! (a store's or a dataset's) promptly with `Error::Interrupted`.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::*;
use zring_engine::dataset::{Dataset, DatasetBuilder};
use zring_engine::{
    Backend, Codec, DType, Error, Interrupt, Never, RaggedLayout, ReadOptions, Records, Schema,
    Store, WriteOptions,
};

const N: usize = 3000;
const WIDTH: usize = 512;

/// One dense store of `N` records and the same records as a dataset of 3 shards
/// (an empty one among them) with a dense and a ragged field.
fn fixture(dir: &std::path::Path, codec: Codec) -> (Vec<u8>, Ragged) {
    let dense = dense_records(N, WIDTH, 7, |i| i % 3 == 0);
    let ragged = ragged_records(N, 2, DType::U16, 9, 11);
    let opts = WriteOptions::with_codec(codec);
    let schema = Schema::dense(DType::U8, &[WIDTH as u64]);
    write_dense(&dir.join("dense.zr"), &schema, opts.clone(), &dense, 4).unwrap();
    write_ragged(&dir.join("ragged.zr"), DType::U16, opts.clone(), &ragged, 3).unwrap();
    let fields = vec![
        ("d".to_string(), schema.clone()),
        ("r".to_string(), Schema::ragged(DType::U16, 2)),
    ];
    let mut b = DatasetBuilder::create(dir.join("ds"), fields, false).unwrap();
    for (k, range) in [0..1000, 1000..1000, 1000..N].into_iter().enumerate() {
        let paths = b.shard_paths(k);
        let part = &dense[range.start * WIDTH..range.end * WIDTH];
        write_dense(&paths[0], &schema, opts.clone(), part, 1).unwrap();
        write_ragged(
            &paths[1],
            DType::U16,
            opts.clone(),
            &ragged.slice(range.clone()),
            1,
        )
        .unwrap();
        b.add_shard(range.len() as u64).unwrap();
    }
    b.publish().unwrap();
    (dense, ragged)
}

fn indices() -> Vec<u64> {
    (0..2000u64)
        .map(|k| (k * 7919) % N as u64)
        .chain([0, 999, 1000, 2999])
        .collect()
}

fn dense_through(r: &dyn Records, idx: &[u64]) -> Vec<u8> {
    let width = r.schema().item_bytes().unwrap() as usize;
    let mut out = vec![0u8; idx.len() * width];
    r.gather_until(idx, &mut out, &Never).unwrap();
    out
}

fn ragged_through(r: &dyn Records, idx: &[u64]) -> (RaggedLayout, Vec<u8>) {
    let mut layout = RaggedLayout::default();
    r.ragged_layout_into(idx, &mut layout).unwrap();
    let mut values = vec![0u8; layout.values_bytes];
    r.gather_ragged_until(idx, &layout, &mut values, &Never)
        .unwrap();
    (layout, values)
}

#[test]
fn a_store_and_a_dataset_field_give_the_same_records_on_every_backend() {
    let dir = tempfile::tempdir().unwrap();
    for codec in [Codec::Raw, Codec::Zstd] {
        let dir = dir.path().join(format!("{codec:?}"));
        std::fs::create_dir(&dir).unwrap();
        let (dense, ragged) = fixture(&dir, codec);
        let idx = indices();
        let want_dense: Vec<u8> = idx
            .iter()
            .flat_map(|&i| dense[i as usize * WIDTH..(i as usize + 1) * WIDTH].to_vec())
            .collect();
        let want_values: Vec<u8> = idx
            .iter()
            .flat_map(|&i| ragged.record(i as usize).to_vec())
            .collect();
        for backend in [Backend::Mmap, Backend::Pread, Backend::Uring] {
            let opts = ReadOptions::with_backend(backend);
            let ds = Dataset::open(dir.join("ds"), opts.clone()).unwrap();
            let sources: [(Box<dyn Records>, Box<dyn Records>); 2] = [
                (
                    Box::new(Store::open(dir.join("dense.zr"), opts.clone()).unwrap()),
                    Box::new(Store::open(dir.join("ragged.zr"), opts.clone()).unwrap()),
                ),
                (
                    Box::new(ds.field(0).unwrap()),
                    Box::new(ds.field(1).unwrap()),
                ),
            ];
            for (d, r) in &sources {
                let what = format!("{codec:?} {backend} {d:?}");
                assert_eq!(d.len(), N as u64, "{what}");
                assert_eq!(dense_through(&**d, &idx), want_dense, "{what}");
                let (layout, values) = ragged_through(&**r, &idx);
                assert_eq!(values, want_values, "{what}");
                for (k, &i) in idx.iter().enumerate() {
                    assert_eq!(
                        &layout.shapes[k * 2..k * 2 + 2],
                        ragged.shape(i as usize),
                        "{what}"
                    );
                }
                assert!(d.sample_store().is_some(), "{what}");
            }
            assert!(sources[0].0.as_store().is_some() && sources[1].0.as_store().is_none());
            // A dataset gathers through each shard store's own backend: io_uring
            // reads stay io_uring reads (one stream per thread, not cut by bytes).
            if backend == Backend::Uring && uring_here() {
                for s in [0, 2] {
                    let served = ds.store(s, 0).unwrap().reads_served();
                    assert!(served.uring > 0, "shard {s}: {served:?}");
                    assert_eq!((served.pread, served.mmap), (0, 0), "shard {s}: {served:?}");
                }
            }
        }
    }
}

/// Says stop after being asked `after` times.
struct StopAfter {
    asked: AtomicUsize,
    after: usize,
}

impl Interrupt for StopAfter {
    fn interrupted(&self) -> bool {
        self.asked.fetch_add(1, Ordering::Relaxed) >= self.after
    }
}

#[test]
fn a_stop_signal_ends_store_dataset_and_verify_batches_with_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    fixture(dir.path(), Codec::Zstd);
    let idx: Vec<u64> = (0..20_000u64).map(|k| (k * 7919) % N as u64).collect();
    for backend in [Backend::Mmap, Backend::Pread, Backend::Uring] {
        let opts = ReadOptions::with_backend(backend);
        let ds = Dataset::open(dir.path().join("ds"), opts.clone()).unwrap();
        let store = Store::open(dir.path().join("dense.zr"), opts.clone()).unwrap();
        let field = ds.field(0).unwrap();
        let mut out = vec![0u8; idx.len() * WIDTH];
        for r in [&store as &dyn Records, &field] {
            // Stopped before it starts, and after a few checks between records.
            for after in [0, 3] {
                let stop = StopAfter {
                    asked: AtomicUsize::new(0),
                    after,
                };
                let err = r.gather_until(&idx, &mut out, &stop).unwrap_err();
                assert!(matches!(err, Error::Interrupted), "{backend} {r:?}: {err}");
                assert_eq!(err.to_string(), "the batch was stopped before it finished");
            }
            // Never stopping is an ordinary gather.
            r.gather_until(&idx, &mut out, &Never).unwrap();
        }
        let stop = AtomicBool::new(true);
        assert!(matches!(
            store.verify_range_until(0..N as u64, &stop),
            Err(Error::Interrupted)
        ));
        assert!(matches!(ds.verify_until(&stop), Err(Error::Interrupted)));
        stop.store(false, Ordering::Relaxed);
        ds.verify_until(&stop).unwrap();
    }
}

#[test]
fn a_stop_from_another_thread_ends_a_long_gather_within_a_tenth_of_a_second() {
    let dir = tempfile::tempdir().unwrap();
    fixture(dir.path(), Codec::Zstd);
    // A batch long enough to take seconds: 2M zstd records.
    let idx: Vec<u64> = (0..2_000_000u64).map(|k| (k * 7919) % N as u64).collect();
    let mut out = vec![0u8; idx.len() * WIDTH];
    let ds = Dataset::open(dir.path().join("ds"), ReadOptions::default()).unwrap();
    let store = Store::open(dir.path().join("dense.zr"), ReadOptions::default()).unwrap();
    let field = ds.field(0).unwrap();
    for r in [&store as &dyn Records, &field] {
        let stop = AtomicBool::new(false);
        let stopped_at = std::sync::Mutex::new(None);
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(100));
                *stopped_at.lock().unwrap() = Some(Instant::now());
                stop.store(true, Ordering::Relaxed);
            });
            let err = r.gather_until(&idx, &mut out, &stop).unwrap_err();
            let ended = Instant::now();
            assert!(matches!(err, Error::Interrupted), "{r:?}: {err}");
            let lag = ended - stopped_at.lock().unwrap().expect("the stop was set");
            println!("{r:?}: stopped {lag:?} after the signal");
            // Milliseconds when the machine is idle (docs/testing.md); the bound
            // leaves room for a busy machine's scheduling.
            assert!(
                lag < Duration::from_millis(500),
                "{r:?}: stopped {lag:?} after the signal"
            );
            assert!(
                lag < Duration::from_millis(100),
                "{r:?}: stopped {lag:?} after the signal"
            );
        });
    }
}

//! The read path allocates nothing per record, counted exactly: every `malloc` of the
//! process is counted (zstd's C allocations included, see zring_testkit::alloc), and
//! once warm a gather of 4096 records makes as many allocations as a gather of 1024
//! (one Arc for the pool job; with io_uring 3 per thread), for dense and ragged stores
//! of every codec through every backend. What may differ is per batch, not per record:
//! io_uring's request lists (2 allocations per 8 MiB window of compressed bytes) and a
//! block of the pool's task queue.
#![allow(clippy::unwrap_used)]

use std::sync::Mutex;

use zring_engine::{Backend, Codec, DType, ReadOptions, Schema, Store, WriteOptions, Writer};
use zring_testkit::compressible;

zring_testkit::count_allocations!();

/// Tests in this file count process-wide: they must not overlap.
static SERIAL: Mutex<()> = Mutex::new(());

fn allocations_during(f: impl FnOnce()) -> u64 {
    let before = allocations();
    f();
    allocations() - before
}

#[test]
fn the_counter_sees_c_allocations() {
    let _serial = SERIAL.lock().unwrap();
    // zstd creates its contexts with C malloc, never through Rust's allocator.
    let n = allocations_during(|| drop(zstd::bulk::Decompressor::new().unwrap()));
    assert!(n >= 1, "ZSTD_createDCtx was not counted");
    // SAFETY: a plain malloc/free pair of the C library.
    let n = allocations_during(|| unsafe { libc::free(libc::malloc(64)) });
    assert_eq!(n, 1);
}

fn write(path: &std::path::Path, ragged: bool, codec: Codec, width: usize) {
    let mut opts = WriteOptions::with_codec(codec);
    if codec == Codec::ZstdDict {
        let samples: Vec<Vec<u8>> = (0..300).map(|s| compressible(512, 900 + s)).collect();
        let refs: Vec<&[u8]> = samples.iter().map(Vec::as_slice).collect();
        opts.dictionary = Some(zring_engine::train_dict(&refs, 2048).unwrap());
    }
    let records: Vec<Vec<u8>> = (0..600)
        .map(|i| compressible(if ragged { 1 + (i * 37) % width } else { width }, i as u64))
        .collect();
    let values = records.concat();
    if ragged {
        let mut w = Writer::create(path, Schema::ragged(DType::U8, 1), opts).unwrap();
        let mut cu = vec![0u64];
        for r in &records {
            cu.push(cu[cu.len() - 1] + r.len() as u64);
        }
        let shapes: Vec<u32> = records.iter().map(|r| r.len() as u32).collect();
        w.append_ragged(&values, &cu, &shapes).unwrap();
        w.close().unwrap();
    } else {
        let schema = Schema::dense(DType::U8, &[width as u64]);
        let mut w = Writer::create(path, schema, opts).unwrap();
        w.append_dense(&values).unwrap();
        w.close().unwrap();
    }
}

#[test]
fn warm_gathers_allocate_nothing_per_record() {
    let _serial = SERIAL.lock().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut report = Vec::new();
    for ragged in [false, true] {
        for codec in [Codec::Raw, Codec::Zstd, Codec::ZstdDict] {
            for width in [2048usize, 40_000] {
                let path = dir.path().join(format!("{ragged}-{codec}-{width}.zr"));
                write(&path, ragged, codec, width);
                for backend in Backend::CONCRETE {
                    let store = Store::open(&path, ReadOptions::with_backend(backend)).unwrap();
                    // Both batches are large enough to use every pool thread, so they
                    // run as the same number of tasks.
                    let small: Vec<u64> = (0..1024).map(|i| (i * 7) % 600).collect();
                    let large: Vec<u64> = (0..4096).map(|i| (i * 13) % 600).collect();
                    let gather =
                        |idx: &[u64],
                         out: &mut Vec<u8>,
                         layout: &mut zring_engine::RaggedLayout| {
                            if ragged {
                                store.ragged_layout_into(idx, layout).unwrap();
                                store.gather_ragged_into(idx, layout, out).unwrap();
                            } else {
                                store.gather(idx, out).unwrap();
                            }
                        };
                    let size = |idx: &[u64]| -> usize {
                        if ragged {
                            store.ragged_layout(idx).unwrap().values_bytes
                        } else {
                            idx.len() * width
                        }
                    };
                    let mut out_small = vec![0u8; size(&small)];
                    let mut out_large = vec![0u8; size(&large)];
                    let mut layout = zring_engine::RaggedLayout::default();
                    // Warm up: per-thread scratch, decoders and the layout grow to
                    // their working size.
                    for _ in 0..3 {
                        gather(&large, &mut out_large, &mut layout);
                        gather(&small, &mut out_small, &mut layout);
                    }
                    let a_small =
                        allocations_during(|| gather(&small, &mut out_small, &mut layout));
                    let a_large =
                        allocations_during(|| gather(&large, &mut out_large, &mut layout));
                    let ctx = format!(
                        "{} {codec} {width}B {backend}",
                        if ragged { "ragged" } else { "dense" }
                    );
                    report.push(format!("{ctx}: {a_small} / {a_large}"));
                    // io_uring plans a task's reads in windows of at most 8 MiB of
                    // scratch and allocates each window's request list (2 vectors): the
                    // one cost that grows with the batch, by 2 per 8 MiB of compressed
                    // bytes read into scratch, not per record.
                    let extra_windows = if backend == Backend::Uring && codec != Codec::Raw {
                        let stored = |idx: &[u64]| -> u64 {
                            idx.iter()
                                .map(|&i| u64::from(store.entry(i).unwrap().stored_len))
                                .sum()
                        };
                        (stored(&large) - stored(&small)).div_ceil(8 << 20) * 2
                    } else {
                        0
                    };
                    // One more either way: the pool's lock-free task queue allocates a
                    // block per 32 tasks pushed, and tasks follow bytes, not records.
                    assert!(
                        a_small <= a_large + 1 && a_large <= a_small + 1 + extra_windows,
                        "{ctx}: {a_small} allocations for 1024 records, {a_large} for 4096 \
                         (allowed: {extra_windows} + 1 more)"
                    );
                }
            }
        }
    }
    println!(
        "allocations per warm gather (1024 / 4096 records):\n{}",
        report.join("\n")
    );
}

/// Half noise, half zeros in 4 KiB blocks: zstd halves it, so the stored frame is
/// about `n / 2` bytes.
fn half_compressible(n: usize, seed: u64) -> Vec<u8> {
    let noise = zring_testkit::noise(n, seed);
    noise
        .chunks(4096)
        .enumerate()
        .flat_map(|(k, c)| {
            if k % 2 == 0 {
                c.to_vec()
            } else {
                vec![0; c.len()]
            }
        })
        .collect()
}

#[test]
fn read_scratch_above_16_mib_is_released_after_each_gather_and_kept_below() {
    let _serial = SERIAL.lock().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sizes.zr");
    // Stored sizes about 1 KiB, 8 MiB (kept) and 24 MiB (above the 16 MiB cap).
    let records = [
        half_compressible(16 << 10, 1),
        half_compressible(16 << 20, 2),
        half_compressible(48 << 20, 3),
    ];
    let mut w =
        Writer::create(&path, Schema::ragged(DType::U8, 1), WriteOptions::default()).unwrap();
    let mut cu = vec![0u64];
    for r in &records {
        cu.push(cu[cu.len() - 1] + r.len() as u64);
    }
    let shapes: Vec<u32> = records.iter().map(|r| r.len() as u32).collect();
    w.append_ragged(&records.concat(), &cu, &shapes).unwrap();
    w.close().unwrap();
    for backend in [Backend::Pread, Backend::Uring] {
        let opts = ReadOptions {
            threads: 1,
            ..ReadOptions::with_backend(backend)
        };
        let store = Store::open(&path, opts).unwrap();
        for (i, r) in records.iter().enumerate() {
            let stored = u64::from(store.entry(i as u64).unwrap().stored_len);
            assert!(stored < r.len() as u64, "record {i} is stored compressed");
        }
        let per_gather = |i: u64| -> u64 {
            let layout = store.ragged_layout(&[i]).unwrap();
            let mut out = vec![0u8; layout.values_bytes];
            for _ in 0..3 {
                store.gather_ragged_into(&[i], &layout, &mut out).unwrap();
            }
            let n =
                allocations_during(|| store.gather_ragged_into(&[i], &layout, &mut out).unwrap());
            assert!(out == records[i as usize]);
            n
        };
        let (small, kept, released) = (per_gather(0), per_gather(1), per_gather(2));
        println!("{backend}: allocations per warm gather {small} / {kept} / {released}");
        if backend == Backend::Pread {
            // Scratch of 8 MiB stays with the thread; 24 MiB is freed after each
            // gather and so allocated again by the next.
            assert_eq!(kept, small, "{backend}: 8 MiB of scratch was not kept");
            assert!(released > small, "{backend}: 24 MiB of scratch was kept");
        } else if let Some(before) = zring_testkit::os::anonymous_bytes() {
            // io_uring's scratch slab is mapped, not malloc'd: the kernel's count of
            // anonymous memory shows whether the 32 MiB slab of the 24 MiB record
            // outlived the gather.
            // A fresh thread has no slab yet; with threads = 1 it reads alone.
            let layout = store.ragged_layout(&[2]).unwrap();
            let grown = std::thread::scope(|s| {
                s.spawn(|| {
                    let mut out = vec![0u8; layout.values_bytes];
                    out.fill(1); // fault the destination in before counting
                    store
                        .gather_ragged_into(
                            &[0],
                            &store.ragged_layout(&[0]).unwrap(),
                            &mut out[..records[0].len()],
                        )
                        .unwrap();
                    let before = zring_testkit::os::anonymous_bytes().unwrap_or(before);
                    store.gather_ragged_into(&[2], &layout, &mut out).unwrap();
                    let after = zring_testkit::os::anonymous_bytes().unwrap_or(before);
                    after.saturating_sub(before)
                })
                .join()
                .unwrap()
            });
            assert!(
                grown < 8 << 20,
                "{backend}: {grown} bytes more resident after the gather"
            );
        }
    }
}

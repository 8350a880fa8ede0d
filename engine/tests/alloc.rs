//! The read path allocates nothing per record, counted exactly: every `malloc` of the
//! process is counted (zstd's C allocations included, see zring_testkit::alloc), and
//! once warm every gather makes the same fixed number of allocations whatever its
//! size (1024 or 4096 records), for dense and ragged stores of every codec through
//! every backend: 1 per pool job (the `Arc` its workers share: a dense gather runs
//! one, a ragged one two, its layout's lookups and its reads), and with io_uring
//! 4 more per thread (a task's record list and read plan, its window's request and
//! completion lists; each further 8 MiB window of compressed bytes would add 2, and
//! the batches here fit one). The pool's task queue adds a block every 31 pushes,
//! counted exactly over 31 gathers. The pool is the test's own, of fixed size, so the
//! counts do not depend on the machine's cores.
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

/// Workers of the test's own pool: fixed, so the counts below are the same on any
/// machine (the global pool has one worker per core but one).
const WORKERS: usize = 3;
/// Threads per gather: the workers and the caller. Both batch sizes are large enough
/// that each of them helps.
const THREADS: u64 = WORKERS as u64 + 1;
/// Allocations of every pool job the workers help: the job the caller shares with
/// them (one `Arc`). A ragged gather runs two: its layout's and its reads'.
const PER_JOB: u64 = 1;
/// With io_uring, per thread (each reads one task, in one window here): the window's
/// record list and its read plan, then that window's request and completion lists.
const URING_PER_THREAD: u64 = 4;
/// The io_uring executor's window: the batches are chosen so that each task's
/// compressed bytes fit in one (a further window would add 2 lists).
const SCRATCH_WINDOW: u64 = 8 << 20;
/// Slots per block of the pool's task queue (crossbeam's `SegQueue`): a job is pushed
/// once per helping worker, and a new block is allocated every 31 pushes, so over 31
/// gathers exactly `WORKERS` blocks per job of a gather are allocated, at most one in
/// any gather.
const QUEUE_BLOCK_SLOTS: u64 = 31;

#[test]
fn warm_gathers_allocate_nothing_per_record() {
    let _serial = SERIAL.lock().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let pool = std::sync::Arc::new(zring_platform::Pool::new(WORKERS, false).unwrap());
    let mut report = Vec::new();
    for ragged in [false, true] {
        for codec in [Codec::Raw, Codec::Zstd, Codec::ZstdDict] {
            for width in [2048usize, 40_000] {
                let path = dir.path().join(format!("{ragged}-{codec}-{width}.zr"));
                write(&path, ragged, codec, width);
                for backend in Backend::CONCRETE {
                    let opts = ReadOptions::with_backend(backend)
                        .with_pool(zring_platform::PoolHandle::own(pool.clone()));
                    let store = Store::open(&path, opts).unwrap();
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
                    // Warm up every thread's ring, decoders and scratch, whichever tasks
                    // it takes later: one pool task per thread, held at a barrier so
                    // that each runs on a thread of its own, gathers both batches on it
                    // (a gather inside a pool task runs inline).
                    let barrier = std::sync::Barrier::new(WORKERS + 1);
                    pool.run(WORKERS + 1, WORKERS, |_| {
                        barrier.wait();
                        let mut layout = zring_engine::RaggedLayout::default();
                        let mut large_out = vec![0u8; size(&large)];
                        gather(&large, &mut large_out, &mut layout);
                    });
                    // And the caller's reusable layout.
                    gather(&large, &mut out_large, &mut layout);
                    gather(&small, &mut out_small, &mut layout);
                    let uring = store.reads_served().uring > 0;
                    if backend == Backend::Uring && !uring {
                        zring_testkit::require_uring(
                            "io_uring",
                            zring_platform::uring_unavailable_reason(),
                        );
                    }
                    if uring {
                        // Each task (a quarter of the batch) fits one window: its
                        // compressed records, which are read into scratch (raw ones
                        // are read into their slots), take less than one window.
                        let scratch_bytes = |idx: &[u64]| -> u64 {
                            idx.chunks(idx.len().div_ceil(THREADS as usize))
                                .map(|t| {
                                    t.iter()
                                        .map(|&i| store.entry(i).unwrap())
                                        .filter(|e| e.stored_len < e.logical_len)
                                        .map(|e| u64::from(e.stored_len))
                                        .sum::<u64>()
                                })
                                .max()
                                .unwrap_or(0)
                        };
                        assert!(scratch_bytes(&large) < SCRATCH_WINDOW);
                    }
                    let jobs = if ragged { 2 } else { 1 };
                    let want = PER_JOB * jobs + if uring { THREADS * URING_PER_THREAD } else { 0 };
                    let ctx = format!(
                        "{} {codec} {width}B {backend}",
                        if ragged { "ragged" } else { "dense" }
                    );
                    let why = format!(
                        "{PER_JOB} per pool job x {jobs}{}",
                        if uring {
                            format!(" + {URING_PER_THREAD} per thread x {THREADS}")
                        } else {
                            String::new()
                        }
                    );
                    // 31 gathers of 1024 records: exactly `want` each, plus the
                    // queue's `WORKERS` blocks per job over all of them. The count is the
                    // process's: the test harness allocates too when it prints its
                    // "running for over 60 seconds" notice, so a round may be measured
                    // again, up to 3 times; an allocation the read path makes in every
                    // round still fails.
                    let blocks = WORKERS as u64 * jobs;
                    let small_ok = |c: &[u64]| {
                        c.iter().all(|&n| n == want || n == want + 1)
                            && c.iter().sum::<u64>() == want * QUEUE_BLOCK_SLOTS + blocks
                    };
                    // 3 of 4096 records (9 or 18 pushes): the same `want` each, one
                    // of them perhaps with a queue block.
                    let large_ok = |c: &[u64]| {
                        c.iter().all(|&n| n == want || n == want + 1)
                            && c.iter().sum::<u64>() <= want * 3 + 1
                    };
                    let mut small_counts = Vec::new();
                    let mut large_counts = Vec::new();
                    for _ in 0..3 {
                        small_counts = (0..QUEUE_BLOCK_SLOTS)
                            .map(|_| {
                                allocations_during(|| gather(&small, &mut out_small, &mut layout))
                            })
                            .collect();
                        large_counts = (0..3)
                            .map(|_| {
                                allocations_during(|| gather(&large, &mut out_large, &mut layout))
                            })
                            .collect();
                        if small_ok(&small_counts) && large_ok(&large_counts) {
                            break;
                        }
                        println!("{ctx}: measured again after {small_counts:?} / {large_counts:?}");
                    }
                    assert!(
                        small_ok(&small_counts),
                        "{ctx}: allocations of {QUEUE_BLOCK_SLOTS} warm gathers of 1024 \
                         records: {small_counts:?}; each must be {want} ({why}), plus \
                         {blocks} queue blocks over all of them"
                    );
                    assert!(
                        large_ok(&large_counts),
                        "{ctx}: allocations of 3 warm gathers of 4096 records: \
                         {large_counts:?}; each must be {want} ({why}), one of them \
                         perhaps 1 more (a queue block)"
                    );
                    report.push(format!("{ctx}: {small_counts:?} / {large_counts:?}"));
                }
            }
        }
    }
    println!(
        "allocations per warm gather ({QUEUE_BLOCK_SLOTS} gathers of 1024, then 3 of 4096 records):\n{}",
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
        let opts = ReadOptions::with_backend(backend).threads(1);
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

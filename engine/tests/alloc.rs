//! The read path allocates nothing per record: a gather of 4096 records makes no more
//! heap allocations than a gather of 64 (a handful per gather and per thread, for the
//! task bookkeeping; none per record).
#![allow(clippy::unwrap_used)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use zring_engine::{Backend, Codec, DType, ReadOptions, Schema, Store, WriteOptions, Writer};

struct Counting;

static ALLOCS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations_during(f: impl FnOnce()) -> usize {
    let before = ALLOCS.load(Ordering::SeqCst);
    f();
    ALLOCS.load(Ordering::SeqCst) - before
}

#[test]
fn gathers_allocate_nothing_per_record() {
    let dir = tempfile::tempdir().unwrap();
    for codec in [Codec::Raw, Codec::Zstd] {
        for width in [2048usize, 40_000] {
            let path = dir.path().join(format!("{codec}-{width}.zr"));
            let bytes: Vec<u8> = (0..width * 600).map(|i| (i / 9) as u8).collect();
            let mut w = Writer::create(
                &path,
                Schema::dense(DType::U8, &[width as u64]),
                WriteOptions::with_codec(codec),
            )
            .unwrap();
            w.append_dense(&bytes).unwrap();
            w.close().unwrap();
            for backend in Backend::CONCRETE {
                let store = Store::open(&path, ReadOptions::with_backend(backend)).unwrap();
                let small: Vec<u64> = (0..64).map(|i| (i * 7) % 600).collect();
                let large: Vec<u64> = (0..4096).map(|i| (i * 13) % 600).collect();
                let mut out_small = vec![0u8; small.len() * width];
                let mut out_large = vec![0u8; large.len() * width];
                // Warm up: per-thread scratch and decoders grow to their working size.
                for _ in 0..3 {
                    store.gather(&large, &mut out_large).unwrap();
                    store.gather(&small, &mut out_small).unwrap();
                }
                let a_small = allocations_during(|| store.gather(&small, &mut out_small).unwrap());
                let a_large = allocations_during(|| store.gather(&large, &mut out_large).unwrap());
                assert!(
                    a_large <= a_small + 8,
                    "{codec} {width}B {backend}: {a_small} allocations for 64 records, {a_large} for 4096"
                );
            }
        }
    }
}

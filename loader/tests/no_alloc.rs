//! With a counting global allocator: once warm, making and delivering steps
//! performs no heap allocation at all, with or without worker threads.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

use common::{dense_store, ragged_store};
use zring_engine::Codec;
use zring_loader::{Loader, LoaderOptions};
use zring_sampler::{Mode, Sampler};

struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn a_warm_loader_makes_steps_without_allocating() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dense = dense_store(dir.path(), "d.zr", 64);
    let ragged = ragged_store(dir.path(), "r.zr", 64, Codec::Zstd);
    for workers in [0, 2] {
        let sampler = Sampler::new(64, 8, Mode::Iid, 4).expect("sampler");
        let mut loader = Loader::new(
            [
                ("d", vec![dense.clone(), dense.clone()]),
                ("r", vec![ragged.clone(), ragged.clone()]),
            ],
            sampler,
            LoaderOptions::new(workers, 2),
        )
        .expect("loader");
        // Warm up with every buffer the bound allows alive at once (see memory.rs).
        let held = loader.next().expect("endless").expect("step");
        std::thread::sleep(std::time::Duration::from_millis(100));
        let mut checksum = held.step;
        drop(held);
        for step in loader.by_ref().take(300) {
            checksum += step.expect("step").step;
        }
        let stats_before = loader.stats();
        let before = ALLOCATIONS.load(Ordering::Relaxed);
        for step in loader.by_ref().take(3000) {
            let step = step.expect("step");
            checksum += step.step + step.get("r", 1).map_or(0, |t| t.records() as u64);
        }
        let during = ALLOCATIONS.load(Ordering::Relaxed) - before;
        assert!(checksum > 0);
        assert_eq!(
            during,
            0,
            "workers {workers}: {during} allocations in 3000 steps; stats {stats_before:?} -> {:?}",
            loader.stats()
        );
    }
}

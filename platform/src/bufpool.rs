//! A bounded pool of [`AlignedBuf`]s recycled by size class.
//!
//! A loader fills a batch buffer, hands it to the consumer, and wants it back when
//! the consumer is done, so a steady run allocates (and page-faults, and for pinned
//! buffers `mlock`s) nothing per batch. [`BufPool::get`] returns a [`PooledBuf`] whose
//! capacity is the request rounded up to a size class; dropping it puts the buffer
//! back on the free list of its class, unless the pool already keeps
//! [`BufPoolOptions::max_free`] buffers or [`BufPoolOptions::max_free_bytes`] bytes,
//! in which case it is freed. The free lists sit behind one short mutex (a push or a
//! pop, never I/O or a copy); the statistics are atomics.
//!
//! Size classes: requests up to 4 KiB share one class; above that a class is the
//! request rounded up to a quarter of its power of two (`2^k`, `1.25 * 2^k`,
//! `1.5 * 2^k`, `1.75 * 2^k`), so a buffer wastes at most 25%. A request may also
//! take a free buffer of a larger class up to 1.5 times its own, so batches whose
//! size varies a little (ragged records) keep reusing the same buffers. Requests
//! that always have one size use [`BufPool::get_exact`], which allocates no more
//! than asked and reuses only buffers of exactly that size.

use std::collections::BTreeMap;
use std::io;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};

use crate::sync::{AtomicU64, AtomicUsize, Mutex, MutexGuard};

use crate::buffer::{AlignedBuf, DEFAULT_ALIGN};

/// The smallest size class: every request up to this many bytes shares it.
pub const MIN_CLASS_BYTES: usize = 4096;

/// A class's free list reserves room for up to this many buffers when it is made.
const MAX_RESERVED_PER_CLASS: usize = 256;

/// How a [`BufPool`] allocates and how much it keeps.
#[derive(Clone, Debug)]
pub struct BufPoolOptions {
    /// Alignment of every buffer's start (a power of two; pinned buffers are also
    /// page-aligned).
    pub align: usize,
    /// Allocate page-locked buffers (`mlock`, see [`AlignedBuf::pinned`]). A `get`
    /// that cannot pin fails with the OS error (usually `RLIMIT_MEMLOCK`); recycling
    /// matters most here because pinning costs a syscall and page faults.
    pub pinned: bool,
    /// At most this many free buffers are kept; a buffer returned beyond that is freed.
    pub max_free: usize,
    /// At most this many bytes (of capacity) are kept in free buffers.
    pub max_free_bytes: usize,
}

impl Default for BufPoolOptions {
    fn default() -> Self {
        Self {
            align: DEFAULT_ALIGN,
            pinned: false,
            max_free: 64,
            max_free_bytes: 1 << 30,
        }
    }
}

/// Counters of a pool, for tests, benchmarks and leak hunting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BufPoolStats {
    /// Buffers allocated since the pool was made (a steady run stops increasing it).
    pub allocations: u64,
    /// `get` calls served from a free list.
    pub reuses: u64,
    /// Returned buffers that were freed because the pool was full.
    pub released: u64,
    /// Buffers handed out and not yet returned.
    pub live: usize,
    /// The largest `live` seen since the pool was made (or since
    /// [`BufPool::reset_high_water`]).
    pub live_high_water: usize,
    /// Buffers on the free lists.
    pub free: usize,
    /// Capacity bytes on the free lists.
    pub free_bytes: usize,
}

/// A pool of aligned buffers; cloning shares the pool.
#[derive(Clone)]
pub struct BufPool {
    inner: Arc<Inner>,
}

struct Inner {
    opts: BufPoolOptions,
    free: Mutex<FreeLists>,
    allocations: AtomicU64,
    reuses: AtomicU64,
    released: AtomicU64,
    live: AtomicUsize,
    live_high_water: AtomicUsize,
}

#[derive(Default)]
struct FreeLists {
    /// Free buffers by capacity (always a size class). Emptied lists stay in the map
    /// so that a steady run does not reallocate map nodes or list storage.
    by_class: BTreeMap<usize, Vec<AlignedBuf>>,
    count: usize,
    bytes: usize,
}

/// The size class (capacity) that serves a request of `len` bytes.
pub fn size_class(len: usize) -> usize {
    if len <= MIN_CLASS_BYTES || len.is_power_of_two() {
        return len.max(MIN_CLASS_BYTES);
    }
    let low = 1usize << (usize::BITS - 1 - len.leading_zeros());
    let step = low / 4;
    len.div_ceil(step).checked_mul(step).unwrap_or(len)
}

impl BufPool {
    /// An empty pool; nothing is allocated until the first `get`.
    pub fn new(opts: BufPoolOptions) -> io::Result<Self> {
        if !opts.align.is_power_of_two() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("pool alignment {} is not a power of two", opts.align),
            ));
        }
        Ok(Self {
            inner: Arc::new(Inner {
                opts,
                free: Mutex::new(FreeLists::default()),
                allocations: AtomicU64::new(0),
                reuses: AtomicU64::new(0),
                released: AtomicU64::new(0),
                live: AtomicUsize::new(0),
                live_high_water: AtomicUsize::new(0),
            }),
        })
    }

    /// The options the pool was made with.
    pub fn options(&self) -> &BufPoolOptions {
        &self.inner.opts
    }

    /// A buffer of exactly `len` visible bytes (its capacity is `len`'s size class or
    /// a little more). A recycled buffer holds whatever its previous user wrote; a
    /// fresh one is zeroed. Fails only if a fresh buffer cannot be allocated or pinned.
    pub fn get(&self, len: usize) -> io::Result<PooledBuf> {
        self.take(len, len, false)
    }

    /// Like [`get`](Self::get), but the buffer's capacity is at least `capacity`'s
    /// size class: for requests whose size varies below a known bound (ragged
    /// batches, asked for with a capacity the loader fixes early). They then all take
    /// buffers of one size class and keep reusing them; asked for by their own size,
    /// they straddle neighbouring classes, the pool's mix of classes drifts with the
    /// sizes, and buffers keep being freed and allocated (a process's resident memory
    /// drifting with them).
    pub fn get_with_capacity(&self, len: usize, capacity: usize) -> io::Result<PooledBuf> {
        self.take(len, len.max(capacity), false)
    }

    /// Like [`get`](Self::get), but the buffer has exactly `len` bytes of capacity
    /// instead of `len`'s size class: for requests that always have the same size
    /// (dense batches), which then cost no rounding in memory. Only a free buffer of
    /// exactly that capacity is reused, and `get` takes only class-sized buffers, so
    /// the two kinds of request never take each other's buffers.
    pub fn get_exact(&self, len: usize) -> io::Result<PooledBuf> {
        self.take(len, len, true)
    }

    /// A buffer of `len` visible bytes and a capacity for `want` bytes (`want`
    /// exactly, or its size class).
    fn take(&self, len: usize, want: usize, exact: bool) -> io::Result<PooledBuf> {
        // Counted as live before looking for a free buffer, and (in `put`) until it
        // is back on a list: then a buffer returned while this one is allocated was
        // still counted, and `live_high_water` bounds the buffers ever allocated for
        // requests of one size.
        let live = self.inner.live.fetch_add(1, Ordering::Relaxed) + 1;
        self.inner
            .live_high_water
            .fetch_max(live, Ordering::Relaxed);
        let buf = match self.inner.pop(want, exact) {
            Some(buf) => {
                self.inner.reuses.fetch_add(1, Ordering::Relaxed);
                buf
            }
            None => match self.allocate(if exact { want } else { size_class(want) }) {
                Ok(buf) => buf,
                Err(e) => {
                    self.inner.live.fetch_sub(1, Ordering::Relaxed);
                    return Err(e);
                }
            },
        };
        Ok(PooledBuf {
            buf: Some(buf),
            len,
            pool: Arc::clone(&self.inner),
        })
    }

    fn allocate(&self, capacity: usize) -> io::Result<AlignedBuf> {
        let opts = &self.inner.opts;
        let buf = if opts.pinned {
            AlignedBuf::pinned(capacity, opts.align)?
        } else {
            AlignedBuf::new(capacity, opts.align)?
        };
        self.inner.allocations.fetch_add(1, Ordering::Relaxed);
        Ok(buf)
    }

    /// The pool's counters now.
    pub fn stats(&self) -> BufPoolStats {
        let (free, free_bytes) = {
            let lists = self.inner.lock();
            (lists.count, lists.bytes)
        };
        BufPoolStats {
            allocations: self.inner.allocations.load(Ordering::Relaxed),
            reuses: self.inner.reuses.load(Ordering::Relaxed),
            released: self.inner.released.load(Ordering::Relaxed),
            live: self.inner.live.load(Ordering::Relaxed),
            live_high_water: self.inner.live_high_water.load(Ordering::Relaxed),
            free,
            free_bytes,
        }
    }

    /// Restarts the `live_high_water` count from the current `live`.
    pub fn reset_high_water(&self) {
        let live = self.inner.live.load(Ordering::Relaxed);
        self.inner.live_high_water.store(live, Ordering::Relaxed);
    }

    /// Frees every buffer on the free lists (buffers in use are not affected).
    pub fn trim(&self) {
        let taken = {
            let mut lists = self.inner.lock();
            lists.count = 0;
            lists.bytes = 0;
            std::mem::take(&mut lists.by_class)
        };
        drop(taken);
    }
}

impl std::fmt::Debug for BufPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BufPool")
            .field("options", &self.inner.opts)
            .field("stats", &self.stats())
            .finish()
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, FreeLists> {
        // The lists are consistent after every push or pop, so a panic elsewhere
        // while the lock was held cannot leave them broken.
        self.free.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A free buffer of capacity exactly `len` (`exact`), or else the smallest
    /// class-sized one from `len`'s size class up to 1.5 x that class.
    fn pop(&self, len: usize, exact: bool) -> Option<AlignedBuf> {
        let mut lists = self.lock();
        if lists.count == 0 {
            return None;
        }
        let buf = if exact {
            lists.by_class.get_mut(&len).and_then(Vec::pop)?
        } else {
            let class = size_class(len);
            let limit = class.saturating_add(class / 2);
            lists
                .by_class
                .range_mut(class..=limit)
                .filter(|(&cap, _)| size_class(cap) == cap)
                .find_map(|(_, list)| list.pop())?
        };
        lists.count -= 1;
        lists.bytes -= buf.len();
        Some(buf)
    }

    /// Takes a returned buffer back, or frees it (outside the lock) if the pool is full.
    /// A full pool first makes room by freeing one idle buffer of another size class
    /// (the largest): the returned buffer's class is the one in use now, and a pool
    /// left full of another size by an earlier burst would otherwise never recycle
    /// again.
    fn put(&self, buf: AlignedBuf) {
        let cap = buf.len();
        let (rejected, evicted) = {
            let mut lists = self.lock();
            let fits = |l: &FreeLists| {
                l.count < self.opts.max_free
                    && l.bytes.saturating_add(cap) <= self.opts.max_free_bytes
            };
            let mut evicted = None;
            if !fits(&lists) && cap <= self.opts.max_free_bytes {
                let victim = lists
                    .by_class
                    .iter_mut()
                    .rev()
                    .find(|(&c, list)| c != cap && !list.is_empty())
                    .and_then(|(_, list)| list.pop());
                if let Some(v) = victim {
                    lists.count -= 1;
                    lists.bytes -= v.len();
                    evicted = Some(v);
                }
            }
            if fits(&lists) {
                lists.count += 1;
                lists.bytes += cap;
                // A class's list is sized for the most buffers it may keep, so that
                // pushing never reallocates once the class exists.
                let reserve = self.opts.max_free.min(MAX_RESERVED_PER_CLASS);
                lists
                    .by_class
                    .entry(cap)
                    .or_insert_with(|| Vec::with_capacity(reserve))
                    .push(buf);
                (None, evicted)
            } else {
                (Some(buf), evicted)
            }
        };
        // Still live until it is back on a list (see `BufPool::take`).
        self.live.fetch_sub(1, Ordering::Relaxed);
        let freed = u64::from(rejected.is_some()) + u64::from(evicted.is_some());
        if freed > 0 {
            self.released.fetch_add(freed, Ordering::Relaxed);
        }
        drop(rejected);
        drop(evicted);
    }
}

/// A buffer on loan from a [`BufPool`]: derefs to its `len` visible bytes and goes
/// back to the pool when dropped.
pub struct PooledBuf {
    /// Always `Some` until drop or `detach`.
    buf: Option<AlignedBuf>,
    len: usize,
    pool: Arc<Inner>,
}

impl PooledBuf {
    /// Bytes actually allocated (at least `len`).
    pub fn capacity(&self) -> usize {
        self.buf.as_ref().map_or(0, |b| b.len())
    }

    /// Shows only the first `len` bytes (no-op if it shows fewer): a batch that
    /// turned out shorter than its buffer (bad images skipped). The capacity, and so
    /// the pool list it returns to, is unchanged.
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Whether the buffer is page-locked.
    pub fn is_pinned(&self) -> bool {
        self.buf.as_ref().is_some_and(AlignedBuf::is_pinned)
    }

    /// The alignment of the buffer's start.
    pub fn align(&self) -> usize {
        self.buf.as_ref().map_or(1, AlignedBuf::align)
    }

    /// Takes the whole underlying buffer (all of its capacity) out of the pool for
    /// good: it will be freed, not recycled, when dropped.
    pub fn detach(mut self) -> AlignedBuf {
        self.pool.live.fetch_sub(1, Ordering::Relaxed);
        self.buf
            .take()
            .expect("a PooledBuf holds its buffer until it is dropped or detached")
    }
}

impl Deref for PooledBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.buf {
            Some(b) => &b[..self.len],
            None => &[],
        }
    }
}

impl DerefMut for PooledBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        match &mut self.buf {
            Some(b) => &mut b[..self.len],
            None => &mut [],
        }
    }
}

impl Drop for PooledBuf {
    fn drop(&mut self) {
        if let Some(buf) = self.buf.take() {
            self.pool.put(buf);
        }
    }
}

impl std::fmt::Debug for PooledBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PooledBuf")
            .field("len", &self.len)
            .field("capacity", &self.capacity())
            .field("pinned", &self.is_pinned())
            .finish()
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;

    /// Two threads take and return buffers through a pool that keeps one free buffer:
    /// whatever the interleaving, every buffer is counted back, the free list stays
    /// within its bound, and a buffer is reused or allocated, never both or neither.
    #[test]
    fn loom_bufpool_recycling() {
        loom::model(|| {
            let pool = BufPool::new(BufPoolOptions {
                max_free: 1,
                ..BufPoolOptions::default()
            })
            .expect("pool");
            let threads: Vec<_> = (0..2u8)
                .map(|k| {
                    let pool = pool.clone();
                    loom::thread::spawn(move || {
                        let mut buf = pool.get(4096).expect("buffer");
                        buf[0] = k;
                        drop(buf);
                    })
                })
                .collect();
            for t in threads {
                t.join().expect("thread");
            }
            let s = pool.stats();
            assert_eq!(s.live, 0);
            assert_eq!(s.allocations + s.reuses, 2);
            assert!(s.free <= 1);
            assert_eq!(s.free as u64 + s.released, s.allocations);
            assert!(s.allocations as usize <= s.live_high_water);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(max_free: usize) -> BufPool {
        BufPool::new(BufPoolOptions {
            max_free,
            ..BufPoolOptions::default()
        })
        .expect("pool")
    }

    #[test]
    fn size_classes_round_up_by_at_most_a_quarter() {
        assert_eq!(size_class(0), MIN_CLASS_BYTES);
        assert_eq!(size_class(1), MIN_CLASS_BYTES);
        assert_eq!(size_class(4096), 4096);
        assert_eq!(size_class(4097), 5120);
        assert_eq!(size_class(8192), 8192);
        assert_eq!(size_class(8193), 10240);
        assert_eq!(size_class(150_528), 163_840);
        for len in (4097..1 << 20).step_by(997) {
            let c = size_class(len);
            assert!(c >= len && c <= len + len / 4, "{len} -> {c}");
            assert_eq!(size_class(c), c, "a class is its own class");
        }
    }

    #[test]
    fn a_returned_buffer_is_reused_for_the_next_request_of_its_class() {
        let p = pool(8);
        let first = p.get(100_000).expect("get");
        assert_eq!(first.len(), 100_000);
        assert!(first.capacity() >= 100_000);
        let addr = first.as_ptr() as usize;
        drop(first);
        let again = p.get(99_000).expect("get");
        assert_eq!(again.as_ptr() as usize, addr);
        assert_eq!(again.len(), 99_000);
        let s = p.stats();
        assert_eq!((s.allocations, s.reuses, s.live, s.free), (1, 1, 1, 0));
    }

    #[test]
    fn a_slightly_larger_free_class_serves_a_request() {
        let p = pool(8);
        drop(p.get(120_000).expect("get"));
        // 100_000 rounds to 114_688; the free 131_072 buffer is within 1.5x.
        let b = p.get(100_000).expect("get");
        assert_eq!(b.capacity(), size_class(120_000));
        assert_eq!(p.stats().allocations, 1);
        // Far larger buffers are not handed out for small requests.
        drop(b);
        let small = p.get(1000).expect("get");
        assert_eq!(small.capacity(), MIN_CLASS_BYTES);
        assert_eq!(p.stats().allocations, 2);
    }

    #[test]
    fn buffers_are_aligned_and_writable_through_the_loan() {
        let p = BufPool::new(BufPoolOptions {
            align: 4096,
            ..BufPoolOptions::default()
        })
        .expect("pool");
        let mut b = p.get(10_000).expect("get");
        assert_eq!(b.as_ptr() as usize % 4096, 0);
        assert_eq!(b.align(), 4096);
        b.fill(9);
        assert!(b.iter().all(|&x| x == 9));
    }

    #[test]
    fn the_free_lists_are_bounded_by_count_and_bytes() {
        let p = pool(2);
        let bufs: Vec<PooledBuf> = (0..5).map(|_| p.get(8192).expect("get")).collect();
        assert_eq!(p.stats().live, 5);
        assert_eq!(p.stats().live_high_water, 5);
        drop(bufs);
        let s = p.stats();
        assert_eq!((s.live, s.free, s.released), (0, 2, 3));
        assert_eq!(s.free_bytes, 2 * 8192);

        let by_bytes = BufPool::new(BufPoolOptions {
            max_free: 100,
            max_free_bytes: 3 * 8192,
            ..BufPoolOptions::default()
        })
        .expect("pool");
        let bufs: Vec<PooledBuf> = (0..5).map(|_| by_bytes.get(8192).expect("get")).collect();
        drop(bufs);
        assert_eq!(by_bytes.stats().free, 3);
        by_bytes.trim();
        assert_eq!(by_bytes.stats().free, 0);
        assert_eq!(by_bytes.stats().free_bytes, 0);
    }

    #[test]
    fn a_full_pool_of_another_size_makes_room_for_the_size_in_use() {
        let p = pool(2);
        drop(
            (0..2)
                .map(|_| p.get(1 << 20).expect("get"))
                .collect::<Vec<_>>(),
        );
        assert_eq!(p.stats().free, 2);
        drop(p.get(8192).expect("warm"));
        let before = p.stats();
        for _ in 0..10 {
            drop(p.get(8192).expect("get"));
        }
        let after = p.stats();
        assert_eq!(
            after.allocations, before.allocations,
            "8 KiB buffers are reused"
        );
        assert_eq!(after.free, 2);
        assert_eq!(after.free as u64 + after.released, after.allocations);
    }

    #[test]
    fn a_steady_loop_stops_allocating_after_warm_up() {
        let p = pool(16);
        for round in 0..1000 {
            let held: Vec<PooledBuf> = (0..4)
                .map(|k| p.get(50_000 + (round * 7 + k) % 300).expect("get"))
                .collect();
            drop(held);
        }
        let s = p.stats();
        assert_eq!(s.allocations, 4);
        assert_eq!(s.live_high_water, 4);
        p.reset_high_water();
        assert_eq!(p.stats().live_high_water, 0);
    }

    #[test]
    fn exact_requests_allocate_no_rounding_and_are_reused() {
        let p = pool(8);
        let len = 256 * 150_528;
        let b = p.get_exact(len).expect("get");
        assert_eq!((b.len(), b.capacity()), (len, len));
        let addr = b.as_ptr() as usize;
        drop(b);
        let again = p.get_exact(len).expect("get");
        assert_eq!(again.as_ptr() as usize, addr);
        drop(again);
        // Class-rounded requests do not take exact buffers, nor the other way round.
        let class = p.get(len).expect("get");
        assert_eq!(class.capacity(), size_class(len));
        drop(class);
        let exact = p.get_exact(len).expect("get");
        assert_eq!(exact.as_ptr() as usize, addr);
        assert_eq!(p.stats().allocations, 2);
        // An exact request of a class size shares the class buffers.
        drop(p.get(8000).expect("get"));
        assert_eq!(p.get_exact(8192).expect("get").capacity(), 8192);
        assert_eq!(p.stats().allocations, 3);
    }

    #[test]
    fn detached_buffers_leave_the_pool() {
        let p = pool(4);
        let b = p.get(5000).expect("get");
        let owned = b.detach();
        assert_eq!(owned.len(), size_class(5000));
        let s = p.stats();
        assert_eq!((s.live, s.free), (0, 0));
    }

    #[test]
    fn many_threads_share_one_pool() {
        let p = pool(64);
        std::thread::scope(|s| {
            for t in 0..4usize {
                let p = p.clone();
                s.spawn(move || {
                    for i in 0..500usize {
                        let mut b = p.get(4096 + (t * 1000 + i) % 20_000).expect("get");
                        b[0] = t as u8;
                        assert_eq!(b[0], t as u8);
                    }
                });
            }
        });
        let s = p.stats();
        assert_eq!(s.live, 0);
        assert_eq!(s.reuses + s.allocations, 2000);
        assert!(s.live_high_water <= 4);
    }

    #[test]
    fn pinned_pools_pin_or_fail_cleanly() {
        let p = BufPool::new(BufPoolOptions {
            pinned: true,
            ..BufPoolOptions::default()
        })
        .expect("pool");
        let must_work = zring_testkit::os::pinning_must_work();
        match p.get(1 << 16) {
            Ok(b) => {
                assert!(b.is_pinned());
                assert_eq!(b.as_ptr() as usize % crate::buffer::page_size(), 0);
                // The kernel agrees: the pages are locked.
                if let Some(locked) = zring_testkit::os::locked_bytes_at(b.as_ptr() as usize) {
                    assert!(locked >= 1 << 16, "{locked} bytes locked of 65536");
                }
                drop(b);
                assert!(p.get(1 << 16).expect("reuse").is_pinned());
                assert_eq!(p.stats().allocations, 1);
            }
            Err(e) => {
                // Only where the OS may refuse (no root, a small RLIMIT_MEMLOCK).
                assert!(
                    !must_work,
                    "pinning must work here (root or a large RLIMIT_MEMLOCK): {e}"
                );
                assert!(e.to_string().contains("mlock"), "{e}");
            }
        }
    }

    /// Requests whose size varies across neighbouring classes, held a varying number
    /// at a time (a loader whose consumer runs in bursts): asked for by their own
    /// size, the pool keeps freeing and allocating as its mix of classes drifts;
    /// asked for with the largest size so far, every buffer ends in that one class
    /// and allocations stop once it is reached.
    #[test]
    fn requests_at_the_largest_size_so_far_stop_allocating() {
        let run = |high_water: bool| {
            // Room for all 8 that may be live at once (as a loader sizes its pool).
            let p = pool(8);
            let mut seed = 0x9E37_79B9_7F4A_7C15u64;
            let mut next = move |m: u64| {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (seed >> 33) % m
            };
            let (mut live, mut largest, mut late) = (Vec::new(), 0, 0);
            let mut target = 4;
            for i in 0..20_000u64 {
                if i % 25 == 0 {
                    target = 1 + next(8) as usize;
                }
                while live.len() > target {
                    live.remove(0);
                }
                // 13-23 KiB: the classes of 16, 20 and 24 KiB.
                let len = 13 * 1024 + next(10 * 1024) as usize;
                largest = largest.max(len);
                let before = p.stats().allocations;
                let b = match high_water {
                    true => p.get_with_capacity(len, largest),
                    false => p.get(len),
                }
                .expect("buffer");
                assert_eq!(b.len(), len);
                assert!(b.capacity() >= len.max(if high_water { largest } else { 0 }));
                if i >= 1_000 {
                    late += p.stats().allocations - before;
                }
                live.push(b);
            }
            late
        };
        assert_eq!(
            run(true),
            0,
            "allocations after warm-up at the largest size"
        );
        // What the test guards against: by their own size they keep allocating.
        assert!(run(false) > 100, "by their own size the classes drift");
    }

    #[test]
    fn a_bad_alignment_is_refused() {
        let r = BufPool::new(BufPoolOptions {
            align: 48,
            ..BufPoolOptions::default()
        });
        assert!(r.is_err());
    }
}

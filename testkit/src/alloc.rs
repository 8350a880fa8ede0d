//! Counting every heap allocation of the process, C libraries' included.
//!
//! A `#[global_allocator]` sees only Rust's allocations; zstd (and any other C code)
//! calls `malloc` directly. [`count_allocations!`](crate::count_allocations) instead
//! defines `malloc`, `calloc`, `realloc`, `posix_memalign`, `aligned_alloc` and
//! `memalign` in the test binary itself: the executable's definitions take precedence
//! over glibc's for every caller (statically linked C code, Rust's `System`
//! allocator, and shared libraries through symbol interposition), so no
//! `LD_PRELOAD` is needed. Each forwards to glibc's own `__libc_*` entry point after
//! bumping a counter. Linux/glibc only.

/// Defines the counting allocator entry points in the calling test binary and a
/// function `allocations() -> u64` returning how many allocations (any thread, any
/// language) happened so far. Use it once, at the top level of one test file.
#[macro_export]
macro_rules! count_allocations {
    () => {
        static ALLOCATIONS: ::std::sync::atomic::AtomicU64 = ::std::sync::atomic::AtomicU64::new(0);

        /// Allocations (Rust and C, every thread) since the process started.
        fn allocations() -> u64 {
            ALLOCATIONS.load(::std::sync::atomic::Ordering::SeqCst)
        }

        fn count_one() {
            ALLOCATIONS.fetch_add(1, ::std::sync::atomic::Ordering::Relaxed);
        }

        mod glibc {
            extern "C" {
                pub fn __libc_malloc(size: usize) -> *mut u8;
                pub fn __libc_calloc(n: usize, size: usize) -> *mut u8;
                pub fn __libc_realloc(p: *mut u8, size: usize) -> *mut u8;
                pub fn __libc_memalign(align: usize, size: usize) -> *mut u8;
            }
        }

        /// # Safety
        /// The C `malloc` contract.
        #[no_mangle]
        pub unsafe extern "C" fn malloc(size: usize) -> *mut u8 {
            count_one();
            // SAFETY: forwards the caller's request to glibc unchanged.
            unsafe { glibc::__libc_malloc(size) }
        }

        /// # Safety
        /// The C `calloc` contract.
        #[no_mangle]
        pub unsafe extern "C" fn calloc(n: usize, size: usize) -> *mut u8 {
            count_one();
            // SAFETY: forwards the caller's request to glibc unchanged.
            unsafe { glibc::__libc_calloc(n, size) }
        }

        /// # Safety
        /// The C `realloc` contract.
        #[no_mangle]
        pub unsafe extern "C" fn realloc(p: *mut u8, size: usize) -> *mut u8 {
            count_one();
            // SAFETY: forwards the caller's request to glibc unchanged.
            unsafe { glibc::__libc_realloc(p, size) }
        }

        /// # Safety
        /// The C `memalign` contract.
        #[no_mangle]
        pub unsafe extern "C" fn memalign(align: usize, size: usize) -> *mut u8 {
            count_one();
            // SAFETY: forwards the caller's request to glibc unchanged.
            unsafe { glibc::__libc_memalign(align, size) }
        }

        /// # Safety
        /// The C `aligned_alloc` contract.
        #[no_mangle]
        pub unsafe extern "C" fn aligned_alloc(align: usize, size: usize) -> *mut u8 {
            count_one();
            // SAFETY: forwards the caller's request to glibc unchanged.
            unsafe { glibc::__libc_memalign(align, size) }
        }

        /// # Safety
        /// The C `posix_memalign` contract: `out` is valid for a write.
        #[no_mangle]
        pub unsafe extern "C" fn posix_memalign(
            out: *mut *mut u8,
            align: usize,
            size: usize,
        ) -> i32 {
            count_one();
            if align < ::std::mem::size_of::<usize>() || !align.is_power_of_two() {
                return 22; // EINVAL
            }
            // SAFETY: forwards to glibc; `out` is the caller's valid out-pointer.
            unsafe {
                let p = glibc::__libc_memalign(align, size);
                if p.is_null() && size != 0 {
                    return 12; // ENOMEM
                }
                *out = p;
            }
            0
        }
    };
}

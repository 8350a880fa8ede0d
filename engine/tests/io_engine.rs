//! The I/O engine: every backend, direct or not, returns the same bytes; queue depths,
//! big batches, many submitters, the async API, and the forced io_uring fallback.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

mod common;

use zring_engine::{
    ArgumentError, Backend, Codec, DType, Error, ReadOptions, Schema, Store, WriteOptions, Writer,
};
use zring_testkit::ramp as data;

fn dense_store(
    dir: &Path,
    name: &str,
    width: usize,
    n: usize,
    codec: Codec,
    align: u32,
) -> (PathBuf, Vec<u8>) {
    let path = dir.join(name);
    let bytes = data(n * width, width as u64 + n as u64);
    let mut opts = WriteOptions::with_codec(codec);
    opts.align = align;
    if codec == Codec::ZstdDict {
        let samples: Vec<&[u8]> = bytes.chunks(width).collect();
        opts.dictionary = Some(zring_engine::train_dict(&samples, 4096).unwrap());
    }
    let mut w = Writer::create(&path, Schema::dense(DType::U8, &[width as u64]), opts).unwrap();
    w.append_dense(&bytes).unwrap();
    w.close().unwrap();
    (path, bytes)
}

fn indices(n: usize, count: usize, seed: u64) -> Vec<u64> {
    let mut x = seed | 1;
    (0..count)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % n as u64
        })
        .collect()
}

fn expected(bytes: &[u8], width: usize, idx: &[u64]) -> Vec<u8> {
    idx.iter()
        .flat_map(|&i| {
            bytes[i as usize * width..(i as usize + 1) * width]
                .iter()
                .copied()
        })
        .collect()
}

/// Every (backend, direct) pair a store can be read with here. O_DIRECT needs a file
/// system that supports it; where it does not, direct variants are skipped loudly.
fn read_variants(path: &Path) -> Vec<ReadOptions> {
    let mut out: Vec<ReadOptions> = Backend::CONCRETE
        .iter()
        .map(|&b| ReadOptions::with_backend(b))
        .collect();
    for backend in [Backend::Pread, Backend::Uring] {
        let opts = ReadOptions::with_backend(backend).direct(true);
        if common::open_direct_or_skip(path, opts.clone()).is_some() {
            out.push(opts);
        }
    }
    out
}

#[test]
fn every_backend_and_direct_read_identical_bytes() {
    let dir = tempfile::tempdir().unwrap();
    for codec in [Codec::Raw, Codec::Zstd, Codec::ZstdDict] {
        for align in [8u32, 4096] {
            for width in [100usize, 4096, 40_000] {
                let name = format!("{codec}-{align}-{width}.zr");
                let (path, bytes) = dense_store(dir.path(), &name, width, 300, codec, align);
                let idx = indices(300, 500, width as u64);
                let want = expected(&bytes, width, &idx);
                for opts in read_variants(&path) {
                    let store = Store::open(&path, opts.clone()).unwrap();
                    let got = store.gather_vec(&idx).unwrap();
                    assert!(got == want, "{name} differs with {opts:?}");
                    assert_eq!(store.is_direct(), opts.direct);
                    common::assert_served_by(&store, opts.backend, idx.len() as u64);
                    let before = store.reads_served();
                    assert_eq!(store.get(7).unwrap(), &bytes[7 * width..8 * width]);
                    // get reads its one record on the caller: from the mapping, or
                    // with pread (uring stores included: one read needs no ring).
                    let after = store.reads_served();
                    match opts.backend {
                        Backend::Mmap => assert_eq!(after.mmap, before.mmap + 1),
                        _ => assert_eq!(after.pread, before.pread + 1),
                    }
                }
            }
        }
    }
}

#[test]
fn ragged_stores_read_identically_through_every_backend() {
    let dir = tempfile::tempdir().unwrap();
    let n = 400usize;
    let lens: Vec<u64> = (0..n).map(|i| 1 + (i as u64 * 53) % 700).collect();
    let mut cu = vec![0u64];
    for l in &lens {
        cu.push(cu.last().unwrap() + l);
    }
    let values = data(*cu.last().unwrap() as usize * 2, 5);
    let shapes: Vec<u32> = lens.iter().map(|&l| l as u32).collect();
    for codec in [Codec::Raw, Codec::Zstd] {
        let path = dir.path().join(format!("ragged-{codec}.zr"));
        let mut opts = WriteOptions::with_codec(codec);
        opts.align = 4096;
        let mut w = Writer::create(&path, Schema::ragged(DType::F16, 1), opts).unwrap();
        w.append_ragged(&values, &cu, &shapes).unwrap();
        w.close().unwrap();
        let idx = indices(n, 300, 9);
        let reference = Store::open(&path, ReadOptions::with_backend(Backend::Mmap))
            .unwrap()
            .gather_ragged(&idx)
            .unwrap();
        for (k, &i) in idx.iter().enumerate() {
            let i = i as usize;
            assert_eq!(
                reference.record(k, 2).unwrap(),
                &values[cu[i] as usize * 2..cu[i + 1] as usize * 2]
            );
        }
        for opts in read_variants(&path) {
            let store = Store::open(&path, opts.clone()).unwrap();
            let got = store.gather_ragged(&idx).unwrap();
            common::assert_served_by(&store, opts.backend, idx.len() as u64);
            assert!(
                got.values[..] == reference.values[..],
                "{codec} differs with {opts:?}"
            );
            assert_eq!(got.cu_seqlens, reference.cu_seqlens);
            assert_eq!(got.shapes, reference.shapes);
        }
    }
}

#[test]
fn every_queue_depth_from_1_to_256_reads_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    for codec in [Codec::Raw, Codec::Zstd] {
        let (path, bytes) =
            dense_store(dir.path(), &format!("qd-{codec}.zr"), 3000, 1000, codec, 8);
        let idx = indices(1000, 700, 3);
        let want = expected(&bytes, 3000, &idx);
        for depth in [1usize, 2, 3, 8, 31, 64, 128, 256] {
            for threads in [1usize, 0] {
                let opts = ReadOptions::with_backend(Backend::Uring)
                    .queue_depth(depth)
                    .threads(threads);
                let got = Store::open(&path, opts).unwrap().gather_vec(&idx).unwrap();
                assert!(got == want, "{codec} depth {depth} threads {threads}");
            }
        }
    }
}

#[test]
fn a_gather_of_100k_records_is_exact_on_every_backend() {
    let dir = tempfile::tempdir().unwrap();
    let (path, bytes) = dense_store(dir.path(), "many.zr", 48, 20_000, Codec::Zstd, 8);
    let idx = indices(20_000, 100_000, 77);
    let want = expected(&bytes, 48, &idx);
    for backend in Backend::CONCRETE {
        let got = Store::open(&path, ReadOptions::with_backend(backend))
            .unwrap()
            .gather_vec(&idx)
            .unwrap();
        assert!(got == want, "100k gather differs with {backend}");
    }
}

#[test]
fn many_threads_submitting_at_once_through_io_uring_get_exact_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let (path, bytes) = dense_store(dir.path(), "threads.zr", 5000, 500, Codec::Zstd, 4096);
    let store = Store::open(&path, ReadOptions::with_backend(Backend::Uring)).unwrap();
    std::thread::scope(|s| {
        for t in 0..8u64 {
            let (store, bytes) = (&store, &bytes);
            s.spawn(move || {
                for round in 0..20 {
                    let idx = indices(500, 64, t * 100 + round);
                    assert!(store.gather_vec(&idx).unwrap() == expected(bytes, 5000, &idx));
                }
            });
        }
    });
}

#[test]
fn async_reads_complete_under_a_tokio_multi_thread_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let (path, bytes) = dense_store(dir.path(), "async.zr", 1000, 300, Codec::Zstd, 8);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    rt.block_on(async {
        let store = Store::open(&path, ReadOptions::with_backend(Backend::Uring)).unwrap();
        let gets: Vec<_> = (0..200u64).map(|i| store.get_async(i % 300)).collect();
        let idx = indices(300, 256, 1);
        let batch = store.gather_async(idx.clone());
        // Dropping the caller's handle while reads are in flight is safe: each read
        // holds its own.
        drop(store);
        for (i, get) in gets.into_iter().enumerate() {
            let i = i % 300;
            assert_eq!(get.await.unwrap(), &bytes[i * 1000..(i + 1) * 1000]);
        }
        assert!(batch.await.unwrap() == expected(&bytes, 1000, &idx));
    });
    // Errors travel through the future too.
    let store = Store::open(&path, ReadOptions::default()).unwrap();
    let err = rt.block_on(store.get_async(300)).unwrap_err();
    assert!(
        matches!(err, Error::IndexOutOfRange { index: 300, .. }),
        "{err:?}"
    );
    assert_eq!(store.get_async(3).wait().unwrap(), &bytes[3000..4000]);
}

#[test]
fn mmap_with_direct_is_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = dense_store(dir.path(), "d.zr", 64, 10, Codec::Raw, 8);
    let opts = ReadOptions::with_backend(Backend::Mmap).direct(true);
    let err = Store::open(&path, opts).unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidArgument(ArgumentError::DirectNeedsFileBackend { .. })
        ),
        "{err:?}"
    );
}

#[test]
fn auto_picks_mmap_for_a_store_in_the_page_cache() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = dense_store(dir.path(), "warm.zr", 4096, 200, Codec::Raw, 8);
    // Just written, so resident.
    assert_eq!(
        Store::open(&path, ReadOptions::default())
            .unwrap()
            .backend(),
        Backend::Mmap
    );
    let direct = ReadOptions::default().direct(true);
    if let Ok(store) = Store::open(&path, direct) {
        assert_ne!(store.backend(), Backend::Mmap);
    }
}

#[test]
#[cfg(target_os = "linux")]
fn auto_picks_io_uring_for_a_store_out_of_the_page_cache() {
    use std::os::fd::AsRawFd;
    let dir = tempfile::tempdir().unwrap();
    // 64 MiB: opening a store reads its superblock and footer through the mapping, and
    // the kernel reads around those faults (8 MiB on this machine's disk), so a store
    // much smaller than that is found warm by the very open that samples it.
    let n = 16_384;
    let (path, bytes) = dense_store(dir.path(), "cold.zr", 4096, n, Codec::Raw, 4096);
    // The writer fsynced the file, so its pages are clean and can be dropped.
    let f = std::fs::File::open(&path).unwrap();
    // SAFETY: posix_fadvise only reads its integer arguments; the fd is open.
    let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    assert_eq!(rc, 0, "posix_fadvise");
    let store = Store::open(&path, ReadOptions::default()).unwrap();
    let want = if common::uring_here() {
        Backend::Uring
    } else {
        Backend::Pread
    };
    assert_eq!(store.backend(), want, "auto on a cold store");
    let idx = indices(n, 300, 3);
    assert!(store.gather_vec(&idx).unwrap() == expected(&bytes, 4096, &idx));
    common::assert_served_by(&store, want, idx.len() as u64);
    // Read once, the same store is warm: auto now maps it.
    std::hint::black_box(std::fs::read(&path).unwrap());
    assert_eq!(
        Store::open(&path, ReadOptions::default())
            .unwrap()
            .backend(),
        Backend::Mmap
    );
}

// ---- forced fallback: io_uring blocked by seccomp in a child process ----

const CHILD_ENV: &str = "ZRING_FALLBACK_CHILD_STORE";

/// Installs a seccomp filter that makes io_uring_setup fail with EPERM, as container
/// runtimes do.
#[cfg(target_os = "linux")]
fn block_io_uring() {
    const IO_URING_SETUP: u32 = 425; // the same number on every 64-bit Linux arch
    let filter = [
        libc::sock_filter {
            code: (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16,
            jt: 0,
            jf: 0,
            k: 0,
        },
        libc::sock_filter {
            code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
            jt: 0,
            jf: 1,
            k: IO_URING_SETUP,
        },
        libc::sock_filter {
            code: (libc::BPF_RET | libc::BPF_K) as u16,
            jt: 0,
            jf: 0,
            k: libc::SECCOMP_RET_ERRNO | libc::EPERM as u32,
        },
        libc::sock_filter {
            code: (libc::BPF_RET | libc::BPF_K) as u16,
            jt: 0,
            jf: 0,
            k: libc::SECCOMP_RET_ALLOW,
        },
    ];
    let prog = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr() as *mut _,
    };
    // SAFETY: plain syscalls with valid pointers to locals that outlive them; TSYNC
    // applies the filter to every thread of this (child) process.
    unsafe {
        assert_eq!(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
        let rc = libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_TSYNC,
            &prog as *const libc::sock_fprog,
        );
        assert_eq!(rc, 0, "seccomp: {}", std::io::Error::last_os_error());
    }
}

/// Runs only when re-invoked by the parent test with io_uring to be blocked.
#[test]
#[ignore = "child process of uring_blocked_by_seccomp_falls_back_to_pread_with_identical_bytes"]
fn fallback_child() {
    let Ok(path) = std::env::var(CHILD_ENV) else {
        return;
    };
    #[cfg(target_os = "linux")]
    block_io_uring();
    let uring = Store::open(&path, ReadOptions::with_backend(Backend::Uring)).unwrap();
    assert_eq!(uring.backend(), Backend::Pread, "fell back");
    assert!(!zring_platform::uring_available());
    let mmap = Store::open(&path, ReadOptions::with_backend(Backend::Mmap)).unwrap();
    let idx = indices(mmap.len() as usize, 1000, 5);
    assert!(uring.gather_vec(&idx).unwrap() == mmap.gather_vec(&idx).unwrap());
    // Auto with O_DIRECT would pick io_uring; it must fall back too.
    let direct = ReadOptions::default().direct(true);
    if let Ok(store) = Store::open(&path, direct) {
        assert_eq!(store.backend(), Backend::Pread);
        assert!(store.gather_vec(&idx).unwrap() == mmap.gather_vec(&idx).unwrap());
    }
    println!("CHILD-OK");
}

/// Re-runs this test binary for the ignored test `child` alone, with `store_var`
/// naming the store it reads; returns (success, stdout, stderr).
fn run_child_test(
    child: &str,
    store_var: &str,
    path: &Path,
    extra_env: Option<(&str, &str)>,
) -> (bool, String, String) {
    let mut cmd = zring_testkit::rerun_test(child);
    cmd.env(store_var, path);
    if let Some((k, v)) = extra_env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs the ignored test `child` in a child process and insists it passed.
fn child_passes(child: &str, store_var: &str, path: &Path) {
    let (ok, stdout, stderr) = run_child_test(child, store_var, path, None);
    assert!(
        ok && stdout.contains("CHILD-OK"),
        "child failed:\n{stdout}\n{stderr}"
    );
}

#[test]
fn uring_blocked_by_seccomp_falls_back_to_pread_with_identical_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = dense_store(dir.path(), "fallback.zr", 2048, 400, Codec::Zstd, 4096);
    let (ok, stdout, stderr) = run_child_test("fallback_child", CHILD_ENV, &path, None);
    assert!(
        ok && stdout.contains("CHILD-OK"),
        "child failed:\n{stdout}\n{stderr}"
    );
    let notices = stderr.matches("io_uring unavailable").count();
    assert_eq!(notices, 1, "one clear log line, got:\n{stderr}");
    assert!(stderr.contains("Operation not permitted"), "{stderr}");
}

#[test]
fn uring_disabled_by_environment_falls_back_with_one_notice() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = dense_store(dir.path(), "envoff.zr", 512, 100, Codec::Raw, 8);
    // The child installs seccomp too, but the variable is seen first.
    let (ok, stdout, stderr) = run_child_test(
        "fallback_child",
        CHILD_ENV,
        &path,
        Some(("ZRING_URING", "0")),
    );
    assert!(
        ok && stdout.contains("CHILD-OK"),
        "child failed:\n{stdout}\n{stderr}"
    );
    assert!(stderr.contains("disabled by ZRING_URING=0"), "{stderr}");
}

// ---- a thread that cannot make its own ring reads with pread ----

const RING_FAIL_ENV: &str = "ZRING_RING_FAIL_CHILD_STORE";

/// Runs only when re-invoked by the parent test: the caller makes its ring, then the
/// process runs out of file descriptors, so every pool worker's io_uring_setup fails.
#[test]
#[ignore = "child process of a_thread_without_a_ring_of_its_own_reads_with_pread"]
fn ring_fail_child() {
    let Ok(path) = std::env::var(RING_FAIL_ENV) else {
        return;
    };
    let opts = ReadOptions::with_backend(Backend::Uring).threads(4);
    let store = Store::open(&path, opts).unwrap();
    let mmap = Store::open(&path, ReadOptions::with_backend(Backend::Mmap)).unwrap();
    let idx = indices(mmap.len() as usize, 4000, 13);
    let want = mmap.gather_vec(&idx).unwrap();
    assert!(
        zring_platform::uring_thread_ring_ready(),
        "the caller's ring"
    );
    #[cfg(target_os = "linux")]
    exhaust_file_descriptors();
    let got = store.gather_vec(&idx).unwrap();
    assert!(got == want, "wrong bytes");
    let s = store.reads_served();
    println!("served {s:?}");
    assert!(
        s.uring > 0,
        "the caller read nothing through its ring: {s:?}"
    );
    assert!(s.pread > 0, "no worker fell back to pread: {s:?}");
    println!("CHILD-OK");
}

/// Lowers RLIMIT_NOFILE to the highest open descriptor and fills every gap below it,
/// so that no new file descriptor (and so no new io_uring) can be made.
#[cfg(target_os = "linux")]
fn exhaust_file_descriptors() {
    let max_fd = std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u64>().ok())
        .max()
        .unwrap();
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read or write a valid rlimit; dup only
    // duplicates stdin's descriptor.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim), 0);
        lim.rlim_cur = max_fd + 1;
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &lim), 0);
        while libc::dup(0) >= 0 {}
    }
}

#[test]
fn a_thread_without_a_ring_of_its_own_reads_with_pread() {
    if !common::uring_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = dense_store(dir.path(), "ringfail.zr", 4096, 2000, Codec::Zstd, 8);
    child_passes("ring_fail_child", RING_FAIL_ENV, &path);
}

// ---- io_uring_enter interrupted by signals ----

const EINTR_ENV: &str = "ZRING_EINTR_CHILD_STORE";

#[cfg(target_os = "linux")]
extern "C" fn ignore_signal(_: libc::c_int) {}

/// Runs only when re-invoked by the parent test: O_DIRECT gathers through io_uring on
/// one thread while another thread keeps signalling it, so its waits in
/// io_uring_enter return EINTR again and again; every gather must still be exact.
#[test]
#[ignore = "child process of signals_interrupting_ring_waits_are_retried"]
fn eintr_child() {
    let Ok(path) = std::env::var(EINTR_ENV) else {
        return;
    };
    #[cfg(target_os = "linux")]
    {
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
        let opts = ReadOptions::with_backend(Backend::Uring)
            .threads(1)
            .direct(true);
        let store = Store::open(&path, opts).unwrap();
        let mmap = Store::open(&path, ReadOptions::with_backend(Backend::Mmap)).unwrap();
        // SAFETY: installs a handler that does nothing (async-signal-safe), without
        // SA_RESTART so that interrupted system calls return EINTR.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = ignore_signal as *const () as usize;
            assert_eq!(libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut()), 0);
        }
        // SAFETY: pthread_self has no preconditions.
        let me = unsafe { libc::pthread_self() } as u64;
        let stop = AtomicBool::new(false);
        let sent = AtomicU64::new(0);
        std::thread::scope(|s| {
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    // SAFETY: signals a thread of this process that outlives the scope.
                    unsafe { libc::pthread_kill(me as libc::pthread_t, libc::SIGUSR1) };
                    sent.fetch_add(1, Ordering::Relaxed);
                    std::thread::yield_now();
                }
            });
            for round in 0..40 {
                let idx = indices(mmap.len() as usize, 256, round);
                let got = store.gather_vec(&idx).unwrap();
                assert!(got == mmap.gather_vec(&idx).unwrap(), "round {round}");
            }
            stop.store(true, Ordering::Relaxed);
        });
        assert_eq!(store.reads_served().uring, 40 * 256);
        println!("signals sent: {}", sent.load(Ordering::Relaxed));
    }
    println!("CHILD-OK");
}

#[test]
fn signals_interrupting_ring_waits_are_retried() {
    if !common::uring_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = dense_store(dir.path(), "eintr.zr", 4096, 4000, Codec::Raw, 4096);
    child_passes("eintr_child", EINTR_ENV, &path);
}

// ---- registered files and buffers, and their fallback ----

/// A compressed gather through io_uring on the caller alone: its reads land in the
/// caller's scratch slab.
fn uring_caller_gather(path: &Path, direct: bool) -> (Vec<u8>, Vec<u8>) {
    let opts = ReadOptions::default()
        .backend(Backend::Uring)
        .threads(1)
        .direct(direct);
    let uring = Store::open(path, opts).unwrap();
    let mmap = Store::open(path, ReadOptions::with_backend(Backend::Mmap)).unwrap();
    let idx = indices(mmap.len() as usize, 500, 9);
    (
        uring.gather_vec(&idx).unwrap(),
        mmap.gather_vec(&idx).unwrap(),
    )
}

#[test]
fn uring_gathers_register_the_store_and_the_scratch_slab() {
    if !common::uring_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = dense_store(dir.path(), "fixed.zr", 3000, 300, Codec::Zstd, 8);
    let (got, want) = uring_caller_gather(&path, false);
    assert!(got == want);
    assert!(zring_platform::uring_scratch_registered());
    // The store was dropped inside the helper, on this thread: nothing stays held.
    assert_eq!(zring_platform::uring_registered_files(), 0);
    let store = Store::open(
        &path,
        ReadOptions::default().backend(Backend::Uring).threads(1),
    )
    .unwrap();
    store.gather_vec(&[1, 2, 3]).unwrap();
    assert_eq!(zring_platform::uring_registered_files(), 1);
}

const MEMLOCK_CHILD_ENV: &str = "ZRING_MEMLOCK_CHILD_STORE";

/// Takes CAP_IPC_LOCK away from this thread (root may lock any amount of memory) and
/// sets RLIMIT_MEMLOCK to 128 KiB: enough for rings (which this kernel may count as
/// locked memory too), too little for the scratch slab, so io_uring refuses to
/// register buffers.
#[cfg(target_os = "linux")]
fn forbid_locked_memory() {
    #[repr(C)]
    struct CapHeader {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct CapData {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const CAP_V3: u32 = 0x2008_0522;
    const CAP_IPC_LOCK: u32 = 14;
    let mut header = CapHeader {
        version: CAP_V3,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    let small = libc::rlimit {
        rlim_cur: 128 << 10,
        rlim_max: 128 << 10,
    };
    // SAFETY: capget/capset with a v3 header and two data words, as the ABI asks;
    // setrlimit with a valid struct. All pointers are to live locals.
    unsafe {
        assert_eq!(libc::setrlimit(libc::RLIMIT_MEMLOCK, &small), 0);
        assert_eq!(
            libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()),
            0
        );
        data[0].effective &= !(1 << CAP_IPC_LOCK);
        data[0].permitted &= !(1 << CAP_IPC_LOCK);
        assert_eq!(
            libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()),
            0,
            "capset: {}",
            std::io::Error::last_os_error()
        );
    }
}

/// Runs only when re-invoked by the parent test, with locked memory forbidden.
#[test]
#[ignore = "child process of buffer_registration_refused_falls_back_with_one_notice"]
fn memlock_child() {
    let Ok(path) = std::env::var(MEMLOCK_CHILD_ENV) else {
        return;
    };
    #[cfg(target_os = "linux")]
    forbid_locked_memory();
    for direct in [false, true] {
        let (got, want) = uring_caller_gather(Path::new(&path), direct);
        assert!(got == want, "direct {direct}");
    }
    assert!(zring_platform::uring_available());
    assert!(!zring_platform::uring_scratch_registered());
    println!("CHILD-OK");
}

#[test]
fn buffer_registration_refused_falls_back_with_one_notice() {
    if !common::uring_here() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = dense_store(dir.path(), "memlock.zr", 3000, 300, Codec::Zstd, 8);
    for env in [None, Some(("ZRING_URING_REGISTER", "0"))] {
        let (ok, stdout, stderr) = run_child_test("memlock_child", MEMLOCK_CHILD_ENV, &path, env);
        assert!(
            ok && stdout.contains("CHILD-OK"),
            "child failed ({env:?}):\n{stdout}\n{stderr}"
        );
        let notices = stderr
            .matches("io_uring buffer registration unavailable")
            .count();
        assert_eq!(notices, 1, "one clear log line ({env:?}), got:\n{stderr}");
    }
}

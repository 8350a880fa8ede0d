//! Tests of the batched read loop, registration and fallback of the per-thread rings.
use super::*;
use std::io::Write;

/// Whether io_uring works here; otherwise says why the test is skipped (or fails it
/// under `ZRING_REQUIRE_URING=1`).
fn ring_here() -> bool {
    zring_testkit::require_uring("io_uring", unavailable_reason())
}

/// Reads one buffer at `offset` through this thread's ring.
fn read_one(f: &RingFile, buf: &mut [u8], offset: u64) -> io::Result<ReadBy> {
    read_batch(f, &mut [ReadReq { buf, offset }], 4, |_, _| Ok(()))
}

fn sample_file(len: usize) -> (RingFile, Vec<u8>) {
    sample_file_seeded(len, 31)
}

fn sample_file_seeded(len: usize, seed: usize) -> (RingFile, Vec<u8>) {
    let data: Vec<u8> = (0..len).map(|i| (i * seed % 251) as u8).collect();
    let mut f = tempfile::tempfile().expect("tempfile");
    f.write_all(&data).expect("write");
    (RingFile::new(f), data)
}

#[test]
fn batches_of_every_depth_read_exact_bytes() {
    if !ring_here() {
        return;
    }
    let (f, data) = sample_file(1 << 20);
    for depth in [1usize, 2, 7, 32, 256] {
        let mut bufs: Vec<Vec<u8>> = (0..300).map(|i| vec![0u8; 1 + (i * 97) % 5000]).collect();
        let offsets: Vec<u64> = (0..300).map(|i| ((i * 7919) % 1_000_000) as u64).collect();
        let mut reqs: Vec<ReadReq<'_>> = bufs
            .iter_mut()
            .zip(&offsets)
            .map(|(b, &offset)| ReadReq { buf: b, offset })
            .collect();
        let mut seen = vec![false; 300];
        read_batch(&f, &mut reqs, depth, |i, buf| {
            let o = offsets[i] as usize;
            assert_eq!(buf, &data[o..o + buf.len()]);
            seen[i] = true;
            Ok(())
        })
        .expect("batch");
        assert!(seen.iter().all(|&s| s));
    }
}

#[test]
fn reading_past_the_end_is_an_eof_error_and_drains() {
    if !ring_here() {
        return;
    }
    let (f, _) = sample_file(4096);
    let mut a = vec![0u8; 100];
    let mut b = vec![0u8; 100];
    let mut reqs = vec![
        ReadReq {
            buf: &mut a,
            offset: 0,
        },
        ReadReq {
            buf: &mut b,
            offset: 4050,
        },
    ];
    let err = read_batch(&f, &mut reqs, 8, |_, _| Ok(())).expect_err("eof");
    assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
}

#[test]
fn a_failing_callback_stops_the_batch_with_its_error() {
    if !ring_here() {
        return;
    }
    let (f, _) = sample_file(1 << 16);
    let mut bufs: Vec<Vec<u8>> = (0..64).map(|_| vec![0u8; 512]).collect();
    let mut reqs: Vec<ReadReq<'_>> = bufs
        .iter_mut()
        .enumerate()
        .map(|(i, b)| ReadReq {
            buf: b,
            offset: i as u64 * 512,
        })
        .collect();
    let err = read_batch(&f, &mut reqs, 16, |i, _| {
        if i == 10 {
            Err(io::Error::other("stop"))
        } else {
            Ok(())
        }
    })
    .expect_err("callback error");
    assert_eq!(err.to_string(), "stop");
}

#[test]
fn a_panicking_callback_is_reraised_after_the_reads_drain() {
    if !ring_here() {
        return;
    }
    let (f, _) = sample_file(1 << 16);
    for _ in 0..3 {
        let result = std::panic::catch_unwind(|| {
            let mut bufs: Vec<Vec<u8>> = (0..64).map(|_| vec![0u8; 1024]).collect();
            let mut reqs: Vec<ReadReq<'_>> = bufs
                .iter_mut()
                .enumerate()
                .map(|(i, b)| ReadReq {
                    buf: b,
                    offset: i as u64 * 1024,
                })
                .collect();
            let _ = read_batch(&f, &mut reqs, 32, |i, _| {
                assert!(i != 5, "callback boom");
                Ok(())
            });
        });
        assert!(result.is_err());
    }
    // The thread's ring is still sound for the next batch.
    let mut buf = vec![0u8; 16];
    read_one(&f, &mut buf, 0).expect("after a panic");
}

#[test]
fn a_forked_child_gets_its_own_ring() {
    if !ring_here() {
        return;
    }
    let (f, data) = sample_file(8192);
    let mut buf = vec![0u8; 100];
    read_one(&f, &mut buf, 0).expect("parent");
    // The child only reads into a local buffer; no locks are taken.
    let end = zring_testkit::run_forked(std::time::Duration::from_secs(60), || {
        let mut b = vec![0u8; 100];
        let ok = read_one(&f, &mut b, 100).is_ok() && b[..] == data[100..200];
        i32::from(!ok)
    });
    assert_eq!(end, zring_testkit::ChildEnd::Exited(0), "child read failed");
    read_one(&f, &mut buf, 0).expect("parent after fork");
}

#[test]
fn empty_and_zero_length_requests_complete() {
    if !ring_here() {
        return;
    }
    let (f, _) = sample_file(10);
    read_batch(&f, &mut [], 4, |_, _| Ok(())).expect("empty");
    let mut z = Vec::new();
    let mut calls = 0;
    read_batch(
        &f,
        &mut [ReadReq {
            buf: &mut z,
            offset: 3,
        }],
        4,
        |_, _| {
            calls += 1;
            Ok(())
        },
    )
    .expect("zero length");
    assert_eq!(calls, 1);
}

#[test]
fn a_file_is_registered_once_per_ring_and_released_when_dropped_here() {
    if !ring_here() {
        return;
    }
    if !registration_allowed() {
        eprintln!("skipped: registration disabled by ZRING_URING_REGISTER=0");
        return;
    }
    let before = registered_files();
    let (f, data) = sample_file(8192);
    let mut buf = vec![0u8; 64];
    for at in [0u64, 100, 4000] {
        read_one(&f, &mut buf, at).expect("read");
        assert_eq!(buf[..], data[at as usize..at as usize + 64]);
    }
    assert_eq!(registered_files(), before + 1, "one slot, reused");
    drop(f);
    assert_eq!(
        registered_files(),
        before,
        "released by the dropping thread"
    );
}

#[test]
fn a_file_dropped_elsewhere_is_released_at_this_threads_next_look() {
    if !ring_here() {
        return;
    }
    if !registration_allowed() {
        eprintln!("skipped: registration disabled by ZRING_URING_REGISTER=0");
        return;
    }
    let before = registered_files();
    let (f, _) = sample_file(4096);
    let mut buf = vec![0u8; 16];
    read_one(&f, &mut buf, 0).expect("read");
    assert_eq!(registered_files(), before + 1);
    std::thread::spawn(move || drop(f))
        .join()
        .expect("drop thread");
    assert_eq!(registered_files(), before + 1, "not yet swept");
    release_closed();
    assert_eq!(registered_files(), before);
}

#[test]
fn a_reused_descriptor_number_never_reads_the_old_file() {
    if !ring_here() {
        return;
    }
    for round in 0..4 {
        let (a, data_a) = sample_file_seeded(4096, 31);
        let mut buf = vec![0u8; 256];
        read_one(&a, &mut buf, 0).expect("read a");
        assert_eq!(buf[..], data_a[..256]);
        // Dropped on another thread: this ring's slot for `a` is still there when
        // `b` (very likely given a's descriptor number) is read.
        std::thread::spawn(move || drop(a))
            .join()
            .expect("drop thread");
        let (b, data_b) = sample_file_seeded(4096, 17 + round);
        read_one(&b, &mut buf, 0).expect("read b");
        assert_eq!(buf[..], data_b[..256], "round {round}");
    }
}

#[test]
fn more_files_than_slots_all_read_correctly() {
    if !ring_here() {
        return;
    }
    let files: Vec<(RingFile, Vec<u8>)> =
        (0..80).map(|k| sample_file_seeded(1024, 1 + k)).collect();
    let mut buf = vec![0u8; 100];
    for _ in 0..2 {
        for (f, data) in &files {
            read_one(f, &mut buf, 7).expect("read");
            assert_eq!(buf[..], data[7..107]);
        }
    }
}

#[test]
fn idle_pool_workers_release_registrations_of_closed_files() {
    if !ring_here() {
        return;
    }
    if !registration_allowed() {
        eprintln!("skipped: registration disabled by ZRING_URING_REGISTER=0");
        return;
    }
    let pool = crate::Pool::new(1, false).expect("pool");
    let (f, _) = sample_file(4096);
    let f = std::sync::Arc::new(f);
    let ask = |f: Option<std::sync::Arc<RingFile>>| {
        let (tx, rx) = std::sync::mpsc::channel();
        pool.spawn(move || {
            if let Some(f) = f {
                let mut buf = vec![0u8; 16];
                read_one(&f, &mut buf, 0).expect("worker read");
            }
            let _ = tx.send(registered_files());
        });
        rx.recv().expect("worker answer")
    };
    let with_file = ask(Some(std::sync::Arc::clone(&f)));
    assert!(with_file >= 1);
    drop(f);
    // The worker sweeps before each park: wait for that event (a peek that does
    // not read sees what the last sweep left), not for a guessed duration; the
    // watchdog turns a sweep that never comes into a failure.
    let _hang = zring_testkit::watchdog("an idle worker releasing a closed file");
    loop {
        let (tx, rx) = std::sync::mpsc::channel();
        pool.spawn(move || {
            let _ = tx.send(registered_files());
        });
        let after = rx.recv().expect("worker answer");
        assert!(after >= with_file - 1, "released more than the closed file");
        if after == with_file - 1 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn reads_into_the_registered_scratch_are_exact_and_use_it() {
    if !ring_here() {
        return;
    }
    let (f, data) = sample_file(1 << 20);
    let offsets: Vec<u64> = (0..200).map(|i| (i * 4099 % 1_000_000) as u64).collect();
    with_scratch(200 * 3000, |scratch| {
        let mut reqs: Vec<ReadReq<'_>> = scratch
            .chunks_mut(3000)
            .zip(&offsets)
            .map(|(buf, &offset)| ReadReq { buf, offset })
            .collect();
        read_batch(&f, &mut reqs, 32, |i, buf| {
            let o = offsets[i] as usize;
            assert_eq!(buf, &data[o..o + 3000]);
            Ok(())
        })
        .expect("batch");
    })
    .expect("scratch");
    if registration_allowed() {
        assert!(scratch_registered(), "root may always register buffers");
    }
}

#[test]
fn direct_reads_into_the_registered_scratch_are_exact() {
    if !ring_here() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("direct.bin");
    let data: Vec<u8> = (0..1usize << 20).map(|i| (i * 13 % 251) as u8).collect();
    std::fs::write(&path, &data).expect("write");
    let direct = match crate::file::open_direct(&path) {
        Ok(f) => f,
        Err(e) => {
            zring_testkit::require_uring("O_DIRECT", Some(&e.to_string()));
            return;
        }
    };
    let f = RingFile::new(direct);
    assert!(f.is_direct());
    assert!(!sample_file(16).0.is_direct());
    let a = crate::file::DIRECT_ALIGN;
    // Direct files submit in growing groups; every depth must still read every byte.
    for depth in [1usize, 3, 16, 256] {
        with_scratch(64 * a, |scratch| {
            let mut reqs: Vec<ReadReq<'_>> = scratch
                .chunks_mut(a)
                .enumerate()
                .map(|(k, buf)| ReadReq {
                    buf,
                    offset: ((k * 37) % 256 * a) as u64,
                })
                .collect();
            read_batch(&f, &mut reqs, depth, |k, buf| {
                let o = (k * 37) % 256 * a;
                assert_eq!(buf, &data[o..o + a]);
                Ok(())
            })
            .expect("direct batch");
        })
        .expect("scratch");
    }
}

#[test]
fn scratch_that_grows_is_registered_anew_and_reads_stay_exact() {
    if !ring_here() {
        return;
    }
    let (f, data) = sample_file(1 << 20);
    for len in [4096usize, 1 << 20, 100, 1 << 19] {
        with_scratch(len, |scratch| {
            let mut reqs = [ReadReq {
                buf: scratch,
                offset: 0,
            }];
            read_batch(&f, &mut reqs, 4, |_, buf| {
                assert_eq!(buf, &data[..len]);
                Ok(())
            })
            .expect("read");
        })
        .expect("scratch");
    }
}

#[test]
fn buffered_batches_are_exact_whether_their_pages_are_cached_or_not() {
    use std::os::fd::AsRawFd;
    if !ring_here() {
        return;
    }
    let (f, data) = sample_file(4 << 20);
    for evict in [false, true, false] {
        if evict {
            // Written back, then dropped from the page cache: the batch's first read
            // misses and the refills ramp.
            f.file().sync_all().expect("fsync");
            // SAFETY: advice about a descriptor we own; no memory is involved.
            unsafe { libc::posix_fadvise(f.file().as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        }
        let offsets: Vec<u64> = (0..500).map(|i| (i * 8191 % 4_000_000) as u64).collect();
        let mut bufs: Vec<Vec<u8>> = (0..500).map(|_| vec![0u8; 4096]).collect();
        let mut reqs: Vec<ReadReq<'_>> = bufs
            .iter_mut()
            .zip(&offsets)
            .map(|(buf, &offset)| ReadReq { buf, offset })
            .collect();
        read_batch(&f, &mut reqs, 32, |i, buf| {
            let o = offsets[i] as usize;
            assert_eq!(buf, &data[o..o + 4096], "evicted {evict}");
            Ok(())
        })
        .expect("batch");
    }
}

/// Installs, in this process (a forked child: one thread), a seccomp filter that fails
/// `io_uring_enter` with EPERM and allows every other system call, as container
/// profiles that allow io_uring_setup but not enter do.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn refuse_enter() -> bool {
    use libc::{sock_filter, sock_fprog};
    let stmt = |code: u32, k: u32| sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    };
    let filter = [
        // The system call number is the first field of struct seccomp_data.
        stmt(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0),
        sock_filter {
            code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
            jt: 0,
            jf: 1,
            k: libc::SYS_io_uring_enter as u32,
        },
        stmt(
            libc::BPF_RET | libc::BPF_K,
            libc::SECCOMP_RET_ERRNO | libc::EPERM as u32,
        ),
        stmt(libc::BPF_RET | libc::BPF_K, libc::SECCOMP_RET_ALLOW),
    ];
    let prog = sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr().cast_mut(),
    };
    // SAFETY: prctl with NO_NEW_PRIVS takes integers; SET_SECCOMP reads the program,
    // which lives on this stack for the call (the kernel copies it).
    unsafe {
        libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
            && libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER as libc::c_ulong,
                &prog as *const sock_fprog,
            ) == 0
    }
}

/// The child's exit code for each way the seccomp tests can fail.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn seccomp_child(scenario: impl FnOnce() -> Result<(), u8>) {
    use zring_testkit::{run_forked, ChildEnd};
    let end = run_forked(std::time::Duration::from_secs(60), || match scenario() {
        Ok(()) => 0,
        Err(code) => i32::from(code),
    });
    assert_eq!(
        end,
        ChildEnd::Exited(0),
        "child failed (see the codes in the test)"
    );
}

#[test]
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn a_refused_enter_at_ring_creation_falls_back_without_aborting() {
    if !ring_here() {
        return;
    }
    let (f, data) = sample_file(8192);
    seccomp_child(|| {
        if !refuse_enter() {
            return Err(2);
        }
        // A fresh probe (as in a process started under the profile) says why.
        STATE.store(UNKNOWN, Ordering::Release);
        if available() {
            return Err(3);
        }
        if !unavailable_reason().is_some_and(|r| r.contains("io_uring_enter")) {
            return Err(4);
        }
        // A probe inherited from an unconfined parent: the thread's new ring checks.
        STATE.store(USABLE, Ordering::Release);
        if thread_ring_ready() || available() {
            return Err(5);
        }
        // The batch itself reads with pread: the caller never asks first.
        let mut b = vec![0u8; 100];
        if read_one(&f, &mut b, 100).map_err(|_| 6)? != ReadBy::Pread {
            return Err(7);
        }
        (b[..] == data[100..200]).then_some(()).ok_or(8)
    });
}

#[test]
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn a_refused_enter_with_reads_queued_finishes_the_batch_with_pread() {
    if !ring_here() {
        return;
    }
    let (f, data) = sample_file(1 << 16);
    seccomp_child(|| {
        // The child's own ring, made before the profile arrives.
        let mut b = vec![0u8; 100];
        read_one(&f, &mut b, 0).map_err(|_| 2)?;
        if !refuse_enter() {
            return Err(3);
        }
        let mut bufs: Vec<Vec<u8>> = (0..16).map(|_| vec![0u8; 1000]).collect();
        let mut reqs: Vec<ReadReq<'_>> = bufs
            .iter_mut()
            .enumerate()
            .map(|(i, buf)| ReadReq {
                buf,
                offset: i as u64 * 2000,
            })
            .collect();
        let mut seen = 0usize;
        read_batch(&f, &mut reqs, 8, |_, _| {
            seen += 1;
            Ok(())
        })
        .map_err(|_| 4)?;
        // Finished with pread: every request once, with the file's bytes.
        if seen != 16 {
            return Err(5);
        }
        let right = bufs.iter().enumerate().all(|(i, b)| {
            let at = i * 2000;
            b[..] == data[at..at + 1000]
        });
        if !right {
            return Err(7);
        }
        // Blocked for the rest of the process, and the ring is gone.
        if available() || thread_ring_ready() {
            return Err(6);
        }
        Ok(())
    });
}

// ---- faults injected through the read seam (crate::faults::install_read) ----

use crate::faults::{install_read, ReadFault, ReadSite};
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

/// A named file of `len` sample bytes (hooks find files by path), and its ring file.
fn named_sample(len: usize) -> (tempfile::NamedTempFile, RingFile, Vec<u8>) {
    let data: Vec<u8> = (0..len).map(|i| (i * 37 % 251) as u8).collect();
    let mut named = tempfile::NamedTempFile::new().expect("tempfile");
    named.write_all(&data).expect("write");
    let f = RingFile::new(std::fs::File::open(named.path()).expect("open"));
    (named, f, data)
}

/// Reads 100 spans of `f` in one batch (depth 8) and checks every byte.
fn batch_is_exact(f: &RingFile, data: &[u8]) -> io::Result<()> {
    let offsets: Vec<u64> = (0..100)
        .map(|i| (i * 9973 % (data.len() - 5000)) as u64)
        .collect();
    let mut bufs: Vec<Vec<u8>> = (0..100).map(|i| vec![0u8; 100 + i * 37]).collect();
    let mut reqs: Vec<ReadReq<'_>> = bufs
        .iter_mut()
        .zip(&offsets)
        .map(|(b, &offset)| ReadReq { buf: b, offset })
        .collect();
    let mut seen = 0;
    read_batch(f, &mut reqs, 8, |i, buf| {
        let o = offsets[i] as usize;
        assert_eq!(buf, &data[o..o + buf.len()], "request {i}");
        seen += 1;
        Ok(())
    })?;
    assert_eq!(seen, 100);
    Ok(())
}

#[test]
fn enter_refused_for_a_moment_is_retried_and_the_batch_completes() {
    if !ring_here() {
        return;
    }
    for errno in [libc::EAGAIN, libc::EBUSY, libc::EINTR] {
        let (named, f, data) = named_sample(1 << 20);
        let enters = Arc::new(AtomicUsize::new(0));
        let seen = Arc::clone(&enters);
        let guard = install_read(
            named.path(),
            Arc::new(move |site: &ReadSite| {
                // The first three enters of the batch fail.
                (*site == ReadSite::Enter && seen.fetch_add(1, Ordering::SeqCst) < 3)
                    .then(|| ReadFault::Fail(io::Error::from_raw_os_error(errno)))
            }),
        )
        .expect("hook");
        batch_is_exact(&f, &data).unwrap_or_else(|e| panic!("errno {errno}: {e}"));
        assert!(
            enters.load(Ordering::SeqCst) > 3,
            "errno {errno}: the batch entered again after the injected failures"
        );
        drop(guard);
    }
}

#[test]
fn interrupted_would_block_and_short_completions_are_continued() {
    if !ring_here() {
        return;
    }
    let (named, f, data) = named_sample(1 << 20);
    let faults = Arc::new(AtomicUsize::new(0));
    let n = Arc::clone(&faults);
    let _guard = install_read(
        named.path(),
        Arc::new(move |site: &ReadSite| {
            let ReadSite::Uring { len, .. } = *site else {
                return None;
            };
            // Cycle through the three faults on the first 60 completions.
            let k = n.fetch_add(1, Ordering::SeqCst);
            match k % 3 {
                _ if k >= 60 => None,
                0 => Some(ReadFault::Fail(io::Error::from_raw_os_error(libc::EINTR))),
                1 => Some(ReadFault::Fail(io::Error::from_raw_os_error(libc::EAGAIN))),
                _ => Some(ReadFault::Short((len / 3).max(1))),
            }
        }),
    )
    .expect("hook");
    batch_is_exact(&f, &data).expect("batch");
    assert!(
        faults.load(Ordering::SeqCst) > 60,
        "the faults were injected"
    );
}

#[test]
fn an_io_error_fails_the_batch_naming_its_request_then_reads_work_again() {
    if !ring_here() {
        return;
    }
    let (named, f, data) = named_sample(1 << 20);
    // Every read that covers byte 500_000 fails with EIO.
    let guard = install_read(
        named.path(),
        Arc::new(|site: &ReadSite| match *site {
            ReadSite::Uring { offset, len, .. }
                if (offset..offset + len as u64).contains(&500_000) =>
            {
                Some(ReadFault::Fail(io::Error::from_raw_os_error(libc::EIO)))
            }
            _ => None,
        }),
    )
    .expect("hook");
    let mut a = vec![0u8; 4096];
    let mut b = vec![0u8; 4096];
    let mut c = vec![0u8; 4096];
    let mut reqs = [
        ReadReq {
            buf: &mut a,
            offset: 0,
        },
        ReadReq {
            buf: &mut b,
            offset: 499_000,
        },
        ReadReq {
            buf: &mut c,
            offset: 900_000,
        },
    ];
    let e = read_batch(&f, &mut reqs, 4, |_, _| Ok(())).expect_err("EIO");
    let failed = e
        .get_ref()
        .and_then(|r| r.downcast_ref::<RequestFailed>())
        .expect("a RequestFailed inside");
    assert_eq!(failed.request, 1);
    assert_eq!(failed.source.raw_os_error(), Some(libc::EIO));
    drop(guard);
    batch_is_exact(&f, &data).expect("reads work once the fault clears");
}

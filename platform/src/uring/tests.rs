//! Tests of the batched read loop, registration and fallback of the per-thread rings.
use super::*;
use std::io::Write;

/// Reads one buffer at `offset` through this thread's ring.
fn read_one(f: &RingFile, buf: &mut [u8], offset: u64) -> io::Result<()> {
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
    if !available() {
        eprintln!("skipped: {:?}", unavailable_reason());
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
    if !available() {
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
    if !available() {
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
    if !available() {
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
    if !available() {
        return;
    }
    let (f, data) = sample_file(8192);
    let mut buf = vec![0u8; 100];
    read_one(&f, &mut buf, 0).expect("parent");
    // SAFETY: the child only reads into a local buffer and exits with _exit; no
    // locks are taken between fork and exit.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let mut b = vec![0u8; 100];
        let ok = read_one(&f, &mut b, 100).is_ok() && b[..] == data[100..200];
        // SAFETY: terminate the child without running the parent's destructors.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    assert!(pid > 0, "fork failed");
    let mut status = 0;
    // SAFETY: waiting for our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "child read failed"
    );
    read_one(&f, &mut buf, 0).expect("parent after fork");
}

#[test]
fn empty_and_zero_length_requests_complete() {
    if !available() {
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
    if !available() || !registration_allowed() {
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
    if !available() || !registration_allowed() {
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
    if !available() {
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
    if !available() {
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
    if !available() || !registration_allowed() {
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
    // The worker parks for at most 100 ms at a time and sweeps before each park.
    std::thread::sleep(std::time::Duration::from_millis(350));
    let (tx, rx) = std::sync::mpsc::channel();
    // Peek without reading: the answer is what the sweep left.
    pool.spawn(move || {
        let _ = tx.send(registered_files());
    });
    let after = rx.recv().expect("worker answer");
    assert_eq!(after, with_file - 1, "released while idle");
}

#[test]
fn reads_into_the_registered_scratch_are_exact_and_use_it() {
    if !available() {
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
    if !available() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("direct.bin");
    let data: Vec<u8> = (0..1usize << 20).map(|i| (i * 13 % 251) as u8).collect();
    std::fs::write(&path, &data).expect("write");
    let Ok(direct) = crate::file::open_direct(&path) else {
        return; // the file system has no O_DIRECT
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
    if !available() {
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
    if !available() {
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

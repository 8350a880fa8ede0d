//! A child forked while another thread is in the process's first use of the worker
//! pool (and of io_uring) must not wait for that thread, which does not exist in the
//! child: PyTorch's DataLoader forks its workers exactly then.
#![cfg(unix)]

use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use zring_platform::{uring_available, uring_read_batch, Pool, ReadReq, RingFile};
use zring_testkit::{fork_during_first_use, ChildEnd};

const CHUNK: usize = 4096;
const CHUNKS: usize = 64;

fn byte(i: usize) -> u8 {
    (i * 31 % 251) as u8
}

/// Reads every chunk of the file on the global pool (pread) and, where io_uring works,
/// through this thread's ring; `Err` names what went wrong.
fn read_all(file: &RingFile) -> Result<(), &'static str> {
    let good = AtomicUsize::new(0);
    Pool::global().run(CHUNKS, usize::MAX, |c| {
        let mut buf = vec![0u8; CHUNK];
        let ok = zring_platform::read_exact_at(file.file(), &mut buf, (c * CHUNK) as u64).is_ok()
            && buf
                .iter()
                .enumerate()
                .all(|(k, &b)| b == byte(c * CHUNK + k));
        if ok {
            good.fetch_add(1, Ordering::Relaxed);
        }
    });
    if good.load(Ordering::Relaxed) != CHUNKS {
        return Err("pool read wrong data");
    }
    if uring_available() {
        let mut bufs: Vec<Vec<u8>> = (0..8).map(|_| vec![0u8; CHUNK]).collect();
        let mut reqs: Vec<ReadReq<'_>> = bufs
            .iter_mut()
            .enumerate()
            .map(|(c, buf)| ReadReq {
                buf,
                offset: (c * CHUNK) as u64,
            })
            .collect();
        uring_read_batch(file, &mut reqs, 4, |_, _| Ok(())).map_err(|_| "ring read failed")?;
        let ok = bufs
            .iter()
            .enumerate()
            .all(|(c, b)| b.iter().enumerate().all(|(k, &v)| v == byte(c * CHUNK + k)));
        if !ok {
            return Err("ring read wrong data");
        }
    }
    Ok(())
}

#[test]
fn children_forked_during_the_first_use_of_the_pool_read_correctly() {
    let mut f = tempfile::tempfile().expect("tempfile");
    let data: Vec<u8> = (0..CHUNK * CHUNKS).map(byte).collect();
    f.write_all(&data).expect("write");
    let file = RingFile::new(f);
    let mut hung = 0;
    let mut failed = Vec::new();
    for round in 0..200 {
        // Each round runs in a fresh child, whose pool is not started yet (a child
        // starts its own): one thread starts it while the main thread forks again.
        let end = fork_during_first_use(Duration::from_secs(120), || read_all(&file).is_ok());
        match end {
            ChildEnd::Exited(0) => {}
            ChildEnd::Exited(2) | ChildEnd::Hung => hung += 1,
            other => failed.push((round, other)),
        }
    }
    assert_eq!(hung, 0, "forked children hung");
    assert!(failed.is_empty(), "rounds that failed: {failed:?}");
}

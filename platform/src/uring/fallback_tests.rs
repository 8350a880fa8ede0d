//! The one fallback rule: a ring refused in the middle of a batch finishes that batch
//! with pread, marks the process, and later batches go straight to pread. Each case
//! runs in a forked child, since the mark is process-wide.
use super::*;
use crate::faults::{install_read, ReadFault, ReadSite};
use std::io::Write;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

const REQUESTS: usize = 64;
const LEN: usize = 4096;

/// The child's scenario: the `fail_at`-th `io_uring_enter` of the first batch is
/// refused with EPERM (as a seccomp profile arriving mid-batch would); `Err(code)`
/// says which check failed.
fn refused_mid_batch(fail_at: usize) -> Result<(), u8> {
    let data: Vec<u8> = (0..REQUESTS * LEN * 2)
        .map(|i| (i * 13 % 251) as u8)
        .collect();
    let mut tmp = tempfile::NamedTempFile::new().map_err(|_| 2)?;
    tmp.write_all(&data).map_err(|_| 2)?;
    let file = RingFile::new(std::fs::File::open(tmp.path()).map_err(|_| 2)?);
    let enters = Arc::new(AtomicUsize::new(0));
    let preads = Arc::new(AtomicUsize::new(0));
    let (e, p) = (Arc::clone(&enters), Arc::clone(&preads));
    let _guard = install_read(
        tmp.path(),
        Arc::new(move |site: &ReadSite| match site {
            ReadSite::Enter if e.fetch_add(1, Ordering::SeqCst) + 1 == fail_at => {
                Some(ReadFault::Fail(io::Error::from_raw_os_error(libc::EPERM)))
            }
            ReadSite::Pread { .. } => {
                p.fetch_add(1, Ordering::SeqCst);
                None
            }
            _ => None,
        }),
    )
    .map_err(|_| 2)?;
    // Every other request, so no two reads are neighbours.
    let batch = |file: &RingFile| -> Result<(ReadBy, Vec<usize>), u8> {
        let mut bufs: Vec<Vec<u8>> = (0..REQUESTS).map(|_| vec![0u8; LEN]).collect();
        let mut reqs: Vec<ReadReq<'_>> = bufs
            .iter_mut()
            .enumerate()
            .map(|(i, buf)| ReadReq {
                buf,
                offset: (2 * i * LEN) as u64,
            })
            .collect();
        let mut seen = vec![0usize; REQUESTS];
        let by = read_batch(file, &mut reqs, 8, |i, _| {
            seen[i] += 1;
            Ok(())
        })
        .map_err(|_| 3)?;
        let right = bufs.iter().enumerate().all(|(i, b)| {
            let at = 2 * i * LEN;
            b[..] == data[at..at + LEN]
        });
        right.then_some((by, seen)).ok_or(4)
    };
    if !available() {
        return Err(5);
    }
    // The refused batch completes, every callback once, with the file's bytes.
    let (by, seen) = batch(&file)?;
    if by != ReadBy::Pread || seen.iter().any(|&k| k != 1) {
        return Err(6);
    }
    if enters.load(Ordering::SeqCst) != fail_at || preads.load(Ordering::SeqCst) == 0 {
        return Err(7);
    }
    // Marked for the process, with the reason.
    if available() || !unavailable_reason().is_some_and(|r| r.contains("io_uring_enter refused")) {
        return Err(8);
    }
    // The next batch goes straight to pread: no enter, one pread per request.
    let before = preads.load(Ordering::SeqCst);
    let (by, seen) = batch(&file)?;
    if by != ReadBy::Pread || seen.iter().any(|&k| k != 1) {
        return Err(9);
    }
    if enters.load(Ordering::SeqCst) != fail_at
        || preads.load(Ordering::SeqCst) - before != REQUESTS
    {
        return Err(10);
    }
    Ok(())
}

fn in_child(fail_at: usize) {
    if !zring_testkit::require_uring("io_uring", unavailable_reason()) {
        return;
    }
    let end =
        zring_testkit::run_forked(
            std::time::Duration::from_secs(60),
            || match refused_mid_batch(fail_at) {
                Ok(()) => 0,
                Err(code) => i32::from(code),
            },
        );
    assert_eq!(
        end,
        zring_testkit::ChildEnd::Exited(0),
        "child failed (see the codes in the test)"
    );
}

/// The first enter is refused while the batch's first read (submitted alone, to
/// probe the page cache) is already the kernel's: it is reaped, then read again.
#[test]
fn a_ring_refused_with_a_read_taken_finishes_the_batch_with_pread() {
    in_child(1);
}

/// A later enter is refused after whole groups of reads completed through the ring:
/// only the rest is read with pread.
#[test]
fn a_ring_refused_after_reads_completed_finishes_the_batch_with_pread() {
    in_child(2);
}

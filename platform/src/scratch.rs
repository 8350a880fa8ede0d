//! The one keep policy for per-thread read scratch.
//!
//! A read that cannot land in its destination goes through scratch kept per thread
//! and reused from task to task: the io_uring slab ([`crate::uring::with_scratch`],
//! which must live here because the thread's ring has it registered) and the
//! engine's pread and O_DIRECT scratch (its per-thread decode context). Each buffer
//! grows to the largest read its thread has done; after every task, each owner asks
//! [`oversized`] and releases a buffer past [`KEEP_BYTES`], so one huge batch does not
//! pin memory in every thread for the life of the process. The limit is this one
//! number, not one per owner, except for a whole batch gathered to be decoded
//! ([`batch_oversized`]), which only a loader's few producing threads hold.

/// Per-thread scratch up to this many bytes is kept between tasks; larger scratch is
/// released after the task that grew it (16 MiB: a whole default gather task's
/// records, so steady-state gathers allocate nothing).
pub const KEEP_BYTES: usize = 16 << 20;

/// Whether scratch of `bytes` is to be released after the task that used it.
pub fn oversized(bytes: usize) -> bool {
    bytes > KEEP_BYTES
}

/// A whole batch's records, gathered by one of a loader's producing threads (its
/// workers and its consumer: a few threads, not every core) to be decoded there, is
/// kept up to this many bytes (64 MiB: 256 ImageNet-sized JPEGs are ~25 MiB). Below
/// it, every step would allocate its batch afresh and pay its page faults again.
pub const BATCH_KEEP_BYTES: usize = 64 << 20;

/// Whether a producing thread's batch scratch of `bytes` is to be released.
pub fn batch_oversized(bytes: usize) -> bool {
    bytes > BATCH_KEEP_BYTES
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scratch_up_to_the_limit_is_kept_and_larger_scratch_released() {
        assert!(!oversized(0));
        assert!(!oversized(KEEP_BYTES));
        assert!(oversized(KEEP_BYTES + 1));
        assert!(!batch_oversized(BATCH_KEEP_BYTES));
        assert!(batch_oversized(BATCH_KEEP_BYTES + 1));
    }
}

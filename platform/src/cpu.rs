//! How many cores to use, and pinning a thread to one.

/// The number of cores this process may run on (at least 1).
pub fn available_cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// Pins the current thread to the `k`-th core the process may use (modulo their
/// number). Returns whether the OS accepted it; pinning is an optimisation, never a
/// requirement, so failure is not an error.
pub fn pin_current_thread(k: usize) -> bool {
    match core_affinity::get_core_ids() {
        Some(ids) if !ids.is_empty() => core_affinity::set_for_current(ids[k % ids.len()]),
        _ => false,
    }
}

/// Pins the current thread to core `id` (an OS CPU number, as in
/// [`crate::topology::Placement::cores`]). Returns whether the OS accepted it.
pub fn pin_current_thread_to_core(id: usize) -> bool {
    core_affinity::set_for_current(core_affinity::CoreId { id })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn there_is_at_least_one_core() {
        assert!(available_cores() >= 1);
    }

    #[test]
    fn pinning_a_scratch_thread_does_not_fail_loudly() {
        std::thread::spawn(|| {
            let _ = pin_current_thread(0);
        })
        .join()
        .expect("thread");
    }
}

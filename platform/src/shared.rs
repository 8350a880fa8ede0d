//! Disjoint writes into one caller-owned slice from several threads.
//!
//! A gather fills one destination buffer from many worker threads, each writing the
//! slots of the records it read. Rust's borrow rules cannot express "these ranges are
//! disjoint" across a thread pool, so this type carries the raw pointer and makes the
//! promise explicit at each use.

use std::marker::PhantomData;
use std::ops::Range;

/// A `&'a mut [u8]` that several threads may carve disjoint sub-slices from.
pub struct SharedMut<'a> {
    ptr: *mut u8,
    len: usize,
    _borrow: PhantomData<&'a mut [u8]>,
}

// SAFETY: SharedMut only hands out sub-slices through `slice`, whose contract requires
// callers to keep concurrently used ranges disjoint; with that, sharing it across
// threads is as safe as splitting a &mut [u8] with split_at_mut.
unsafe impl Send for SharedMut<'_> {}
// SAFETY: see Send.
unsafe impl Sync for SharedMut<'_> {}

impl<'a> SharedMut<'a> {
    /// Takes the exclusive borrow of `slice` for `'a`.
    pub fn new(slice: &'a mut [u8]) -> Self {
        Self {
            ptr: slice.as_mut_ptr(),
            len: slice.len(),
            _borrow: PhantomData,
        }
    }

    /// The length of the whole slice.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the whole slice is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The sub-slice `range`, or `None` when it is out of bounds.
    ///
    /// # Safety
    /// No two live results of `slice` (on any thread) may overlap: every caller must
    /// write only the range it owns, and a range is owned by one task at a time.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn slice(&self, range: Range<usize>) -> Option<&mut [u8]> {
        if range.start > range.end || range.end > self.len {
            return None;
        }
        // SAFETY: in bounds (checked above) of a slice exclusively borrowed for 'a;
        // disjointness of concurrently live sub-slices is the caller's contract.
        Some(unsafe {
            std::slice::from_raw_parts_mut(self.ptr.add(range.start), range.end - range.start)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_fill_disjoint_ranges() {
        let mut data = vec![0u8; 1000];
        {
            let shared = SharedMut::new(&mut data);
            std::thread::scope(|s| {
                for t in 0..4usize {
                    let shared = &shared;
                    s.spawn(move || {
                        // SAFETY: each thread owns the distinct range t*250..(t+1)*250.
                        let part =
                            unsafe { shared.slice(t * 250..(t + 1) * 250) }.expect("in bounds");
                        part.fill(t as u8 + 1);
                    });
                }
            });
        }
        for (i, &b) in data.iter().enumerate() {
            assert_eq!(b as usize, i / 250 + 1);
        }
    }

    #[test]
    fn out_of_bounds_ranges_are_refused() {
        let mut data = vec![0u8; 10];
        let shared = SharedMut::new(&mut data);
        // SAFETY: no other slice is live.
        unsafe {
            assert!(shared.slice(5..11).is_none());
            assert!(shared.slice(11..12).is_none());
            assert_eq!(shared.slice(2..5).map(|s| s.len()), Some(3));
        }
    }
}

//! Recycled small vectors: the per-step `cu_seqlens`, ragged shapes and the list of a
//! step's tensors. Like the batch buffers, they come back when a step is dropped, so
//! a steady run allocates nothing per step.

use std::ops::Deref;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// A bounded free list of empty vectors that keep their capacity.
pub(crate) struct VecPool<T> {
    inner: Arc<Inner<T>>,
}

struct Inner<T> {
    free: Mutex<Vec<Vec<T>>>,
    max_free: usize,
    created: AtomicU64,
}

impl<T> VecPool<T> {
    /// A pool keeping at most `max_free` vectors.
    pub(crate) fn new(max_free: usize) -> Self {
        Self {
            inner: Arc::new(Inner {
                free: Mutex::new(Vec::with_capacity(max_free)),
                max_free,
                created: AtomicU64::new(0),
            }),
        }
    }

    /// An empty vector, recycled if one is free.
    pub(crate) fn take(&self) -> PooledVec<T> {
        let recycled = self
            .inner
            .free
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        let vec = recycled.unwrap_or_else(|| {
            self.inner.created.fetch_add(1, Ordering::Relaxed);
            Vec::new()
        });
        PooledVec {
            vec,
            pool: Some(Arc::clone(&self.inner)),
        }
    }

    /// Vectors created because none was free (a steady run stops increasing it).
    pub(crate) fn created(&self) -> u64 {
        self.inner.created.load(Ordering::Relaxed)
    }
}

/// A vector on loan from the loader: reads as a slice, and goes back (emptied, with
/// its capacity) to the loader's pool when dropped.
pub struct PooledVec<T> {
    pub(crate) vec: Vec<T>,
    /// `None` for a vector that is not recycled.
    pool: Option<Arc<Inner<T>>>,
}

impl<T> PooledVec<T> {
    /// A vector that is freed, not recycled, when dropped.
    pub fn unpooled(vec: Vec<T>) -> Self {
        Self { vec, pool: None }
    }

    /// Takes the elements out as a plain vector (the pool keeps nothing).
    pub fn into_vec(mut self) -> Vec<T> {
        std::mem::take(&mut self.vec)
    }
}

impl<T> Deref for PooledVec<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        &self.vec
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for PooledVec<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.vec.fmt(f)
    }
}

impl<T> Drop for PooledVec<T> {
    fn drop(&mut self) {
        let Some(pool) = self.pool.take() else {
            return;
        };
        let mut vec = std::mem::take(&mut self.vec);
        if vec.capacity() == 0 {
            return;
        }
        // Drop the elements (for a step's tensors: return their buffers) before
        // taking the lock.
        vec.clear();
        let mut free = pool.free.lock().unwrap_or_else(PoisonError::into_inner);
        if free.len() < pool.max_free {
            free.push(vec);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_come_back_empty_with_their_capacity() {
        let pool = VecPool::<u64>::new(2);
        let mut v = pool.take();
        v.vec.extend(0..100);
        let cap = v.vec.capacity();
        drop(v);
        let again = pool.take();
        assert!(again.is_empty());
        assert_eq!(again.vec.capacity(), cap);
        assert_eq!(pool.created(), 1);
    }

    #[test]
    fn the_free_list_is_bounded() {
        let pool = VecPool::<u32>::new(1);
        let vs: Vec<PooledVec<u32>> = (0..3)
            .map(|_| {
                let mut v = pool.take();
                v.vec.push(1);
                v
            })
            .collect();
        drop(vs);
        assert_eq!(pool.inner.free.lock().expect("lock").len(), 1);
        assert_eq!(pool.created(), 3);
    }

    #[test]
    fn into_vec_keeps_the_elements() {
        let pool = VecPool::<u8>::new(4);
        let mut v = pool.take();
        v.vec.extend([1, 2, 3]);
        assert_eq!(v.into_vec(), vec![1, 2, 3]);
    }
}

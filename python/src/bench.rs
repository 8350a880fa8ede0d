//! `_bench_gather` and `_bench_loader`: the Rust-side baselines of
//! python/bench/bench_gather.py.
//!
//! They run what a Rust program would (engine gathers into one reused destination;
//! the Rust loader consumed in Rust), with no Python in the loop, so the benchmark
//! can report the Python API's throughput as a ratio of the Rust API's in one run.

use std::time::Instant;

use numpy::{PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use zring_platform::PooledBuf;

use crate::index::{self, Selection};
use crate::store::ReadError;
use crate::store::StoreBase;

/// Gathers every index batch of `batches` from `store` in Rust, each into the same
/// reused buffer (taken from the read-buffer pool), and returns the seconds each gather took: wall-clock seconds, or
/// with `thread_cpu=True` the calling thread's CPU seconds (immune to preemption; use
/// it with a `threads=1` store, whose gathers run entirely on the caller).
#[pyfunction]
#[pyo3(signature = (store, batches, thread_cpu = false))]
pub fn _bench_gather(
    py: Python<'_>,
    store: &Bound<'_, StoreBase>,
    batches: Vec<Bound<'_, PyAny>>,
    thread_cpu: bool,
) -> PyResult<Vec<f64>> {
    let base = store.get();
    let handle = base.handle(py)?;
    let mut all: Vec<Vec<u64>> = Vec::with_capacity(batches.len());
    for b in &batches {
        if let Ok(a) = b.cast::<PyUntypedArray>() {
            if a.ndim() != 1 {
                return Err(pyo3::exceptions::PyValueError::new_err(
                    "each batch must be a 1-D index array",
                ));
            }
        }
        match index::select(b, base.len())? {
            Selection::One(i) => all.push(vec![i]),
            Selection::Many { indices, .. } => all.push(indices),
        }
    }
    let ragged = base.is_ragged();
    let width = handle.item_bytes().unwrap_or(0) as usize;
    let result = py.detach(|| -> Result<Vec<f64>, ReadError> {
        let mut times = Vec::with_capacity(all.len());
        let mut buf = grown(0)?;
        let now = |cpu: bool| if cpu { thread_cpu_seconds() } else { 0.0 };
        for ids in &all {
            let t0 = Instant::now();
            let c0 = now(thread_cpu);
            let layout = if ragged {
                Some(handle.ragged_layout(ids)?)
            } else {
                None
            };
            let planned = t0.elapsed();
            let planned_cpu = now(thread_cpu) - c0;
            let len = layout
                .as_ref()
                .map_or(ids.len() * width, |l| l.values_bytes);
            if buf.len() < len {
                // Grow and touch the pages outside the timing, as a steady Rust loop
                // over a reused buffer would have done long before.
                buf = grown(len)?;
            }
            let dest = &mut buf[..len];
            let t1 = Instant::now();
            let c1 = now(thread_cpu);
            match &layout {
                Some(l) => handle.gather_ragged_into(ids, l, dest)?,
                None => handle.gather(ids, dest)?,
            }
            times.push(if thread_cpu {
                planned_cpu + now(true) - c1
            } else {
                (planned + t1.elapsed()).as_secs_f64()
            });
        }
        Ok(times)
    });
    result.map_err(|e| e.into_py(py))
}

/// CPU seconds the calling thread has used (`CLOCK_THREAD_CPUTIME_ID`, what Python's
/// `time.thread_time()` reads); 0 where there is no such clock.
fn thread_cpu_seconds() -> f64 {
    #[cfg(unix)]
    {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes one timespec into the valid `ts`.
        if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } == 0 {
            return ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9;
        }
    }
    0.0
}

/// A page-touched buffer of `len` bytes from the same pool Python reads use, so that
/// both sides write into the same kind of memory (where a destination lies changes
/// memcpy speed by tens of percent; see docs/python.md).
fn grown(len: usize) -> Result<PooledBuf, ReadError> {
    let mut buf = crate::buffer::acquire(len)
        .map_err(|e| ReadError::Alloc(len, "the benchmark's output".into(), e))?;
    buf.fill(0);
    Ok(buf)
}

/// Runs the Rust loader over `streams` (`{name: [store, ...]}`) for `steps` steps
/// entirely in Rust (nothing converted to Python) and returns the seconds it took,
/// after `warmup` untimed steps: the baseline of `Loader` iteration from Python.
#[pyfunction]
#[pyo3(signature = (streams, sampler, steps, workers = 2, prefetch = 4, warmup = 5))]
pub fn _bench_loader(
    py: Python<'_>,
    streams: &Bound<'_, pyo3::types::PyDict>,
    sampler: &Bound<'_, crate::sampler::Sampler>,
    steps: usize,
    workers: usize,
    prefetch: usize,
    warmup: usize,
) -> PyResult<f64> {
    let mut views: Vec<(String, Vec<zring_loader::View>)> = Vec::new();
    for (name, list) in streams.iter() {
        let mut v = Vec::new();
        for s in list.try_iter()? {
            v.push(zring_loader::View::new(
                s?.cast::<StoreBase>()?.get().handle(py)?,
            ));
        }
        views.push((name.extract::<String>()?, v));
    }
    let sampler = sampler.get().snapshot();
    let options = zring_loader::LoaderOptions::new(workers, prefetch);
    let result = py.detach(|| -> Result<f64, zring_loader::LoaderError> {
        let mut loader = zring_loader::Loader::new(views, sampler, options)?;
        for _ in 0..warmup {
            if let Some(step) = loader.next() {
                step?;
            }
        }
        let t0 = Instant::now();
        for _ in 0..steps {
            if let Some(step) = loader.next() {
                step?;
            }
        }
        let elapsed = t0.elapsed().as_secs_f64();
        loader.close();
        Ok(elapsed)
    });
    result.map_err(|e| pyo3::exceptions::PyRuntimeError::new_err(e.to_string()))
}

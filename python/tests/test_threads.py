"""Gathers, appends and loader waits release the GIL: Python threads keep running
while the engine works, and concurrent gathers return correct data."""

import sys
import threading
import time

import numpy as np
import pytest

import zring
from conftest import write_dense


class Counter:
    """A Python thread that counts as fast as it can until stopped."""

    def __init__(self):
        self.n = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            self.n += 1

    def __enter__(self):
        self._thread.start()
        while self.n == 0:
            time.sleep(0.001)
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def progress_during(fn):
    """(Python steps the counter made while `fn` ran, seconds fn took)."""
    with Counter() as c:
        before = c.n
        t0 = time.perf_counter()
        fn()
        elapsed = time.perf_counter() - t0
        after = c.n
    return after - before, elapsed


def free_running_share(fn):
    """How fast a Python thread counts while `fn` runs, as a share of how fast it
    counts while the main thread sleeps. Near 0 if `fn` holds the GIL (the counter
    only runs in the switch windows at its start and end, made tiny here), near 1
    (or 1/2 with one spare core) if `fn` releases it."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(0.0002)
    try:
        steps, elapsed = progress_during(lambda: time.sleep(0.05))
        rate = steps / elapsed
        steps, elapsed = progress_during(fn)
        return steps / elapsed / rate, elapsed
    finally:
        sys.setswitchinterval(old)


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """~19 MiB of compressible 64 KiB records: a single-threaded decode of 4 copies
    takes tens of milliseconds."""
    rng = np.random.default_rng(3)
    data = np.repeat(rng.integers(0, 4, (300, 4096), dtype=np.uint8), 16, axis=1)
    path = tmp_path_factory.mktemp("big") / "big.zr"
    write_dense(path, data, codec="zstd")
    return path, data


def test_a_gather_lets_other_python_threads_run(big):
    path, _ = big
    store = zring.DenseStore(path, threads=1)
    idx = np.tile(np.arange(300), 4)
    store[idx[:10]]
    share, elapsed = free_running_share(lambda: store[idx])
    assert elapsed > 0.01
    assert share > 0.2, (share, elapsed)


def test_an_append_lets_other_python_threads_run(tmp_path, big):
    _, data = big
    big_batch = np.concatenate([data] * 3)
    with zring.DenseWriter(tmp_path / "w.zr", "uint8", data.shape[1:], codec="zstd", level=5, threads=1) as w:
        share, elapsed = free_running_share(lambda: w.append(big_batch))
    assert elapsed > 0.01
    assert share > 0.2, (share, elapsed)


def test_waiting_for_a_loader_step_lets_other_threads_run(big):
    path, _ = big
    store = zring.DenseStore(path, threads=1)
    with zring.Loader({"x": [store]}, zring.Sampler(300, 256, "iid"), workers=1, prefetch=1) as loader:
        share, elapsed = free_running_share(lambda: [next(loader) for _ in range(8)])
    assert share > 0.2, (share, elapsed)


def test_concurrent_gathers_from_python_threads_are_correct(big):
    path, data = big
    store = zring.DenseStore(path)
    errors = []

    def worker(seed):
        rng = np.random.default_rng(seed)
        try:
            for _ in range(20):
                idx = rng.integers(0, len(data), 16)
                got = store[idx] if seed % 2 else store.gather(idx, out=np.empty((16, data.shape[1]), np.uint8))
                if not np.array_equal(got, data[idx]):
                    errors.append(f"thread {seed}: wrong data")
        except Exception as e:  # pragma: no cover - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []


def test_rust_timing_helpers_of_the_benchmark_run(big):
    path, _ = big
    store = zring.DenseStore(path, threads=1)
    batches = [np.arange(8), np.array([3, 3, 299])]
    wall = zring._zring._bench_gather(store, batches)
    cpu = zring._zring._bench_gather(store, batches, thread_cpu=True)
    assert len(wall) == len(cpu) == 2 and all(t > 0 for t in wall + cpu)
    seconds = zring._zring._bench_loader({"x": [store]}, zring.Sampler(300, 8, "iid"), 5, workers=1, prefetch=2)
    assert seconds > 0

"""Every long call releases the GIL (gathers with and without `out=`, ragged reads,
appends, writer close, verify, dictionary training, loader waits and seek): another
Python thread makes progress while it runs, shown by an event rather than a timing.
Concurrent gathers return correct data."""

import sys
import threading
import time

import numpy as np
import pytest

import zring
from conftest import write_dense


class Bystander:
    """A second Python thread that counts, yielding the GIL after every step.

    With the interpreter's switch interval made enormous, the thread that holds the GIL
    is never forced to hand it over: the bystander then runs only while another
    thread has released the GIL of its own accord. So if its count moves while `fn`
    runs, `fn` released the GIL (an event, not a timing), and if `fn` holds the GIL
    throughout, the count cannot move at all."""

    def __init__(self):
        self.n = 0
        self._stop = False
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop:
            self.n += 1
            time.sleep(0)  # hands the GIL back to a thread that wants it

    def progress_during(self, fn):
        old = sys.getswitchinterval()
        self._thread.start()
        while self.n == 0:
            time.sleep(0.001)
        sys.setswitchinterval(1000.0)
        try:
            # A bystander already waiting for the GIL waits with the old interval and
            # would force one hand-over when it runs out: let it take a step first,
            # so that its next wait starts under the new interval.
            settled = self.n
            while self.n == settled:
                time.sleep(0.001)
            before = self.n
            fn()
            return self.n - before
        finally:
            sys.setswitchinterval(old)
            self._stop = True
            self._thread.join()


def progress_while(fn):
    return Bystander().progress_during(fn)


def test_the_bystander_cannot_run_while_the_gil_is_held():
    """The check itself: a call that holds the GIL shows no progress, one that
    releases it does."""
    assert progress_while(lambda: sum(range(2_000_000))) == 0
    assert progress_while(lambda: time.sleep(0.02)) > 0


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
    path, data = big
    store = zring.DenseStore(path, threads=1)
    idx = np.tile(np.arange(300), 4)
    got = []
    assert progress_while(lambda: got.append(store[idx])) > 0
    np.testing.assert_array_equal(got[0][-300:], data)


def test_an_append_lets_other_python_threads_run(tmp_path, big):
    _, data = big
    big_batch = np.concatenate([data] * 3)
    with zring.DenseWriter(tmp_path / "w.zr", "uint8", data.shape[1:], codec="zstd", level=5, threads=1) as w:
        assert progress_while(lambda: w.append(big_batch)) > 0


def test_waiting_for_a_loader_step_lets_other_threads_run(big):
    path, _ = big
    store = zring.DenseStore(path, threads=1)
    with zring.Loader({"x": [store]}, zring.Sampler(300, 256, "iid"), workers=1, prefetch=1) as loader:
        assert progress_while(lambda: [next(loader) for _ in range(8)]) > 0


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
    # A smoke test of the helpers the benchmark script calls: one figure per batch.
    # What they measure is checked by the benchmarks' check mode, not here.
    wall = zring._zring._bench_gather(store, batches)
    cpu = zring._zring._bench_gather(store, batches, thread_cpu=True)
    assert len(wall) == len(cpu) == 2
    zring._zring._bench_loader({"x": [store]}, zring.Sampler(300, 8, "iid"), 5, workers=1, prefetch=2)


# Every long call releases the GIL while the engine works (docs/python.md).


def test_gather_with_out_releases_the_gil(big):
    path, data = big
    store = zring.DenseStore(path, threads=1)
    idx = np.tile(np.arange(300), 2)
    out = np.empty((len(idx), data.shape[1]), np.uint8)
    assert progress_while(lambda: store.gather(idx, out=out)) > 0
    np.testing.assert_array_equal(out, data[idx])


def test_verify_releases_the_gil(big):
    path, _ = big
    store = zring.DenseStore(path, threads=1)
    assert progress_while(store.verify) > 0


def test_ragged_reads_release_the_gil(tmp_path, big):
    _, data = big
    records = [data[i, : 4096 * (1 + i % 16)] for i in range(300)]
    path = tmp_path / "r.zr"
    with zring.RaggedWriter(path, "uint8", codec="zstd") as w:
        w.append(records)
    store = zring.RaggedStore(path, threads=1)
    idx = np.tile(np.arange(300), 2)
    got = []
    assert progress_while(lambda: got.append(store[idx])) > 0
    for k in (0, 299, 599):
        np.testing.assert_array_equal(got[0][k], records[idx[k]])


def test_writer_close_releases_the_gil(tmp_path, big):
    _, data = big
    w = zring.DenseWriter(tmp_path / "c.zr", "uint8", data.shape[1:], codec="raw")
    w.append(np.concatenate([data] * 2))  # 38 MiB for close's fsync
    assert progress_while(w.close) > 0
    assert len(zring.DenseStore(tmp_path / "c.zr")) == 600


def test_dictionary_training_releases_the_gil(big):
    path, data = big
    store = zring.DenseStore(path, threads=1)
    records = [data[i] for i in range(300)]
    assert progress_while(lambda: zring.train_dict(store, size=16384)) > 0
    assert progress_while(lambda: zring.train_dict(records, size=16384)) > 0


def test_loader_seek_releases_the_gil(big):
    path, _ = big
    store = zring.DenseStore(path, threads=1)
    with zring.Loader({"x": [store]}, zring.Sampler(300, 64, "iid"), workers=1, prefetch=2) as loader:
        next(loader)
        assert progress_while(lambda: loader.seek(5)) > 0
        assert next(loader)[0]["x"].shape == (64, 65536)

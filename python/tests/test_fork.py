"""Fork safety at the Python level (PyTorch's DataLoader forks its workers): a child
forked with a warm store, with a running loader, or before a store's first read,
reads correct data through every backend, and the parent carries on."""

import os

import numpy as np
import pytest

import zring
from conftest import write_dense, write_ragged

N = 3000
BACKENDS = ["pread", "mmap", "uring"]


def open_store(path, backend):
    """Opens `path` with `backend` and checks the backend it really uses: io_uring
    may be unavailable (a container's seccomp profile), which skips loudly, or fails
    under ZRING_REQUIRE_URING=1 (scripts/test.sh sets it on Linux)."""
    store = zring.open(path, backend=backend)
    if store.backend != backend:
        assert backend == "uring" and store.backend == "pread", store.backend
        if os.environ.get("ZRING_REQUIRE_URING") == "1":
            pytest.fail("io_uring is unavailable but ZRING_REQUIRE_URING=1 requires it")
        pytest.skip("io_uring unavailable here; set ZRING_REQUIRE_URING=1 to fail instead")
    return store


def in_child(fn):
    """Runs `fn` in a forked child; True if it returned True (nothing is left to the
    child's interpreter: it leaves with os._exit)."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = 0 if fn() else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("fork")
    dense = np.arange(N * 64, dtype=np.int64).reshape(N, 64)
    ragged = [np.full(1 + i % 13, i, np.int32) for i in range(N)]
    write_dense(d / "d.zr", dense, codec="zstd")
    write_ragged(d / "r.zr", ragged, "int32", codec="zstd")
    return d, dense, ragged


def reads_correctly(dstore, rstore, dense, ragged):
    idx = (np.arange(N) * 7 + 3) % N
    if not np.array_equal(dstore[idx], dense[idx]):
        return False
    out = np.empty((N, 64), np.int64)
    dstore.gather(idx, out=out)
    if not np.array_equal(out, dense[idx]):
        return False
    batch = rstore[idx[:500]]
    return all(np.array_equal(a, ragged[i]) for a, i in zip(batch.to_arrays(), idx[:500]))


@pytest.mark.parametrize("backend", BACKENDS)
def test_children_of_a_warm_or_cold_store_read_correct_data(data, backend):
    d, dense, ragged = data
    cold = (open_store(d / "d.zr", backend), open_store(d / "r.zr", backend))
    assert in_child(lambda: reads_correctly(*cold, dense, ragged)), "forked before first use"
    warm = (open_store(d / "d.zr", backend), open_store(d / "r.zr", backend))
    assert reads_correctly(*warm, dense, ragged)
    assert in_child(lambda: reads_correctly(*warm, dense, ragged)), "forked warm"
    assert reads_correctly(*warm, dense, ragged), "parent after fork"
    assert reads_correctly(*cold, dense, ragged), "cold parent after fork"


@pytest.mark.parametrize("backend", BACKENDS)
def test_children_of_a_running_loader_run_their_own(data, backend):
    d, dense, ragged = data
    dstore = open_store(d / "d.zr", backend)
    rstore = open_store(d / "r.zr", backend)
    sampler = zring.Sampler(N, 128, "iid", seed=5)

    def steps_are_right(loader, steps):
        for _ in range(steps):
            step = loader.step
            (shard,) = next(loader)
            idx = sampler.batch(step)
            if not np.array_equal(shard["d"], dense[idx]):
                return False
            if not all(np.array_equal(a, ragged[i]) for a, i in zip(shard["r"].to_arrays(), idx)):
                return False
        return True

    def new_loader(workers):
        return zring.Loader({"d": [dstore], "r": [rstore]}, sampler, workers=workers, prefetch=2)

    with new_loader(2) as running:
        assert steps_are_right(running, 3)
        for workers in (0, 2):
            assert in_child(lambda: steps_are_right(new_loader(workers), 5)), workers
        assert steps_are_right(running, 10), "parent after fork"


FIRST_USE = r"""
import os, signal, sys, threading
import numpy as np
import zring

path, kind = sys.argv[1], sys.argv[2]
# "ragged-pool": a first read large enough to run on the engine's worker pool, so
# the fork also lands while the pool (and the fork handler) is being set up.
pool = kind == "ragged-pool"
store = zring.open(path, backend="pread", threads=2 if pool else 1)
entering = threading.Event()


def read(ids):
    got = store[ids]
    return got if kind == "dense" else got.values


def first_read():
    # The process's first read buffer: it creates the buffer pool (without the GIL).
    entering.set()
    read(list(range(4000)) if pool else [0, 1, 2])


t = threading.Thread(target=first_read)
t.start()
entering.wait()
pid = os.fork()
if pid == 0:
    # A child whose parent was creating the pool: its own reads must not wait for a
    # creator it does not have (the alarm turns a hang into a failure).
    signal.alarm(60)
    want = np.arange(3 * 64, 5 * 64, dtype=np.int64)
    ok = np.array_equal(np.asarray(read([3, 4])).reshape(-1), want)
    os._exit(0 if ok else 1)
t.join()
_, status = os.waitpid(pid, 0)
print("child", os.WEXITSTATUS(status) if os.WIFEXITED(status) else -os.WTERMSIG(status))
"""


@pytest.mark.parametrize("kind", ["dense", "ragged", "ragged-pool"])
def test_a_child_forked_during_the_first_buffer_use_reads(tmp_path, kind):
    """The Python buffer pool is a fork-safe once: a fork that lands while another
    thread creates it leaves the child able to read (a race test like the engine's
    fork-during-first-use ones: each attempt is a fresh process). The store's dtype
    and the RaggedBatch class are resolved when the store is built, not by that first
    read: a child forked while another thread resolved them used to hang (half the
    attempts on CPython 3.10). With "ragged-pool" the first read runs on the worker
    pool: a child forked while it was being started used to miss the fork handler
    (registered then, inside glibc's fork) and wait for the parent's pool forever
    (18 of 30 attempts on CPython 3.10); the handler is now registered at load."""
    import subprocess
    import sys

    path = tmp_path / "d.zr"
    data = np.arange((4000 if kind == "ragged-pool" else 64) * 64, dtype=np.int64).reshape(-1, 64)
    if kind == "dense":
        write_dense(path, data)
    else:
        write_ragged(path, zring.RaggedBatch.from_records(list(data)), "int64")
    for attempt in range(5):
        proc = subprocess.run(
            [sys.executable, "-c", FIRST_USE, str(path), kind],
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip().splitlines()[-1] == "child 0", (attempt, proc.stdout, proc.stderr)

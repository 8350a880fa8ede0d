"""DataLoader worker processes share the cores: each worker's zring pool takes its
share (cores // num_workers threads, at least one, the caller counted) instead of
one thread per core, so W workers do not crowd W pools onto the cores. Observed by
counting the pool's threads (named ``zring-worker-K``) inside each worker."""

import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import zring.torch as zt  # noqa: E402
from conftest import write_dense  # noqa: E402

N = 64


def pool_threads():
    """The zring pool workers alive in this process."""
    n = 0
    for t in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{t}/comm") as f:
                n += f.read().startswith("zring-worker")
        except OSError:  # the thread ended meanwhile
            continue
    return n


def count_threads(batch):
    return {"pool_threads": torch.full((1,), pool_threads())}


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    p = tmp_path_factory.mktemp("threads") / "x.zr"
    write_dense(p, np.arange(N * 64, dtype=np.float32).reshape(N, 64))
    return p


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_each_worker_takes_its_share_of_the_cores(path, context):
    if "ZRING_THREADS" in os.environ:
        pytest.skip("ZRING_THREADS sets every pool's threads, shares included")
    workers = 2
    cores = len(os.sched_getaffinity(0))
    ds = zt.Dataset({"x": path}, transform=count_threads)
    ds[0]  # the main process reads first: its pool is its own, one thread per core
    loader = torch.utils.data.DataLoader(ds, batch_size=8, num_workers=workers,
                                         multiprocessing_context=context, collate_fn=zt.collate)
    seen = {int(b["pool_threads"][0]) for b in loader}
    share = max(1, cores // workers)
    assert seen == {share - 1}, f"{cores} cores, {workers} workers: pool workers {seen}"
    # The main process keeps its pool of one thread per core (the caller counted).
    assert pool_threads() == cores - 1

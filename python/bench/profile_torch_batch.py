#!/usr/bin/env python3
"""CPU time per W3 batch (256 records) of zring's bare gather and of
zring.torch.DataLoader, and of the pieces the DataLoader adds, in one process.

CPU time (time.process_time, every thread counted) is what the other jobs of a
shared machine do not inflate; docs/benchmarks.md (W12) reports these figures.

    python python/bench/profile_torch_batch.py [--dir DIR] [--batches 3000]
"""

import argparse
import os
import tempfile
import time

import numpy as np
import torch

import zring
import zring.torch as zt
from zring._data import as_int_indices


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=None)
    ap.add_argument("--batches", type=int, default=3000)
    a = ap.parse_args()
    torch.set_num_threads(1)
    d = a.dir or tempfile.mkdtemp(prefix="zring-prof-")
    path = os.path.join(d, "w3.zr")
    if not os.path.exists(path):
        rng = np.random.default_rng(0)
        n = 200_000
        lengths = np.clip(rng.lognormal(np.log(130), 0.6, n), 16, 512).astype(np.int64)
        offsets = np.zeros(n + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        values = rng.integers(0, 50_000, offsets[-1], dtype=np.int32)
        with zring.RaggedWriter(path, "int32", 1, codec="raw", overwrite=True) as w:
            w.append(zring.RaggedBatch(values, offsets, lengths.reshape(-1, 1)))
    with open(path, "rb") as f:  # warm: the figures are of a store in the page cache
        while f.read(1 << 24):
            pass
    store = zring.open(path)
    n = len(store)
    ds = zt.Dataset({"x": store})
    sampler = zring.Sampler(n, 256, "iid", seed=1)
    plan = zt.BatchSampler(n, 256, seed=2).plan
    ids = plan.indices(5)
    batch = store[ids]

    def timeit(name, f):
        for _ in range(50):
            f()
        t = time.process_time()
        for _ in range(a.batches):
            f()
        print(f"{name:44s} {1e6 * (time.process_time() - t) / a.batches:8.1f} CPU us")

    def gather():
        return zt._convert(store[sampler.next()], "offsets", 0)

    it = iter(())

    def dl_next():
        nonlocal it
        try:
            return next(it)
        except StopIteration:
            it = iter(zt.DataLoader(ds, batch_sampler=zt.BatchSampler(n, 256, seed=2)))
            return next(it)

    timeit("gather: store[sampler.next()] + conversion", gather)
    timeit("zring.torch.DataLoader: next()", dl_next)
    timeit("BatchSampler's Plan.indices", lambda: plan.indices(5))
    timeit("__getitems__'s index check", lambda: as_int_indices(ids))
    timeit("conversion to tensors (_convert)", lambda: zt._convert(batch, "offsets", 0))


if __name__ == "__main__":
    main()

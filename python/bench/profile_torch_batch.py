#!/usr/bin/env python3
"""CPU time per W3 batch (256 records) of zring's bare gather and of
zring.torch.DataLoader, and of the pieces the DataLoader adds, in one process.

CPU time (time.process_time, every thread counted) is what the other jobs of a
shared machine do not inflate; docs/benchmarks.md (W12) reports these figures.

    python python/bench/profile_torch_batch.py [--dir DIR] [--batches 3000]
    python python/bench/profile_torch_batch.py --check   # tiny store, batches checked, nothing timed (CI)

Before anything is timed, the batches of the bare gather and of the DataLoader are
checked against the generated records.
"""

import argparse
import os
import tempfile
import time

import numpy as np
import torch

import zring
import zring.torch as zt
from zring._internal.frameworks import as_int_indices


def check_batch(what, got, values, offsets, ids):
    """`got` (zring.torch.Ragged) holds exactly records `ids` of the source."""
    v, o = got.values.numpy(), got.offsets.numpy()
    assert len(o) == len(ids) + 1, f"{what}: {len(o) - 1} records for {len(ids)} ids"
    for k, i in enumerate(ids):
        want = values[offsets[i] : offsets[i + 1]]
        assert np.array_equal(v[o[k] : o[k + 1]], want), f"{what}: record {i} differs from the source"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=None)
    ap.add_argument("--batches", type=int, default=3000)
    ap.add_argument("--check", action="store_true", help="a tiny store: check the batches, time nothing")
    a = ap.parse_args()
    torch.set_num_threads(1)
    d = a.dir or tempfile.mkdtemp(prefix="zring-prof-")
    n = 2_000 if a.check else 200_000
    path = os.path.join(d, f"w3-{n}.zr")
    # The records, generated from one seed (cheap next to the timing), so the batches
    # can be checked also when the store is reused from --dir.
    rng = np.random.default_rng(0)
    lengths = np.clip(rng.lognormal(np.log(130), 0.6, n), 16, 512).astype(np.int64)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    values = rng.integers(0, 50_000, offsets[-1], dtype=np.int32)
    if not os.path.exists(path):
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
    assert len(store) == n, f"{path} holds {len(store)} records, not {n}"
    # The batches the timed calls make, checked first.
    ids0 = zring.Sampler(n, 256, "iid", seed=1).next()  # the timed gather's first draw
    check_batch("gather", zt._convert(store[ids0], "offsets", 0), values, offsets, ids0)
    first = next(iter(zt.DataLoader(ds, batch_sampler=zt.BatchSampler(n, 256, seed=2))))
    check_batch("zring.torch.DataLoader", first["x"], values, offsets, plan.indices(0))
    check_batch("_convert", zt._convert(batch, "offsets", 0), values, offsets, ids)
    if a.check:
        print("profile_torch_batch: the gathered and DataLoader batches equal the source records")
        return

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

#!/usr/bin/env python3
"""PyTorch DataLoader over zring's map-style dataset against zring's bare gather and
a plain torch Dataset over np.load(mmap_mode="r"), in one run (workload W12).

Workloads: W1 = 2,000 x uint8[3,224,224] image-like records (147 KiB), W3 = 200,000
int32 token sequences 16..512 long (median ~130); raw stores; batch 256; warm page
cache (files read once first); everything in the main process (num_workers=0, the
2-core machine has no core to spare for worker processes). Contenders, timed in
alternating rounds until each has accumulated --seconds, each batch a fresh random
draw:

  gather     zring's gather called directly: store[ids] + torch.from_dlpack, ids from
             zring.Sampler (IID) drawn in the timed loop
  zring-dl   torch DataLoader(zring.torch.Dataset, batch_sampler=zring.torch.
             BatchSampler, collate_fn=zring.torch.collate)
  zring.torch.DataLoader  zring's DataLoader subclass with the same batch sampler: in
             this process it calls __getitems__ once per batch directly
  zring-dl-torchsampler  torch DataLoader with torch's BatchSampler(RandomSampler)
             (lists of ints) instead of zring's
  IterableDataset  zring.torch.IterableDataset (shuffled, endless, prefetch default)
             iterated directly, as with num_workers=0
  npy-dl     torch DataLoader(plain Dataset over np.load(mmap_mode="r"), batch_size=256,
             shuffle=True): __getitem__ returns torch.from_numpy(np.array(mm[i]));
             default collation (W1); W3 records differ in length, which default_collate
             refuses, so there collate_fn packs them (torch.cat + offsets), the output
             zring gives

With --workers N, two more: zring-dl with N DataLoader worker processes (persistent),
each taking its share of the cores for its zring pool (the default), and the same
with each worker keeping a pool of one thread per core ("unshared", as before
workers shared the cores).

Reported: batches/s of each and the ratios zring-dl / gather (target >= 0.9),
zring-dl / npy-dl (target >= 3) and IterableDataset / gather.

    python python/bench/bench_torch.py            # full sizes (~0.9 GB under --dir)
    python python/bench/bench_torch.py --quick    # small sizes, a smoke test
    python python/bench/bench_torch.py --check    # tiny sizes, batches checked, nothing timed (CI)

Before anything is timed, batches of every contender are checked: each record of a
batch is a whole record of the source (the .npy files written from the generated
arrays), and the bare gather's batch is exactly the records its indices name.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os

import numpy as np
import torch

import zring
import zring.torch as zt
from bench_gather import image_like, warm  # the same W1 records as the gather bench
from rounds import add_timing_args, apply_quick, batch_rates

BATCH = 256


def token_lengths(n: int, rng: np.random.Generator) -> np.ndarray:
    """16..512, median ~130 (log-normal, clipped)."""
    return np.clip(rng.lognormal(np.log(130), 0.6, n), 16, 512).astype(np.int64)


class NpyDense(torch.utils.data.Dataset):
    def __init__(self, path):
        self.path = path
        self.mm = np.load(path, mmap_mode="r")

    def __len__(self):
        return len(self.mm)

    def __getitem__(self, i):
        return torch.from_numpy(np.array(self.mm[i]))


class NpyRagged(torch.utils.data.Dataset):
    def __init__(self, values, offsets):
        self.values = np.load(values, mmap_mode="r")
        self.offsets = np.load(offsets, mmap_mode="r")

    def __len__(self):
        return len(self.offsets) - 1

    def __getitem__(self, i):
        a, b = self.offsets[i], self.offsets[i + 1]
        return torch.from_numpy(np.array(self.values[a:b]))


def pack(records):
    lengths = torch.tensor([len(r) for r in records])
    offsets = torch.zeros(len(records) + 1, dtype=torch.int64)
    torch.cumsum(lengths, 0, out=offsets[1:])
    return torch.cat(records), offsets


def endless(make):
    """Batches from a fresh DataLoader iterator, restarted at each epoch end."""
    while True:
        yield from make()


def build(d, quick, check=False):
    rng = np.random.default_rng(0)
    n1 = 300 if check else 200 if quick else 2000
    images = image_like(n1, rng)
    w1 = os.path.join(d, "w1.zr")
    with zring.DenseWriter(w1, "uint8", (3, 224, 224), codec="raw", overwrite=True) as w:
        w.append(images)
    np.save(os.path.join(d, "w1.npy"), images)
    del images
    n3 = 2_000 if check else 20_000 if quick else 200_000
    lengths = token_lengths(n3, rng)
    offsets = np.zeros(n3 + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    values = rng.integers(0, 50_000, offsets[-1], dtype=np.int32)
    w3 = os.path.join(d, "w3.zr")
    with zring.RaggedWriter(w3, "int32", 1, codec="raw", overwrite=True) as w:
        w.append(zring.RaggedBatch(values, offsets, lengths.reshape(-1, 1)))
    np.save(os.path.join(d, "w3-values.npy"), values)
    np.save(os.path.join(d, "w3-offsets.npy"), offsets)
    for f in os.listdir(d):
        warm(os.path.join(d, f))


def keep_full_pool(_worker_id):
    """worker_init_fn of the "unshared" contender: the worker skips taking its share
    of the cores, so its pool has one thread per core, as before workers shared."""
    zt._share_taken = True


def contenders(d, name, workers=0):
    store = zring.open(os.path.join(d, f"{name}.zr"))
    n = len(store)
    ds = zt.Dataset({"x": store})
    sampler = zring.Sampler(n, BATCH, "iid", seed=1)
    ref = zring.Sampler(n, BATCH, "iid", seed=1)
    # The indices the gather contender draws, for the check: the same sampler's.
    drawn = [ref.next() for _ in range(2)]

    def gather():
        while True:
            v = store[sampler.next()]
            yield zt.to_tensor(v) if isinstance(v, np.ndarray) else zt._convert(v, "offsets", 0)

    def zring_dl():
        bs = zt.BatchSampler(n, BATCH, seed=2)
        return torch.utils.data.DataLoader(ds, batch_sampler=bs, collate_fn=zt.collate)

    def zring_torch_dl():
        return zt.DataLoader(ds, batch_sampler=zt.BatchSampler(n, BATCH, seed=2))

    def zring_dl_torch():
        return torch.utils.data.DataLoader(ds, batch_size=BATCH, shuffle=True, collate_fn=zt.collate)

    if name == "w1":
        plain = NpyDense(os.path.join(d, "w1.npy"))
        npy = lambda: torch.utils.data.DataLoader(plain, batch_size=BATCH, shuffle=True)  # noqa: E731
    else:
        plain = NpyRagged(os.path.join(d, "w3-values.npy"), os.path.join(d, "w3-offsets.npy"))
        npy = lambda: torch.utils.data.DataLoader(plain, batch_size=BATCH, shuffle=True, collate_fn=pack)  # noqa: E731
    def iterable():
        return iter(zt.IterableDataset({"x": store}, BATCH, seed=3))

    def zring_dl_workers(init=None):
        dl = torch.utils.data.DataLoader(ds, batch_sampler=zt.BatchSampler(n, BATCH, seed=2), collate_fn=zt.collate,
                                         num_workers=workers, persistent_workers=True, worker_init_fn=init)
        return endless(lambda: dl)

    parallel = {}
    if workers:
        parallel = {
            f"zring-dl-w{workers}": zring_dl_workers(),
            f"zring-dl-w{workers}-unshared": zring_dl_workers(keep_full_pool),
        }
    return drawn, {
        **parallel,
        "gather": gather(),
        "IterableDataset": iterable(),
        "zring-dl": endless(zring_dl),
        "zring.torch.DataLoader": endless(zring_torch_dl),
        "zring-dl-torchsampler": endless(zring_dl_torch),
        "npy-dl": endless(npy),
    }


def source_records(d, name) -> list[np.ndarray]:
    """The records the stores were written from (the .npy files hold the generated
    arrays as they were)."""
    if name == "w1":
        return list(np.load(os.path.join(d, "w1.npy")))
    values = np.load(os.path.join(d, "w3-values.npy"))
    offsets = np.load(os.path.join(d, "w3-offsets.npy"))
    return [values[offsets[i] : offsets[i + 1]] for i in range(len(offsets) - 1)]


def digest(r: np.ndarray) -> bytes:
    return hashlib.blake2b(np.ascontiguousarray(r).tobytes(), digest_size=16).digest() + str(r.dtype).encode()


def records_of(batch) -> list[np.ndarray]:
    """The records of a batch as any contender yields it: a tensor, zring's Ragged
    (values, offsets, shapes), npy-dl's (values, offsets), or a dict of one of them."""
    if isinstance(batch, dict):
        (batch,) = batch.values()
    if isinstance(batch, tuple):
        values, offsets = batch[0].numpy(), batch[1].numpy()
        return [values[offsets[i] : offsets[i + 1]] for i in range(len(offsets) - 1)]
    return list(batch.numpy())


def check(its: dict, source: list[np.ndarray], gather_ids: list[np.ndarray], batches: int = 2) -> None:
    """Each contender's first `batches` batches hold whole source records only (their
    indices are the contender's own random draw), and the bare gather's are exactly
    `source[i]` for the indices it drew."""
    known = {digest(r) for r in source}
    for name, it in its.items():
        for b in range(batches):
            got = records_of(next(it))
            assert 0 < len(got) <= BATCH, f"{name}: batch of {len(got)} records"
            bad = sum(digest(r) not in known for r in got)
            assert bad == 0, f"{name}: {bad} of {len(got)} records of batch {b} are not source records"
            if name == "gather":
                ids = gather_ids[b]
                assert all(np.array_equal(g, source[i]) for g, i in zip(got, ids, strict=True)), (
                    f"gather: batch {b} != source[ids]")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default="/tmp/zring-bench-torch")
    add_timing_args(ap)
    ap.add_argument("--workers", type=int, default=0,
                    help="also time zring-dl with this many DataLoader worker processes, each taking its share of the "
                         "cores (the default) and keeping a pool of one thread per core (unshared, the old behaviour)")
    a = ap.parse_args()
    apply_quick(a)
    os.makedirs(a.dir, exist_ok=True)
    torch.set_num_threads(1)
    build(a.dir, a.quick, a.check)
    out = {}
    for name in ("w1", "w3"):
        drawn, its = contenders(a.dir, name, a.workers)
        check(its, source_records(a.dir, name), drawn)
        if a.check:
            print(f"bench_torch {name}: every contender's batches hold source records")
            continue
        rates = batch_rates(its, a.seconds, a.rounds)
        out[name] = rates
        print(f"{name.upper()} raw, batch {BATCH}:")
        for k, v in rates.items():
            print(f"  {k:24s} {v:10.1f} batches/s")
        print(f"  zring-dl / gather  = {rates['zring-dl'] / rates['gather']:.2f}   (target >= 0.9)")
        print(f"  zring-dl / npy-dl  = {rates['zring-dl'] / rates['npy-dl']:.2f}   (target >= 3)")
        print(f"  zring-dl-torchsampler / gather = {rates['zring-dl-torchsampler'] / rates['gather']:.2f}")
        zdl = rates["zring.torch.DataLoader"]
        print(f"  zring.torch.DataLoader / gather = {zdl / rates['gather']:.2f}, / npy-dl = {zdl / rates['npy-dl']:.2f}")
        print(f"  IterableDataset / gather = {rates['IterableDataset'] / rates['gather']:.2f}")
        if a.workers:
            w = f"zring-dl-w{a.workers}"
            print(f"  {w} / {w}-unshared = {rates[w] / rates[w + '-unshared']:.2f}   (workers x threads within the cores)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()

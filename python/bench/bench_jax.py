#!/usr/bin/env python3
"""zring.jax.batches against zring's direct gather of the same ids, batches to
jax.Array on CPU, in one run (workload W12-JAX).

Workloads: W1 = 2,000 x uint8[3,224,224] image-like records (147 KiB), W3 = 200,000
int32 token sequences 16..512 long (median ~130, a ragged field); raw stores; batch
256; warm page cache (files read once first); shuffled epochs without end (zring's
global order, seed 3). Contenders, timed in alternating rounds until each has
accumulated --seconds, every one over the same steps of the same plan:

  gather          the direct gather: ids = plan.indices(step) (as batches computes
                  them), then zring.jax.to_jax(store[ids]), in the caller's thread
  batches         zring.jax.batches(source, 256, epochs=None, seed=3): prefetched
                  (prefetch=2, the default) on a zring.Loader thread
  batches-sync    the same with prefetch=0: each batch gathered in the caller's thread

Reported: batches/s of each and batches / gather (target >= 0.9). The consumer only
takes each batch (a jax.Array over zring's memory, or a ragged field's three
arrays) and drops it, so this measures the delivery, not an overlap with compute.

    python python/bench/bench_jax.py            # full sizes (~0.6 GB under --dir)
    python python/bench/bench_jax.py --quick    # small sizes, a smoke test
    python python/bench/bench_jax.py --check    # tiny sizes, batches checked, nothing timed (CI)

Before anything is timed, every contender's first batches are checked against the
source records (the generated arrays) of the plan's ids for those steps.
"""

from __future__ import annotations

import argparse
import json
import os

import numpy as np

import jax
import zring
import zring.jax as zj
from bench_gather import image_like, warm  # the same W1 records as the gather bench
from rounds import add_timing_args, apply_quick, batch_rates
from zring._internal.frameworks import Plan

BATCH = 256
SEED = 3


def token_lengths(n: int, rng: np.random.Generator) -> np.ndarray:
    """16..512, median ~130 (log-normal, clipped), as bench_torch's W3."""
    return np.clip(rng.lognormal(np.log(130), 0.6, n), 16, 512).astype(np.int64)


def build(d: str, n1: int, n3: int) -> dict:
    """The two stores, and their records (for the checks)."""
    rng = np.random.default_rng(0)
    images = image_like(n1, rng)
    with zring.DenseWriter(os.path.join(d, "w1.zr"), "uint8", (3, 224, 224), codec="raw", overwrite=True) as w:
        w.append(images)
    lengths = token_lengths(n3, rng)
    offsets = np.zeros(n3 + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    values = rng.integers(0, 50_000, offsets[-1], dtype=np.int32)
    with zring.RaggedWriter(os.path.join(d, "w3.zr"), "int32", 1, codec="raw", overwrite=True) as w:
        w.append(zring.RaggedBatch(values, offsets, lengths.reshape(-1, 1)))
    for name in ("w1.zr", "w3.zr"):
        warm(os.path.join(d, name))
    return {"w1": images, "w3": (values, offsets)}


def contenders(d: str, name: str) -> tuple[Plan, dict]:
    store = zring.open(os.path.join(d, f"{name}.zr"))
    source = zj.DataSource({"x": store})
    # The plan batches makes for these arguments (one process): the gather takes its
    # ids step by step, as batches does.
    plan = Plan(len(store), BATCH, mode="cyclic", seed=SEED, epochs=None, drop_last=True)

    def gather():
        step = 0
        while True:
            yield {"x": zj.to_jax(store[plan.indices(step)])}
            step += 1

    return plan, {
        "gather": gather(),
        "batches": zj.batches(source, BATCH, epochs=None, seed=SEED),
        "batches-sync": zj.batches(source, BATCH, epochs=None, seed=SEED, prefetch=0),
    }


def expected(records, ids: np.ndarray) -> list[np.ndarray]:
    if isinstance(records, tuple):
        values, offsets = records
        return [values[offsets[i]:offsets[i + 1]] for i in ids]
    return [records[i] for i in ids]


def got(batch) -> list[np.ndarray]:
    x = batch["x"]
    assert all(isinstance(a, jax.Array) for a in (x if isinstance(x, tuple) else (x,)))
    if isinstance(x, tuple):
        values, cu, _ = (np.asarray(a) for a in x)
        return [values[cu[k]:cu[k + 1]] for k in range(len(cu) - 1)]
    return list(np.asarray(x))


def check(plan: Plan, its: dict, records, steps: int = 3) -> None:
    """The first `steps` batches of every contender are the records of the plan's ids
    (the iterators go on from there: the timing starts later in the same order)."""
    for step in range(steps):
        want = expected(records, plan.indices(step).astype(np.int64))
        for k, it in its.items():
            batch = got(next(it))
            assert len(batch) == len(want) == BATCH, (k, step, len(batch))
            for a, b in zip(batch, want):
                assert a.dtype == b.dtype and np.array_equal(a, b), f"{k}: step {step} differs from the source"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default="/tmp/zring-bench-jax")
    add_timing_args(ap)
    a = ap.parse_args()
    apply_quick(a)
    n1, n3 = (300, 2_000) if a.check else (400, 20_000) if a.quick else (2_000, 200_000)
    os.makedirs(a.dir, exist_ok=True)
    records = build(a.dir, n1, n3)
    assert jax.devices()[0].platform == "cpu", "W12-JAX measures the CPU handover"
    out = {}
    for name in ("w1", "w3"):
        plan, its = contenders(a.dir, name)
        check(plan, its, records[name])
        if a.check:
            print(f"bench_jax {name}: every contender's batches are the plan's source records")
            continue
        rates = batch_rates(its, a.seconds, a.rounds)
        out[name] = rates
        print(f"{name.upper()} raw, batch {BATCH}, to jax.Array on CPU:")
        for k, v in rates.items():
            print(f"  {k:14s} {v:10.1f} batches/s")
        print(f"  batches / gather      = {rates['batches'] / rates['gather']:.2f}   (target >= 0.9)")
        print(f"  batches-sync / gather = {rates['batches-sync'] / rates['gather']:.2f}")
        for it in its.values():
            it.close()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()

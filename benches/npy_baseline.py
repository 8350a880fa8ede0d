#!/usr/bin/env python3
"""NumPy memmap baselines for zring's gather benchmarks (docs/workloads.md method).

Reads the workloads that `zring-bench-npy DIR` wrote (the very records the Rust
benches use) and times, per batch of fresh IID indices (drawn outside the timing):

  w1, w2    np.take(mm, idx, axis=0, out=buf) on an np.load(..., mmap_mode="r") array
  w3_concat values+offsets: np.concatenate of the records' slices of the mapped values
            (offsets in RAM), plus the batch's cu_seqlens
  w3_take   the same batch gathered with one vectorised np.take of element positions

5 warm-up batches, then batches until >= --seconds of timed gathers. The files are
read once first so the page cache is warm. Prints records/s, MiB/s, p50/p95 per batch
and, with --json, writes them for benches/summary.py.

Usage: npy_baseline.py DIR [--seconds 2] [--batch 256] [--seed 7] [--json OUT]
"""

import argparse
import json
import os
import sys
import time

import numpy as np

MIB = 1 << 20


def warm(path):
    with open(path, "rb", buffering=0) as f:
        while f.read(8 << 20):
            pass


def timed(gather, n, batch, seconds, rng):
    """Runs gather(idx) on fresh IID batches; returns (batches, seconds, bytes, lats)."""
    for _ in range(5):
        gather(rng.integers(0, n, size=batch, dtype=np.int64))
    total = 0.0
    nbytes = 0
    lats = []
    while total < seconds:
        idx = rng.integers(0, n, size=batch, dtype=np.int64)
        t0 = time.perf_counter()
        got = gather(idx)
        dt = time.perf_counter() - t0
        total += dt
        nbytes += got
        lats.append(dt)
    return len(lats), total, nbytes, lats


def report(name, batch, result):
    batches, secs, nbytes, lats = result
    lats = np.sort(np.array(lats))
    out = {
        "records_s": batches * batch / secs,
        "mib_s": nbytes / MIB / secs,
        "p50_us": float(lats[len(lats) // 2]) * 1e6,
        "p95_us": float(lats[int(len(lats) * 0.95)]) * 1e6,
        "batches": batches,
    }
    print(
        f"npy {name:10s} {out['records_s'] / 1e6:8.3f} M records/s "
        f"{out['mib_s']:9.1f} MiB/s  p50 {out['p50_us']:8.1f} us  "
        f"p95 {out['p95_us']:8.1f} us  ({batches} batches)"
    )
    return out


def dense(path, batch, seconds, rng):
    warm(path)
    mm = np.load(path, mmap_mode="r")
    buf = np.empty((batch,) + mm.shape[1:], dtype=mm.dtype)
    idx = rng.integers(0, len(mm), size=batch)
    np.take(mm, idx, axis=0, out=buf)
    assert np.array_equal(buf, mm[idx]), "np.take returned the wrong rows"

    def gather(idx):
        np.take(mm, idx, axis=0, out=buf)
        return buf.nbytes

    return timed(gather, len(mm), batch, seconds, rng)


def ragged(dir_, batch, seconds, rng):
    vpath = os.path.join(dir_, "w3_values.npy")
    warm(vpath)
    values = np.asarray(np.load(vpath, mmap_mode="r"))  # plain ndarray view: no subclass cost
    offsets = np.load(os.path.join(dir_, "w3_offsets.npy"))
    n = len(offsets) - 1

    def concat(idx):
        starts = offsets[idx].tolist()
        ends = offsets[idx + 1].tolist()
        vals = np.concatenate([values[s:e] for s, e in zip(starts, ends)])
        cu = np.zeros(len(idx) + 1, dtype=np.int64)
        np.cumsum(offsets[idx + 1] - offsets[idx], out=cu[1:])
        return vals.nbytes

    def take(idx):
        starts = offsets[idx]
        lens = offsets[idx + 1] - starts
        cu = np.zeros(len(idx) + 1, dtype=np.int64)
        np.cumsum(lens, out=cu[1:])
        pos = np.repeat(starts - cu[:-1], lens) + np.arange(cu[-1])
        return np.take(values, pos).nbytes

    idx = rng.integers(0, n, size=batch)
    want = np.concatenate([values[offsets[i] : offsets[i + 1]] for i in idx])
    starts = offsets[idx]
    lens = offsets[idx + 1] - starts
    cu = np.concatenate([[0], np.cumsum(lens)])
    assert np.array_equal(np.take(values, np.repeat(starts - cu[:-1], lens) + np.arange(cu[-1])), want)
    return (
        timed(concat, n, batch, seconds, rng),
        timed(take, n, batch, seconds, rng),
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", help="directory written by zring-bench-npy")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", help="write the figures here")
    a = ap.parse_args()
    missing = [
        f
        for f in ("w1.npy", "w2.npy", "w3_values.npy", "w3_offsets.npy")
        if not os.path.exists(os.path.join(a.dir, f))
    ]
    if missing:
        sys.exit(
            f"{a.dir}: missing {', '.join(missing)}; run "
            "`cargo run --release -p zring-benches --bin zring-bench-npy -- DIR` first"
        )
    rng = np.random.default_rng(a.seed)
    print(f"numpy {np.__version__}, batch {a.batch}, >= {a.seconds} s per figure")
    res = {"numpy": np.__version__, "batch": a.batch}
    for w in ("w1", "w2"):
        res[w] = report(w, a.batch, dense(os.path.join(a.dir, f"{w}.npy"), a.batch, a.seconds, rng))
    concat, take = ragged(a.dir, a.batch, a.seconds, rng)
    res["w3_concat"] = report("w3_concat", a.batch, concat)
    res["w3_take"] = report("w3_take", a.batch, take)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Small records from Python: W2 and W3 raw gathers and W2 raw writes against NumPy
and loaderx, in one run.

Workloads (docs/workloads.md): W2 = int32[512] Zipf token ids (2 KiB), W3 = ragged
int32 sequences 16..512 long (median ~130, ~615 B); raw codec; batch 256; fresh IID
indices per batch (drawn outside the timing); warm page cache. Each gather contender
is timed per call, the contenders taking turns in 16 rounds so that the machine's
drift hits them alike; writes alternate in --write-rounds rounds.

Gather contenders (same index batches, same run, default options unless named):
  zring            store.gather(idx, out=buf) into a caller array (W2); store[idx] (W3)
  zring-unchecked  the same store opened with verify_checksums=False
  numpy            np.take(memmap, idx, axis=0, out=buf) (W2); for W3 the values
                   and offsets of one memory-mapped .npy each, sliced per record
                   and concatenated (np.concatenate)
  loaderx          loaderx 2.8's store bound to a CPU Allocator, view[idx]
                   (only where `import loaderx` works)
Write contenders (W2, the whole array in appends of 4,096 records, timed from
create to a durable file):
  zring            DenseWriter(..., codec="raw"); close() fsyncs before publishing
  numpy            np.save then os.fsync
  loaderx          loaderx's DenseWriter, codec "raw"; its close() does not fsync,
                   so it is timed twice: as shipped, and with its files fsynced
                   after close() (the same durability as the others)

    python python/bench/bench_small.py                # ~3 min, ~1 GB of files
    python python/bench/bench_small.py --check        # tiny sizes, outputs checked
    python python/bench/bench_small.py --json small.json

loaderx 2.8.19 requires numpy>=2.5, which is not on PyPI when this was written; it
runs on numpy 2.4 (installed with `pip install --no-deps loaderx==2.8.19
ml-dtypes`). Every contender's output is checked against the source before timing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time

import numpy as np

import zring

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_gather import interleaved, zipf_tokens  # noqa: E402

try:  # the peer is optional: without it, its rows are left out
    import loaderx
    from loaderx import zrecord as lx_zrecord
except ImportError:
    loaderx = None

BATCH = 256
APPEND = 4096


def w3_lengths(n: int, rng: np.random.Generator) -> np.ndarray:
    """Sequence lengths 16..512, log-normal around ~130 (docs/workloads.md)."""
    return np.clip(rng.lognormal(np.log(130), 0.6, n), 16, 512).astype(np.int64)


def warm(path: str) -> None:
    for root, _, files in os.walk(path) if os.path.isdir(path) else [("", [], [path])]:
        for f in files:
            with open(os.path.join(root, f), "rb") as fh:
                while fh.read(64 << 20):
                    pass


def fsync_tree(path: str) -> None:
    """fsync every file under path (or path itself), then its directory."""
    paths = [path] if os.path.isfile(path) else [os.path.join(r, f) for r, _, fs in os.walk(path) for f in fs]
    for p in paths + [os.path.dirname(os.path.abspath(path))]:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def remove(path: str) -> None:
    if os.path.isdir(path):
        shutil.rmtree(path)
    elif os.path.exists(path):
        os.remove(path)


def index_batches(n: int, rng: np.random.Generator) -> list:
    """IID batches that together touch every record about twice: a few batches
    reused would leave their records in the CPU's cache (64 W2 batches are 32 MiB,
    an L3's size) and measure the cache, not the store."""
    return [rng.integers(0, n, BATCH).astype(np.uint64) for _ in range(max(64, 2 * n // BATCH))]


def rates(times: dict, base: str) -> dict:
    """Mean records/s and MiB/s per contender, and each one's ratio to `base`."""
    out = {}
    for name, t in times.items():
        rec_s = BATCH * len(t) / t.sum()
        out[name] = {"records_s": rec_s, "p50_us": float(np.median(t)) * 1e6}
    for name in out:
        out[name]["x_" + base] = out[name]["records_s"] / out[base]["records_s"]
    for name in out:
        out[name]["zring_x"] = out["zring"]["records_s"] / out[name]["records_s"]
    return out


def lx_view(path: str, dense: bool):
    store = lx_zrecord.DenseStore(path) if dense else lx_zrecord.RaggedStore(path)
    return store.bind(loaderx.Allocator("cpu")), store


def bench_w2(d: str, n: int, seconds: float, rng, check: bool, gap_us: float = 0.0) -> dict:
    data = zipf_tokens(n, rng)
    zr, npy, lxp = (os.path.join(d, f"w2.{x}") for x in ("zr", "npy", "lx"))
    with zring.DenseWriter(zr, np.int32, (512,), codec="raw", overwrite=True) as w:
        w.append(data)
    np.save(npy, data)
    if loaderx is not None:
        remove(lxp)
        with lx_zrecord.DenseWriter(lxp, np.int32, (512,), codec="raw") as w:
            for i in range(0, n, APPEND):
                w.append(np.ascontiguousarray(data[i : i + APPEND]))
    for p in (zr, npy, lxp):
        if os.path.exists(p):
            warm(p)
    checked, unchecked = zring.DenseStore(zr), zring.DenseStore(zr, verify_checksums=False)
    mm = np.load(npy, mmap_mode="r")
    batches = index_batches(n, rng)
    out, out_u, out_np = (np.empty((BATCH, 512), np.int32) for _ in range(3))
    contenders = {
        "zring": lambda idx: checked.gather(idx, out=out),
        "zring-unchecked": lambda idx: unchecked.gather(idx, out=out_u),
        "numpy": lambda idx: np.take(mm, idx, axis=0, out=out_np),
    }
    if loaderx is not None:
        view, _lx_store = lx_view(lxp, dense=True)
        contenders["loaderx"] = lambda idx: view[idx]
    for name, fn in contenders.items():  # correctness first
        got = np.from_dlpack(fn(batches[0])) if name == "loaderx" else fn(batches[0])
        assert np.array_equal(np.asarray(got), data[batches[0].astype(np.int64)]), name
    if check:
        return {"records": n}
    times = interleaved(contenders, batches, seconds, gap_us=gap_us)
    return {"records": n, "gather": rates(times, "numpy")}


def bench_w3(d: str, n: int, seconds: float, rng, check: bool, gap_us: float = 0.0) -> dict:
    lens = w3_lengths(n, rng)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lens, out=offsets[1:])
    values = ((rng.zipf(1.1, int(offsets[-1])) - 1) % 50_000).astype(np.int32)
    shapes = lens.reshape(-1, 1)
    zr, lxp = os.path.join(d, "w3.zr"), os.path.join(d, "w3.lx")
    vals_npy, offs_npy = os.path.join(d, "w3.values.npy"), os.path.join(d, "w3.offsets.npy")
    with zring.RaggedWriter(zr, np.int32, 1, codec="raw", overwrite=True) as w:
        w.append(zring.RaggedBatch(values, offsets, shapes))
    np.save(vals_npy, values)
    np.save(offs_npy, offsets)
    if loaderx is not None:
        remove(lxp)
        with lx_zrecord.RaggedWriter(lxp, np.int32, 1, codec="raw") as w:
            for i in range(0, n, APPEND):
                j = min(n, i + APPEND)
                cu = (offsets[i : j + 1] - offsets[i]).astype(np.int32)
                w.append(lx_zrecord.RaggedBatch(values[offsets[i] : offsets[j]], cu, lens[i:j].astype(np.uint32).reshape(-1, 1)))
    for p in (zr, vals_npy, offs_npy, lxp):
        if os.path.exists(p):
            warm(p)
    checked, unchecked = zring.RaggedStore(zr), zring.RaggedStore(zr, verify_checksums=False)
    vm, om = np.load(vals_npy, mmap_mode="r"), np.load(offs_npy, mmap_mode="r")

    def numpy_gather(idx):
        return np.concatenate([vm[om[i] : om[i + 1]] for i in idx.tolist()])

    batches = index_batches(n, rng)
    contenders = {
        "zring": lambda idx: checked[idx],
        "zring-unchecked": lambda idx: unchecked[idx],
        "numpy": numpy_gather,
    }
    if loaderx is not None:
        view, _lx_store = lx_view(lxp, dense=False)
        contenders["loaderx"] = lambda idx: view[idx]
    want = numpy_gather(batches[0])
    for name, fn in contenders.items():
        got = fn(batches[0])
        got = got if name == "numpy" else np.asarray(np.from_dlpack(got.values) if name == "loaderx" else got.values)
        assert np.array_equal(got, want), name
    if check:
        return {"records": n}
    times = interleaved(contenders, batches, seconds, gap_us=gap_us)
    return {"records": n, "mean_bytes": float(lens.mean() * 4), "gather": rates(times, "numpy")}


def read_back(name: str, path: str, n: int) -> np.ndarray:
    """What a writer of bench_writes left at `path`, as one array."""
    if name == "zring":
        return zring.DenseStore(path)[np.arange(n)]
    if name == "numpy":
        return np.load(path)
    view, _store = lx_view(path, dense=True)
    return np.asarray(np.from_dlpack(view[np.arange(n, dtype=np.uint64)]))


def bench_writes(d: str, n: int, rounds: int, rng, check: bool) -> dict:
    data = zipf_tokens(n, rng)
    mib = data.nbytes / (1 << 20)

    def zring_write(p):
        with zring.DenseWriter(p, np.int32, (512,), codec="raw", overwrite=True) as w:
            for i in range(0, n, APPEND):
                w.append(data[i : i + APPEND])

    def numpy_write(p):
        np.save(p, data)
        fsync_tree(p)

    def loaderx_write(p, sync):
        with lx_zrecord.DenseWriter(p, np.int32, (512,), codec="raw") as w:
            for i in range(0, n, APPEND):
                w.append(np.ascontiguousarray(data[i : i + APPEND]))
        if sync:
            fsync_tree(p)

    writers = {"zring": zring_write, "numpy": numpy_write}
    if loaderx is not None:
        writers["loaderx"] = lambda p: loaderx_write(p, False)
        writers["loaderx+fsync"] = lambda p: loaderx_write(p, True)
    secs: dict = {k: [] for k in writers}
    for _ in range(1 if check else rounds):
        for name, fn in writers.items():
            # np.save adds ".npy" to a name without it (and fsync_tree would miss it).
            p = os.path.join(d, f"write-{name}" + (".npy" if name == "numpy" else ""))
            remove(p)
            fsync_tree(d)  # nothing of the previous writer left to flush
            t0 = time.perf_counter()
            fn(p)
            secs[name].append(time.perf_counter() - t0)
            if check:
                assert np.array_equal(read_back(name, p, n), data), name
            remove(p)
    out = {name: {"MiB_s": [mib / s for s in v], "median_MiB_s": mib / float(np.median(v))} for name, v in secs.items()}
    for name in out:
        out[name]["zring_x"] = out["zring"]["median_MiB_s"] / out[name]["median_MiB_s"]
    return {"records": n, "MiB": mib, "writes": out}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default="/tmp/zring-bench-small", help="where the stores and .npy files go")
    ap.add_argument("--seconds", type=float, default=3.0, help="timed seconds per gather contender")
    ap.add_argument("--w2-records", type=int, default=200_000)
    ap.add_argument("--w3-records", type=int, default=400_000)
    ap.add_argument("--write-rounds", type=int, default=4, help="rounds of W2 writes (0: none)")
    ap.add_argument("--gap-us", type=float, default=0.0, help="busy wait before every gather call (work between steps)")
    ap.add_argument("--check", action="store_true", help="tiny sizes: check every output, time nothing")
    ap.add_argument("--json", help="also write the results to this file")
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    rng = np.random.default_rng(0)
    if a.check:
        a.w2_records, a.w3_records = 2_000, 4_000
    res = {
        "loaderx": getattr(loaderx, "__version__", None),
        "gap_us": a.gap_us,
        "w2": bench_w2(a.dir, a.w2_records, a.seconds, rng, a.check, a.gap_us),
        "w3": bench_w3(a.dir, a.w3_records, a.seconds, rng, a.check, a.gap_us),
    }
    if a.write_rounds or a.check:
        res["w2_writes"] = bench_writes(a.dir, a.w2_records, a.write_rounds, rng, a.check)
    if a.check:
        print("bench_small: every output checked" + ("" if loaderx else " (loaderx not installed: left out)"))
        return
    for w in ("w2", "w3"):
        for name, r in res[w].get("gather", {}).items():
            print(f"{w} gather {name:16} {r['records_s'] / 1e6:6.2f} M rec/s  "
                  f"x numpy {r['x_numpy']:5.2f}  zring x it {r['zring_x']:5.2f}")
    for name, r in res.get("w2_writes", {}).get("writes", {}).items():
        print(f"w2 write  {name:16} {r['median_MiB_s']:7.1f} MiB/s  zring x it {r['zring_x']:5.2f}  "
              f"rounds {[round(x) for x in r['MiB_s']]}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Python gather, sampler and loader throughput against the Rust API and NumPy, in one run.

Workloads (docs/workloads.md): W1 = 2,000 x uint8[3,224,224] image-like records
(147 KiB), W2 = 200,000 x int32[512] Zipf token ids (2 KiB); raw stores; batch 256;
fresh IID indices per batch (drawn outside the timing); 5 warm-up batches; then each
gather call is timed until --seconds have accumulated, the contenders taking turns
in 16 rounds so that the machine's drift affects them alike. Warm page cache.
"x rust" is the ratio of mean throughputs (logical MiB/s); "p50 x" the ratio of
median batch latencies (rust / contender). Both move with the load of a shared
machine, so the same gathers are also run single-threaded and timed by the thread's
CPU clock, which preemption does not inflate ("thread CPU time" lines).

Contenders, same index batches, same run:
  rust        zring._zring._bench_gather: engine gathers in Rust into one reused buffer
  py-index    store[idx]: a new NumPy array over an engine-owned (pooled) buffer
  py-out      store.gather(idx, out=buf): into a caller array (page-aligned)
  npy-mmap    np.take(memmap, idx, axis=0, out=buf): the NumPy baseline (page-aligned buf)
Also: the binding's own cost per call, Sampler.next() at batch 256, and Loader
iteration against the Rust loader consumed in Rust (zring._zring._bench_loader),
alternating in 4 rounds.

    python python/bench/bench_gather.py            # full sizes (~1.4 GB of files)
    python python/bench/bench_gather.py --quick    # small sizes, a smoke test
    python python/bench/bench_gather.py --check    # tiny sizes, outputs checked, nothing timed (CI)

Every contender's output is checked against the source records before it is timed.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import timeit

import numpy as np

import zring
from zring import _zring

BATCH = 256


def image_like(n: int, rng: np.random.Generator) -> np.ndarray:
    """Smooth gradients plus noise, like natural images: (n, 3, 224, 224) uint8."""
    out = np.empty((n, 3, 224, 224), np.uint8)
    yy, xx = np.mgrid[0:224, 0:224].astype(np.float32) / 224
    for i in range(0, n, 64):
        k = min(64, n - i)
        a = rng.uniform(0, 255, (k, 3, 1, 1)).astype(np.float32)
        b = rng.uniform(-120, 120, (k, 3, 1, 1)).astype(np.float32)
        c = rng.uniform(-120, 120, (k, 3, 1, 1)).astype(np.float32)
        img = a + b * yy + c * xx + rng.normal(0, 8, (k, 3, 224, 224)).astype(np.float32)
        out[i : i + k] = np.clip(img, 0, 255).astype(np.uint8)
    return out


def zipf_tokens(n: int, rng: np.random.Generator) -> np.ndarray:
    """(n, 512) int32 ids over a 50k vocabulary, Zipf-distributed."""
    return ((rng.zipf(1.1, (n, 512)) - 1) % 50_000).astype(np.int32)


def build(dirpath: str, name: str, data: np.ndarray) -> tuple[str, str]:
    store = os.path.join(dirpath, f"{name}.zr")
    npy = os.path.join(dirpath, f"{name}.npy")
    with zring.DenseWriter(store, data.dtype, data.shape[1:], codec="raw", overwrite=True) as w:
        w.append(data)
    np.save(npy, data)
    return store, npy


def warm(path: str) -> None:
    with open(path, "rb") as f:
        while f.read(64 << 20):
            pass


def interleaved(contenders: dict, batches, seconds: float, rounds: int = 16, gap_us: float = 0.0) -> dict:
    """Per-call seconds of every contender, timed in alternating rounds (so that the
    machine's drift hits all of them alike) until each accumulated `seconds`.

    A contender is fn(idx) (timed here around each call) or, for the Rust baseline,
    a function of a list of index batches that returns its own per-call seconds.
    Calls follow each other with O(1) bookkeeping between them: a gap between calls
    lets the engine's helper threads park, and waking them is then timed too (a
    sum over the growing list of times, once every 8 calls, was such a gap). With
    `gap_us`, a busy wait that long precedes every Python call instead: work between
    gathers, as a training step."""
    times: dict = {k: [] for k in contenders}
    total = dict.fromkeys(contenders, 0.0)
    for fn in contenders.values():  # warm-up: 5 batches each, untimed
        _run(fn, batches[:5])
    k = 0
    for r in range(rounds):
        for name, fn in contenders.items():
            goal = seconds * (r + 1) / rounds
            while total[name] < goal:
                chunk = [batches[(k + j) % len(batches)] for j in range(8)]
                k += 8
                got = _run(fn, chunk, gap_us)
                times[name].extend(got)
                total[name] += sum(got)
    return {name: np.array(t) for name, t in times.items()}


def _run(fn, chunk, gap_us: float = 0.0) -> list:
    if getattr(fn, "rust", False):
        return fn(chunk)
    clock = getattr(fn, "clock", time.perf_counter)
    out = []
    for idx in chunk:
        if gap_us:
            until = time.perf_counter() + gap_us * 1e-6
            while time.perf_counter() < until:
                pass
        t0 = clock()
        fn(idx)
        out.append(clock() - t0)
    return out


def page_aligned_empty(shape, dtype) -> np.ndarray:
    """An uninitialised array whose data starts on a 4096-byte boundary. Where a
    destination starts relative to the source pages changes memcpy speed by up to
    ~15% here (np.empty gives 16 mod 4096), which is NumPy's allocator, not the
    binding; page-aligned `out` buffers take that out of the comparison."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape)) * dtype.itemsize
    raw = np.empty(n + 4096, np.uint8)
    start = (-raw.ctypes.data) % 4096
    return raw[start : start + n].view(dtype).reshape(shape)


def cpu_time_ratios(store_path: str, batches, seconds: float) -> dict:
    """Single-threaded gathers (threads=1: all work on the calling thread) timed by
    the thread's CPU clock on both sides, which preemption by other processes does
    not inflate: Rust CPU seconds / Python CPU seconds per batch."""
    store = zring.DenseStore(store_path, threads=1)
    out = page_aligned_empty((BATCH, *store.item_shape), store.dtype)

    def rust(chunk):
        return _zring._bench_gather(store, chunk, thread_cpu=True)

    def py_index(idx):
        store[idx]

    def py_out(idx):
        store.gather(idx, out=out)

    rust.rust = True
    py_index.clock = py_out.clock = time.thread_time
    t = interleaved({"rust": rust, "py-index": py_index, "py-out": py_out}, batches, seconds)
    base = t["rust"].mean()
    return {"rust_cpu_ms": base * 1e3} | {k: base / v.mean() for k, v in t.items() if k != "rust"}


def summary(times: np.ndarray, record_bytes: int) -> dict:
    per_batch = BATCH * record_bytes
    total = times.sum()
    return {
        "MiB_s": len(times) * per_batch / total / 2**20,
        "krec_s": len(times) * BATCH / total / 1e3,
        "p50_ms": float(np.percentile(times, 50) * 1e3),
        "p95_ms": float(np.percentile(times, 95) * 1e3),
        "batches": len(times),
    }


def check_workload(name, data, store, mm, batches) -> None:
    """Every contender's batch equals the source records `data[idx]`, and so does the
    Loader's step (the loader bench's output), before anything is timed."""
    out = page_aligned_empty((BATCH, *store.item_shape), store.dtype)
    out_np = page_aligned_empty((BATCH, *store.item_shape), store.dtype)
    for idx in batches[:3]:
        want = data[idx.astype(np.int64)]
        assert np.array_equal(store[idx], want), f"{name}: store[idx] != source"
        assert np.array_equal(store.gather(idx, out=out), want), f"{name}: gather(out=) != source"
        assert np.array_equal(out, want), f"{name}: the out= buffer != source"
        assert np.array_equal(np.take(mm, idx, axis=0, out=out_np), want), f"{name}: npy != source"
    sampler = zring.Sampler(len(data), BATCH, "iid", seed=3)
    ref = zring.Sampler(len(data), BATCH, "iid", seed=3)
    with zring.Loader({"x": [store]}, sampler, workers=2, prefetch=4) as loader:
        for _ in range(3):
            (shard,) = next(loader)
            assert np.array_equal(shard["x"], data[ref.next().astype(np.int64)]), f"{name}: Loader != source"


def bench_workload(name, data, dirpath, seconds, rng, check_only=False) -> dict:
    store_path, npy_path = build(dirpath, name, data)
    n, record_bytes = len(data), data[0].nbytes
    warm(store_path)
    warm(npy_path)
    store = zring.DenseStore(store_path)
    mm = np.load(npy_path, mmap_mode="r")
    sampler = zring.Sampler(n, BATCH, zring.Sampler.Mode.IID, seed=int(rng.integers(1 << 31)))
    batches = [sampler.next() for _ in range(64)]
    # Correctness before timing.
    check_workload(name, data, store, mm, batches)
    del data
    if check_only:
        return {"records": n, "store": store}
    out = page_aligned_empty((BATCH, *store.item_shape), store.dtype)
    out_np = page_aligned_empty((BATCH, *store.item_shape), store.dtype)

    def rust(chunk):
        return _zring._bench_gather(store, chunk)

    rust.rust = True
    times = interleaved(
        {
            "rust": rust,
            "py-index": lambda idx: store[idx],
            "py-out": lambda idx: store.gather(idx, out=out),
            "npy-mmap": lambda idx: np.take(mm, idx, axis=0, out=out_np),
        },
        batches,
        seconds,
    )
    results = {name: summary(t, record_bytes) for name, t in times.items()}
    cpu = cpu_time_ratios(store_path, batches, seconds)
    rust = results["rust"]
    for k in ("py-index", "py-out", "npy-mmap"):
        results[k]["x_rust"] = results[k]["MiB_s"] / rust["MiB_s"]
        results[k]["x_rust_p50"] = rust["p50_ms"] / results[k]["p50_ms"]
    return {"records": n, "record_bytes": record_bytes, "results": results, "cpu_x_rust": cpu, "store": store}


def bench_overhead(dirpath: str, seconds: float) -> dict:
    """The binding's own cost per gather: a batch of 256 int32 scalars (1 KiB, in
    cache) gathered by Rust and from Python; the difference of median latencies is
    what Python adds to any gather (argument parsing, GIL release and re-take,
    buffer, array object)."""
    path = os.path.join(dirpath, "tiny.zr")
    with zring.DenseWriter(path, "int32", (), codec="raw", overwrite=True) as w:
        w.append(np.arange(4096, dtype=np.int32))
    store = zring.DenseStore(path)
    sampler = zring.Sampler(len(store), BATCH, "iid", seed=9)
    batches = [sampler.next() for _ in range(64)]
    out = np.empty(BATCH, np.int32)

    def rust(chunk):
        return _zring._bench_gather(store, chunk)

    rust.rust = True
    t = interleaved(
        {"rust": rust, "py-index": lambda idx: store[idx], "py-out": lambda idx: store.gather(idx, out=out)},
        batches,
        min(seconds, 0.5),
    )
    base = float(np.median(t["rust"]))
    return {k: float(np.median(v) - base) * 1e6 for k, v in t.items() if k != "rust"} | {"rust_us": base * 1e6}


def bench_sampler() -> dict:
    out = {}
    for mode in ("iid", "cyclic"):
        s = zring.Sampler(1_000_000, BATCH, mode)
        n = 20_000
        best = min(timeit.repeat(s.next, number=n, repeat=7)) / n
        out[mode] = {"next_us": best * 1e6}
    return out


def bench_loader(store, seconds: float, rounds: int = 4) -> dict:
    """Loader steps/s from Python against the same Rust loader consumed in Rust, in
    alternating rounds (a fresh loader per round, 5 untimed warm-up steps each)."""
    sampler = zring.Sampler(len(store), BATCH, "iid", seed=3)
    steps = 10
    while _zring._bench_loader({"x": [store]}, sampler, steps, workers=2, prefetch=4) < seconds / (2 * rounds):
        if steps >= 20_000:
            break
        steps *= 2
    rust_s = py_s = 0.0
    for _ in range(rounds):
        rust_s += _zring._bench_loader({"x": [store]}, sampler, steps, workers=2, prefetch=4)
        with zring.Loader({"x": [store]}, sampler, workers=2, prefetch=4) as loader:
            for _ in range(5):
                next(loader)
            t0 = time.perf_counter()
            for _ in range(steps):
                next(loader)
            py_s += time.perf_counter() - t0
    total = steps * rounds
    return {
        "steps": total,
        "rust_steps_s": total / rust_s,
        "py_steps_s": total / py_s,
        "x_rust": rust_s / py_s,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default="/tmp/zring-bench-python", help="where the stores and .npy files go")
    ap.add_argument("--seconds", type=float, default=2.0, help="timed seconds per contender")
    ap.add_argument("--quick", action="store_true", help="small workloads, short timing (smoke test)")
    ap.add_argument("--json", help="also write the results to this file")
    ap.add_argument("--check", action="store_true", help="tiny workloads: check every output, time nothing")
    args = ap.parse_args()
    if args.check:
        n1, n2 = 300, 1_000
    elif args.quick:
        n1, n2, args.seconds = 300, 4_000, min(args.seconds, 0.3)
    else:
        n1, n2 = 2_000, 200_000
    os.makedirs(args.dir, exist_ok=True)
    rng = np.random.default_rng(42)
    if args.check:
        for name, data in (("w1", image_like(n1, rng)), ("w2", zipf_tokens(n2, rng))):
            bench_workload(name, data, args.dir, 0.0, rng, check_only=True)
        print("bench_gather: every output equals the source records")
        return
    report = {"numpy": np.__version__, "cpus": os.cpu_count(), "seconds": args.seconds}
    w1 = bench_workload("w1", image_like(n1, rng), args.dir, args.seconds, rng)
    w2 = bench_workload("w2", zipf_tokens(n2, rng), args.dir, args.seconds, rng)
    report["overhead_us"] = bench_overhead(args.dir, args.seconds)
    report["sampler"] = bench_sampler()
    report["loader_w1"] = bench_loader(w1.pop("store"), args.seconds)
    report["loader_w2"] = bench_loader(w2.pop("store"), args.seconds)
    report["w1"], report["w2"] = w1, w2

    for name, w in (("W1 raw 147 KiB", w1), ("W2 raw 2 KiB", w2)):
        print(f"\n{name}: {w['records']} records, batch {BATCH}, IID")
        print(f"  {'contender':10} {'MiB/s':>9} {'krec/s':>9} {'p50 ms':>8} {'p95 ms':>8} {'x rust':>7} {'p50 x':>6}")
        for k, r in w["results"].items():
            print(
                f"  {k:10} {r['MiB_s']:9.0f} {r['krec_s']:9.1f} {r['p50_ms']:8.3f} {r['p95_ms']:8.3f} "
                f"{r.get('x_rust', 1.0):7.2f} {r.get('x_rust_p50', 1.0):6.2f}"
            )
        c = w["cpu_x_rust"]
        print(
            f"  threads=1, thread CPU time per batch: rust {c['rust_cpu_ms']:.3f} ms; "
            f"store[idx] {c['py-index']:.3f}x rust, gather(out=) {c['py-out']:.3f}x rust"
        )
    o = report["overhead_us"]
    print(f"\nPython overhead per gather (median, vs Rust {o['rust_us']:.1f} us for 256 x 4 B): "
          f"store[idx] +{o['py-index']:.1f} us, gather(out=) +{o['py-out']:.1f} us")
    for name, w in (("W1", w1), ("W2", w2)):
        t = w["results"]["rust"]["p50_ms"] * 1e3
        print(f"  => {name} floor from overhead alone: {t / (t + max(o['py-index'], 0)):.3f}x rust (p50 {t:.0f} us)")
    for mode, r in report["sampler"].items():
        print(f"\nSampler.next() batch {BATCH} {mode}: {r['next_us']:.3f} us")
    for key in ("loader_w1", "loader_w2"):
        r = report[key]
        print(
            f"\nLoader {key[-2:].upper()} (1 stream, workers 2, prefetch 4): python {r['py_steps_s']:.0f} steps/s, "
            f"rust {r['rust_steps_s']:.0f} steps/s, {r['x_rust']:.2f}x rust"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()

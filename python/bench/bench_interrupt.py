"""What making long calls Ctrl-C-interruptible costs.

The same gather (128 MiB, 4 KiB records, all ids in random order, into one `out`
array) and the same append (32 MiB, zstd level 3) timed in turns from the main
thread, where signals are watched (the engine's stop signal for the gather, slices
for the append), and from another thread, where each runs as one engine call with
nothing watched. Prints the medians and main/other ratios (same run, same process).

    python python/bench/bench_interrupt.py [pread|mmap]
"""
import os
import sys
import tempfile
import threading
import time

import numpy as np

import zring

def in_thread(f):
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("t", f()))
    t.start(); t.join()
    return out["t"]

def timed(f):
    t0 = time.perf_counter(); f(); return time.perf_counter() - t0

with tempfile.TemporaryDirectory(dir="/dev/shm" if os.path.isdir("/dev/shm") else None) as d:
    n, width = 32768, 4096  # 128 MiB
    data = np.random.default_rng(0).integers(0, 255, size=(n, width), dtype=np.uint8)
    p = os.path.join(d, "g.zr")
    with zring.DenseWriter(p, "uint8", (width,), codec="raw") as w:
        w.append(data)
    s = zring.DenseStore(p, backend=sys.argv[1] if len(sys.argv) > 1 else "pread")
    ids = np.random.default_rng(1).permutation(n)
    out = np.empty((n, width), np.uint8)
    s.gather(ids, out=out)
    main, thread = [], []
    for _ in range(9):
        main.append(timed(lambda: s.gather(ids, out=out)))
        thread.append(in_thread(lambda: timed(lambda: s.gather(ids, out=out))))
    print(f"gather 128 MiB: main (signals watched) median {np.median(main)*1e3:.1f} ms, other thread (one call) median {np.median(thread)*1e3:.1f} ms, ratio {np.median(main)/np.median(thread):.3f}")
    rows = np.random.default_rng(2).integers(0, 16, size=(512, 64 << 10), dtype=np.uint8)  # 32 MiB
    main, thread = [], []
    def app():
        q = os.path.join(d, "a.zr")
        with zring.DenseWriter(q, "uint8", (64 << 10,), codec="zstd", level=3, overwrite=True) as w:
            w.append(rows)
    for _ in range(5):
        main.append(timed(app))
        thread.append(in_thread(lambda: timed(app)))
    print(f"append 32 MiB zstd-3: main (sliced) median {np.median(main)*1e3:.1f} ms, other thread (one call) median {np.median(thread)*1e3:.1f} ms, ratio {np.median(main)/np.median(thread):.3f}")

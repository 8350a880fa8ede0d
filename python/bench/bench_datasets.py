#!/usr/bin/env python3
"""Dataset conversion and gather throughput against MosaicML Streaming and Hugging Face.

Conversion (each contender in its own child process, so its peak RSS is its own):
  tokens  N x int32 token sequences, 16..512 long (uniform), ids < 50257, one
          Parquet file (row groups of 10,000)
  images  M x 150,528-byte (147 KiB) image-like records (smooth gradients plus
          noise, ~2.5x compressible), one Parquet binary column
  zring   zring.converters.from_parquet(..., codec="zstd", level=3, workers=2)
  zring-raw  the same with codec="raw" (no compression, as save_to_disk)
  mds     streaming.MDSWriter(columns ndarray:int32 / bytes, compression="zstd:3"),
          rows from pyarrow iter_batches
  hf      datasets.Dataset.from_parquet(...) then save_to_disk (its own cache dir)
Records/s is input records over the child's wall time; CPU seconds (user + system)
are the child's (os.wait4), peak RSS its VmHWM. Two sizes per input show whether RSS grows with the input.

Gather: a 3-field dataset (tokens ragged int32 16..512, label int64, image uint8
[3,32,32]) of R records in 16 shards against the same fields in three single stores
(zstd-3 both), batch 256, fresh random indices, the two alternating batch by batch
on the same indices; records/s from the median batch time. The dataset reads its
fields in one ds.gather, the stores in three gathers. Timed twice: wall clock with
every thread, and the thread's CPU clock with one thread (which the preemption of
a shared machine does not inflate).

    python python/bench/bench_datasets.py --quick             # smoke test
    python python/bench/bench_datasets.py --check             # tiny, outputs checked, nothing timed (CI)

Checked, whatever the mode: each zring conversion's dataset holds exactly the Parquet
input's records (right after its child, the output is removed after), and the
gathers of the dataset and of the single stores equal the generated fields before
they are timed.
    python python/bench/bench_datasets.py --tokens 100000 200000 --images 10000 20000 \
        --mds-python .venv-mds/bin/python
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

CHILD = {
    "zring": """
import sys, zring.converters as zd
zd.from_parquet(sys.argv[1], sys.argv[2], codec="zstd", level=3, workers=2, progress=False)
""",
    "zring-raw": """
import sys, zring.converters as zd
zd.from_parquet(sys.argv[1], sys.argv[2], codec="raw", workers=2, progress=False)
""",
    "mds": """
import sys, numpy as np, pyarrow.parquet as pq
from streaming import MDSWriter
kind = sys.argv[3]
cols = {"tokens": "ndarray:int32"} if kind == "tokens" else {"image": "bytes"}
with MDSWriter(out=sys.argv[2], columns=cols, compression="zstd:3", progress_bar=False) as w:
    for rb in pq.ParquetFile(sys.argv[1]).iter_batches(batch_size=1024):
        col = rb.column(0)
        if kind == "tokens":
            offs = np.asarray(col.offsets); vals = col.values.to_numpy()
            for i in range(len(col)):
                w.write({"tokens": vals[offs[i]:offs[i + 1]]})
        else:
            for v in col:
                w.write({"image": v.as_py()})
""",
    "hf": """
import sys, datasets
datasets.disable_progress_bars()
d = datasets.Dataset.from_parquet(sys.argv[1], cache_dir=sys.argv[2] + "-cache")
d.save_to_disk(sys.argv[2])
""",
}


def make_tokens(path, n, seed=0):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    lens = rng.integers(16, 513, n)
    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    values = rng.integers(0, 50257, int(offsets[-1]), dtype=np.int32)
    arr = pa.ListArray.from_arrays(pa.array(offsets), pa.array(values))
    pq.write_table(pa.table({"tokens": arr}), path, row_group_size=10000)


def make_images(path, n, seed=0):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    base = np.add.outer(np.arange(224), np.arange(224)).astype(np.uint8)
    writer = None
    for start in range(0, n, 500):
        k = min(500, n - start)
        recs = []
        for i in range(k):
            img = np.stack([base + (start + i) % 256, base.T, base // 2]) + rng.integers(0, 8, (3, 224, 224), dtype=np.uint8)
            recs.append(img.tobytes())
        t = pa.table({"image": pa.array(recs, type=pa.binary())})
        writer = writer or pq.ParquetWriter(path, t.schema)
        writer.write_table(t, row_group_size=500)
    writer.close()


PYTHON = {}
CONTENDERS = list(CHILD)

# Each child reports its own peak RSS (VmHWM, the high-water mark of its address
# space): wait4's ru_maxrss survives exec on Linux, so it would report this parent's
# peak (it made the inputs) for any child that stayed below it.
HWM = """
with open("/proc/self/status") as _f, open(sys.argv[4], "w") as _o:
    _o.write(next(l.split()[1] for l in _f if l.startswith("VmHWM:")))
"""


def run_child(name, src, dst, kind):
    hwm = dst + ".hwm"
    start = time.perf_counter()
    proc = subprocess.Popen([PYTHON.get(name, sys.executable), "-c", CHILD[name] + HWM, src, dst, kind, hwm])
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    if status != 0:
        raise RuntimeError(f"{name} failed with status {status}")
    with open(hwm) as f:
        peak_mib = int(f.read()) / 1024
    os.remove(hwm)
    return elapsed, peak_mib, usage.ru_utime + usage.ru_stime


def check_conversion(kind, src, dst):
    """The dataset a zring contender wrote at `dst` holds the records of `src`."""
    import pyarrow.parquet as pq
    import zring

    col = pq.read_table(src).column(0).combine_chunks()
    ds = zring.open_dataset(dst)
    assert len(ds) == len(col), f"{dst}: {len(ds)} records, the input has {len(col)}"
    if kind == "tokens":
        got = ds.gather(np.arange(len(ds)))[kind]
        assert np.array_equal(got.cu_seqlens, np.asarray(col.offsets)), f"{dst}: token lengths differ"
        assert np.array_equal(got.values, col.values.to_numpy()), f"{dst}: token values differ"
    else:
        # The images input's one column is "image" (bytes, stored as ragged uint8).
        for i in range(len(ds)):
            got = np.asarray(ds[i]["image"]).tobytes()
            assert got == col[i].as_py(), f"{dst}: image {i} differs"


def bench_convert(kind, sizes, work, rounds):
    maker = make_tokens if kind == "tokens" else make_images
    rows = []
    for n in sizes:
        src = os.path.join(work, f"{kind}-{n}.parquet")
        maker(src, n)
        results = {c: [] for c in CONTENDERS}
        for r in range(rounds):
            # The contenders take turns so the machine's drift affects them alike.
            for c in CONTENDERS:
                dst = os.path.join(work, f"out-{c}")
                for d in (dst, dst + "-cache"):
                    shutil.rmtree(d, ignore_errors=True)
                results[c].append(run_child(c, src, dst, kind))
                if c.startswith("zring"):
                    check_conversion(kind, src, dst)
                for d in (dst, dst + "-cache"):
                    shutil.rmtree(d, ignore_errors=True)
        os.remove(src)
        best = {c: min(v) for c, v in results.items()}
        row = {"input": kind, "records": n}
        for c, (secs, _, cpu) in best.items():
            row[c] = {
                "records_per_s": n / secs,
                "seconds": round(secs, 2),
                "cpu_seconds": round(cpu, 2),
                "peak_rss_mib": round(max(x[1] for x in results[c])),
            }
        for a, b in (("zring", "mds"), ("zring", "hf"), ("zring-raw", "hf")):
            if a in row and b in row:
                row[f"{a}_x_{b}"] = row[a]["records_per_s"] / row[b]["records_per_s"]
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def bench_gather(records, work, seconds, rounds, check_only=False):
    import zring

    rng = np.random.default_rng(1)
    lens = rng.integers(16, 513, records)
    tokens = [np.arange(k, dtype=np.int32) for k in lens]
    label = np.arange(records, dtype=np.int64)
    image = rng.integers(0, 4, (records, 3, 32, 32), dtype=np.uint8)
    path = os.path.join(work, "gather-ds")
    ds = zring.write_dataset(
        path,
        {"tokens": np.array(tokens, dtype=object), "label": label, "image": image},
        {"tokens": zring.ragged("int32"), "label": zring.dense("int64"), "image": zring.dense("uint8", (3, 32, 32))},
        shard_records=-(-records // 16),
        progress=False,
    )
    assert ds.shards == 16
    stores = {}
    with zring.RaggedWriter(os.path.join(work, "t.zr"), "int32", 1, overwrite=True) as w:
        w.append(tokens)
    with zring.DenseWriter(os.path.join(work, "l.zr"), "int64", (), overwrite=True) as w:
        w.append(label)
    with zring.DenseWriter(os.path.join(work, "i.zr"), "uint8", (3, 32, 32), overwrite=True) as w:
        w.append(image)

    # Both contenders' output against the generated fields, before any timing.
    check_ds = zring.open_dataset(path)
    check_stores = [zring.open(os.path.join(work, f)) for f in ("t.zr", "l.zr", "i.zr")]
    for _ in range(3):
        idx = rng.integers(0, records, 256)
        got = check_ds.gather(idx)
        single = [st[idx] for st in check_stores]
        for toks in (got["tokens"], single[0]):
            assert np.array_equal(toks.values, np.concatenate([tokens[i] for i in idx])), "tokens differ"
            assert np.array_equal(np.diff(toks.cu_seqlens), lens[idx]), "token lengths differ"
        for name, want, store_got in (("label", label, single[1]), ("image", image, single[2])):
            assert np.array_equal(got[name], want[idx]), f"dataset {name} differs"
            assert np.array_equal(store_got, want[idx]), f"store {name} differs"
    del check_ds, check_stores
    if check_only:
        return []

    def measure(dataset, single, clock, seconds):
        """Per-batch times of both contenders on the same indices, alternating batch
        by batch (which goes first alternates too), so drift hits both alike."""
        times = {"dataset": [], "stores": []}
        spent = 0.0
        k = 0
        while spent < seconds:
            idx = rng.integers(0, records, 256)
            order = [("dataset", lambda: dataset.gather(idx)), ("stores", lambda: [st[idx] for st in single])]
            for name, fn in order if k % 2 == 0 else order[::-1]:
                t = clock()
                fn()
                dt = clock() - t
                times[name].append(dt)
                spent += dt
            k += 1
        med = {n: 256 / float(np.median(v)) for n, v in times.items()}
        return med, len(times["dataset"])

    rows = []
    modes = (
        ("wall, all threads", 0, time.perf_counter),
        ("process CPU, all threads", 0, time.process_time),
        ("thread CPU, 1 thread", 1, time.thread_time),
    )
    for label, threads, clock in modes:
        dataset = zring.open_dataset(path, threads=threads)
        single = [zring.open(os.path.join(work, f), threads=threads) for f in ("t.zr", "l.zr", "i.zr")]
        for _ in range(20):  # warm-up
            idx = rng.integers(0, records, 256)
            dataset.gather(idx)
            [st[idx] for st in single]
        med, batches = measure(dataset, single, clock, seconds)
        row = {"gather_records": records, "shards": 16, "batch": 256, "timing": label, "batches": batches,
               "dataset_records_per_s": med["dataset"], "stores_records_per_s": med["stores"],
               "dataset_x_stores": med["dataset"] / med["stores"]}
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokens", type=int, nargs="*", default=[100000, 200000])
    p.add_argument("--images", type=int, nargs="*", default=[10000, 20000])
    p.add_argument("--gather-records", type=int, default=100000)
    p.add_argument("--rounds", type=int, default=1, help="conversion rounds (best kept)")
    p.add_argument("--seconds", type=float, default=8.0, help="gather time per contender")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--skip-convert", action="store_true")
    p.add_argument("--workdir", default=None)
    p.add_argument(
        "--mds-python",
        default=os.environ.get("ZRING_BENCH_MDS_PYTHON", sys.executable),
        help="the Python with mosaicml-streaming (it pins huggingface_hub < 1, which "
        "current datasets refuses, so it usually lives in its own virtualenv)",
    )
    p.add_argument("--contenders", nargs="*", default=list(CHILD), choices=list(CHILD))
    p.add_argument("--check", action="store_true",
                   help="tiny inputs, zring's conversions and the gathers checked, nothing timed")
    a = p.parse_args()
    PYTHON["mds"] = a.mds_python
    CONTENDERS[:] = a.contenders
    if a.quick:
        a.tokens, a.images, a.gather_records, a.seconds = [5000], [300], 5000, 1.0
    if a.check:
        # Only zring's contenders: their output is what is checked (the others need
        # packages the test environment need not have).
        a.tokens, a.images, a.gather_records, a.seconds = [2000], [40], 2000, 0.0
        CONTENDERS[:] = [c for c in CONTENDERS if c.startswith("zring")]
    work = tempfile.mkdtemp(prefix="zring-bench-ds-", dir=a.workdir)
    try:
        if not a.skip_convert:
            if a.tokens:
                bench_convert("tokens", a.tokens, work, a.rounds)
            if a.images:
                bench_convert("images", a.images, work, a.rounds)
        if a.gather_records:
            bench_gather(a.gather_records, work, a.seconds, 4, check_only=a.check)
        if a.check:
            print("bench_datasets: zring's conversions and every gather equal their source")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

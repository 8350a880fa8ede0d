#!/usr/bin/env python3
"""Conversion straight to object storage (workload W11's upload leg): Parquet into a
zring dataset at an s3:// URL, against the link's upload speed and MosaicML's
MDSWriter uploading to the same server, in one run.

Setup as bench_remote.py (whose server and link this reuses): an S3-compatible server
on 127.0.0.1 (s3s-fs when found, else moto), behind netem_proxy.py's emulated link
(default 10 ms round trip, 1 Gbit/s each way).

Inputs (bench_datasets.py's generators): `tokens`, N int32 sequences 16..512 long in
one Parquet file; `images`, M image-like 147 KiB records in a Parquet binary column.

Contenders, each in its own child process, one after the other, per input:
  link-up  boto3 `upload_file` of a file as large as zring's output, 8 MiB parts, 16
           in flight, through the link: the upload speed a plain client gets
  zring    zring.converters.from_parquet(src, "s3://.../zring-KIND", codec="zstd",
           level=3, workers=2) through the link: stores streamed to multipart
           uploads, the manifest published with a conditional put
  mds      streaming.MDSWriter(out=(local dir, "s3://.../mds-KIND"),
           compression="zstd:3"), rows from pyarrow batches, through the link (it
           writes each shard locally, then uploads it)
Each time is the child's own, from after its imports to the end of its upload (the
child's whole life is in the JSON too). "uploaded MiB/s" is the bytes under the
contender's prefix afterwards over that time.

    python python/bench/bench_upload.py --server-bin <s3s-fs> --json w11-up.json
    python python/bench/bench_upload.py --check      # tiny, moto: outputs checked

Needs python/bench/requirements-remote.txt (mosaicml-streaming for the mds rows:
without it they are left out) and pyarrow.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_datasets import CHILD as LOCAL_CHILD, make_images, make_tokens  # noqa: E402
from bench_remote import BUCKET, Proxy, Server, env_for, find_s3s  # noqa: E402

# Each child prints the seconds from after its imports to the end of its upload (the
# imports are not the work: MosaicML Streaming's pull in torch and transformers).
CHILD = {
    "link-up": """
import sys, time, boto3
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
t0 = time.perf_counter()
s3 = boto3.client("s3", config=Config(max_pool_connections=32))
tc = TransferConfig(multipart_threshold=8 << 20, multipart_chunksize=8 << 20, max_concurrency=16)
s3.upload_file(sys.argv[1], sys.argv[2], sys.argv[3], Config=tc)
print(time.perf_counter() - t0)
""",
    "zring": """
import sys, time, zring.converters as zd
import pyarrow.parquet  # imported inside from_parquet: imported here, as the others' are
t0 = time.perf_counter()
zd.from_parquet(sys.argv[1], f"s3://{sys.argv[2]}/{sys.argv[3]}", codec="zstd", level=3,
                workers=2, progress=False)
print(time.perf_counter() - t0)
""",
}


# bench_datasets' MDSWriter child with a (local, remote) destination: argv is
# (parquet, s3 URL, kind, local staging directory).
CHILD["mds"] = (
    LOCAL_CHILD["mds"]
    .replace("from streaming import MDSWriter\n", "from streaming import MDSWriter\nimport time\nt0 = time.perf_counter()\n")
    .replace("out=sys.argv[2]", "out=(sys.argv[4], sys.argv[2])")
    + "print(time.perf_counter() - t0)\n"
)
assert "t0 = time" in CHILD["mds"] and "sys.argv[4]" in CHILD["mds"]


def have(module: str) -> bool:
    return subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True).returncode == 0


def prefix_bytes(s3, prefix: str) -> int:
    total = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix + "/"):
        total += sum(o["Size"] for o in page.get("Contents", []))
    return total


def run(kind: str, args: list[str], env: dict, timeout: float) -> tuple[float, float]:
    """(seconds of the work, seconds of the whole child, imports included)."""
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", CHILD[kind], *args], env=env, capture_output=True,
                       text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"{kind} failed: {p.stderr[-3000:]}")
    return float(p.stdout.split()[-1]), time.perf_counter() - t0


def check_outputs(s3, endpoint: str, prefix: str, n: int, kind: str, src: str) -> None:
    """zring's dataset opens from the URL with exactly the Parquet input's records."""
    code = f"""
import sys, numpy as np, pyarrow.parquet as pq, zring
ds = zring.open_dataset("s3://{BUCKET}/{prefix}")
assert len(ds) == {n}, len(ds)
col = pq.read_table({src!r}).column(0).combine_chunks()
idx = np.array([0, {n} // 2, {n} - 1], np.uint64)
got = ds.gather(idx)
field = ds.fields[0]
for k, i in enumerate(idx.tolist()):
    want = col[i].as_py()
    have = got[field][k]
    have = have.tolist() if "{kind}" == "tokens" else bytes(np.asarray(have).tobytes())
    assert have == want, (i, "{kind}")
print("ok")
"""
    p = subprocess.run([sys.executable, "-c", code], env=env_for(endpoint), capture_output=True, text=True)
    if p.returncode != 0 or "ok" not in p.stdout:
        raise RuntimeError(f"the dataset at {prefix} does not hold the input: {p.stderr[-3000:]}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=200_000, help="token sequences (W11: 200,000)")
    ap.add_argument("--images", type=int, default=2_000, help="147 KiB images")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--rtt-ms", type=float, default=10.0)
    ap.add_argument("--rate-mbit", type=float, default=1000.0)
    ap.add_argument("--server", choices=["auto", "s3s-fs", "moto"], default="auto")
    ap.add_argument("--server-bin", help="the s3s-fs binary (else $S3S_FS or PATH)")
    ap.add_argument("--dir", help="work directory (default: a new temporary one)")
    ap.add_argument("--contenders", default="zring,link-up,mds", help="zring first: link-up uploads as many bytes as it did")
    ap.add_argument("--check", action="store_true", help="tiny inputs, moto, outputs checked, nothing timed")
    ap.add_argument("--json", help="also write the results to this file")
    a = ap.parse_args()
    if a.check:
        a.tokens, a.images, a.rounds, a.server, a.contenders = 2_000, 40, 1, "moto", "zring"
    d = a.dir or tempfile.mkdtemp(prefix="zring-bench-upload-")
    os.makedirs(d, exist_ok=True)
    s3s = find_s3s(a.server_bin)
    kind = a.server if a.server != "auto" else ("s3s-fs" if s3s else "moto")
    contenders = [c for c in a.contenders.split(",") if c != "mds" or have("streaming")]
    inputs = {"tokens": (os.path.join(d, "tokens.parquet"), a.tokens, make_tokens),
              "images": (os.path.join(d, "images.parquet"), a.images, make_images)}
    for path, n, make in inputs.values():
        make(path, n)
    server = Server(kind, d, s3s)
    proxy = Proxy(server.port, a.rtt_ms, a.rate_mbit, os.path.join(d, "proxy.log"))
    results: dict = {"server": kind, "link_mib_s": a.rate_mbit * 1e6 / 8 / (1 << 20), "inputs": {}}
    try:
        s3 = server.client()
        s3.create_bucket(Bucket=BUCKET)
        env = env_for(proxy.endpoint)
        for name, (src, n, _) in inputs.items():
            rows: dict = {c: [] for c in contenders}
            for r in range(a.rounds):
                for c in contenders:
                    prefix = f"{c}-{name}-{r}"
                    if c == "link-up":
                        size = max(rows["zring"][-1]["bytes"] if rows.get("zring") else 0, 64 << 20)
                        blob = os.path.join(d, "blob")
                        with open(blob, "wb") as f:
                            f.write(np.random.default_rng(r).bytes(size))
                        secs, whole = run(c, [blob, BUCKET, prefix + "/blob"], env, 600)
                    elif c == "mds":
                        local = tempfile.mkdtemp(dir=d)
                        secs, whole = run(c, [src, f"s3://{BUCKET}/{prefix}", name, local], env, 1800)
                    else:
                        secs, whole = run(c, [src, BUCKET, prefix, name], env, 1800)
                    up = prefix_bytes(s3, prefix)
                    if c == "zring" and (a.check or r == 0):
                        check_outputs(s3, proxy.endpoint, prefix, n, name, src)
                    rows[c].append({"seconds": secs, "child_seconds": whole, "bytes": up, "records_s": n / secs,
                                    "uploaded_mib_s": up / secs / (1 << 20)})
            results["inputs"][name] = {"records": n, "parquet_bytes": os.path.getsize(src), "rounds": rows}
    finally:
        proxy.stop()
        server.stop()
    if a.check:
        print("bench_upload: zring's datasets at the URL hold every input record")
        return 0
    link = results["link_mib_s"]
    for name, r in results["inputs"].items():
        med = {c: float(np.median([x["uploaded_mib_s"] for x in v])) for c, v in r["rounds"].items()}
        secs = {c: float(np.median([x["seconds"] for x in v])) for c, v in r["rounds"].items()}
        for c in med:
            line = f"{name:6} {c:8} {secs[c]:6.2f} s  uploaded {med[c]:6.1f} MiB/s = {med[c] / link:.2f} x link"
            if "link-up" in med and c != "link-up":
                line += f"  {med[c] / med['link-up']:.2f} x link-up"
            if c == "zring" and "mds" in secs:
                line += f"  {secs['mds'] / secs['zring']:.2f} x mds"
            print(line)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

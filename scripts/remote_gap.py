"""Measures the coalescing gap threshold of remote reads (docs/remote.md#tuning).

Starts moto's S3 server on 127.0.0.1 (optionally behind a proxy that adds a fixed
latency to every request, as a real object store's round trip would), uploads a raw
store of 64 KiB records, and times gathers of two records separated by a gap of G
bytes, read either with two GETs (``max_gap=0``) or with one GET that also fetches the
G bytes between them (``max_gap`` large). The crossover G is where one more
request costs as much as transferring G more bytes. Prints one line per gap.

    python scripts/remote_gap.py [--latency-ms 0] [--rounds 30]

Needs ``moto[server]`` and ``boto3`` (python/requirements-test.txt) and the zring
wheel.
"""

from __future__ import annotations

import argparse
import http.client
import os
import statistics
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import boto3
import numpy as np
from moto.server import ThreadedMotoServer

import zring

RECORD = 64 << 10


def latency_proxy(upstream: tuple[str, int], delay: float) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            time.sleep(delay)
            conn = http.client.HTTPConnection(*upstream, timeout=60)
            headers = {k: v for k, v in self.headers.items() if k.lower() != "connection"}
            conn.request("GET", self.path, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            self.send_response(resp.status)
            for k, v in resp.getheaders():
                if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            conn.close()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency-ms", type=float, default=0.0)
    ap.add_argument("--rounds", type=int, default=30)
    args = ap.parse_args()

    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto.start()
    host, port = moto.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    if args.latency_ms > 0:
        proxy = latency_proxy((host, port), args.latency_ms / 1000)
        endpoint = f"http://127.0.0.1:{proxy.server_address[1]}"
    os.environ.update(
        AWS_ENDPOINT_URL=endpoint,
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_REGION="us-east-1",
        AWS_ALLOW_HTTP="true",
    )
    s3 = boto3.client("s3", endpoint_url=f"http://{host}:{port}", region_name="us-east-1")
    s3.create_bucket(Bucket="gap")
    n = 512  # 32 MiB of records
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "gap.zr"
        rng = np.random.default_rng(0)
        with zring.DenseWriter(path, np.uint8, (RECORD,), codec="raw") as w:
            w.append(rng.integers(0, 255, (n, RECORD), dtype=np.uint8))
        s3.put_object(Bucket="gap", Key="gap.zr", Body=path.read_bytes())
    url = "s3://gap/gap.zr"
    split = zring.DenseStore(url, remote={"max_gap": 0})
    merged = zring.DenseStore(url, remote={"max_gap": 1 << 40, "max_request": 1 << 40})
    print(f"latency {args.latency_ms} ms added per request; record {RECORD >> 10} KiB")
    print("gap_KiB  two_GETs_ms  one_GET_ms  ratio(one/two)")
    for gap_records in [0, 1, 2, 4, 8, 16, 32, 64]:
        two, one = [], []
        for r in range(args.rounds):
            a = (r * 7) % (n - gap_records - 2)
            idx = [a, a + gap_records + 1]
            for store, out in ((split, two), (merged, one)):
                t = time.perf_counter()
                store[idx]
                out.append(time.perf_counter() - t)
        t2, t1 = statistics.median(two) * 1e3, statistics.median(one) * 1e3
        print(f"{gap_records * RECORD >> 10:7d}  {t2:11.2f}  {t1:10.2f}  {t1 / t2:.2f}")
    moto.stop()


if __name__ == "__main__":
    main()

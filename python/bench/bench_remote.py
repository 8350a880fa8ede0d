#!/usr/bin/env python3
"""Remote reads (workload W10): zring's loader over s3:// URLs on an S3-compatible
server on 127.0.0.1 behind an emulated link (default 10 ms round trip, 1 Gbit/s),
against the link's limit, the raw ranged-GET ceiling, MosaicML Streaming on the same
server and the same store read as a local file, in one run.

Setup (everything on this machine, nothing downloaded):
  server   s3s-fs (Rust, serves files from a directory; `cargo install s3s-fs@0.14.1
           --features binary`) when found (--server-bin, $S3S_FS or PATH), else moto's
           server mode. moto answers a ranged GET by copying the whole object, twice,
           so its ceiling on ranged reads of big objects is far below any link: the
           run measures and prints it (`raw-direct`), and with moto the figures are
           the server's, not zring's.
  link     netem_proxy.py (next to this file): a TCP proxy adding half the round trip
           in each direction and a rate limit shared by all connections. The kernel
           here has no sch_netem (`tc qdisc add ... netem` is refused), hence a proxy.
  data     W1: image-like uint8[3,224,224] records (147 KiB), W3: int32 token
           sequences 16..512 long (median ~130), raw codec, generated from one seed;
           written as zring stores and as MDS shards (MosaicML's MDSWriter, no
           compression, same records), uploaded to the same bucket.

Contenders, each in its own process, one workload after the other, batch 256:
  raw-direct     boto3, 8 MiB ranged GETs of the store object, 16 in flight, straight
                 to the server: the server's own ceiling (no emulated link)
  raw-link       the same through the link: what a plain client gets from the link
  raw-records    boto3, record-sized GETs (store bytes / records) at random offsets,
                 64 in flight, through the link: the request-rate ceiling of this
                 client + proxy + server (what uncoalesced record reads can reach)
  zring-remote   zring.Loader over the s3:// store, no cache, cyclic sampler (a fresh
                 permutation each epoch): `first epoch` from open, then steady MiB/s
  zring-cache    the same with an empty cache directory (default options: a store of
                 at most half the cache's bound is cached whole, i.e. downloaded at
                 open and read as a local file): `first epoch` includes that
                 download, then steady MiB/s with the cache warm
  zring-chunks   the same with `cache_whole: "never"`: the cache keeps 4 MiB chunks
                 fetched as records need them
  zring-local    zring.Loader over the same store as a local file (page cache warm)
  streaming      StreamingDataset(remote=s3://..., local=<empty dir>, shuffle=True,
                 batch_size=256) iterated for one epoch, samples collated into the
                 batch zring returns (np.stack for W1; values + offsets for W3)

MiB/s are logical: payload bytes delivered per second (W3: token bytes only).
Ratios: zring-remote steady / link limit (target >= 0.8), zring-remote and
zring-cache first epoch / streaming epoch (target >= 2), zring-cache steady /
zring-local (target >= 0.9); also zring-cache first epoch / link limit.

    python python/bench/bench_remote.py                 # defaults, a few minutes
    python python/bench/bench_remote.py --json out.json
    python python/bench/bench_remote.py --check         # tiny: remote == local, no timing

Needs python/bench/requirements-remote.txt and the zring wheel built with remote reads.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
BATCH = 256
BUCKET = "zring-bench"
ACCESS_KEY = "zringbench"
SECRET_KEY = "zringbench-secret"
REGION = "us-east-1"


# ---------------------------------------------------------------------------- data


def image_like(n: int, rng: np.random.Generator) -> np.ndarray:
    """The W1 records of bench_gather.py: (n, 3, 224, 224) uint8."""
    sys.path.insert(0, HERE)
    from bench_gather import image_like as gen

    return gen(n, rng)


def token_lengths(n: int, rng: np.random.Generator) -> np.ndarray:
    """16..512, median ~130 (log-normal, clipped), as bench_torch.py."""
    return np.clip(rng.lognormal(np.log(130), 0.6, n), 16, 512).astype(np.int64)


def make_data(d: str, n1: int, n3: int, mds: bool) -> dict:
    """Writes the stores (and MDS shards) under `d`, or reuses those a previous run
    with the same sizes left there (--dir)."""
    stamp = os.path.join(d, "data.json")
    if os.path.exists(stamp):
        with open(stamp) as f:
            info = json.load(f)
        if info["w1"]["records"] == n1 and info["w3"]["records"] == n3 and (not mds or "mds_write_s" in info):
            return info
    info = _make_data(d, n1, n3, mds)
    with open(stamp, "w") as f:
        json.dump(info, f)
    return info


def _make_data(d: str, n1: int, n3: int, mds: bool) -> dict:
    import zring

    rng = np.random.default_rng(0)
    info = {}
    images = image_like(n1, rng)
    w1 = os.path.join(d, "w1.zr")
    with zring.DenseWriter(w1, "uint8", (3, 224, 224), codec="raw", overwrite=True) as w:
        w.append(images)
    info["w1"] = {"records": n1, "logical_bytes": int(images.nbytes), "store_bytes": os.path.getsize(w1)}
    lengths = token_lengths(n3, rng)
    offsets = np.zeros(n3 + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    values = rng.integers(0, 50_000, int(offsets[-1]), dtype=np.int32)
    w3 = os.path.join(d, "w3.zr")
    with zring.RaggedWriter(w3, "int32", 1, codec="raw", overwrite=True) as w:
        w.append(zring.RaggedBatch(values, offsets, lengths.reshape(-1, 1)))
    info["w3"] = {"records": n3, "logical_bytes": int(values.nbytes), "store_bytes": os.path.getsize(w3)}
    if mds:
        from streaming import MDSWriter

        for name in ("mds-w1", "mds-w3"):
            shutil.rmtree(os.path.join(d, name), ignore_errors=True)
        t = time.perf_counter()
        with MDSWriter(out=os.path.join(d, "mds-w1"), columns={"x": "ndarray:uint8:3,224,224"}) as w:
            for img in images:
                w.write({"x": img})
        with MDSWriter(out=os.path.join(d, "mds-w3"), columns={"x": "ndarray:int32"}) as w:
            for i in range(n3):
                w.write({"x": values[offsets[i] : offsets[i + 1]]})
        info["mds_write_s"] = time.perf_counter() - t
    return info


# --------------------------------------------------------------- server and link


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def find_s3s(explicit: str | None) -> str | None:
    for cand in (explicit, os.environ.get("S3S_FS"), shutil.which("s3s-fs")):
        if cand and os.access(cand, os.X_OK):
            return cand
    return None


class Server:
    """An S3-compatible server on 127.0.0.1 in a child process."""

    def __init__(self, kind: str, root: str, s3s_bin: str | None) -> None:
        self.kind = kind
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        log = open(os.path.join(root, f"{kind}.log"), "wb")
        if kind == "s3s-fs":
            data = os.path.join(root, "s3s-data")
            shutil.rmtree(data, ignore_errors=True)  # a fresh bucket every run
            os.makedirs(data)
            cmd = [s3s_bin, "--host", "127.0.0.1", "--port", str(self.port),
                   "--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY, data]
        else:
            cmd = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)]
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 120
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{kind} did not start; see {log.name}")
                time.sleep(0.2)

    def client(self, endpoint: str | None = None):
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3", endpoint_url=endpoint or self.endpoint, aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY, region_name=REGION,
            config=Config(max_pool_connections=64, retries={"max_attempts": 2}))

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class Proxy:
    """netem_proxy.py in a child process, in front of `upstream`."""

    def __init__(self, upstream: int, rtt_ms: float, rate_mbit: float, log: str) -> None:
        cmd = [sys.executable, os.path.join(HERE, "netem_proxy.py"), "--upstream", str(upstream),
               "--rtt-ms", str(rtt_ms), "--rate-mbit", str(rate_mbit)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=open(log, "wb"), text=True,
                                     start_new_session=True)
        line = self.proc.stdout.readline().split()
        if len(line) != 2 or line[0] != "ready":
            raise RuntimeError(f"netem_proxy did not start: {line}")
        self.port = int(line[1])
        self.endpoint = f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process (all its threads)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_busy() -> float:
    """CPU seconds all processes spent busy so far (from /proc/stat)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]
    return (sum(v[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def upload(server: Server, d: str, names: list[str]) -> None:
    s3 = server.client()
    try:
        s3.create_bucket(Bucket=BUCKET)
    except s3.exceptions.BucketAlreadyOwnedByYou:
        pass
    from boto3.s3.transfer import TransferConfig

    tc = TransferConfig(multipart_threshold=64 << 20, multipart_chunksize=64 << 20)
    for name in names:
        p = os.path.join(d, name)
        files = [p] if os.path.isfile(p) else [
            os.path.join(r, f) for r, _, fs in os.walk(p) for f in fs]
        for f in files:
            key = os.path.relpath(f, d)
            s3.upload_file(f, BUCKET, key, Config=tc)


def env_for(endpoint: str) -> dict:
    env = dict(os.environ)
    env.update({
        "AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_REGION": REGION, "AWS_DEFAULT_REGION": REGION,
        "AWS_ENDPOINT_URL": endpoint, "AWS_ENDPOINT": endpoint, "AWS_ALLOW_HTTP": "true",
        "S3_ENDPOINT_URL": endpoint,  # MosaicML Streaming's name for it
    })
    env.pop("ZRING_CACHE_DIR", None)
    return env


# ------------------------------------------------------------------- contenders
# Each runs in a child process (`--_worker`) and prints one JSON line.


def batch_bytes(b) -> int:
    return int(b.nbytes) if isinstance(b, np.ndarray) else int(b.values.nbytes)


def open_store(url: str, cache: str | None, opts: dict):
    """The store at `url`, with zring's remote read options `opts` (plus the cache
    directory, when given)."""
    import zring

    remote = dict(opts)
    if cache is not None:
        remote["cache_dir"] = cache
    else:
        remote["no_cache"] = True
    return zring.open(url, remote=remote)


def run_loader(store, seconds: float, epoch_from: float | None) -> dict:
    """Loader steps (cyclic: a permutation per epoch) for `seconds` after the first
    epoch (timed from `epoch_from`, the moment before open, when given)."""
    import zring

    n = len(store)
    # Every record at least once, as Streaming's epoch delivers every sample (with
    # n // BATCH steps a 1,000-record W1 epoch delivered 768 records but was timed
    # against a download of all 1,000).
    steps_per_epoch = max(1, -(-n // BATCH))
    sampler = zring.Sampler(n, BATCH, "cyclic", seed=1)
    out: dict = {}
    cpu0 = time.process_time()
    with zring.Loader({"x": [store]}, sampler, workers=2, prefetch=4) as loader:
        it = iter(loader)
        nbytes = 0
        for _ in range(steps_per_epoch):
            nbytes += batch_bytes(next(it)[0]["x"])
        total = nbytes
        if epoch_from is not None:
            dt = time.perf_counter() - epoch_from
            out["first_epoch_s"] = dt
            out["first_epoch_mib_s"] = nbytes / dt / 2**20
        t0, cpu0, nbytes, steps = time.perf_counter(), time.process_time(), 0, 0
        while True:
            nbytes += batch_bytes(next(it)[0]["x"])
            steps += 1
            dt = time.perf_counter() - t0
            if dt >= seconds and steps >= 3:
                break
    out.update(mib_s=nbytes / dt / 2**20, steps=steps, seconds=dt, logical_bytes_total=total + nbytes,
               cpu_cores=(time.process_time() - cpu0) / dt)
    return out


def worker_zring(a: dict) -> dict:
    if a["mode"] == "local":
        import zring

        path = a["path"]
        with open(path, "rb") as f:
            while f.read(64 << 20):
                pass
        store = zring.open(path)
        return run_loader(store, a["seconds"], None)
    cache = a.get("cache")
    t = time.perf_counter()
    store = open_store(a["url"], cache, a.get("remote", {}))
    open_s = time.perf_counter() - t
    out = run_loader(store, a["seconds"], t)
    out["open_s"] = open_s
    stats = store.remote_stats
    if stats:
        out["remote_stats"] = stats
        out["fetched_per_logical"] = stats["bytes"] / out["logical_bytes_total"]
    if cache:
        out["cache_bytes"] = sum(
            os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(cache) for f in fs)
    return out


def worker_raw(a: dict) -> dict:
    """8 MiB ranged GETs over the whole object, repeated, `a['inflight']` always in
    flight (a thread each), for `seconds`: a plain client's ceiling."""
    import boto3
    from botocore.config import Config

    s3 = boto3.client(
        "s3", endpoint_url=a["endpoint"], aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY, region_name=REGION,
        config=Config(max_pool_connections=a["inflight"] + 4))
    size = s3.head_object(Bucket=BUCKET, Key=a["key"])["ContentLength"]
    chunk = a.get("chunk", 8 << 20)
    if a.get("random"):  # record-sized GETs at random offsets
        offsets = np.random.default_rng(0).integers(0, size - chunk, 1 << 16)
        ranges = [(int(o), int(o) + chunk - 1) for o in offsets]
    else:
        ranges = [(o, min(o + chunk, size) - 1) for o in range(0, size, chunk)]

    def get(r):
        body = s3.get_object(Bucket=BUCKET, Key=a["key"], Range=f"bytes={r[0]}-{r[1]}")["Body"]
        n = 0
        while True:
            b = body.read(1 << 20)
            if not b:
                return n
            n += len(b)

    get(ranges[0])  # connect once
    t0, cpu0 = time.perf_counter(), time.process_time()
    deadline = t0 + a["seconds"]

    def loop(start: int) -> int:
        n, k = 0, start
        while time.perf_counter() < deadline:
            n += get(ranges[k % len(ranges)])
            k += a["inflight"]
        return n

    with cf.ThreadPoolExecutor(a["inflight"]) as ex:
        nbytes = sum(ex.map(loop, range(a["inflight"])))
    dt = time.perf_counter() - t0
    return {"mib_s": nbytes / dt / 2**20, "seconds": dt, "requests_s": nbytes / chunk / dt,
            "cpu_cores": (time.process_time() - cpu0) / dt}


def worker_streaming(a: dict) -> dict:
    """One epoch of StreamingDataset from the server, cold local directory."""
    from streaming import StreamingDataset
    from streaming.base.util import clean_stale_shared_memory

    clean_stale_shared_memory()
    t = time.perf_counter()
    cpu0 = time.process_time()
    ds = StreamingDataset(remote=a["url"], local=a["local"], shuffle=True, batch_size=BATCH,
                          shuffle_seed=1)
    ragged = a["workload"] == "w3"
    nbytes, batch, records = 0, [], 0
    for sample in ds:
        batch.append(sample["x"])
        if len(batch) == BATCH:
            if ragged:
                lengths = np.fromiter((len(r) for r in batch), np.int64, BATCH)
                offsets = np.zeros(BATCH + 1, np.int64)
                np.cumsum(lengths, out=offsets[1:])
                values = np.concatenate(batch)
                nbytes += values.nbytes
            else:
                nbytes += np.stack(batch).nbytes
            records += len(batch)
            batch = []
    dt = time.perf_counter() - t
    nbytes += sum(r.nbytes for r in batch)
    records += len(batch)
    return {"mib_s": nbytes / dt / 2**20, "first_epoch_s": dt, "first_epoch_mib_s": nbytes / dt / 2**20,
            "records": records, "cpu_cores": (time.process_time() - cpu0) / dt}


WORKERS = {"zring": worker_zring, "raw": worker_raw, "streaming": worker_streaming}


def spawn(kind: str, args: dict, env: dict, watch: dict[str, int], timeout: float) -> dict:
    """Runs a contender in a child process; adds the CPU cores the watched processes
    (server, proxy) and everything else on the machine used meanwhile."""
    before = {k: cpu_seconds(p) for k, p in watch.items()}
    busy0, t0 = machine_busy(), time.perf_counter()
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--_worker", kind, json.dumps(args)],
                       env=env, capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        return {"error": (p.stderr or p.stdout).strip().splitlines()[-1:] or ["failed"],
                "stderr": p.stderr[-4000:]}
    out = json.loads(p.stdout.strip().splitlines()[-1])
    for k, pid in watch.items():
        out[f"{k}_cores"] = (cpu_seconds(pid) - before[k]) / wall
    out["machine_cores"] = (machine_busy() - busy0) / wall
    return out


# ---------------------------------------------------------------------- driver


def check(args, d: str, server: Server, proxy: Proxy) -> int:
    """Remote (no cache, then a whole-object cache cold and warm, then a chunk cache
    cold and warm) gathers equal the local store's."""
    code = (
        "import json, sys, numpy as np, zring, os\n"
        "a = json.loads(sys.argv[1])\n"
        "local = zring.open(a['path'])\n"
        "whole = {'cache_dir': a['cache']}\n"
        "chunks = {'cache_dir': a['cache'] + '-chunks', 'cache_whole': 'never'}\n"
        "for opts in [{'no_cache': True}, whole, whole, chunks, chunks]:\n"
        "    remote = zring.open(a['url'], remote=opts)\n"
        "    assert len(remote) == len(local), (len(remote), len(local))\n"
        "    s = zring.Sampler(len(local), 64, 'iid', seed=3)\n"
        "    for _ in range(4):\n"
        "        idx = s.next()\n"
        "        x, y = remote[idx], local[idx]\n"
        "        if isinstance(x, np.ndarray): assert np.array_equal(x, y)\n"
        "        else:\n"
        "            assert np.array_equal(x.values, y.values)\n"
        "            assert np.array_equal(x.cu_seqlens, y.cu_seqlens)\n"
        "    with zring.Loader({'x': [remote]}, zring.Sampler(len(local), 32, 'cyclic', seed=1), workers=2) as L:\n"
        "        it = iter(L)\n"
        "        ref = zring.Sampler(len(local), 32, 'cyclic', seed=1)\n"
        "        for _ in range(3):\n"
        "            x, y = next(it)[0]['x'], local[ref.next()]\n"
        "            xv = x if isinstance(x, np.ndarray) else x.values\n"
        "            yv = y if isinstance(y, np.ndarray) else y.values\n"
        "            assert np.array_equal(xv, yv)\n"
        "    del remote\n"
        "print('ok')\n"
    )
    failures = 0
    for w in ("w1", "w3"):
        a = {"path": os.path.join(d, f"{w}.zr"), "url": f"s3://{BUCKET}/{w}.zr",
             "cache": os.path.join(d, f"check-cache-{w}")}
        for ep_name, ep in (("direct", server.endpoint), ("link", proxy.endpoint)):
            p = subprocess.run([sys.executable, "-c", code, json.dumps(a)], env=env_for(ep),
                               capture_output=True, text=True, timeout=300)
            ok = p.returncode == 0 and p.stdout.strip().endswith("ok")
            failures += not ok
            print(f"check {w} {ep_name}: {'ok' if ok else 'FAILED'}")
            if not ok:
                print(p.stderr[-3000:])
            shutil.rmtree(a["cache"], ignore_errors=True)
            shutil.rmtree(a["cache"] + "-chunks", ignore_errors=True)
    return 1 if failures else 0


def main() -> int:
    if len(sys.argv) == 4 and sys.argv[1] == "--_worker":
        print(json.dumps(WORKERS[sys.argv[2]](json.loads(sys.argv[3]))))
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--w1-records", type=int, default=1024)
    p.add_argument("--w3-records", type=int, default=100_000)
    p.add_argument("--rtt-ms", type=float, default=10.0)
    p.add_argument("--rate-mbit", type=float, default=1000.0)
    p.add_argument("--seconds", type=float, default=4.0, help="steady-state time per contender")
    p.add_argument("--server", choices=["auto", "s3s-fs", "moto"], default="auto")
    p.add_argument("--server-bin", help="the s3s-fs binary (default: $S3S_FS, then PATH)")
    p.add_argument("--workloads", default="w1,w3")
    p.add_argument("--contenders",
                   default="raw-direct,raw-link,raw-records,zring-remote,zring-cache,zring-chunks,zring-local,streaming")
    p.add_argument("--dir", help="scratch directory (default: a temporary one, removed)")
    p.add_argument("--remote", default="{}", help="zring remote= options, JSON (e.g. '{\"in_flight\": 64}')")
    p.add_argument("--json", help="write the results here")
    p.add_argument("--check", action="store_true", help="tiny data; verify remote == local; no timing")
    args = p.parse_args()
    if args.check:
        args.w1_records, args.w3_records, args.rtt_ms = 96, 3000, 2.0

    s3s_bin = find_s3s(args.server_bin)
    kind = args.server if args.server != "auto" else ("s3s-fs" if s3s_bin else "moto")
    if kind == "s3s-fs" and not s3s_bin:
        p.error("s3s-fs not found: --server-bin, $S3S_FS or PATH")
    d = args.dir or tempfile.mkdtemp(prefix="zring-bench-remote-")
    os.makedirs(d, exist_ok=True)
    contenders = args.contenders.split(",")
    remote_opts = json.loads(args.remote)
    workloads = args.workloads.split(",")
    server = proxy = None
    try:
        t = time.perf_counter()
        info = make_data(d, args.w1_records, args.w3_records, "streaming" in contenders and not args.check)
        print(f"data: {json.dumps(info)} ({time.perf_counter() - t:.1f} s)", flush=True)
        server = Server(kind, d, s3s_bin)
        t = time.perf_counter()
        names = [f"{w}.zr" for w in workloads] + [f"mds-{w}" for w in workloads if os.path.isdir(os.path.join(d, f"mds-{w}"))]
        upload(server, d, names)
        print(f"server: {kind} at {server.endpoint}; uploaded {names} in {time.perf_counter() - t:.1f} s", flush=True)
        proxy = Proxy(server.port, args.rtt_ms, args.rate_mbit, os.path.join(d, "proxy.log"))
        print(f"link: {proxy.endpoint} -> {server.endpoint}, rtt {args.rtt_ms} ms, {args.rate_mbit} Mbit/s", flush=True)
        if args.check:
            return check(args, d, server, proxy)
        watch = {"server": server.proc.pid, "proxy": proxy.proc.pid}
        link_mib_s = args.rate_mbit * 1e6 / 8 / 2**20 if args.rate_mbit > 0 else float("inf")
        results: dict = {"config": {**vars(args), "server": kind, "data": info, "link_mib_s": link_mib_s},
                         "runs": {}}
        for w in workloads:
            for c in contenders:
                key = f"s3://{BUCKET}/{w}.zr"
                env = env_for(proxy.endpoint)
                if c == "raw-direct":
                    r = spawn("raw", {"endpoint": server.endpoint, "key": f"{w}.zr", "inflight": 16,
                                      "seconds": args.seconds}, env, watch, 600)
                elif c == "raw-link":
                    r = spawn("raw", {"endpoint": proxy.endpoint, "key": f"{w}.zr", "inflight": 16,
                                      "seconds": args.seconds}, env, watch, 600)
                elif c == "raw-records":
                    rec = info[w]["store_bytes"] // info[w]["records"]
                    r = spawn("raw", {"endpoint": proxy.endpoint, "key": f"{w}.zr", "inflight": 64,
                                      "chunk": rec, "random": True, "seconds": args.seconds}, env, watch, 600)
                elif c == "zring-remote":
                    r = spawn("zring", {"mode": "remote", "url": key, "seconds": args.seconds,
                                        "remote": remote_opts}, env, watch, 900)
                elif c in ("zring-cache", "zring-chunks"):
                    cache = os.path.join(d, f"cache-{w}")
                    shutil.rmtree(cache, ignore_errors=True)
                    opts = dict(remote_opts)
                    if c == "zring-chunks":
                        opts["cache_whole"] = "never"
                    r = spawn("zring", {"mode": "remote", "url": key, "cache": cache,
                                        "seconds": args.seconds, "remote": opts}, env, watch, 900)
                    shutil.rmtree(cache, ignore_errors=True)
                elif c == "zring-local":
                    r = spawn("zring", {"mode": "local", "path": os.path.join(d, f"{w}.zr"),
                                        "seconds": args.seconds}, env, watch, 600)
                elif c == "streaming":
                    local = os.path.join(d, f"streaming-local-{w}")
                    shutil.rmtree(local, ignore_errors=True)
                    r = spawn("streaming", {"url": f"s3://{BUCKET}/mds-{w}", "local": local,
                                            "workload": w}, env, watch, 1800)
                    shutil.rmtree(local, ignore_errors=True)
                else:
                    raise SystemExit(f"unknown contender {c}")
                results["runs"][f"{w}/{c}"] = r
                print(f"{w}/{c}: {json.dumps({k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items() if k != 'stderr'})}", flush=True)
        report(results, workloads, link_mib_s)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(results, f, indent=1)
        return 0
    finally:
        for x in (proxy, server):
            if x is not None:
                x.stop()
        if not args.dir:
            shutil.rmtree(d, ignore_errors=True)


def report(results: dict, workloads: list[str], link: float) -> None:
    runs = results["runs"]

    def get(w, c, k="mib_s"):
        r = runs.get(f"{w}/{c}", {})
        return r.get(k)

    def ratio(a, b):
        return f"{a / b:.2f}x" if a and b else "-"

    print()
    print(f"{'workload/contender':28} {'steady MiB/s':>12} {'1st epoch MiB/s':>16} {'own cores':>9} {'server':>7} {'proxy':>6} {'machine':>7} {'fetched/logical':>15}")
    for key, r in runs.items():
        if "error" in r:
            print(f"{key:28} ERROR {r['error']}")
            continue
        fe = r.get("first_epoch_mib_s")
        print(f"{key:28} {r['mib_s']:12.1f} {fe if fe is None else round(fe, 1)!s:>16} {r.get('cpu_cores', 0):9.2f} "
              f"{r.get('server_cores', 0):7.2f} {r.get('proxy_cores', 0):6.2f} {r.get('machine_cores', 0):7.2f} "
              f"{r['fetched_per_logical'] if 'fetched_per_logical' in r else '-'!s:>15.6}")
    print()
    print(f"link limit {link:.1f} MiB/s")
    for w in workloads:
        zr, zc, zl = get(w, "zring-remote"), get(w, "zring-cache"), get(w, "zring-local")
        zr1, zc1, st = get(w, "zring-remote", "first_epoch_mib_s"), get(w, "zring-cache", "first_epoch_mib_s"), get(w, "streaming")
        print(f"{w}: zring-remote / link {ratio(zr, link)} (target >= 0.8), / raw-link {ratio(zr, get(w, 'raw-link'))}; "
              f"first epoch zring-remote / streaming {ratio(zr1, st)}, zring-cache / streaming {ratio(zc1, st)} (target >= 2); "
              f"zring-cache warm / local {ratio(zc, zl)} (target >= 0.9), zring-chunks warm / local "
              f"{ratio(get(w, 'zring-chunks'), zl)}; zring-cache first epoch / link {ratio(zc1, link)}; "
              f"raw-direct (server ceiling) {get(w, 'raw-direct') or 0:.0f} MiB/s")


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    sys.exit(main())

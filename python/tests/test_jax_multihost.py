"""zring.jax.batches(sharding=...) across two JAX processes on CPU: each process
reads its share, and every global jax.Array holds exactly the global batch of a
single-process plan (both ranks' batches, in rank order)."""

import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import zring.jax as zj  # noqa: E402
from conftest import write_dense  # noqa: E402

N = 45

# One JAX process of two: two CPU devices each, a 1-D mesh over the four, every
# field gathered back from all processes (jax.experimental.multihost_utils) so the
# parent can compare it with the global batch.
CHILD = r"""
import json, sys
import numpy as np
import jax

address, pid, store, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
jax.config.update("jax_platforms", "cpu")
jax.config.update("jax_num_cpu_devices", 2)
jax.distributed.initialize(coordinator_address=address, num_processes=2, process_id=pid)
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec
import zring.jax as zj

sharding = NamedSharding(Mesh(np.array(jax.devices()), ("data",)), PartitionSpec("data"))
source = zj.DataSource({"x": store})
seen = {}
for prefetch in (2, 0):
    steps = []
    for batch in zj.batches(source, 6, epochs=2, seed=5, start=1, prefetch=prefetch, sharding=sharding):
        x = batch["x"]
        assert x.shape == (12, 3) and x.sharding == sharding and not x.is_fully_addressable
        local = sorted((s.index[0].start, np.asarray(s.data).tolist()) for s in x.addressable_shards)
        steps.append({"global": multihost_utils.process_allgather(x, tiled=True).tolist(), "local": local})
    seen[prefetch] = steps
with open(out, "w") as f:
    json.dump({"process": jax.process_index(), "devices": len(jax.devices()), "seen": seen}, f)
jax.distributed.shutdown()
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_processes_build_the_global_batch(tmp_path):
    x = np.arange(N * 3, dtype=np.float32).reshape(N, 3)
    write_dense(tmp_path / "x.zr", x)
    address = f"127.0.0.1:{free_port()}"
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env["JAX_PLATFORMS"] = "cpu"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, address, str(i), str(tmp_path / "x.zr"), str(tmp_path / f"out{i}.json")],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        for i in range(2)
    ]
    logs = []
    try:
        for p in procs:
            # A hang (a process waiting for the other forever) fails the test.
            logs.append(p.communicate(timeout=120)[0])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
    for i, (p, log) in enumerate(zip(procs, logs)):
        assert p.returncode == 0, f"process {i} failed:\n{log}"

    # The global batches of one process's plan: rank 0's rows, then rank 1's.
    source = zj.DataSource({"x": tmp_path / "x.zr"})
    shares = [list(zj.batches(source, 6, epochs=2, seed=5, start=1, rank=r, world_size=2, prefetch=0))
              for r in range(2)]
    want = [np.concatenate([np.asarray(a["x"]), np.asarray(b["x"])]).tolist() for a, b in zip(*shares)]
    assert len(want) == 2 * (N // 12) - 1
    for i in range(2):
        result = json.loads((tmp_path / f"out{i}.json").read_text())
        assert result["process"] == i and result["devices"] == 4
        for prefetch, steps in result["seen"].items():
            assert [s["global"] for s in steps] == want, f"process {i}, prefetch={prefetch}"
            # Each process's devices hold its own share: rows [6 * i, 6 * i + 6).
            for s, mine in zip(steps, shares[i]):
                rows = [row for _, block in s["local"] for row in block]
                assert [start for start, _ in s["local"]] == [6 * i, 6 * i + 3]
                assert rows == np.asarray(mine["x"]).tolist()

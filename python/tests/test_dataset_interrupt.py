"""Ctrl-C stops a long dataset gather or verify between slices, as it does a store's:
KeyboardInterrupt arrives before the work is complete, no engine thread is left
behind, and the dataset stays usable.

Each case runs in a child process that sends itself SIGINT once the work has visibly
started (its reads counted by /proc/self/io growing), so a late signal can never reach
pytest itself. Whether the work was complete is read from the bytes it read, against
those of the same call run to its end just before: no clock is read. A child that
finished all the work before its signal could be delivered (a stalled machine) is
retried with more work; a build without slicing fails every attempt.
"""

import sys
import textwrap

import pytest
from child_runs import run_until


CHILD = textwrap.dedent(
    r"""
    import json, os, signal, sys, threading, time
    import numpy as np
    import zring

    case, tmp, scale = sys.argv[1], sys.argv[2], int(sys.argv[3])

    def read_bytes():
        # Bytes this process has read with read/pread (the pread backend's reads).
        with open("/proc/self/io") as f:
            for line in f:
                if line.startswith("rchar:"):
                    return int(line.split()[1])
        raise RuntimeError("no rchar in /proc/self/io")

    def threads_now():
        count = 0
        for t in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{t}/comm") as f:
                    count += f.read().startswith("zring")
            except FileNotFoundError:
                pass
        return count

    n = 500_000 * scale
    x = np.arange(n * 4, dtype=np.int32).reshape(n, 4)
    zring.write_dataset(
        os.path.join(tmp, "ds"), {"x": x, "label": np.arange(n, dtype=np.int64)},
        shard_records=n // 4, codec="raw", progress=False,
    )
    ds = zring.open_dataset(os.path.join(tmp, "ds"), backend="pread", threads=1)
    ids = np.random.default_rng(0).permutation(n)
    call = (lambda: ds.gather(ids)) if case == "gather" else ds.verify
    # The whole call once: the bytes it reads, and every thread it starts.
    start = read_bytes()
    call()
    full = read_bytes() - start
    before = threads_now()

    start = read_bytes()
    def interrupt():
        while read_bytes() - start < full // 20:
            time.sleep(0.0005)
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGINT)
    sent = []
    watcher = threading.Thread(target=interrupt, daemon=True)
    watcher.start()
    result = {}
    try:
        call()
        result["raised"] = None
    except KeyboardInterrupt:
        result["raised"] = "KeyboardInterrupt"
        result["latency"] = time.monotonic() - sent[0]
    result["read"] = read_bytes() - start
    watcher.join()
    result["full"] = full
    result["threads_grew"] = threads_now() - before
    got = ds.gather(ids[-5:])
    result["still_usable"] = bool((got["x"] == x[ids[-5:]]).all()) and bool(
        (got["label"] == ids[-5:]).all()
    )
    print(json.dumps(result))
    """
)


def run_child(case, tmp_path):
    return run_until(
        CHILD,
        case,
        tmp_path,
        lambda r: r["raised"] is not None or r["read"] < r["full"],
        sigint=True,
    )


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/io")
@pytest.mark.parametrize("case", ["gather", "verify"])
def test_ctrl_c_stops_a_large_dataset_call(tmp_path, case):
    r = run_child(case, tmp_path)
    assert r["raised"] == "KeyboardInterrupt", r
    # Tens of ms on an idle machine (docs/testing.md); room for a busy one.
    assert r["latency"] < 0.5, r
    # Stopped part way: less read than the whole call reads (a call that ran to its
    # end and raised afterwards read all of it).
    assert r["read"] < r["full"] * 0.9, r
    assert r["threads_grew"] <= 0, r
    assert r["still_usable"], r

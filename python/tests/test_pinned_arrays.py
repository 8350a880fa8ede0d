"""A caller's array that zring reads or writes without the GIL is pinned for the call.

An append or a gather with `out=` (and `train_dict`'s copy of its records) hands the array's memory to engine
code that runs with the GIL released while other Python threads go on. Holding the
array object is not enough: `ndarray.resize(..., refcheck=False)` reallocates its
memory in place (views and buffer exports notwithstanding), and a `bytearray` under an
array can grow. While such a call is in flight, these must fail cleanly (ValueError
from NumPy, BufferError from the buffer's owner) instead of leaving the engine with
freed memory; once it has returned, they work again.

Each case runs in a child process (a regression would crash, not fail): a worker
thread makes the long call while the main thread, once the call has visibly started
(its first records in `out`, the writer's temporary file growing), tries to
reallocate the array. A child whose call ended before that attempt (a stalled
machine) is retried with more work.
"""

import textwrap

import pytest
from child_runs import run_until

CHILD = textwrap.dedent(
    r"""
    import json, os, sys, threading, time
    import numpy as np
    import zring

    case, tmp, scale = sys.argv[1], sys.argv[2], int(sys.argv[3])
    result = {}

    def attempt(name, fn):
        # Runs one hostile operation; records its outcome.
        try:
            fn()
            result[name] = "done"
        except (ValueError, BufferError) as e:
            result[name] = type(e).__name__

    def temp_growing():
        tmps = [f for f in os.listdir(tmp) if f.endswith(".zr-tmp")]
        return any(os.path.getsize(os.path.join(tmp, f)) > (1 << 20) for f in tmps)

    def in_flight(work, started, hostile):
        # Runs work() on a worker thread and hostile() on this one once started() is
        # true, unless the work has ended first (then the run is inconclusive).
        ended = threading.Event()
        out = {}
        def run():
            try:
                out["value"] = work()
            except Exception as e:  # reported to the parent, which fails on it
                out["error"] = f"{type(e).__name__}: {e}"
            ended.set()
        t = threading.Thread(target=run)
        t.start()
        while not started() and not ended.is_set():
            time.sleep(0.0002)
        result["conclusive"] = not ended.is_set()
        if result["conclusive"]:
            hostile()
            # A success is only legitimate if the work had ended by then.
            result["ended_after_hostile"] = ended.is_set()
        t.join()
        result["error"] = out.get("error")
        return out.get("value")

    if case in ("dense_out", "ragged_out"):
        n = 1_000_000 * scale
        path = os.path.join(tmp, "s.zr")
        data = np.arange(n * 4, dtype=np.int32).reshape(n, 4)
        if case == "dense_out":
            with zring.DenseWriter(path, "int32", (4,), codec="raw") as w:
                w.append(data)
            store = zring.DenseStore(path, backend="pread", threads=1)
            out = np.full((n, 4), -1, np.int32)
        else:
            cu = np.arange(0, n * 4 + 1, 4, dtype=np.int64)
            shapes = np.full((n, 1), 4, dtype=np.int64)
            with zring.RaggedWriter(path, "int32", 1, codec="raw") as w:
                w.append(zring.RaggedBatch(data.reshape(-1), cu, shapes))
            store = zring.RaggedStore(path, backend="pread", threads=1)
            out = np.full(n * 4, -1, np.int32)
        ids = np.random.default_rng(0).permutation(n)
        flat = out.reshape(-1)
        def hostile():
            attempt("resize", lambda: out.resize(16, refcheck=False))
            attempt("resize_refcheck", lambda: out.resize(16))
        in_flight(lambda: store.gather(ids, out=out), lambda: flat[0] != -1, hostile)
        result["correct"] = bool((out.reshape(n, 4) == data[ids]).all())
        del flat
        attempt("resize_after", lambda: out.resize(16, refcheck=False))
    elif case.startswith(("dense_append", "ragged_append")):
        n = 256 * scale
        rng = np.random.default_rng(0)
        rows = rng.integers(0, 16, size=(n, 64 << 10), dtype=np.uint8)
        path = os.path.join(tmp, "s.zr")
        owner = rows
        if case == "dense_append":
            w = zring.DenseWriter(path, "uint8", (64 << 10,), codec="zstd", level=9)
            batch = rows.copy()
            owner = batch
        elif case == "dense_append_bytearray":
            w = zring.DenseWriter(path, "uint8", (64 << 10,), codec="zstd", level=9)
            raw = bytearray(rows.tobytes())
            # An array over a bytearray that holds no export of it (NumPy's
            # ndarray(buffer=...) keeps the bytearray itself as its base).
            batch = np.ndarray(rows.shape, np.uint8, buffer=raw)
            owner = None
        elif case == "ragged_append_list":
            w = zring.RaggedWriter(path, "uint8", 1, codec="zstd", level=9)
            owner = rows.copy()
            batch = list(owner)  # views of `owner`, which NumPy lets resize under them
        else:
            w = zring.RaggedWriter(path, "uint8", 1, codec="zstd", level=9)
            owner = rows.reshape(-1).copy()
            cu = np.arange(0, n * (64 << 10) + 1, 64 << 10, dtype=np.int64)
            shapes = np.full((n, 1), 64 << 10, dtype=np.int64)
            batch = zring.RaggedBatch(owner, cu, shapes)
        def hostile():
            if owner is None:
                attempt("extend", lambda: raw.extend(b"x" * (1 << 20)))
            else:
                attempt("resize", lambda: owner.resize(16, refcheck=False))
        in_flight(lambda: w.append(batch), temp_growing, hostile)
        w.close()
        got = zring.DenseStore(path) if case.startswith("dense") else zring.RaggedStore(path)
        result["correct"] = len(got) == n and all(
            (np.asarray(got[i]).reshape(-1) == rows[i]).all() for i in range(0, n, 17)
        )
        del batch, got
        if owner is None:
            attempt("extend_after", lambda: raw.extend(b"x"))
        else:
            attempt("resize_after", lambda: owner.resize(16, refcheck=False))
    print(json.dumps(result))
    """
)


def run_child(case, tmp_path):
    result = run_until(CHILD, case, tmp_path, lambda r: bool(r["conclusive"]))
    if not result["conclusive"]:
        pytest.fail(f"the call ended before it could be interfered with, 3 times: {result}")
    return result


@pytest.mark.parametrize("case", ["dense_out", "ragged_out"])
def test_out_cannot_be_resized_while_a_gather_writes_it(tmp_path, case):
    r = run_child(case, tmp_path)
    assert r["error"] is None, r
    assert r["resize"] == "ValueError", r
    assert r["resize_refcheck"] == "ValueError", r
    assert r["correct"], r
    assert r["resize_after"] == "done", r


@pytest.mark.parametrize("case", ["dense_append", "ragged_append_list", "ragged_append_batch"])
def test_a_batch_cannot_be_resized_while_it_is_appended(tmp_path, case):
    r = run_child(case, tmp_path)
    assert r["error"] is None, r
    assert r["resize"] == "ValueError", r
    assert r["correct"], r
    assert r["resize_after"] == "done", r


def test_the_bytearray_under_a_batch_cannot_grow_while_it_is_appended(tmp_path):
    r = run_child("dense_append_bytearray", tmp_path)
    assert r["error"] is None, r
    assert r["extend"] == "BufferError", r
    assert r["correct"], r
    assert r["extend_after"] == "done", r

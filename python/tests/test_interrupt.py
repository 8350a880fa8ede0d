"""Ctrl-C stops a long gather (in the engine, between records) or an append (between
slices) within tens of milliseconds: KeyboardInterrupt arrives
before the work is complete, a partial read is never returned, an interrupted writer
is aborted (no temporary file, nothing published), and the store stays usable.

Each case runs in a child process that sends itself SIGINT once the work has visibly
started (the first records of the output written, or the writer's temporary file
growing), so a late signal can never reach pytest itself. Whether the work was
complete is read from the output, not from a clock. A child that finished all the
work before its signal could be delivered (a stalled machine) is retried with more
work; a build without slicing fails every attempt.
"""

import json
import subprocess
import sys
import textwrap

import pytest
from child_runs import run_until, sigint_default

CHILD = textwrap.dedent(
    r"""
    import json, os, signal, sys, threading, time
    import numpy as np
    import zring

    case, tmp, scale = sys.argv[1], sys.argv[2], int(sys.argv[3])

    def threads_now():
        # zring's threads only (all are named zring-*): a Python thread that was
        # joined may still be listed for a moment while it exits.
        count = 0
        for t in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{t}/comm") as f:
                    count += f.read().startswith("zring")
            except FileNotFoundError:
                pass
        return count

    sent = []

    def kill_when(started):
        # Sends SIGINT to this process once started() is true: an event, not a delay.
        def run():
            while not started():
                time.sleep(0.0005)
            sent.append(time.monotonic())
            os.kill(os.getpid(), signal.SIGINT)
        t = threading.Thread(target=run, daemon=True)
        t.start()
        return t

    result = {}
    if case in ("dense_gather", "ragged_gather"):
        n = 1_000_000 * scale
        path = os.path.join(tmp, case + ".zr")
        if case == "dense_gather":
            data = np.arange(n * 4, dtype=np.int32).reshape(n, 4)
            with zring.DenseWriter(path, "int32", (4,), codec="raw") as w:
                w.append(data)
            store = zring.DenseStore(path, backend="pread", threads=1)
        else:
            values = np.arange(n * 4, dtype=np.int32)
            cu = np.arange(0, n * 4 + 1, 4, dtype=np.int64)
            shapes = np.full((n, 1), 4, dtype=np.int64)
            with zring.RaggedWriter(path, "int32", 1, codec="raw") as w:
                w.append(zring.RaggedBatch(values, cu, shapes))
            store = zring.RaggedStore(path, backend="pread", threads=1)
        ids = np.random.default_rng(0).permutation(n)
        store[ids[:1000]]  # warm the worker pool before counting threads
        before = threads_now()
        out = np.full(n * 4, -1, dtype=np.int32)
        dest = out.reshape(n, 4) if case == "dense_gather" else out
        watcher = kill_when(lambda: out[0] != -1)
        try:
            store.gather(ids, out=dest)
            result["raised"] = None
        except KeyboardInterrupt:
            result["raised"] = "KeyboardInterrupt"
            result["latency"] = time.monotonic() - sent[0]
        watcher.join()
        result["written_records"] = int((out.reshape(n, 4)[:, 0] != -1).sum())
        result["records"] = n
        result["threads_grew"] = threads_now() - before
        # The store is still usable and right.
        got = store[ids[-5:]]
        want_rows = ids[-5:]
        if case == "dense_gather":
            result["still_usable"] = bool((got == data[want_rows]).all())
        else:
            result["still_usable"] = all(
                (r == np.arange(i * 4, i * 4 + 4)).all() for r, i in zip(got.to_arrays(), want_rows)
            )
    elif case in ("dense_append", "ragged_append"):
        n = 256 * scale
        rng = np.random.default_rng(0)
        # Compressible but not trivially so: zstd level 9 works for it.
        rows = rng.integers(0, 16, size=(n, 64 << 10), dtype=np.uint8)
        path = os.path.join(tmp, case + ".zr")
        if case == "dense_append":
            w = zring.DenseWriter(path, "uint8", (64 << 10,), codec="zstd", level=9)
            batch = rows
        else:
            w = zring.RaggedWriter(path, "uint8", 1, codec="zstd", level=9)
            batch = list(rows)
        def temp_growing():
            tmps = [f for f in os.listdir(tmp) if f.endswith(".zr-tmp")]
            return any(os.path.getsize(os.path.join(tmp, f)) > (1 << 20) for f in tmps)
        # Start whatever the engine's writers create once per process (the worker
        # pool, ...) before counting threads.
        with zring.DenseWriter(os.path.join(tmp, "warm.zr"), "uint8", (64 << 10,), codec="zstd") as warm:
            warm.append(rows[:64])
        os.remove(os.path.join(tmp, "warm.zr"))
        before = threads_now()
        watcher = kill_when(temp_growing)
        try:
            w.append(batch)
            result["raised"] = None
        except KeyboardInterrupt:
            result["raised"] = "KeyboardInterrupt"
        watcher.join()
        result["written_records"] = len(w)
        result["records"] = n
        result["threads_grew"] = threads_now() - before
        result["closed"] = w.closed
        try:
            w.append(batch[:1])
            result["append_after"] = "ok"
        except zring.ClosedError as e:
            result["append_after"] = str(e)
        result["published"] = os.path.exists(path)
        result["leftovers"] = sorted(f for f in os.listdir(tmp) if f.endswith(".zr-tmp"))
        # A new writer at the same path works.
        with zring.DenseWriter(path, "uint8", (4,), codec="raw") as w2:
            w2.append(np.zeros((3, 4), np.uint8))
        result["still_usable"] = len(zring.DenseStore(path)) == 3
    print(json.dumps(result))
    """
)


def run_child(case, tmp_path):
    return run_until(
        CHILD,
        case,
        tmp_path,
        lambda r: r["raised"] is not None or r["written_records"] < r["records"],
        sigint=True,
    )


@pytest.mark.parametrize("case", ["dense_gather", "ragged_gather"])
def test_ctrl_c_stops_a_large_gather(tmp_path, case):
    r = run_child(case, tmp_path)
    assert r["raised"] == "KeyboardInterrupt"
    # The engine asks for signals every 20 ms between records: tens of ms on an
    # idle machine (docs/testing.md); the bound leaves room for a busy one.
    assert r["latency"] < 0.5, r
    assert 0 < r["written_records"] < r["records"], r
    assert r["threads_grew"] <= 0, r
    assert r["still_usable"]


@pytest.mark.parametrize("case", ["dense_append", "ragged_append"])
def test_ctrl_c_stops_a_large_compressed_append_and_aborts_the_writer(tmp_path, case):
    r = run_child(case, tmp_path)
    assert r["raised"] == "KeyboardInterrupt"
    assert r["written_records"] < r["records"], r
    assert r["closed"]
    assert "interrupted" in r["append_after"]
    assert not r["published"]
    assert r["leftovers"] == []
    assert r["threads_grew"] <= 0, r
    assert r["still_usable"]


def test_a_handler_that_does_not_raise_lets_the_work_finish(tmp_path):
    script = textwrap.dedent(
        r"""
        import os, signal, sys, threading, time
        import numpy as np
        import zring
        path = os.path.join(sys.argv[1], "s.zr")
        n = 1_000_000
        data = np.arange(n * 4, dtype=np.int32).reshape(n, 4)
        with zring.DenseWriter(path, "int32", (4,), codec="raw") as w:
            w.append(data)
        store = zring.DenseStore(path, backend="pread", threads=1)
        seen = []
        signal.signal(signal.SIGINT, lambda *a: seen.append(1))
        out = np.full((n, 4), -1, np.int32)
        def run():
            while out[0, 0] == -1:
                time.sleep(0.0005)
            os.kill(os.getpid(), signal.SIGINT)
        threading.Thread(target=run, daemon=True).start()
        ids = np.random.default_rng(0).permutation(n)
        store.gather(ids, out=out)
        assert (out == data[ids]).all()
        print("ok", len(seen))
        """
    )
    proc = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, timeout=600, preexec_fn=sigint_default)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[0] == "ok"


def test_a_handler_that_calls_the_appending_writer_gets_an_error_not_a_deadlock(tmp_path):
    script = textwrap.dedent(
        r"""
        import os, signal, sys, threading, time
        import numpy as np
        import zring
        tmp = sys.argv[1]
        path = os.path.join(tmp, "w.zr")
        w = zring.DenseWriter(path, "uint8", (64 << 10,), codec="zstd", level=9)
        calls = []
        def handler(*a):
            calls.append(w.closed)  # answered without the lock the append holds
            w.abort()               # would deadlock on it: raises instead
        signal.signal(signal.SIGINT, handler)
        rows = np.random.default_rng(0).integers(0, 16, size=(512, 64 << 10), dtype=np.uint8)
        def growing():
            tmps = [f for f in os.listdir(tmp) if f.endswith(".zr-tmp")]
            return any(os.path.getsize(os.path.join(tmp, f)) > (1 << 20) for f in tmps)
        def run():
            while not growing():
                time.sleep(0.0005)
            os.kill(os.getpid(), signal.SIGINT)
        threading.Thread(target=run, daemon=True).start()
        try:
            w.append(rows)
            print("finished")
        except RuntimeError as e:
            print("RuntimeError", "signal handler" in str(e), calls, w.closed,
                  os.path.exists(path), [f for f in os.listdir(tmp) if f.endswith(".zr-tmp")])
        """
    )
    proc = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, timeout=600, preexec_fn=sigint_default)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "RuntimeError True [False] True False []", proc.stdout


# Waits that are not slices of work: a loader's next step, its close, and training a
# dictionary. Each child sends itself SIGINT once the main thread is provably blocked
# in the call (asleep in the kernel while a worker is held, or while the call's own
# thread exists), and checks that KeyboardInterrupt arrived while the work it waited
# for was still unfinished: no clock is read.
WAITS = textwrap.dedent(
    r"""
    import json, os, signal, sys, threading, time
    import numpy as np
    import zring

    case, tmp, scale = sys.argv[1], sys.argv[2], int(sys.argv[3])
    main_tid = threading.main_thread().native_id

    def thread_names():
        names = []
        for t in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{t}/comm") as f:
                    names.append(f.read().strip())
            except FileNotFoundError:
                pass
        return names

    def main_asleep():
        try:
            with open(f"/proc/self/task/{main_tid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] == "S"
        except FileNotFoundError:
            return False

    def interrupt_when(ready, stop=None):
        # SIGINT once ready() holds; polled, so the signal follows the event. Gives
        # up once `stop` is set (the call ended first).
        def run():
            while not ready():
                if stop is not None and stop.is_set():
                    return
                time.sleep(0.001)
            os.kill(os.getpid(), signal.SIGINT)
        t = threading.Thread(target=run, daemon=True)
        t.start()
        return t

    result = {}
    if case in ("loader_next", "loader_close"):
        path = os.path.join(tmp, "s.zr")
        with zring.DenseWriter(path, "int32", (4,), codec="raw") as w:
            w.append(np.arange(400, dtype=np.int32).reshape(100, 4))
        store = zring.DenseStore(path)
        release = threading.Event()
        entered = []
        lock = threading.Lock()

        def transform(shard):
            # Workers (never the main thread here, see below) wait for the test.
            if threading.current_thread() is not threading.main_thread():
                with lock:
                    entered.append(1)
                release.wait()
            return shard

        sampler = zring.Sampler(100, 8, "iid", seed=1)
        # Two workers hold steps 0 and 1 and prefetch is 1, so the consumer cannot
        # make a step itself: it can only wait.
        loader = zring.Loader({"x": [store]}, sampler, workers=2, prefetch=1, transform=transform)
        while len(entered) < 2:
            time.sleep(0.001)
        watcher = interrupt_when(main_asleep)
        try:
            if case == "loader_next":
                next(loader)
            else:
                loader.close()
            result["raised"] = None
        except KeyboardInterrupt:
            result["raised"] = "KeyboardInterrupt"
        watcher.join()
        # The workers were still held: the interrupt did not wait for them.
        result["workers_still_held"] = not release.is_set()
        release.set()
        if case == "loader_next":
            # Nothing was consumed by the interrupted wait.
            result["step_before"] = loader.step
            first = next(loader)
            result["got_step"] = loader.step
            result["usable"] = first is not None
            loader.close()
        else:
            result["closed"] = loader.closed
            # The workers are joined in the background: wait for that thread to end.
            while any(n.startswith("zring-lclose") for n in thread_names()):
                time.sleep(0.01)
            result["closer_ended"] = True
            try:
                next(loader)
                result["next_after_close"] = "item"
            except StopIteration:
                result["next_after_close"] = "StopIteration"
            except zring.ClosedError:
                result["next_after_close"] = "ClosedError"
    elif case == "train_dict":
        rng = np.random.default_rng(0)
        # Enough samples that training takes far longer than the signal's delivery.
        records = rng.integers(0, 40, size=(40_000, 512), dtype=np.uint8)
        watcher = interrupt_when(lambda: any(n.startswith("zring-train") for n in thread_names()))
        try:
            zring.train_dict(records, size=16384)
            result["raised"] = None
        except KeyboardInterrupt:
            result["raised"] = "KeyboardInterrupt"
        watcher.join()
        # Still training in the background: the interrupt did not wait for it.
        result["trainer_still_running"] = any(n.startswith("zring-train") for n in thread_names())
        d = zring.train_dict(records[:500, :64], size=2048)
        result["usable"] = isinstance(d, bytes) and len(d) > 0
    elif case == "writer_close":
        n = 8
        path = os.path.join(tmp, "w.zr")
        w = zring.DenseWriter(path, "uint8", (1 << 16,), codec="raw")
        w.append(np.random.default_rng(0).integers(0, 255, size=(n, 1 << 16), dtype=np.uint8))
        # The publish waits, just before it names the store, until released: the
        # signal lands while it runs however fast this disk's fsync is.
        hold = zring._zring._hold_publish(tmp)
        closing = lambda: any(n.startswith("zring-wclose") for n in thread_names())
        returned = threading.Event()
        watcher = interrupt_when(lambda: hold.reached() and closing(), returned)
        # A close() deaf to Ctrl-C (or publishing on its own thread no longer) would
        # wait for the hold forever: let it go after a while, so such a build fails
        # (raised None) instead of hanging.
        deaf = threading.Timer(30, hold.release)
        deaf.start()
        try:
            try:
                w.close()
                result["raised"] = None
            finally:
                returned.set()
                watcher.join()
        except KeyboardInterrupt:
            result["raised"] = "KeyboardInterrupt"
        deaf.cancel()
        # Still publishing: the interrupt did not wait for it.
        result["closer_still_running"] = closing()
        result["published_early"] = os.path.exists(path)
        hold.release()
        # A second close waits for the publish and returns its count.
        result["count"] = w.close()
        result["closed"] = w.closed
        result["records"] = n
        result["readable"] = len(zring.DenseStore(path)) == n
        result["leftovers"] = sorted(f for f in os.listdir(tmp) if f.endswith(".zr-tmp"))
    print(json.dumps(result))
    """
)


def run_waits(case, tmp_path, scale=1):
    tmp = tmp_path / f"scale{scale}"
    tmp.mkdir()
    proc = subprocess.run(
        [sys.executable, "-c", WAITS, case, str(tmp), str(scale)],
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=sigint_default,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_ctrl_c_interrupts_the_wait_for_a_loader_step_and_loses_no_step(tmp_path):
    r = run_waits("loader_next", tmp_path)
    assert r["raised"] == "KeyboardInterrupt", r
    assert r["workers_still_held"], r
    assert r["step_before"] == 0, r
    assert r["got_step"] == 1 and r["usable"], r


def test_ctrl_c_interrupts_a_loader_close_which_still_completes(tmp_path):
    r = run_waits("loader_close", tmp_path)
    assert r["raised"] == "KeyboardInterrupt", r
    assert r["workers_still_held"], r
    assert r["closed"] and r["closer_ended"], r
    assert r["next_after_close"] == "ClosedError", r


def test_ctrl_c_interrupts_train_dict(tmp_path):
    r = run_waits("train_dict", tmp_path)
    assert r["raised"] == "KeyboardInterrupt", r
    assert r["trainer_still_running"], r
    assert r["usable"], r


def test_ctrl_c_interrupts_a_writer_close_whose_publish_completes(tmp_path):
    """Ctrl-C during close(): KeyboardInterrupt arrives while the publish is still
    running (held by a test hook at the step that names the store), the publish then
    completes in the background, and a second close() returns its count."""
    r = run_waits("writer_close", tmp_path)
    assert r["raised"] == "KeyboardInterrupt", r
    assert r["closer_still_running"] and not r["published_early"], r
    assert r["closed"], r
    assert r["count"] == r["records"] and r["readable"], r
    assert r["leftovers"] == [], r

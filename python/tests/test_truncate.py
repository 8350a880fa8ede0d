"""A store file truncated while it is open raises on every backend that does not map
the file (pread, uring), from every read entry point (indexing, gather, verify, an
iteration and a Loader under way): it never kills the process with SIGBUS. Each case runs in a
child process, so a SIGBUS shows as a failed test instead of killing pytest."""

import os
import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent(
    """
    import os, sys
    import numpy as np
    import zring

    path, backend, kind, entry = sys.argv[1:]
    # A dense iteration reads up to 4096 records at a time: it needs more than one
    # read for a read to come after the cut.
    n = 5000 if (kind, entry) == ("dense", "iter") else 400
    if kind == "dense":
        data = np.arange(n * 64, dtype=np.int32).reshape(n, 64)
        with zring.DenseWriter(path, data.dtype, (64,), codec="zstd") as w:
            w.append(data)
        s = zring.DenseStore(path, backend=backend)
    else:
        with zring.RaggedWriter(path, "int32", 1, codec="zstd") as w:
            w.append([np.arange(i % 50 + 1, dtype=np.int32) for i in range(n)])
        s = zring.RaggedStore(path, backend=backend)
    assert s.backend == backend, s.backend
    s[:]  # every record read once, as before the file changes
    # An iteration and a loader under way when the file changes.
    it = iter(s)
    next(it)
    loader = None
    if entry == "loader":
        loader = zring.Loader({"x": [s]}, zring.Sampler(n, 16, "sequential"), workers=2, prefetch=2)
        next(loader)
    os.truncate(path, 8192)
    try:
        if entry == "slice":
            s[:]
        elif entry == "get":
            s[n - 1]
        elif entry == "gather":
            s.gather(np.arange(n))
        elif entry == "verify":
            s.verify()
        elif entry == "iter":
            for _ in it:
                pass
        elif entry == "loader":
            # Steps prefetched before the cut may still arrive; a later one raises.
            for _ in range(10 * n):
                next(loader)
        elif entry == "stats":
            # The table was read into memory at open: stats still answers.
            assert s.stats()["records"] == n
            print("ANSWERED")
            sys.exit(0)
    except zring.ZringError as e:
        assert "truncated: 8192 bytes, expected" in str(e), str(e)
        assert path in str(e), str(e)
        print("RAISED", type(e).__name__)
        sys.exit(0)
    finally:
        if loader is not None:
            loader.close()
    print("NO ERROR")
    sys.exit(1)
    """
)


@pytest.mark.parametrize("backend", ["pread", "uring"])
@pytest.mark.parametrize("kind", ["dense", "ragged"])
@pytest.mark.parametrize("entry", ["slice", "get", "gather", "verify", "stats", "iter", "loader"])
def test_truncated_store_raises_instead_of_sigbus(tmp_path, backend, kind, entry):
    if kind == "ragged" and entry == "gather":
        entry = "slice"
    path = str(tmp_path / f"{kind}.zr")
    r = subprocess.run(
        [sys.executable, "-c", CHILD, path, backend, kind, entry],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if "AssertionError: pread" in r.stderr and backend == "uring":
        if os.environ.get("ZRING_REQUIRE_URING") == "1":
            pytest.fail("io_uring is unavailable (the store fell back to pread) but ZRING_REQUIRE_URING=1 requires it")
        pytest.skip("io_uring is unavailable here (the store fell back to pread); set ZRING_REQUIRE_URING=1 to fail instead")
    assert r.returncode == 0, (
        f"child exited with {r.returncode} (negative: killed by that signal)\n"
        f"stdout: {r.stdout}\nstderr: {r.stderr}"
    )
    assert ("RAISED" in r.stdout) or (entry == "stats" and "ANSWERED" in r.stdout), r.stdout

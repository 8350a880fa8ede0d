"""Two processes appending to one dataset at once: every append that returns is its
own version and its records stay in the dataset; every other append gets
VersionConflictError and is named by no manifest."""

import json
import subprocess
import sys
import textwrap

import numpy as np

import zring

RECORDS_PER_APPEND = 10

# Appends through the dataset builder that write_dataset drives (stores at the
# builder's paths, add_shard, publish): the publication race without reopening a
# growing dataset after every append, so 1,000 appends take seconds.
BUILDER_WRITER = textwrap.dedent(
    """
    import json, sys, numpy as np, zring
    from zring._zring import _DatasetBuilder
    path, who, appends, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    won, lost = [], 0
    print("ready", flush=True)
    sys.stdin.readline()
    for k in range(appends):
        first = (who * appends + k) * per
        b = _DatasetBuilder(path, [], append=True)
        with zring.DenseWriter(b.shard_paths(0)[0], "int64", ()) as w:
            w.append(np.arange(first, first + per, dtype=np.int64))
        b.add_shard(per)
        try:
            won.append([b.publish(), first])
        except zring.VersionConflictError as e:
            assert "write again" in str(e), str(e)
            lost += 1
    print(json.dumps({"won": won, "lost": lost}), flush=True)
    """
)

# The same through the public write_dataset, which returns the version it published.
API_WRITER = textwrap.dedent(
    """
    import json, sys, numpy as np, zring
    path, who, appends, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    won, lost = [], 0
    print("ready", flush=True)
    sys.stdin.readline()
    for k in range(appends):
        first = (who * appends + k) * per
        try:
            ds = zring.write_dataset(path, {"x": np.arange(first, first + per, dtype=np.int64)},
                                     append=True, workers=1, progress=False)
        except zring.VersionConflictError as e:
            assert "write again" in str(e), str(e)
            lost += 1
            continue
        assert ds[len(ds) - 1]["x"] == first + per - 1, "not the version this append published"
        won.append([ds.version, first])
    print(json.dumps({"won": won, "lost": lost}), flush=True)
    """
)


def race(path, script, appends_per_process):
    """Runs two writer processes that start together; returns (won, lost)."""
    zring.write_dataset(path, {"x": np.array([-1], dtype=np.int64)})
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(path), str(who), str(appends_per_process), str(RECORDS_PER_APPEND)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for who in range(2)
    ]
    for p in procs:
        assert p.stdout.readline().strip() == "ready"
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    results = []
    for p in procs:
        out, _ = p.communicate(timeout=600)
        assert p.returncode == 0, out
        results.append(json.loads(out.strip().splitlines()[-1]))
    won = [tuple(w) for r in results for w in r["won"]]
    lost = sum(r["lost"] for r in results)
    assert len(won) + lost == 2 * appends_per_process
    return won, lost


def check_exactly_the_acknowledged_records(path, won):
    # Every success is a distinct version, and they are versions 2, 3, ... in turn.
    assert sorted(v for v, _ in won) == list(range(2, 2 + len(won)))
    ds = zring.open_dataset(path)
    assert ds.version == 1 + len(won)
    got = np.sort(ds[np.arange(len(ds))]["x"])
    expected = np.sort(
        np.concatenate([[-1]] + [np.arange(first, first + RECORDS_PER_APPEND) for _, first in won]).astype(np.int64)
    )
    np.testing.assert_array_equal(got, expected)


def test_two_processes_appending_1000_times_lose_no_acknowledged_record(tmp_path):
    path = tmp_path / "ds"
    won, _ = race(path, BUILDER_WRITER, 500)
    check_exactly_the_acknowledged_records(path, won)


def test_write_dataset_from_two_processes_returns_its_own_version_or_a_conflict(tmp_path):
    path = tmp_path / "ds"
    won, _ = race(path, API_WRITER, 40)
    check_exactly_the_acknowledged_records(path, won)

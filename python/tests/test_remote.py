"""Remote stores and datasets against a real S3-compatible server on 127.0.0.1.

The server and its request-counting, fault-injecting proxy are in s3_server.py.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import zring

boto3 = pytest.importorskip("boto3")
pytest.importorskip("moto.server")

from s3_server import BUCKET, S3, s3  # noqa: E402,F401  (s3: the module's server fixture)


# Fast retries for the fault tests (the defaults back off for seconds).
FAST = {"backoff_initial": 0.01, "backoff_max": 0.05}


def trained(records: np.ndarray | list[np.ndarray]) -> bytes:
    return zring.train_dict(records, size=4096)


def dense_file(tmp_path: Path, codec: str = "zstd", n: int = 400, seed: int = 0) -> tuple[Path, np.ndarray]:
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 8, (n, 3, 17, 19), dtype=np.uint8)
    path = tmp_path / f"dense-{codec}-{seed}.zr"
    dict_bytes = trained(data) if codec == "zstd-dict" else None
    with zring.DenseWriter(path, np.uint8, (3, 17, 19), codec=codec, dict_bytes=dict_bytes) as w:
        w.append(data)
    return path, data


@pytest.mark.parametrize("codec", ["raw", "zstd", "zstd-dict"])
def test_dense_gathers_equal_the_local_store(s3: S3, tmp_path: Path, codec: str) -> None:
    path, data = dense_file(tmp_path, codec)
    url = s3.put_file(f"dense-{codec}.zr", path)
    store = zring.DenseStore(url)
    assert store.path == url and len(store) == len(data)
    idx = np.random.default_rng(1).integers(0, len(data), 128)
    np.testing.assert_array_equal(store[idx], data[idx])
    np.testing.assert_array_equal(store[5], data[5])
    np.testing.assert_array_equal(store[10:20], data[10:20])
    store.verify()
    stats = store.remote_stats
    assert stats is not None and stats["requests"] >= 1
    assert zring.DenseStore(path).remote_stats is None


@pytest.mark.parametrize("codec", ["raw", "zstd", "zstd-dict"])
def test_ragged_gathers_equal_the_local_store(s3: S3, tmp_path: Path, codec: str) -> None:
    rng = np.random.default_rng(2)
    lengths = rng.integers(1, 400, 300)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    values = rng.integers(0, 50_000, int(offsets[-1]), dtype=np.int32)
    path = tmp_path / "ragged.zr"
    pieces = [values[offsets[i] : offsets[i + 1]] for i in range(300)]
    dict_bytes = trained(pieces) if codec == "zstd-dict" else None
    with zring.RaggedWriter(path, np.int32, codec=codec, dict_bytes=dict_bytes) as w:
        w.append(pieces)
    url = s3.put_file(f"ragged-{codec}.zr", path)
    remote, local = zring.open(url), zring.RaggedStore(path)
    assert isinstance(remote, zring.RaggedStore)
    idx = rng.integers(0, 300, 77)
    got, want = remote[idx], local[idx]
    np.testing.assert_array_equal(got.cu_seqlens, want.cu_seqlens)
    np.testing.assert_array_equal(got.values, want.values)
    np.testing.assert_array_equal(remote[7], values[offsets[7] : offsets[8]])


def test_dataset_over_a_url(s3: S3, tmp_path: Path) -> None:
    n = 300
    cols = {"x": np.arange(n * 6, dtype=np.float32).reshape(n, 2, 3), "y": np.arange(n)}
    zring.write_dataset(tmp_path / "ds", cols, shard_records=64, codec="zstd")
    url = s3.put_tree("datasets/ds", tmp_path / "ds")
    ds = zring.open_dataset(url)
    assert len(ds) == n and ds.shards == 5
    np.testing.assert_array_equal(ds.gather(slice(None))["x"], cols["x"])
    np.testing.assert_array_equal(ds[[299, 0, 64]]["y"], cols["y"][[299, 0, 64]])
    ds.verify()
    again = pickle.loads(pickle.dumps(ds))
    assert again.path == url and again.version == ds.version
    np.testing.assert_array_equal(again[::9]["y"], cols["y"][::9])


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    code = "import sys, zring._internal.cli as c; sys.argv = ['zring', *sys.argv[1:]]; c.main()"
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120
    )


def test_cli_info_and_verify_read_urls(s3: S3, tmp_path: Path) -> None:
    path, data = dense_file(tmp_path, "zstd")
    url = s3.put_file("cli/images.zr", path)
    info = run_cli("info", url)
    assert info.returncode == 0, info.stderr
    assert "zstd" in info.stdout and str(len(data)) in info.stdout
    ok = run_cli("verify", url)
    assert ok.returncode == 0, ok.stderr
    bad = run_cli("info", f"s3://{BUCKET}/cli/missing.zr")
    assert bad.returncode != 0 and "missing.zr" in bad.stderr


def test_neighbouring_records_are_fetched_by_one_request(s3: S3, tmp_path: Path) -> None:
    path, data = dense_file(tmp_path, "raw", n=2000)
    key = "coalesce/d.zr"
    url = s3.put_file(key, path)
    s3.proxy.clear()
    # Records are 969 bytes, 976 apart (8-byte alignment): a gap of 4 KiB bridges
    # neighbours but not the distant runs below.
    store = zring.DenseStore(url, remote={"max_gap": 4096})
    opened = len(s3.proxy.gets(key))
    assert 1 <= opened <= 3
    # 100 consecutive records in a shuffled order: one GET.
    idx = np.random.default_rng(3).permutation(np.arange(1000, 1100))
    np.testing.assert_array_equal(store[idx], data[idx])
    assert len(s3.proxy.gets(key)) - opened == 1
    # Two distant runs: two GETs without a gap to bridge them, one with.
    idx = np.r_[0:10, 1900:1910]
    before = len(s3.proxy.gets(key))
    np.testing.assert_array_equal(store[idx], data[idx])
    assert len(s3.proxy.gets(key)) - before == 2
    wide = zring.DenseStore(url, remote={"max_gap": 4 << 20})
    before = len(s3.proxy.gets(key))
    np.testing.assert_array_equal(wide[idx], data[idx])
    assert len(s3.proxy.gets(key)) - before == 1


def test_failed_requests_are_retried(s3: S3, tmp_path: Path) -> None:
    path, data = dense_file(tmp_path, "zstd")
    key = "retry/d.zr"
    url = s3.put_file(key, path)
    store = zring.DenseStore(url, remote=FAST)
    s3.proxy.fail_next = 2
    s3.proxy.drop_next = 1
    before = len(s3.proxy.gets(key))
    np.testing.assert_array_equal(store[[1, 2, 3]], data[[1, 2, 3]])
    assert s3.proxy.fail_next == 0 and s3.proxy.drop_next == 0
    assert len(s3.proxy.gets(key)) - before >= 4
    # Without retries the failure is an OSError naming the URL.
    once = zring.DenseStore(url, remote={**FAST, "max_retries": 0})
    s3.proxy.fail_next = 1
    with pytest.raises(zring.ZringOSError, match="retry/d.zr"):
        once[[5]]
    s3.proxy.fail_next = 0
    with pytest.raises(FileNotFoundError):
        zring.DenseStore(f"s3://{BUCKET}/retry/none.zr")


def test_a_corrupt_object_fails_its_checksum(s3: S3, tmp_path: Path) -> None:
    path, data = dense_file(tmp_path, "raw", n=50)
    raw = bytearray(path.read_bytes())
    at = raw.find(data[31].tobytes())
    assert at > 0
    raw[at + 100] ^= 0x10
    url = s3.put("corrupt/d.zr", bytes(raw))
    store = zring.DenseStore(url)
    with pytest.raises(zring.CorruptStoreError, match=r"corrupt/d\.zr.*record 31"):
        store[[2, 31]]
    with pytest.raises(zring.CorruptStoreError, match="record 31"):
        store.verify()
    np.testing.assert_array_equal(store[[2, 3]], data[[2, 3]])


def test_pickles_keep_the_url_and_options(s3: S3, tmp_path: Path) -> None:
    path, data = dense_file(tmp_path, "zstd")
    url = s3.put_file("pickle/d.zr", path)
    store = zring.DenseStore(url, remote={"in_flight": 3, "config": {"aws_region": "us-east-1"}})
    again = pickle.loads(pickle.dumps(store))
    assert again.path == url
    np.testing.assert_array_equal(again[[4, 1]], data[[4, 1]])
    settings = json.loads(store.__reduce__()[1][1])["remote"]
    assert settings["in_flight"] == 3 and settings["config"] == [["aws_region", "us-east-1"]]
    with pytest.raises(ValueError, match="no read setting"):
        zring.DenseStore(url, remote={"in_fligth": 3})


READER = """
import json, sys, numpy as np, zring
whole = sys.argv[3] if len(sys.argv) > 3 else "never"
remote = {"cache_dir": sys.argv[2], "cache_bytes": 1 << 30, "cache_whole": whole}
store = zring.DenseStore(sys.argv[1], remote=remote)
idx = np.arange(len(store))
print(json.dumps({"sum": int(store[idx].sum(dtype=np.int64)), **store.remote_stats}))
"""


def run_reader(url: str, cache: Path, whole: str) -> dict[str, int]:
    """The cache-reading child (READER) on `url` with `cache_whole=whole`."""
    out = subprocess.run(
        [sys.executable, "-c", READER, url, str(cache), whole],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    result: dict[str, int] = json.loads(out.stdout)
    return result


def test_a_second_process_reads_from_the_cache(s3: S3, tmp_path: Path) -> None:
    path, data = dense_file(tmp_path, "zstd", n=300, seed=5)
    key = "cache/d.zr"
    url = s3.put_file(key, path)
    cache = tmp_path / "cache"

    def run() -> dict[str, int]:
        return run_reader(url, cache, "never")

    s3.proxy.clear()
    first = run()
    first_gets = len(s3.proxy.gets(key))
    assert first["sum"] == int(data.sum(dtype=np.int64))
    assert first["cache_misses"] > 0
    second = run()
    assert second["sum"] == first["sum"]
    assert second["cache_misses"] == 0 and second["cache_hits"] > 0
    # The second process only asked for the object's tail (its version) on open.
    assert len(s3.proxy.gets(key)) - first_gets == 1
    assert second["requests"] == 1
    # A replaced object gets new cache entries, never the old bytes.
    other_path, other = dense_file(tmp_path, "zstd", n=300, seed=6)
    s3.put_file(key, other_path)
    third = run()
    assert third["sum"] == int(other.sum(dtype=np.int64)) and third["cache_misses"] > 0


DEFAULT_READER = """
import json, sys, numpy as np, zring
store = zring.DenseStore(sys.argv[1])
print(json.dumps({"sum": int(store[np.arange(len(store))].sum(dtype=np.int64)), **store.remote_stats}))
"""


def test_the_cache_is_on_by_default_in_the_users_cache_directory(s3: S3, tmp_path: Path) -> None:
    """With no cache settings a second process reads from the user's cache directory
    ($XDG_CACHE_HOME/zring/remote) without downloading again; ZRING_NO_CACHE=1 and
    remote={"no_cache": True} turn it off."""
    path, data = dense_file(tmp_path, "zstd", n=300, seed=7)
    key = "default-cache/d.zr"
    url = s3.put_file(key, path)
    xdg = tmp_path / "xdg"

    def run(no_cache: str | None = None, code: str = DEFAULT_READER) -> dict[str, int]:
        env = {k: v for k, v in os.environ.items() if k not in ("ZRING_NO_CACHE", "ZRING_CACHE_DIR")}
        env["XDG_CACHE_HOME"] = str(xdg)
        if no_cache is not None:
            env["ZRING_NO_CACHE"] = no_cache
        out = subprocess.run([sys.executable, "-c", code, url], capture_output=True, text=True, timeout=120, env=env)
        assert out.returncode == 0, out.stderr
        result: dict[str, int] = json.loads(out.stdout)
        assert result["sum"] == int(data.sum(dtype=np.int64))
        return result

    off = run(no_cache="1")
    assert off["cache_hits"] == off["cache_misses"] == 0 and not xdg.exists()
    run()
    assert any((xdg / "zring" / "remote").rglob("object")), "the store was cached whole"
    s3.proxy.clear()
    again = run()
    # The warm cache answers: only the open's request for the object's version.
    assert again["requests"] <= 1 and len(s3.proxy.gets(key)) <= 1
    explicit_off = DEFAULT_READER.replace("DenseStore(sys.argv[1])", 'DenseStore(sys.argv[1], remote={"no_cache": True})')
    s3.proxy.clear()
    assert run(code=explicit_off)["cache_hits"] == 0 and len(s3.proxy.gets(key)) >= 1


CONVERTER = """
import json, sys, numpy as np, zring
cols = {"x": np.arange(300 * 6, dtype=np.float32).reshape(300, 2, 3), "t": [np.arange(i % 9) for i in range(300)]}
ds = zring.write_dataset(sys.argv[1], cols, shard_records=64, codec="zstd")
np.testing.assert_array_equal(ds.gather(slice(None))["x"], cols["x"])
print(json.dumps(ds.store_paths()))
"""


def test_a_dataset_written_at_a_url_is_read_back_from_the_cache_without_a_download(s3: S3, tmp_path: Path) -> None:
    """The stores a conversion uploads become the default cache's whole-object
    entries: the dataset write_dataset returns, and a later process on the machine,
    read them without fetching a byte of them back; with the cache off every store
    is fetched."""
    env = {k: v for k, v in os.environ.items() if k not in ("ZRING_NO_CACHE", "ZRING_CACHE_DIR")}
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg")
    cache = tmp_path / "xdg" / "zring" / "remote"

    def convert(url: str, no_cache: str | None = None) -> list[str]:
        e = dict(env, **({"ZRING_NO_CACHE": no_cache} if no_cache else {}))
        out = subprocess.run([sys.executable, "-c", CONVERTER, url], capture_output=True, text=True, timeout=120, env=e)
        assert out.returncode == 0, out.stderr
        keys: list[str] = [p.split(f"{BUCKET}/", 1)[1] for p in json.loads(out.stdout)]
        return keys

    # Each new store's tail is read once by the builder's check before publishing;
    # beyond that, nothing of a store comes back.
    s3.proxy.clear()
    keys = convert(f"s3://{BUCKET}/seeded/ds")
    assert len(keys) == 10 and len(list(cache.rglob("object"))) == 10  # 5 shards of 2 fields
    assert {k: len(s3.proxy.gets(k)) for k in keys} == dict.fromkeys(keys, 1)
    s3.proxy.clear()
    reader = "import sys, zring; zring.open_dataset(sys.argv[1]).gather(slice(None))"
    out = subprocess.run([sys.executable, "-c", reader, f"s3://{BUCKET}/seeded/ds"], capture_output=True, text=True,
                         timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert [k for k in keys if s3.proxy.gets(k)] == [], "a store was fetched by a later process"
    s3.proxy.clear()
    off = convert(f"s3://{BUCKET}/unseeded/ds", no_cache="1")
    assert len(list(cache.rglob("object"))) == 10
    assert all(len(s3.proxy.gets(k)) > 1 for k in off), "without a cache the stores are read remotely"


# ---------------------------------------------------------------------------------
# Whole-object cache entries.


def whole_entries(cache: Path) -> list[Path]:
    return sorted(cache.glob("v2/*/object"))


def ranged_gets(s3: S3, key: str) -> int:
    return sum(1 for r in s3.proxy.gets(key) if r[2])


def test_a_whole_object_is_fetched_once_then_read_locally(s3: S3, tmp_path: Path) -> None:
    path, data = dense_file(tmp_path, "zstd", n=300, seed=7)
    key = "whole/d.zr"
    url = s3.put_file(key, path)
    cache = tmp_path / "cache"
    remote = {"cache_dir": str(cache), "cache_bytes": 1 << 30}
    s3.proxy.clear()
    store = zring.DenseStore(url, remote=remote)
    stats = store.remote_stats
    assert stats is not None
    assert stats["whole_fetches"] == 1 and stats["whole_hits"] == 0
    assert stats["requests"] == 1 and stats["bytes"] == path.stat().st_size
    assert ranged_gets(s3, key) == 1
    assert len(whole_entries(cache)) == 1
    assert whole_entries(cache)[0].read_bytes() == path.read_bytes()
    idx = np.random.default_rng(4).integers(0, len(data), 100)
    for backend in ["pread", "mmap", "uring", "auto"]:
        s = zring.DenseStore(url, remote=remote, backend=backend)
        assert s.remote_stats is not None and s.remote_stats["whole_hits"] == 1
        np.testing.assert_array_equal(s[idx], data[idx])
        np.testing.assert_array_equal(s[10:20], data[10:20])
        s.verify()
    # Another process: no GET at all (a HEAD names the object's version).
    other = run_reader(url, cache, "auto")
    assert other["sum"] == int(data.sum(dtype=np.int64))
    assert other["whole_hits"] == 1 and other["requests"] == 0
    assert ranged_gets(s3, key) == 1
    # A replaced object (new ETag) is fetched again, never read from the old entry.
    new_path, new = dense_file(tmp_path, "zstd", n=300, seed=8)
    s3.put_file(key, new_path)
    third = run_reader(url, cache, "auto")
    assert third["sum"] == int(new.sum(dtype=np.int64)) and third["whole_fetches"] == 1
    assert ranged_gets(s3, key) == 2


def test_a_damaged_whole_entry_is_refetched(s3: S3, tmp_path: Path) -> None:
    path, data = dense_file(tmp_path, "raw", n=100, seed=9)
    url = s3.put_file("whole/damaged.zr", path)
    cache = tmp_path / "cache"
    remote = {"cache_dir": str(cache), "cache_bytes": 1 << 30}
    zring.DenseStore(url, remote=remote)
    (entry,) = whole_entries(cache)
    for damage in (-100, 10):
        raw = bytearray(entry.read_bytes())
        raw[damage] ^= 0x01
        entry.write_bytes(bytes(raw))
        store = zring.DenseStore(url, remote=remote)
        assert store.remote_stats is not None and store.remote_stats["whole_fetches"] == 1
        np.testing.assert_array_equal(store[::7], data[::7])
        assert entry.read_bytes() == path.read_bytes()


def test_a_killed_download_publishes_nothing(s3: S3, tmp_path: Path) -> None:
    path, data = dense_file(tmp_path, "raw", n=100, seed=10)
    url = s3.put_file("whole/killed.zr", path)
    cache = tmp_path / "cache"
    s3.proxy.delay = 30.0
    try:
        child = subprocess.Popen(
            [sys.executable, "-c", READER, url, str(cache), "always"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while not list(cache.glob("v2/*/.tmp.*")):
            assert time.monotonic() < deadline, "the child never started its download"
            assert child.poll() is None, "the child exited before downloading"
            time.sleep(0.005)
        child.kill()
        child.wait()
    finally:
        s3.proxy.delay = 0.0
    assert whole_entries(cache) == []
    store = zring.DenseStore(url, remote={"cache_dir": str(cache), "cache_bytes": 1 << 30})
    assert store.remote_stats is not None and store.remote_stats["whole_fetches"] == 1
    np.testing.assert_array_equal(store[::3], data[::3])
    assert len(whole_entries(cache)) == 1 and not list(cache.glob("v2/*/.tmp.*"))


def test_whole_entries_are_evicted_least_recent_first(s3: S3, tmp_path: Path) -> None:
    files = [dense_file(tmp_path, "raw", n=400, seed=20 + k) for k in range(3)]
    urls = [s3.put_file(f"whole/evict-{k}.zr", p) for k, (p, _) in enumerate(files)]
    size = files[0][0].stat().st_size
    cache = tmp_path / "cache"
    remote = {"cache_dir": str(cache), "cache_bytes": size * 5 // 2}
    stores = []
    for url in urls:
        stores.append(zring.DenseStore(url, remote=remote))
        time.sleep(0.02)
        assert sum(e.stat().st_size for e in whole_entries(cache)) <= size * 5 // 2
    assert len(whole_entries(cache)) == 2
    # The evicted entry's store still reads its (unlinked) file.
    np.testing.assert_array_equal(stores[0][::5], files[0][1][::5])
    again = zring.DenseStore(urls[0], remote=remote)
    assert again.remote_stats is not None and again.remote_stats["whole_fetches"] == 1


def test_cache_whole_never_keeps_chunks(s3: S3, tmp_path: Path) -> None:
    path, data = dense_file(tmp_path, "zstd", n=200, seed=11)
    url = s3.put_file("whole/never.zr", path)
    cache = tmp_path / "cache"
    store = zring.DenseStore(
        url, remote={"cache_dir": str(cache), "cache_bytes": 1 << 30, "cache_whole": "never"}
    )
    np.testing.assert_array_equal(store[::4], data[::4])
    stats = store.remote_stats
    assert stats is not None and stats["whole_fetches"] == 0 and stats["cache_misses"] > 0
    assert whole_entries(cache) == []
    settings = json.loads(store.__reduce__()[1][1])["remote"]
    assert settings["cache"]["whole"] == "never"
    with pytest.raises(ValueError, match="cache_whole"):
        zring.DenseStore(url, remote={"cache_dir": str(cache), "cache_whole": "sometimes"})


def test_dataset_shards_are_cached_whole(s3: S3, tmp_path: Path) -> None:
    n = 300
    cols = {"x": np.arange(n * 6, dtype=np.float32).reshape(n, 2, 3), "y": np.arange(n)}
    zring.write_dataset(tmp_path / "ds", cols, shard_records=64, codec="zstd")
    url = s3.put_tree("datasets/whole-ds", tmp_path / "ds")
    cache = tmp_path / "cache"
    remote = {"cache_dir": str(cache), "cache_bytes": 1 << 30}
    ds = zring.open_dataset(url, remote=remote)
    np.testing.assert_array_equal(ds.gather(slice(None))["x"], cols["x"])
    # 5 shards x 2 fields, one entry each.
    assert len(whole_entries(cache)) == 10
    s3.proxy.clear()
    again = zring.open_dataset(url, remote=remote)
    np.testing.assert_array_equal(again.gather(slice(None))["y"], cols["y"])
    assert ranged_gets(s3, "datasets/whole-ds/") == 0


# ---------------------------------------------------------------------------------
# Writing to a URL: the store is built in a staging directory and uploaded by close.


def test_writers_and_pack_upload_stores_to_a_url(s3: S3, tmp_path: Path) -> None:
    rng = np.random.default_rng(9)
    # 20 MiB: a multipart upload of 8 MiB parts.
    big = rng.integers(0, 255, (320, 256, 256), dtype=np.uint8)
    url = f"s3://{BUCKET}/written/big.zr"
    s3.proxy.clear()
    with zring.DenseWriter(url, np.uint8, (256, 256), codec="raw") as w:
        assert w.path == url
        w.append(big)
    with s3.proxy.lock:
        methods = [r[0] for r in s3.proxy.requests]
    assert methods.count("PUT") >= 3 and "POST" in methods, methods
    idx = [319, 0, 100]
    np.testing.assert_array_equal(zring.DenseStore(url)[idx], big[idx])

    # A small store is one PUT; ragged records round-trip.
    pieces = [np.arange(i % 13, dtype=np.int32) for i in range(200)]
    small = f"s3://{BUCKET}/written/tokens.zr"
    with zring.RaggedWriter(small, np.int32) as w:
        w.append(pieces)
    got = zring.open(small)[[5, 199, 0]]
    for a, i in zip(got.to_arrays(), [5, 199, 0]):
        np.testing.assert_array_equal(a, pieces[i])

    # An existing object is refused unless overwrite=True.
    with pytest.raises(zring.StoreExistsError, match="written/tokens.zr"):
        zring.RaggedWriter(small, np.int32)
    with zring.RaggedWriter(small, np.int32, overwrite=True) as w:
        w.append(pieces[:3])
    assert len(zring.open(small)) == 3

    # The CLI packs straight to a URL.
    npy = tmp_path / "x.npy"
    np.save(npy, big[:40])
    packed = f"s3://{BUCKET}/written/packed.zr"
    out = run_cli("pack", "--npy", str(npy), packed)
    assert out.returncode == 0, out.stderr
    np.testing.assert_array_equal(zring.DenseStore(packed)[39], big[39])


def test_a_failed_upload_publishes_nothing(s3: S3, tmp_path: Path) -> None:
    """Every request of the upload fails (500s past the retries): close raises an
    error naming the URL, and no object appears."""
    url = f"s3://{BUCKET}/written/failed.zr"
    w = zring.DenseWriter(url, np.uint8, (1024,), codec="raw", remote={"max_retries": 2, **FAST})
    w.append(np.ones((64, 1024), dtype=np.uint8))
    s3.proxy.fail_next = 1000
    try:
        with pytest.raises(zring.ZringError, match="written/failed.zr"):
            w.close()
    finally:
        s3.proxy.fail_next = 0
    with pytest.raises(zring.StoreNotFoundError):
        zring.DenseStore(url)


@pytest.mark.parametrize("fault", ["503 SlowDown", "500", "connection reset"])
def test_transient_upload_faults_are_retried(s3: S3, fault: str) -> None:
    """Throttling, a server error, or a connection reset while a part is sent: the
    upload retries with backoff and the store is published whole. (A reset is
    restarted for the parts of a multipart upload; the client itself retries the
    statuses.)"""
    url = f"s3://{BUCKET}/written/retried-{fault.split()[0]}.zr"
    rows = 1280 if fault == "connection reset" else 64  # 10 MiB: a multipart upload
    data = np.arange(rows * 1024, dtype=np.int64).reshape(rows, 1024)
    w = zring.DenseWriter(url, np.int64, (1024,), codec="raw", remote=FAST)
    w.append(data)
    s3.proxy.clear()
    if fault == "connection reset":
        s3.proxy.only, s3.proxy.drop_next = "PUT", 2  # two parts cut off mid-body
    else:
        s3.proxy.fail_with = (503, "SlowDown") if fault.startswith("503") else (500, "InternalError")
        s3.proxy.fail_next = 2
    try:
        assert w.close() == rows
    finally:
        s3.proxy.fail_next = s3.proxy.drop_next = 0
        s3.proxy.fail_with, s3.proxy.only = (500, "InternalError"), None
    with s3.proxy.lock:
        puts = [r for r in s3.proxy.requests if r[0] == "PUT"]
    assert len(puts) >= 3, puts
    np.testing.assert_array_equal(zring.DenseStore(url)[[rows - 1, 0]], data[[rows - 1, 0]])


def test_refused_and_missing_destinations_say_so(s3: S3) -> None:
    """403 is not retried and is a permission error naming the URL; a bucket that
    does not exist is an error naming it; neither publishes anything."""
    url = f"s3://{BUCKET}/written/forbidden.zr"
    w = zring.DenseWriter(url, np.uint8, (16,), codec="raw", remote=FAST)
    w.append(np.zeros((4, 16), dtype=np.uint8))
    s3.proxy.fail_with, s3.proxy.fail_next = (403, "AccessDenied"), 1000
    s3.proxy.clear()
    try:
        with pytest.raises(PermissionError, match="written/forbidden.zr"):
            w.close()
        with s3.proxy.lock:
            assert len([r for r in s3.proxy.requests if r[0] == "PUT"]) == 1, "403 is not retried"
    finally:
        s3.proxy.fail_next = 0
        s3.proxy.fail_with = (500, "InternalError")
    with pytest.raises(zring.StoreNotFoundError):
        zring.DenseStore(url)
    missing = "s3://no-such-bucket/x.zr"
    with pytest.raises(zring.ZringError, match="no-such-bucket"):
        with zring.DenseWriter(missing, np.uint8, (16,), remote=FAST) as w:
            w.append(np.zeros((4, 16), dtype=np.uint8))


def test_expired_and_missing_credentials_are_errors_naming_the_url(s3: S3, tmp_path: Path) -> None:
    """Credentials the server refuses as expired (400 ExpiredToken, as S3 answers a
    stale session token) end in an error naming the URL and the server's code, asked
    once; with no credentials anywhere, the open fails naming the URL in bounded
    time instead of waiting on a credential source that is not there."""
    path, _ = dense_file(tmp_path, n=10)
    url = s3.put_file("creds/a.zr", path)
    s3.proxy.fail_with, s3.proxy.fail_next = (400, "ExpiredToken"), 1000
    s3.proxy.clear()
    try:
        with pytest.raises(zring.ZringError, match=r"creds/a\.zr.*ExpiredToken"):
            zring.open(url, remote={"no_cache": True, **FAST})
        assert len(s3.proxy.gets()) == 1, "a refused token is not retried"
    finally:
        s3.proxy.fail_next = 0
        s3.proxy.fail_with = (500, "InternalError")
    # No credentials: a process whose environment names the server and nothing else.
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({k: os.environ[k] for k in ("AWS_ENDPOINT_URL", "AWS_REGION", "AWS_ALLOW_HTTP")})
    code = (
        "import zring\n"
        "try:\n"
        f"    zring.open({url!r}, remote={{'no_cache': True}})\n"
        "except zring.ZringError as e:\n"
        "    print('ERROR', e)\n"
    )
    start = time.monotonic()
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0 and r.stdout.startswith("ERROR") and "creds/a.zr" in r.stdout, (r.stdout, r.stderr)
    # It says what is missing, not only the metadata endpoint object_store then asks.
    assert "no credentials are set" in r.stdout and "AWS_ACCESS_KEY_ID" in r.stdout, r.stdout
    assert time.monotonic() - start < 90


def test_write_dataset_publishes_at_a_url(s3: S3, tmp_path: Path) -> None:
    n = 300
    cols = {"x": np.arange(n * 6, dtype=np.float32).reshape(n, 2, 3), "t": [np.arange(i % 9) for i in range(n)]}
    url = f"s3://{BUCKET}/written/ds"
    ds = zring.write_dataset(url, cols, shard_records=64, codec="zstd")
    assert ds.path == url and len(ds) == n and ds.version == 1
    again = zring.open_dataset(url)
    np.testing.assert_array_equal(again.gather(slice(None))["x"], cols["x"])
    np.testing.assert_array_equal(again[[299]]["t"].to_arrays()[0], cols["t"][299])
    with pytest.raises(zring.StoreExistsError):
        zring.write_dataset(url, cols)
    # An append reads the manifest for the schemas, not the stores: each version-1
    # store is asked for once, by the open of the dataset the call returns.
    s3.proxy.clear()
    more = zring.write_dataset(url, {k: v[:10] for k, v in cols.items()}, append=True)
    assert (more.version, len(more)) == (2, n + 10)
    for store in ds.store_paths():
        key = store.split(f"{BUCKET}/", 1)[1]
        assert len(s3.proxy.gets(key)) == 1, (key, s3.proxy.gets(key))


def test_convert_writes_each_split_under_a_url_prefix(s3: S3) -> None:
    datasets = pytest.importorskip("datasets")
    hf = datasets.DatasetDict({
        "train": datasets.Dataset.from_dict({"label": [0, 1, 1], "text": ["a", "bb", "ccc"]}),
        "test": datasets.Dataset.from_dict({"label": [5], "text": ["z"]}),
    })
    url = f"s3://{BUCKET}/written/hf"
    out = zring.convert(hf, url)
    assert {k: (v.path, len(v)) for k, v in out.items()} == {"train": (f"{url}/train", 3), "test": (f"{url}/test", 1)}
    assert zring.open_dataset(f"{url}/train")[2] == {"label": np.array(1), "text": "ccc"}


def test_two_processes_appending_at_a_url_lose_no_acknowledged_record(s3: S3) -> None:
    """The concurrent-writers race of test_concurrent_writers.py against the S3
    server: each version's manifest is created with a create-if-absent PUT, so every
    append that returns is its own version and its records stay; the others get
    VersionConflictError."""
    from test_concurrent_writers import API_WRITER, check_exactly_the_acknowledged_records, race

    url = f"s3://{BUCKET}/raced/ds"
    won, lost = race(url, API_WRITER, 15)
    assert won, "no append succeeded"
    check_exactly_the_acknowledged_records(url, won)

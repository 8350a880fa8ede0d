"""Read settings: one rule set. Python's keyword arguments go to the engine's
`ReadOptions::set`, so a bad value raises `InvalidArgumentError` whose message is
the Rust error's Display, the same that engine/tests/settings.rs asserts and that
`zring verify --read KEY=VALUE` prints (cli/tests/cli_settings.rs): the table is the
same in all three. Pickles carry the engine's serialised settings."""

import json
import pickle

import numpy as np
import pytest

import zring
from conftest import write_dense

# (keyword arguments, engine key, engine text, what the engine expects)
BAD = [
    ({"queue_depth": 0}, "queue_depth", "0", "a whole number from 1 to 256"),
    ({"remote": {"in_flight": 0}}, "remote.in_flight", "0", "a whole number from 1 to 1024"),
    ({"remote": {"in_flight": 100000}}, "remote.in_flight", "100000", "a whole number from 1 to 1024"),
    ({"backend": "disk"}, "backend", "disk", "auto, pread, mmap or uring"),
    ({"remote": {"cache_bytes": -5}}, "remote.cache_bytes", "-5", "a size (e.g. 65536, 64k, 2G)"),
    ({"threads": -1}, "threads", "-1", "a whole number of threads (0: the caller and every pool worker)"),
]


def rust_display(key: str, value: str, expected: str) -> str:
    # Rust's `{value:?}` of an ASCII str without quotes or backslashes: in quotes.
    return f'invalid argument: read setting {key}="{value}": expected {expected}'


@pytest.fixture
def store_path(tmp_path):
    path = tmp_path / "s.zr"
    write_dense(path, np.arange(24, dtype=np.uint8).reshape(8, 3))
    return path


@pytest.mark.parametrize("kwargs,key,value,expected", BAD)
def test_a_bad_setting_raises_the_engines_error_from_every_open(store_path, kwargs, key, value, expected):
    for opener in (zring.open, zring.DenseStore, zring.Dataset):
        with pytest.raises(zring.InvalidArgumentError) as e:
            opener(store_path, **kwargs)
        assert isinstance(e.value, ValueError)
        assert str(e.value) == rust_display(key, value, expected), opener


def test_an_unknown_setting_and_a_wrong_type_are_named(store_path):
    with pytest.raises(zring.InvalidArgumentError, match='^invalid argument: no read setting "thread" '):
        zring.DenseStore(store_path, thread=2)
    with pytest.raises(zring.InvalidArgumentError, match='no read setting "remote.in_fligth"'):
        zring.DenseStore(store_path, remote={"in_fligth": 3})
    with pytest.raises(TypeError, match="read setting threads takes"):
        zring.DenseStore(store_path, threads=[1])
    with pytest.raises(TypeError, match="remote= takes a dict"):
        zring.DenseStore(store_path, remote=3)


def test_good_settings_of_every_python_type_are_taken(store_path, tmp_path):
    store = zring.open(
        store_path,
        backend="pread",
        verify_checksums=False,
        threads=np.int64(2),
        remote={"timeout": 2.5, "cache_dir": tmp_path / "cache", "cache_bytes": "1G", "config": {"aws_region": "x"}},
    )
    assert store.backend == "pread"
    settings = json.loads(store.__reduce__()[1][1])
    assert settings["threads"] == 2 and settings["verify_checksums"] is False
    assert settings["remote"]["timeout"] == {"secs": 2, "nanos": 500_000_000}
    assert settings["remote"]["cache"]["max_bytes"] == 1 << 30
    assert settings["remote"]["config"] == [["aws_region", "x"]]


def test_pickles_carry_the_engines_settings(store_path, tmp_path):
    store = zring.DenseStore(store_path, backend="pread", threads=1, remote={"in_flight": 3})
    copy = pickle.loads(pickle.dumps(store))
    assert copy.backend == "pread"
    assert copy.__reduce__()[1][1] == store.__reduce__()[1][1]
    np.testing.assert_array_equal(copy[[7, 0]], store[[7, 0]])
    path = tmp_path / "ds"
    zring.write_dataset(path, {"x": np.arange(6, dtype=np.int32)})
    ds = zring.Dataset(path, backend="pread", threads=1, remote={"in_flight": 5})
    again = pickle.loads(pickle.dumps(ds))
    assert json.loads(again._settings) == json.loads(ds._settings)
    assert json.loads(ds._settings)["remote"]["in_flight"] == 5
    assert again.version == ds.version and again.gather([4])["x"].tolist() == [4]


def test_sizes_take_units(tmp_path):
    """Size arguments take an int of bytes or text with binary units, by the
    engine's one rule (the CLI's flags and the environment read sizes the same)."""
    from zring._zring import parse_size

    assert parse_size("4k") == parse_size("4KiB") == parse_size("4KB") == parse_size(4096) == 4096
    assert parse_size(" 1.5M ") == 3 << 19
    with pytest.raises(zring.InvalidArgumentError, match="is not a size"):
        parse_size("lots")
    with pytest.raises(zring.InvalidArgumentError, match="at least 0"):
        parse_size(-1)
    with pytest.raises(TypeError, match="a size is an int"):
        parse_size(1.5)
    ds = zring.write_dataset(tmp_path / "ds", {"x": np.zeros((64, 256), np.uint8)}, shard_bytes="4k", codec="raw",
                             batch_records=8)
    assert ds.shards == 4  # 16 records of 256 bytes fill 4 KiB
    sampler = zring.Sampler(len(ds), 8, "cyclic")
    with zring.Loader(ds, sampler, lookahead_bytes="64M") as loader:
        assert loader.options["lookahead_bytes"] == 64 << 20

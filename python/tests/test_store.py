"""Opening, closing, verifying and misusing stores: every failure is a clear exception."""

import os
import threading

import numpy as np
import pytest

import zring
from conftest import write_dense, write_ragged


@pytest.fixture
def data():
    return np.arange(50 * 8, dtype=np.float32).reshape(50, 8)


@pytest.fixture
def path(tmp_path, data):
    write_dense(tmp_path / "d.zr", data, codec="zstd")
    return tmp_path / "d.zr"


def test_properties(path, data):
    with zring.DenseStore(path) as s:
        assert len(s) == 50
        assert s.dtype == np.float32
        assert s.item_shape == (8,) and s.ndim == 1 and s.item_bytes == 32
        assert s.path == str(path)
        assert s.backend in ("mmap", "pread", "uring")
        assert "DenseStore" in repr(s) and "len=50" in repr(s)
        stats = s.stats()
        assert stats["records"] == 50 and stats["logical_bytes"] == data.nbytes


@pytest.mark.parametrize("backend", ["auto", "pread", "mmap", "uring"])
def test_read_options(path, data, backend):
    if backend == "uring" and zring.DenseStore(path, backend="uring").backend != "uring":
        if os.environ.get("ZRING_REQUIRE_URING") == "1":
            pytest.fail("io_uring is unavailable but ZRING_REQUIRE_URING=1 requires it")
        pytest.skip("io_uring unavailable here; set ZRING_REQUIRE_URING=1 to fail instead")
    s = zring.DenseStore(path, backend=backend, verify_checksums=True, threads=1)
    np.testing.assert_array_equal(s[[4, 0, 49]], data[[4, 0, 49]])
    if backend != "auto":
        assert s.backend == backend


def test_closed_store_raises_closed_error(path):
    s = zring.DenseStore(path)
    s.close()
    s.close()
    assert s.closed and "closed" in repr(s)
    for op in (lambda: s[0], lambda: s.gather([1]), s.verify, s.stats):
        with pytest.raises(zring.ClosedError, match="closed"):
            op()
    assert len(s) == 50  # metadata stays readable


def test_missing_and_foreign_files(tmp_path):
    with pytest.raises(FileNotFoundError) as e:
        zring.DenseStore(tmp_path / "nope.zr")
    assert isinstance(e.value, zring.StoreNotFoundError) and e.value.errno == 2
    junk = tmp_path / "junk.zr"
    junk.write_bytes(b"not a store" * 1000)
    with pytest.raises(zring.CorruptStoreError, match="not a valid zring store"):
        zring.DenseStore(junk)
    with pytest.raises(ValueError):
        zring.open(junk)
    with pytest.raises(ValueError, match="backend"):
        zring.DenseStore(junk, backend="floppy")


def test_wrong_store_class_names_the_right_one(tmp_path, path):
    with pytest.raises(zring.SchemaError, match="dense store; open it with DenseStore"):
        zring.RaggedStore(path)
    write_ragged(tmp_path / "r.zr", [np.ones(2, np.int8)], "int8")
    with pytest.raises(zring.SchemaError, match="ragged store; open it with RaggedStore"):
        zring.DenseStore(tmp_path / "r.zr")


def test_verify_finds_a_flipped_byte(tmp_path):
    data = np.random.default_rng(0).integers(0, 255, (20, 4096), dtype=np.uint8)
    p = tmp_path / "raw.zr"
    write_dense(p, data, codec="raw").verify()
    raw = bytearray(p.read_bytes())
    raw[4096 + 10 * 4096 + 7] ^= 0xFF  # inside record 10 of the data region
    p.write_bytes(bytes(raw))
    s = zring.DenseStore(p)
    with pytest.raises(zring.CorruptStoreError, match="record 10"):
        s.verify()
    with pytest.raises(zring.CorruptStoreError, match="checksum"):
        zring.DenseStore(p, verify_checksums=True)[10]


def test_gather_out_is_checked(path):
    s = zring.DenseStore(path)
    with pytest.raises(TypeError, match="dtype"):
        s.gather([1, 2], out=np.empty((2, 8), np.float64))
    with pytest.raises(ValueError, match="shape"):
        s.gather([1, 2], out=np.empty((3, 8), np.float32))
    with pytest.raises(ValueError, match="C-contiguous"):
        s.gather([1, 2], out=np.empty((8, 2), np.float32).T)
    ro = np.empty((2, 8), np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        s.gather([1, 2], out=ro)
    with pytest.raises(TypeError, match="NumPy array"):
        s.gather([1, 2], out=[[0.0] * 8] * 2)


def test_ragged_gather_into_out(tmp_path):
    records = [np.arange(n, dtype=np.int32) for n in (2, 5, 1)]
    s = write_ragged(tmp_path / "r.zr", records, "int32")
    out = np.full(10, -1, np.int32)
    batch = s.gather([1, 0], out=out)
    assert np.shares_memory(batch.values, out)
    assert out[:7].tolist() == [0, 1, 2, 3, 4, 0, 1] and out[7] == -1
    with pytest.raises(ValueError, match="elements"):
        s.gather([1, 1], out=np.empty(9, np.int32))
    with pytest.raises(TypeError, match="dtype"):
        s.gather([1], out=np.empty(9, np.int64))


def test_close_while_another_thread_reads_is_safe(path, data):
    s = zring.DenseStore(path)
    errors, stop = [], threading.Event()

    def reader():
        while not stop.is_set():
            try:
                np.testing.assert_array_equal(s[[1, 2]], data[[1, 2]])
            except zring.ClosedError:
                return
            except Exception as e:  # pragma: no cover - reported below
                errors.append(e)
                return

    t = threading.Thread(target=reader)
    t.start()
    s.close()
    stop.set()
    t.join(10)
    assert not t.is_alive() and errors == []

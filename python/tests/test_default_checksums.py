"""Checksums are verified on read by default: a store opened without options refuses
a record with one flipped payload byte, naming the record, on every backend, for raw
and zstd records alike; ``verify_checksums=False`` is the explicit opt-out."""

import os

import numpy as np
import pytest

import zring
from format_reader import read_file

N = 40
WIDTH = 1024
FLIPPED = 7


def _damaged_store(tmp_path, codec):
    """A store whose record FLIPPED has one payload byte flipped, and its source."""
    if codec == "raw":
        data = np.random.default_rng(1).integers(0, 256, (N, WIDTH), dtype=np.uint8)
    else:
        data = (np.arange(N * WIDTH) // 16 % 7).astype(np.uint8).reshape(N, WIDTH)
    path = tmp_path / f"{codec}.zr"
    with zring.DenseWriter(path, data.dtype, (WIDTH,), codec=codec) as w:
        w.append(data)
    record = read_file(path).records[FLIPPED]
    # Tag 0: stored raw; 1: a zstd frame (the case where zstd alone might decode the
    # damage into other bytes without complaint).
    assert record.tag == (0 if codec == "raw" else 1), record.tag
    raw = bytearray(path.read_bytes())
    raw[record.offset + record.stored_len // 2] ^= 0x01
    path.write_bytes(bytes(raw))
    return path, data


def _open(path, backend):
    if backend is None:
        return zring.DenseStore(path)
    s = zring.DenseStore(path, backend=backend)
    if backend == "uring" and s.backend != "uring":
        if os.environ.get("ZRING_REQUIRE_URING") == "1":
            pytest.fail("io_uring is unavailable but ZRING_REQUIRE_URING=1 requires it")
        pytest.skip("io_uring unavailable here; set ZRING_REQUIRE_URING=1 to fail instead")
    assert s.backend == backend
    return s


@pytest.mark.parametrize("backend", [None, "pread", "mmap", "uring"])
@pytest.mark.parametrize("codec", ["raw", "zstd"])
def test_a_flipped_byte_raises_naming_the_record_by_default(tmp_path, codec, backend):
    path, data = _damaged_store(tmp_path, codec)
    s = _open(path, backend)
    np.testing.assert_array_equal(s[[FLIPPED - 1, FLIPPED + 1]], data[[FLIPPED - 1, FLIPPED + 1]])
    reads = {
        "get": lambda: s[FLIPPED],
        "fancy index": lambda: s[[0, FLIPPED]],
        "gather": lambda: s.gather([FLIPPED, 1]),
        "slice": lambda: s[FLIPPED - 2 : FLIPPED + 2],
    }
    for name, read in reads.items():
        with pytest.raises(zring.CorruptStoreError, match=f"record {FLIPPED}\\b") as e:
            read()
        assert "checksum mismatch" in str(e.value), (name, str(e.value))
        assert str(path) in str(e.value), (name, str(e.value))


def test_the_opt_out_returns_the_damaged_bytes(tmp_path):
    path, data = _damaged_store(tmp_path, "raw")
    got = zring.DenseStore(path, backend="pread", verify_checksums=False)[FLIPPED]
    assert int((got != data[FLIPPED]).sum()) == 1

"""Reads return arrays over engine-owned aligned memory, without a copy, that the
caller may write to without touching the store; buffers are recycled."""

import numpy as np

import zring
from conftest import write_dense, write_ragged


def address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def owner(a):
    """The object at the end of an array's base chain."""
    while isinstance(a, np.ndarray) and a.base is not None:
        a = a.base
    return a


def test_returned_arrays_are_views_of_an_engine_buffer(tmp_path):
    data = np.arange(64 * 10, dtype=np.float64).reshape(64, 10)
    store = write_dense(tmp_path / "d.zr", data, codec="zstd")
    batch = store[[3, 1, 4]]
    buf = batch.base
    assert isinstance(buf, zring.EngineBuffer)
    assert buf.address == address(batch)
    assert buf.nbytes == batch.nbytes
    assert buf.align >= 64 and buf.address % 64 == 0
    assert batch.flags.c_contiguous and batch.flags.writeable and not batch.flags.owndata
    one = store[5]
    assert isinstance(one.base, zring.EngineBuffer)
    # Views of a returned array still lead back to the engine buffer.
    assert owner(batch[1:]) is buf


def test_writing_to_a_returned_batch_does_not_alter_the_store(tmp_path):
    data = np.arange(40, dtype=np.int32).reshape(10, 4)
    for codec in ("raw", "zstd"):
        store = write_dense(tmp_path / f"{codec}.zr", data, codec=codec)
        batch = store[[2, 2]]
        batch[:] = -1
        np.testing.assert_array_equal(store[[2, 2]], data[[2, 2]])
        np.testing.assert_array_equal(store[2], data[2])


def test_two_live_batches_never_share_memory(tmp_path):
    store = write_dense(tmp_path / "d.zr", np.arange(100, dtype=np.uint8).reshape(25, 4))
    a, b = store[[0, 1]], store[[0, 1]]
    assert not np.shares_memory(a, b)
    a[:] = 0
    np.testing.assert_array_equal(b, [[0, 1, 2, 3], [4, 5, 6, 7]])


def test_dropped_batches_are_recycled(tmp_path):
    store = write_dense(tmp_path / "d.zr", np.ones((64, 1024), np.uint8))
    for _ in range(3):
        store[:32]
    before = zring._zring._buffer_pool_stats()
    for _ in range(20):
        batch = store[:32]
        del batch
    after = zring._zring._buffer_pool_stats()
    assert after["allocations"] == before["allocations"]
    assert after["reuses"] >= before["reuses"] + 20


def test_ragged_values_are_an_engine_buffer_and_records_are_views(tmp_path):
    records = [np.arange(n, dtype=np.int64) for n in (3, 1, 7)]
    store = write_ragged(tmp_path / "r.zr", records, "int64", codec="zstd")
    batch = store[[2, 0]]
    assert isinstance(batch.values.base, zring.EngineBuffer)
    arrays = batch.to_arrays()
    assert all(np.shares_memory(a, batch.values) for a in arrays)
    assert all(owner(a) is batch.values.base for a in arrays)
    assert batch.cu_seqlens.dtype == np.int64 and batch.cu_seqlens.tolist() == [0, 7, 10]
    assert batch.shapes.tolist() == [[7], [3]]
    assert isinstance(store[1].base, zring.EngineBuffer)


def test_numpy_dlpack_export_shares_the_engine_memory(tmp_path):
    store = write_dense(tmp_path / "d.zr", np.arange(12, dtype=np.float32).reshape(3, 4))
    batch = store[[0, 2]]
    exported = np.from_dlpack(batch)
    assert np.shares_memory(exported, batch)
    assert address(exported) == batch.base.address


def test_gather_into_a_caller_array_fills_it_in_place(tmp_path):
    data = np.arange(30, dtype=np.int16).reshape(10, 3)
    store = write_dense(tmp_path / "d.zr", data, codec="zstd")
    out = np.full((4, 3), -1, np.int16)
    got = store.gather([9, 0, 9, 3], out=out)
    assert got is out
    np.testing.assert_array_equal(out, data[[9, 0, 9, 3]])
    one = np.empty(3, np.int16)
    store.gather(-1, out=one)
    np.testing.assert_array_equal(one, data[-1])

"""Index arrays of every integer dtype and byte order select the records NumPy means;
arrays of other kinds are refused with a TypeError naming the dtype."""

import numpy as np
import pytest

import zring
from conftest import write_dense, write_ragged

N = 20
INT_CODES = ["i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8"]
ORDERS = ["<", ">", "="]


@pytest.fixture
def data():
    return np.arange(N * 3, dtype=np.int32).reshape(N, 3)


@pytest.fixture
def store(tmp_path, data):
    return write_dense(tmp_path / "d.zr", data, codec="raw")


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("code", INT_CODES)
def test_every_integer_dtype_and_byte_order(store, data, code, order):
    dt = np.dtype(order + code)
    idx = np.array([9, 1, 1, 12, 19, 0], dtype=dt)
    want = data[idx.astype(np.int64)]
    np.testing.assert_array_equal(store[idx], want)
    np.testing.assert_array_equal(store.gather(idx), want)
    # Strided (non-contiguous) and multi-dimensional arrays of the same dtype.
    np.testing.assert_array_equal(store[idx[::2]], want[::2])
    np.testing.assert_array_equal(store[idx.reshape(2, 3)], want.reshape(2, 3, 3))
    # A 0-d array is one record, without a batch axis.
    np.testing.assert_array_equal(store[np.array(7, dtype=dt)], data[7])


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("code", ["i1", "i2", "i4", "i8"])
def test_negative_indices_in_every_signed_dtype_and_byte_order(store, data, code, order):
    idx = np.array([-1, -N, -3], dtype=order + code)
    np.testing.assert_array_equal(store[idx], data[[-1, -N, -3]])


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("code", INT_CODES)
def test_out_of_range_in_every_dtype_and_byte_order(store, code, order):
    # The largest value of the dtype: read with the wrong byte order it could land
    # inside the store (2**56 as big-endian u8 reads as 1 on a little-endian machine).
    dt = np.dtype(order + code)
    top = np.iinfo(dt).max
    with pytest.raises(zring.ZringIndexError, match="out of range"):
        store[np.array([0, top], dtype=dt)]


@pytest.mark.parametrize("code", ["u8", "i8"])
def test_byte_swapped_8_byte_indices_are_not_read_as_native(store, data, code):
    swapped = ">" if np.little_endian else "<"
    with pytest.raises(zring.ZringIndexError, match=str(2**56)):
        store[np.array([2**56], swapped + code)]
    np.testing.assert_array_equal(store[np.array([1], swapped + code)], data[[1]])


def test_boolean_masks(store, data):
    mask = np.zeros(N, bool)
    mask[[0, 5, 19]] = True
    np.testing.assert_array_equal(store[mask], data[mask])
    np.testing.assert_array_equal(store[np.zeros(2 * N, bool)[::2]], data[:0])
    with pytest.raises(IndexError, match="one entry per record"):
        store[np.ones(N - 1, bool)]
    with pytest.raises(IndexError, match="1-D"):
        store[np.ones((N, 1), bool)]


@pytest.mark.parametrize(
    "bad",
    [
        np.array([1.0, 2.0], "<f8"),
        np.array([1.0, 2.0], ">f8"),
        np.array([1.0, 2.0], "<f4"),
        np.array([1.0, 2.0], ">f4"),
        np.array([1.0, 2.0], "f2"),
        np.array([1 + 0j], "c16"),
        np.array([1, 2], object),
        np.array(["1"], "U1"),
        np.array([1], "datetime64[s]"),
        np.array([1], "timedelta64[s]"),
        np.zeros(1, [("a", "i8")]),
    ],
    ids=lambda a: str(a.dtype),
)
def test_arrays_of_other_kinds_are_refused(store, bad):
    with pytest.raises(TypeError, match="integers or a boolean mask"):
        store[bad]


@pytest.mark.parametrize("order", [">", "<"])
def test_ragged_stores_take_every_byte_order(tmp_path, order):
    records = [np.full(1 + i % 3, i, np.int16) for i in range(N)]
    store = write_ragged(tmp_path / "r.zr", records, "int16")
    idx = np.array([4, 17, 4], dtype=order + "u8")
    assert [r.tolist() for r in store[idx].to_arrays()] == [records[i].tolist() for i in (4, 17, 4)]
    with pytest.raises(zring.ZringIndexError):
        store[np.array([2**56], order + "u8")]

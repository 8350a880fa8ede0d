"""NumPy fancy-indexing semantics over stores: order, duplicates, negatives, slices,
masks, index arrays of any integer dtype, and IndexError before any read."""

import numpy as np
import pytest

import zring
from conftest import write_dense, write_ragged

N = 20


@pytest.fixture
def data():
    return np.arange(N * 6, dtype=np.int32).reshape(N, 2, 3)


@pytest.fixture
def store(tmp_path, data):
    return write_dense(tmp_path / "d.zr", data, codec="zstd")


@pytest.fixture
def ragged(tmp_path):
    records = [np.full(1 + i % 4, i, np.int16) for i in range(N)]
    return write_ragged(tmp_path / "r.zr", records, "int16", codec="zstd"), records


def test_integer_index_returns_one_record_without_batch_axis(store, data):
    assert store[3].shape == (2, 3)
    np.testing.assert_array_equal(store[3], data[3])
    np.testing.assert_array_equal(store[np.int64(4)], data[4])
    np.testing.assert_array_equal(store[np.uint8(5)], data[5])


def test_negative_indices_count_from_the_end(store, data):
    np.testing.assert_array_equal(store[-1], data[-1])
    np.testing.assert_array_equal(store[-N], data[0])
    np.testing.assert_array_equal(store[[-1, 0, -2]], data[[-1, 0, -2]])
    np.testing.assert_array_equal(store[np.array([-3, 2])], data[[-3, 2]])


def test_lists_keep_order_and_duplicates(store, data):
    idx = [7, 2, 7, 19, 0, 2]
    got = store[idx]
    assert got.shape == (6, 2, 3)
    np.testing.assert_array_equal(got, data[idx])


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"])
def test_index_arrays_of_every_integer_dtype(store, data, dtype):
    idx = np.array([9, 1, 1, 12], dtype=dtype)
    np.testing.assert_array_equal(store[idx], data[idx.astype(np.int64)])


def test_non_contiguous_and_multidimensional_index_arrays(store, data):
    idx = np.arange(N)[::-3]
    np.testing.assert_array_equal(store[idx], data[idx])
    grid = np.array([[0, 1], [5, 5], [19, 2]])
    got = store[grid]
    assert got.shape == (3, 2, 2, 3)
    np.testing.assert_array_equal(got, data[grid])


@pytest.mark.parametrize(
    "key",
    [slice(None), slice(2, 9), slice(None, None, 3), slice(15, 2, -2), slice(-5, None), slice(100, 200), slice(5, 5)],
)
def test_slices_follow_python_rules(store, data, key):
    got = store[key]
    np.testing.assert_array_equal(got, data[key])
    assert got.shape == data[key].shape


def test_boolean_mask_selects_records(store, data):
    mask = (np.arange(N) % 3) == 0
    np.testing.assert_array_equal(store[mask], data[mask])
    with pytest.raises(IndexError, match="mask"):
        store[mask[:-1]]


def test_tuple_indexes_records_then_inside_them(store, data):
    np.testing.assert_array_equal(store[3, 1], data[3, 1])
    np.testing.assert_array_equal(store[[1, 4], :, 2], data[[1, 4], :, 2])
    assert store[2, 1, 0] == data[2, 1, 0]


def test_ranges_and_index_objects(store, data):
    np.testing.assert_array_equal(store[range(3, 9, 2)], data[3:9:2])

    class Idx:
        def __index__(self):
            return 4

    np.testing.assert_array_equal(store[Idx()], data[4])


def test_empty_selections_give_empty_batches(store):
    assert store[[]].shape == (0, 2, 3)
    assert store[np.array([], np.int64)].shape == (0, 2, 3)
    assert store[range(0)].shape == (0, 2, 3)


@pytest.mark.parametrize("bad", [N, -N - 1, 2**63, -(2**70), [0, N], np.array([1, N + 5]), np.array([-N - 1])])
def test_out_of_range_is_an_index_error(store, bad):
    with pytest.raises(IndexError, match="out of range"):
        store[bad]
    with pytest.raises(zring.ZringIndexError):
        store.gather(bad)


@pytest.mark.parametrize("bad", [1.5, "3", None, np.array([1.0, 2.0]), True, np.bool_(True), {1: 2}])
def test_non_integer_indices_are_type_errors(store, bad):
    with pytest.raises(TypeError):
        store[bad]


def test_iteration_yields_every_record_in_order(store, data):
    got = list(store)
    assert len(got) == N
    for a, b in zip(got, data):
        np.testing.assert_array_equal(a, b)


def test_ragged_indexing(ragged):
    store, records = ragged
    np.testing.assert_array_equal(store[-1], records[-1])
    batch = store[[4, -1, 4]]
    assert [r.tolist() for r in batch.to_arrays()] == [records[i].tolist() for i in (4, -1, 4)]
    assert len(store[3:9:2]) == 3
    mask = np.zeros(N, bool)
    mask[[2, 3]] = True
    assert [r.tolist() for r in store[mask]] == [records[2].tolist(), records[3].tolist()]
    assert [r.tolist() for r in store] == [r.tolist() for r in records]
    assert len(store.gather(5)) == 1
    with pytest.raises(IndexError):
        store[N]
    with pytest.raises(TypeError, match="tuple"):
        store[1, 0]
    with pytest.raises(ValueError, match="1-D"):
        store[np.zeros((2, 2), np.int64)]

"""RaggedBatch: construction checks, record views, slicing."""

import numpy as np
import pytest

import zring


def make():
    return zring.RaggedBatch.from_records(
        [np.arange(6, dtype=np.float32).reshape(2, 3), np.ones((1, 4), np.float32), np.zeros((3, 1), np.float32)]
    )


def test_from_records_packs_values_offsets_and_shapes():
    b = make()
    assert len(b) == 3 and b.ndim == 2 and b.dtype == np.float32
    assert b.cu_seqlens.tolist() == [0, 6, 10, 13]
    assert b.shapes.tolist() == [[2, 3], [1, 4], [3, 1]]
    assert b.values.shape == (13,)


def test_records_are_views_into_values():
    b = make()
    arrays = b.to_arrays()
    assert [a.shape for a in arrays] == [(2, 3), (1, 4), (3, 1)]
    assert all(np.shares_memory(a, b.values) for a in arrays)
    arrays[1][0, 0] = 42
    assert b.values[6] == 42
    np.testing.assert_array_equal(b[0], np.arange(6).reshape(2, 3))
    np.testing.assert_array_equal(b[-1], np.zeros((3, 1)))
    assert [r.shape for r in b] == [(2, 3), (1, 4), (3, 1)]


def test_slices_are_batches_over_the_same_values():
    b = make()
    tail = b[1:]
    assert isinstance(tail, zring.RaggedBatch) and len(tail) == 2
    assert tail.cu_seqlens.tolist() == [0, 4, 7]
    assert np.shares_memory(tail.values, b.values)
    assert [r.shape for r in b[::2]] == [(2, 3), (3, 1)]
    assert len(b[5:]) == 0


def test_index_errors():
    b = make()
    with pytest.raises(IndexError):
        b[3]
    with pytest.raises(IndexError):
        b[-4]
    with pytest.raises(TypeError):
        b[True]


@pytest.mark.parametrize(
    "values, cu, shapes, match",
    [
        (np.ones(4), [0, 4], [[3]], "shapes do not match"),
        (np.ones(4), [1, 4], [[3]], "start at 0"),
        (np.ones(4), [0, 3], [[3]], "ends at 3"),
        (np.ones(4), [0, 3, 2, 4], [[3], [0], [2]], "non-decreasing"),
        (np.ones((2, 2)), [0, 4], [[4]], "1-D"),
        (np.ones(4), [0, 4], [4], r"\(1, ndim\)"),
    ],
)
def test_constructor_validates(values, cu, shapes, match):
    with pytest.raises(ValueError, match=match):
        zring.RaggedBatch(values, cu, shapes)


def test_constructor_accepts_consistent_parts():
    b = zring.RaggedBatch(np.arange(5), np.array([0, 2, 5], np.int32), np.array([[2], [3]], np.uint32))
    assert [r.tolist() for r in b.to_arrays()] == [[0, 1], [2, 3, 4]]
    with pytest.raises(TypeError):
        zring.RaggedBatch(np.arange(5), np.array([0.0, 5.0]), [[5]])

"""Iterators made before `close()` raise ClosedError afterwards, even for records of a
chunk they had already read."""

import numpy as np
import pytest

import zring
from conftest import write_dense, write_ragged

N = 12


def test_dense_iterator_after_close(tmp_path):
    store = write_dense(tmp_path / "d.zr", np.arange(N, dtype=np.int64))
    it = iter(store)
    assert next(it) == 0  # the whole store is now in the iterator's chunk
    store.close()
    with pytest.raises(zring.ClosedError, match="closed"):
        list(it)
    with pytest.raises(zring.ClosedError):
        next(it)


def test_ragged_iterator_after_close(tmp_path):
    records = [np.arange(1 + i % 3, dtype=np.float32) for i in range(N)]
    store = write_ragged(tmp_path / "r.zr", records, "float32")
    it = iter(store)
    np.testing.assert_array_equal(next(it), records[0])
    store.close()
    with pytest.raises(zring.ClosedError, match="closed"):
        list(it)


def test_iterator_of_a_store_closed_by_with(tmp_path):
    write_dense(tmp_path / "d.zr", np.arange(N, dtype=np.int64)).close()
    with zring.DenseStore(tmp_path / "d.zr") as store:
        it = iter(store)
        next(it)
    with pytest.raises(zring.ClosedError):
        next(it)


def test_exhausted_iterator_still_stops(tmp_path):
    store = write_dense(tmp_path / "d.zr", np.arange(N, dtype=np.int64))
    it = iter(store)
    assert len(list(it)) == N
    store.close()
    with pytest.raises(StopIteration):
        next(it)


def test_loader_iterator_after_close(tmp_path):
    store = write_dense(tmp_path / "d.zr", np.arange(N, dtype=np.int64))
    loader = zring.Loader({"x": [store]}, zring.Sampler(N, 4, "sequential"), workers=1)
    it = iter(loader)
    next(it)
    loader.close()
    with pytest.raises(zring.ClosedError, match="loader is closed"):
        list(it)


class ListSampler:
    """A Python sampler (any object with next()): the loader is a SamplerLoader."""

    def __init__(self, n, batch):
        self.n, self.batch, self.k = n, batch, 0

    def next(self):
        idx = (np.arange(self.batch) + self.k * self.batch) % self.n
        self.k += 1
        return idx


@pytest.mark.parametrize("workers", [0, 2])
def test_sampler_loader_iterator_after_close(tmp_path, workers):
    store = write_dense(tmp_path / "d.zr", np.arange(N, dtype=np.int64))
    loader = zring.Loader({"x": [store]}, ListSampler(N, 4), workers=workers)
    it = iter(loader)
    next(it)
    loader.close()
    with pytest.raises(zring.ClosedError, match="closed"):
        list(it)

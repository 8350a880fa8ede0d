"""Stores, samplers and loaders pickle by what defines them; unpickled stores reopen
on first use and refuse a file replaced in between; worker processes started by
fork, spawn and forkserver all read the right records."""

import multiprocessing as mp
import pickle

import numpy as np
import pytest

import zring
from conftest import write_dense, write_ragged

N = 40


@pytest.fixture
def dense(tmp_path):
    data = np.arange(N * 3, dtype=np.int32).reshape(N, 3)
    return write_dense(tmp_path / "d.zr", data, codec="zstd"), data


@pytest.fixture
def ragged(tmp_path):
    records = [np.full(1 + i % 4, i, np.int16) for i in range(N)]
    return write_ragged(tmp_path / "r.zr", records, "int16"), records


def test_stores_round_trip_and_reopen_on_first_read(dense, ragged):
    store, data = dense
    copy = pickle.loads(pickle.dumps(store))
    assert type(copy) is zring.DenseStore and len(copy) == N and not copy.closed
    assert copy.path == store.path and copy.item_shape == (3,) and copy.codec == "zstd"
    np.testing.assert_array_equal(copy[[5, 0, 5]], data[[5, 0, 5]])
    rstore, records = ragged
    rcopy = pickle.loads(pickle.dumps(rstore))
    assert type(rcopy) is zring.RaggedStore
    assert [r.tolist() for r in rcopy[[3, 2]].to_arrays()] == [records[3].tolist(), records[2].tolist()]


def test_open_options_travel_with_the_pickle(tmp_path):
    data = np.arange(12, dtype=np.uint8).reshape(6, 2)
    write_dense(tmp_path / "o.zr", data)
    store = zring.DenseStore(tmp_path / "o.zr", backend="pread", verify_checksums=True, threads=1)
    copy = pickle.loads(pickle.dumps(store))
    assert copy.backend == "pread"
    np.testing.assert_array_equal(copy[:], data)


def test_a_store_replaced_after_pickling_is_refused(dense, tmp_path):
    store, data = dense
    blob = pickle.dumps(store)
    # Publishing renames a new file into place: same path, another file.
    write_dense(tmp_path / "d.zr", data + 1, codec="zstd", overwrite=True)
    copy = pickle.loads(blob)  # lazy: nothing is opened yet
    with pytest.raises(zring.StoreChangedError, match="not the store that was pickled") as e:
        copy[0]
    assert isinstance(e.value, ValueError) and str(tmp_path / "d.zr") in str(e.value)
    # Reopening by hand reads the new file.
    np.testing.assert_array_equal(zring.DenseStore(tmp_path / "d.zr")[0], data[0] + 1)


def test_a_store_deleted_after_pickling_fails_on_first_read(dense, tmp_path):
    store, _ = dense
    blob = pickle.dumps(store)
    (tmp_path / "d.zr").unlink()
    copy = pickle.loads(blob)
    with pytest.raises(zring.StoreNotFoundError):
        copy[0]


def test_closing_an_unpickled_store_before_use(dense):
    copy = pickle.loads(pickle.dumps(dense[0]))
    copy.close()
    assert copy.closed
    with pytest.raises(zring.ClosedError):
        copy[0]


def test_sampler_pickles_its_configuration_and_step():
    s = zring.Sampler(1000, 16, "cyclic", seed=9, rank=1, world_size=4)
    for _ in range(3):
        s.next()
    c = pickle.loads(pickle.dumps(s))
    assert repr(c) == repr(s)
    np.testing.assert_array_equal(c.next(), s.next())
    for mode in ("sequential", "iid", "cyclic"):
        s = zring.Sampler(50, 5, mode, seed=2)
        np.testing.assert_array_equal(pickle.loads(pickle.dumps(s)).batch(7), s.batch(7))


def test_sampler_positions_are_the_sequence_batches_are_cut_from():
    s = zring.Sampler(97, 12, "cyclic", seed=4, rank=1, world_size=3)
    for step in (0, 5, 40):
        np.testing.assert_array_equal(s.positions(step * 12 + 4, 4), s.batch(step))
    whole = zring.Sampler(97, 1, "cyclic", seed=4).positions(97 * 2, 97)
    assert sorted(whole.tolist()) == list(range(97))  # one cycle is a permutation


def test_loader_pickles_and_continues_where_it_is(dense):
    store, data = dense
    sampler = zring.Sampler(N, 4, "cyclic", seed=3)
    with zring.Loader({"x": [store]}, sampler, workers=1, prefetch=2) as loader:
        first = [next(loader)[0]["x"].copy() for _ in range(3)]
        blob = pickle.dumps(loader)
        rest = [next(loader)[0]["x"].copy() for _ in range(3)]
    with pickle.loads(blob) as copy:
        assert copy.step == 3
        for want in rest:
            np.testing.assert_array_equal(next(copy)[0]["x"], want)
    np.testing.assert_array_equal(first[0], data[sampler.batch(0)])


def _read(args):
    store, ids = args
    return store[ids].tolist()


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_worker_processes_read_pickled_stores(dense, ragged, method):
    store, data = dense
    rstore, records = ragged
    store[0], rstore[0]  # open (and use) them in the parent first
    ids = [[1, 2], [39, 0, 39], [7]]
    with mp.get_context(method).Pool(2) as pool:
        got = pool.map(_read, [(store, i) for i in ids])
        rgot = pool.map(_read, [(rstore, i) for i in (5, 6, 7)])
    assert got == [data[i].tolist() for i in ids]
    assert rgot == [records[i].tolist() for i in (5, 6, 7)]

"""zring.jax with real JAX (and Grain when installed): the random-access data
source, DLPack arrays, the global order and its resume."""

import pickle

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import zring.jax as zj  # noqa: E402
from conftest import write_dense, write_ragged  # noqa: E402

N = 50


@pytest.fixture
def source(tmp_path):
    x = np.arange(N * 4, dtype=np.float32).reshape(N, 4)
    write_dense(tmp_path / "x.zr", x)
    write_ragged(tmp_path / "t.zr", [np.full(1 + i % 3, i, np.int32) for i in range(N)], "int32")
    return zj.DataSource({"x": tmp_path / "x.zr", "t": tmp_path / "t.zr"}), x


def test_random_access_and_batched_reads(source):
    ds, x = source
    assert len(ds) == N
    assert ds[7]["x"].tolist() == x[7].tolist() and ds[7]["t"].tolist() == [7, 7]
    recs = ds.__getitems__([4, 0, 4])
    assert [r["x"].tolist() for r in recs] == x[[4, 0, 4]].tolist()
    assert [r["t"].tolist() for r in recs] == [[4, 4], [0], [4, 4]]


def test_batch_is_jax_arrays_over_zring_memory(source):
    ds, x = source
    b = ds.batch([9, 2])
    assert isinstance(b["x"], jax.Array) and np.asarray(b["x"]).tolist() == x[[9, 2]].tolist()
    values, cu, shapes = b["t"]
    assert np.asarray(values).tolist() == [9, 2, 2, 2] and np.asarray(cu).tolist() == [0, 1, 4]


def address(a):
    return a.__array_interface__["data"][0]


def test_the_handover_shares_zring_memory(source, tmp_path):
    ds, x = source
    assert jax.devices()[0].platform == "cpu"
    gathered = ds.fields["x"][[9, 2, 31]]  # float32: JAX can take it as it is
    arr = zj.to_jax(gathered)
    assert address(gathered) % 64 == 0  # the alignment XLA's CPU backend needs
    assert arr.unsafe_buffer_pointer() == address(gathered)
    assert np.asarray(arr).tolist() == x[[9, 2, 31]].tolist()
    ragged = ds.fields["t"][[4, 0, 5]]  # int32 values: shared as well
    values, cu, _ = zj.to_jax(ragged)
    assert values.unsafe_buffer_pointer() == address(ragged.values)
    assert np.asarray(values).tolist() == [4, 4, 0, 5, 5, 5] and np.asarray(cu).tolist() == [0, 2, 3, 6]
    # The copies to_jax's docstring lists: a 64-bit dtype without jax_enable_x64
    # becomes 32-bit (JAX's default), and NumPy's misaligned views are copied.
    if not jax.config.jax_enable_x64:
        wide = write_dense(tmp_path / "w.zr", np.arange(12, dtype=np.int64).reshape(6, 2))[[1, 3]]
        w = zj.to_jax(wide)
        assert w.dtype == np.int32 and w.unsafe_buffer_pointer() != address(wide)
        assert np.asarray(w).tolist() == [[2, 3], [6, 7]]
    shifted = gathered.reshape(-1)[1:]  # 4 bytes past an aligned start
    moved = zj.to_jax(shifted)
    assert moved.unsafe_buffer_pointer() != address(shifted)
    assert np.asarray(moved).tolist() == shifted.tolist()


def test_data_source_pickles_by_path(source):
    ds, x = source
    copy = pickle.loads(pickle.dumps(ds))
    assert copy[3]["x"].tolist() == x[3].tolist()


def test_batches_follow_the_global_order_and_resume(source):
    ds, _ = source
    full = [np.asarray(b["x"])[:, 0] // 4 for b in zj.batches(ds, 8, epochs=2, seed=3)]
    assert len(full) == 2 * (N // 8)
    assert sorted(np.concatenate(full[:6]).tolist()) == sorted(set(np.concatenate(full[:6]).tolist()))
    resumed = [np.asarray(b["x"])[:, 0] // 4 for b in zj.batches(ds, 8, epochs=2, seed=3, start=5)]
    assert [a.tolist() for a in resumed] == [a.tolist() for a in full[5:]]
    halves = [
        np.concatenate([np.asarray(b["x"])[:, 0] // 4 for b in
                        zj.batches(ds, 5, shuffle=False, epochs=1, drop_last=False, rank=p, world_size=2)])
        for p in range(2)
    ]
    assert sorted(np.concatenate(halves).tolist()) == list(range(N))
    # The old names still work, with a DeprecationWarning.
    with pytest.warns(DeprecationWarning, match="is now"):
        old = [np.asarray(b["x"])[:, 0] // 4 for b in
               zj.batches(ds, 5, shuffle=False, epochs=1, drop_last=False, process_index=1, process_count=2)]
    assert np.concatenate(old).tolist() == halves[1].tolist()


def test_grain_map_dataset_over_the_source(source):
    grain = pytest.importorskip("grain.python")
    ds, x = source
    batched = grain.MapDataset.source(zj.DataSource({"x": ds.fields["x"]})).batch(10)
    assert len(batched) == 5
    np.testing.assert_array_equal(batched[1]["x"], x[10:20])


class CountingStore:
    """A store that records its reads: how many records each one asked for (a
    DataSource reads one record as a gather of one id)."""

    def __init__(self, store):
        self.store, self.reads = store, []

    def __len__(self):
        return len(self.store)

    def __getitem__(self, i):
        self.reads.append(1 if isinstance(i, (int, np.integer)) else len(i))
        return self.store[i]


def test_grain_reads_a_batch_of_the_source_with_one_gather_per_field(source, monkeypatch):
    grain = pytest.importorskip("grain.python")
    # Private modules: Grain exports neither the batched-read protocol nor the switch
    # of MapDataset.batch's push-down. A Grain that renames them fails here, which is
    # the point: docs/jax.md describes what this test checks.
    from grain._src.python.dataset import base as grain_base
    from grain._src.python.dataset.transformations import batch as grain_batch

    ds, x = source
    src = zj.DataSource({"x": ds.fields["x"], "t": ds.fields["t"]})
    assert isinstance(src, grain_base.SupportsBatchedReadRandomAccessDataSource)
    src.fields = {name: CountingStore(s) for name, s in src.fields.items()}
    counts = list(src.fields.values())

    # Grain's own batched path: a pipeline over the source asked for several records
    # at once hands them to the source's _getitems, one gather per field.
    pipeline = grain.MapDataset.source(src).shuffle(seed=0).map(lambda r: r["x"])
    ids = [3, 9, 0, 41, 7]
    got = pipeline._getitems(ids)
    assert [c.reads for c in counts] == [[5], [5]]
    want = [pipeline[i] for i in ids]  # record by record: one read per field per record
    assert [c.reads for c in counts] == [[5, 1, 1, 1, 1, 1]] * 2
    assert [a.tolist() for a in got] == [a.tolist() for a in want]

    # MapDataset.batch with its push-down experiment on (Grain 0.2 ships it off):
    # a batch of 10 is one gather per field.
    monkeypatch.setattr(grain_batch, "_is_batch_map_pushdown_experiment_enabled", lambda: True)
    dense = zj.DataSource({"x": ds.fields["x"]})
    dense.fields = {"x": CountingStore(dense.fields["x"])}
    batch = grain.MapDataset.source(dense).batch(10)[1]
    assert dense.fields["x"].reads == [10]
    np.testing.assert_array_equal(batch["x"], x[10:20])

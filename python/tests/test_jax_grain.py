"""zring.jax.BatchIterator / BatchDataset as Grain's iterator source: the batches of
zring.jax.batches, and a checkpointable state (get_state / set_state) from which a
fresh iterator yields exactly the remaining batches."""

import json

import numpy as np
import pytest

jax = pytest.importorskip("jax")
grain = pytest.importorskip("grain")
import zring.jax as zj  # noqa: E402
from conftest import write_dense, write_ragged  # noqa: E402

N = 40


@pytest.fixture
def source(tmp_path):
    write_dense(tmp_path / "x.zr", np.arange(N * 2, dtype=np.int32).reshape(N, 2))
    write_ragged(tmp_path / "t.zr", [np.full(1 + i % 4, i, np.int16) for i in range(N)], "int16")
    return zj.DataSource({"x": tmp_path / "x.zr", "t": tmp_path / "t.zr"})


def contents(batch):
    values, cu, shapes = batch["t"]
    return (np.asarray(batch["x"]).tolist(), np.asarray(values).tolist(), np.asarray(cu).tolist(),
            np.asarray(shapes).tolist())


OPTIONS = dict(seed=11, epochs=3, drop_last=False)


def test_the_iterator_is_the_batches(source):
    it = zj.BatchIterator(source, 6, **OPTIONS)
    assert isinstance(it, grain.DatasetIterator) and iter(it) is it
    assert [contents(b) for b in it] == [contents(b) for b in zj.batches(source, 6, prefetch=0, **OPTIONS)]
    assert it.get_state()["step"] == 3 * 7


@pytest.mark.parametrize("prefetch", [0, 3])
def test_a_fresh_iterator_set_to_a_state_yields_exactly_the_rest(source, prefetch):
    full = [contents(b) for b in zj.batches(source, 6, prefetch=0, **OPTIONS)]
    it = zj.BatchIterator(source, 6, prefetch=prefetch, **OPTIONS)
    head = [contents(next(it)) for _ in range(9)]  # over an epoch boundary (7 steps each)
    # The state counts the batches returned, not those gathered ahead; it survives
    # JSON (what Grain's checkpoint and Orbax write).
    state = json.loads(json.dumps(it.get_state()))
    assert state["step"] == 9
    more = [contents(next(it)) for _ in range(2)]
    it.close()
    assert head + more == full[:11]

    fresh = zj.BatchIterator(source, 6, prefetch=prefetch, **OPTIONS)
    fresh.set_state(state)
    assert [contents(b) for b in fresh] == full[9:]
    # Set back mid-iteration: the batches gathered ahead are dropped.
    fresh.set_state({**state, "step": 2})
    assert contents(next(fresh)) == full[2]
    fresh.close()
    with pytest.raises(ValueError, match="closed"):
        next(fresh)


def test_a_state_of_another_order_is_refused(source):
    state = zj.BatchIterator(source, 6, **OPTIONS).get_state()
    other = zj.BatchIterator(source, 6, **{**OPTIONS, "seed": 12})
    with pytest.raises(ValueError, match="another order"):
        other.set_state(state)
    with pytest.raises(ValueError, match="step must be >= 0, got -1"):
        other.set_state({"step": -1})
    with pytest.raises(ValueError, match="prefetch must be >= 0"):
        zj.BatchIterator(source, 6, prefetch=-1)


def test_grain_pipelines_take_the_dataset_and_checkpoint_its_iterator(source):
    ds = zj.BatchDataset(source, 6, **OPTIONS)
    assert isinstance(ds, grain.IterDataset)
    full = [contents(b) for b in zj.batches(source, 6, prefetch=0, **OPTIONS)]
    # A Grain transformation over the batches; Grain's own iterator keeps the state.
    pipeline = ds.map(lambda b: {**b, "x2": b["x"] * 2})
    it = iter(pipeline)
    first = [next(it) for _ in range(4)]
    assert [contents(b) for b in first] == full[:4]
    assert np.asarray(first[3]["x2"]).tolist() == (np.asarray(first[3]["x"]) * 2).tolist()
    state = it.get_state()
    rest = iter(pipeline)
    rest.set_state(state)
    assert [contents(b) for b in rest] == full[4:]
    it.close()
    # The dataset checks its arguments when it is made.
    with pytest.raises(ValueError, match="start must be >= 0"):
        zj.BatchDataset(source, 6, start=-1)

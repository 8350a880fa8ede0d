"""Sampler: determinism, seek, modes, sharding, argument checks."""

import numpy as np
import pytest

import zring

Mode = zring.Sampler.Mode


@pytest.mark.parametrize("mode", [Mode.SEQUENTIAL, Mode.IID, Mode.CYCLIC])
def test_next_returns_uint64_batches_and_advances(mode):
    s = zring.Sampler(1000, 256, mode, seed=3)
    assert s.step == 0
    a = s.next()
    assert a.dtype == np.uint64 and a.shape == (256,)
    assert s.step == 1
    assert a.max() < 1000
    b = next(s)
    assert s.step == 2
    assert not np.array_equal(a, b)
    assert a.flags.writeable and not np.shares_memory(a, s.next())


def test_sequential_is_the_identity_stream():
    s = zring.Sampler(10, 4, Mode.SEQUENTIAL)
    assert [s.next().tolist() for _ in range(3)] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 1]]


def test_cyclic_covers_every_record_once_per_cycle():
    s = zring.Sampler(100, 10, Mode.CYCLIC, seed=9)
    seen = np.concatenate([s.next() for _ in range(10)])
    assert sorted(seen.tolist()) == list(range(100))


def test_same_seed_same_stream_and_seek_resumes_exactly():
    a = zring.Sampler(10_000, 64, Mode.IID, seed=1)
    b = zring.Sampler(10_000, 64, "iid", seed=1)
    c = zring.Sampler(10_000, 64, 1, seed=2)
    first = [a.next() for _ in range(5)]
    assert all(np.array_equal(x, b.next()) for x in first)
    assert not np.array_equal(first[0], c.next())
    a.seek(2)
    assert a.step == 2
    np.testing.assert_array_equal(a.next(), first[2])
    np.testing.assert_array_equal(a.batch(4), first[4])
    assert a.step == 3  # batch() does not move the counter


def test_iteration_is_endless_and_matches_next():
    s = zring.Sampler(50, 5, Mode.CYCLIC)
    ref = zring.Sampler(50, 5, Mode.CYCLIC)
    for k, batch in zip(range(25), s):
        np.testing.assert_array_equal(batch, ref.batch(k))


def test_ranks_split_the_global_batch():
    full = zring.Sampler(1000, 8, Mode.IID, seed=5)
    parts = [zring.Sampler(1000, 8, Mode.IID, seed=5, rank=r, world_size=4) for r in range(4)]
    assert parts[0].batch_size == 2 and parts[0].global_batch_size == 8
    for step in range(3):
        np.testing.assert_array_equal(np.concatenate([p.next() for p in parts]), full.next())


def test_next_into_a_caller_buffer():
    s = zring.Sampler(100, 16, Mode.IID)
    out = np.empty(16, np.uint64)
    assert s.next(out) is out
    np.testing.assert_array_equal(out, zring.Sampler(100, 16, Mode.IID).next())
    with pytest.raises(TypeError, match="uint64"):
        s.next(np.empty(16, np.int64))
    with pytest.raises(ValueError, match="shape"):
        s.next(np.empty(15, np.uint64))


def test_properties_and_repr():
    s = zring.Sampler(100, 16, Mode.CYCLIC, seed=7, rank=1, world_size=2)
    assert (s.length, s.mode, s.seed, s.rank, s.world_size) == (100, Mode.CYCLIC, 7, 1, 2)
    assert Mode.CYCLIC == 2 and zring.Mode is Mode
    assert "cyclic" in repr(s)


@pytest.mark.parametrize(
    "args, kwargs, exc",
    [
        ((0, 4, Mode.IID), {}, ValueError),
        ((10, 0, Mode.IID), {}, ValueError),
        ((10, 4, 7), {}, ValueError),
        ((10, 4, "random"), {}, ValueError),
        ((10, 4, 1.5), {}, TypeError),
        ((10, 4, Mode.IID), {"rank": 2, "world_size": 2}, ValueError),
        ((10, 6, Mode.IID), {"world_size": 4}, ValueError),
        ((-1, 4, Mode.IID), {}, OverflowError),
    ],
)
def test_bad_arguments(args, kwargs, exc):
    with pytest.raises(exc):
        zring.Sampler(*args, **kwargs)


def test_world_is_the_deprecated_name_of_world_size():
    with pytest.warns(DeprecationWarning, match="world_size"):
        old = zring.Sampler(100, 16, Mode.CYCLIC, seed=7, rank=1, world=2)
    new = zring.Sampler(100, 16, Mode.CYCLIC, seed=7, rank=1, world_size=2)
    assert old.world == old.world_size == 2
    assert old.next().tolist() == new.next().tolist()


def test_seeds_default_to_zero_everywhere():
    """One default seed across the API: the sampler, pack and the adapters."""
    import inspect

    from zring._internal.frameworks import Plan

    assert zring.Sampler(10, 2, Mode.CYCLIC).seed == 0
    assert Plan(10, 2).sampler.seed == 0
    assert inspect.signature(zring.pack).parameters["seed"].default == 0
    for module, names in [("zring.torch", ["IterableDataset", "BatchSampler"]), ("zring.jax", ["batches"])]:
        try:
            mod = __import__(module, fromlist=names)
        except ImportError:  # torch or jax not installed here
            continue
        for name in names:
            assert inspect.signature(getattr(mod, name)).parameters["seed"].default == 0, name

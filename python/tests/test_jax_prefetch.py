"""zring.jax.batches gathered ahead by the Rust loader: the same batches as the
synchronous gather (prefetch=0) for dense, ragged and decoded-image fields, from any
start step and rank; the loader's thread ends with the generator; global arrays
with sharding= in one process (test_jax_multihost.py runs two)."""

import gc
import subprocess
import sys

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import zring  # noqa: E402
import zring.jax as zj  # noqa: E402
from conftest import write_dense  # noqa: E402
# The same two-field source as test_jax's (a pytest fixture, found by its name).
from test_jax import N, source  # noqa: E402,F401


def as_lists(batch):
    """A batch's exact contents: dense fields as lists, ragged ones as their three arrays."""
    out = {}
    for name, v in batch.items():
        if isinstance(v, tuple):
            out[name] = tuple((str(a.dtype), np.asarray(a).tolist()) for a in v)
        else:
            out[name] = (str(v.dtype), v.shape, np.asarray(v).tolist())
    return out


@pytest.mark.parametrize("options", [
    dict(epochs=2, seed=3),
    dict(epochs=2, seed=3, start=5),
    dict(epochs=3, seed=1, drop_last=False, start=4),  # short last steps included
    dict(epochs=1, shuffle=False, drop_last=False, rank=1, world_size=2),
    dict(epochs=3, seed=7, rank=2, world_size=3, start=3),
])
@pytest.mark.parametrize("prefetch", [1, 2, 5])
def test_prefetched_batches_are_the_synchronous_ones(source, options, prefetch):
    ds, x = source
    # Every batch is kept alive to the end: the loader's buffers of later steps must
    # not overwrite the memory earlier jax.Arrays share.
    want = [as_lists(b) for b in zj.batches(ds, 8, prefetch=0, **options)]
    got = list(zj.batches(ds, 8, prefetch=prefetch, **options))
    assert [as_lists(b) for b in got] == want
    assert want and all(isinstance(b["x"], jax.Array) for b in got)
    # And the batches are the records of the plan: x's rows say which record they are.
    for b in got:
        ids = (np.asarray(b["x"])[:, 0] // 4).astype(int)
        np.testing.assert_array_equal(np.asarray(b["x"]), x[ids])
        values, cu, _ = b["t"]
        assert np.asarray(values).tolist() == [i for i in ids for _ in range(1 + i % 3)]
        assert np.asarray(cu).tolist() == np.cumsum([0] + [1 + i % 3 for i in ids]).tolist()


def test_resume_from_any_step_continues_the_full_run(source):
    ds, _ = source
    full = [as_lists(b) for b in zj.batches(ds, 8, epochs=2, seed=3)]
    for start in (0, 1, 6, len(full) - 1, len(full), len(full) + 3):
        assert [as_lists(b) for b in zj.batches(ds, 8, epochs=2, seed=3, start=start)] == full[start:]


def test_an_endless_run_prefetches_across_epochs(source):
    ds, _ = source
    sync = zj.batches(ds, 16, epochs=None, seed=2, prefetch=0)
    ahead = zj.batches(ds, 16, epochs=None, seed=2, prefetch=3)
    for _ in range(10):  # 3 steps per epoch: over three epoch boundaries
        assert as_lists(next(ahead)) == as_lists(next(sync))
    ahead.close()


def test_the_source_epoch_follows_the_delivered_step(source):
    ds, _ = source
    epochs = [ds.epoch for _ in zj.batches(ds, 16, epochs=3, seed=0, start=2)]
    assert epochs == [0, 1, 1, 1, 2, 2, 2]  # 3 steps per epoch, from step 2


def loaders_made(monkeypatch):
    made = []

    def record(*args, **kwargs):
        made.append(zring.Loader(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(zj, "Loader", record)
    return made


def test_the_loader_is_closed_with_the_generator(source, monkeypatch):
    ds, _ = source
    made = loaders_made(monkeypatch)
    gen = zj.batches(ds, 4, epochs=None, prefetch=2)
    assert made == []  # nothing starts before the first batch
    next(gen)
    assert len(made) == 1 and not made[0].closed
    gen.close()
    assert made[0].closed
    # Dropped mid-iteration: garbage collection closes it too.
    gen = zj.batches(ds, 4, epochs=None, prefetch=2)
    next(gen)
    del gen
    gc.collect()
    assert made[1].closed
    # An error in the consumer's loop: the generator is dropped with the loop.
    def train():
        for _ in zj.batches(ds, 4, epochs=None, prefetch=2):
            raise ZeroDivisionError("a failing step")

    with pytest.raises(ZeroDivisionError):
        train()
    assert made[2].closed
    # Run to its end, the loader is closed by the time the loop ends.
    list(zj.batches(ds, 25, epochs=1, prefetch=2))
    assert made[3].closed
    # prefetch=0 starts no loader.
    list(zj.batches(ds, 25, epochs=1, prefetch=0))
    assert len(made) == 4


def test_bad_arguments_are_refused_when_the_generator_is_made(source):
    ds, _ = source
    with pytest.raises(ValueError, match="prefetch must be >= 0, got -1"):
        zj.batches(ds, 8, prefetch=-1)
    with pytest.raises(ValueError, match="start must be >= 0, got -2"):
        zj.batches(ds, 8, start=-2)
    with pytest.raises(ValueError, match="rank 2 is not in a world of 2"):
        zj.batches(ds, 8, rank=2, world_size=2)


def test_one_record_reads_as_the_store_reads_it(tmp_path):
    """DataSource[i] is now a gather of one id: the same arrays as store[i] was,
    ragged records of several dimensions, 0-d scalars and every key it took."""
    write_dense(tmp_path / "s.zr", np.arange(6, dtype=np.int64))
    with zring.RaggedWriter(str(tmp_path / "m.zr"), "int16", ndim=3) as w:
        w.append([np.arange(i * 6, dtype=np.int16).reshape(i, 2, 3) for i in range(6)])
    stores = {"s": zring.open(str(tmp_path / "s.zr")), "m": zring.open(str(tmp_path / "m.zr"))}
    ds = zj.DataSource(stores)
    for key in (0, 3, 5, -1, -6, np.int32(2), np.uint64(4), True, 2.0):
        got = ds[key]
        for name, store in stores.items():
            want = np.asarray(store[int(key)])
            assert (got[name].dtype, got[name].shape) == (want.dtype, want.shape)
            np.testing.assert_array_equal(got[name], want)
    assert ds[0]["m"].shape == (0, 2, 3) and ds[4]["s"].shape == ()
    for key in (6, -7):
        with pytest.raises(IndexError, match="out of range"):
            ds[key]


def mesh_sharding():
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    return NamedSharding(Mesh(np.array(jax.devices()), ("data",)), PartitionSpec("data"))


@pytest.mark.parametrize("prefetch", [0, 2])
def test_sharding_makes_global_arrays_in_one_process(source, prefetch):
    ds, _ = source
    dense = zj.DataSource({"x": ds.fields["x"]})
    sharding = mesh_sharding()
    want = [np.asarray(b["x"]) for b in zj.batches(dense, 8, epochs=2, seed=4, start=1)]
    got = list(zj.batches(dense, 8, epochs=2, seed=4, start=1, prefetch=prefetch, sharding=sharding))
    assert len(got) == len(want) == 2 * (N // 8) - 1
    for g, w in zip(got, want):
        assert isinstance(g["x"], jax.Array) and g["x"].sharding == sharding
        assert g["x"].shape == (8, 4) and g["x"].is_fully_addressable
        np.testing.assert_array_equal(np.asarray(g["x"]), w)


def test_sharding_refuses_what_has_no_global_array(source):
    ds, _ = source
    sharding = mesh_sharding()
    with pytest.raises(TypeError, match=r"dense fields; \['t'\] is ragged"):
        zj.batches(ds, 8, sharding=sharding)
    dense = zj.DataSource({"x": ds.fields["x"]})
    with pytest.raises(ValueError, match="50 records in global batches of 8 leave a short last step"):
        zj.batches(dense, 8, drop_last=False, sharding=sharding)
    with pytest.raises(ValueError, match=r"share of jax.process_index\(\) 0 of jax.process_count\(\) 1"):
        zj.batches(dense, 8, rank=0, world_size=2, sharding=sharding)
    with pytest.raises(TypeError, match="must be a jax.sharding.Sharding, got str"):
        zj.batches(dense, 8, sharding="data")
    # drop_last=False is fine where the epochs divide evenly.
    assert len(list(zj.batches(dense, 10, drop_last=False, sharding=sharding))) == 5


def test_a_dataset_ragged_field_is_refused_and_its_dense_fields_shard(tmp_path):
    rows = ({"id": i, "tokens": np.arange(i % 3 + 1, dtype=np.int32)} for i in range(12))
    dataset = zring.write_dataset(str(tmp_path / "ds"), rows, progress=False)
    sharding = mesh_sharding()
    with pytest.raises(TypeError, match=r"\['tokens'\] is ragged"):
        zj.batches(zj.DataSource(dataset), 4, sharding=sharding)
    ids = zj.DataSource({"id": dataset})
    got = [np.asarray(b["id"]) for b in zj.batches(ids, 4, shuffle=False, sharding=sharding)]
    assert [g.tolist() for g in got] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]


def test_decoded_images_are_the_same_prefetched_with_each_steps_epoch(tmp_path):
    pytest.importorskip("PIL")
    import io

    from PIL import Image as PILImage

    def jpeg(i):
        rng = np.random.default_rng(i)
        out = io.BytesIO()
        PILImage.fromarray(rng.integers(0, 255, (20 + i % 3, 24, 3), dtype=np.uint8)).save(out, "JPEG")
        return out.getvalue()

    path = str(tmp_path / "images")
    zring.write_dataset(path, {"image": [jpeg(i) for i in range(12)], "label": np.arange(12)})
    dataset = zring.Dataset(path)
    spec = zring.decode.Image(size=(8, 8), crop="random_resized", flip=True, seed=5)
    src = zj.DataSource(dataset, decode={"image": spec})
    sync = list(zj.batches(src, 4, seed=1, epochs=3, start=1, prefetch=0))
    ahead = list(zj.batches(src, 4, seed=1, epochs=3, start=1, prefetch=2))
    assert len(ahead) == 8
    for step, (a, s) in enumerate(zip(ahead, sync), start=1):
        assert a["image"].shape == (4, 8, 8, 3) and a["image"].dtype == np.uint8
        assert np.asarray(a["label"]).tolist() == np.asarray(s["label"]).tolist()
        want = dataset.gather(np.asarray(a["label"]), decode={"image": spec}, epoch=step // 3)["image"]
        np.testing.assert_array_equal(np.asarray(a["image"]), want)
        np.testing.assert_array_equal(np.asarray(s["image"]), want)
    # A decoded field is dense pixels: it shards (its encoded bytes do not).
    with pytest.raises(TypeError, match=r"\['image'\] is ragged"):
        zj.batches(zj.DataSource({"image": dataset}), 4, sharding=mesh_sharding())
    sharded = list(zj.batches(src, 4, seed=1, epochs=3, start=1, sharding=mesh_sharding()))
    for a, s in zip(sharded, sync):
        np.testing.assert_array_equal(np.asarray(a["image"]), np.asarray(s["image"]))


def test_the_checkpointable_iterator_works_without_grain(source):
    """Where Grain is not installed, BatchIterator is a plain iterator with the same
    state methods (run in a process where `import grain` fails)."""
    ds, _ = source
    code = r"""
import sys
sys.modules["grain"] = None  # import grain raises ImportError
import numpy as np
import zring.jax as zj
assert zj.grain is None
src = zj.DataSource({"x": sys.argv[1]})
it = zj.BatchIterator(src, 8, epochs=2, seed=3)
[next(it) for _ in range(4)]
state = it.get_state()
rest = [np.asarray(b["x"]).tolist() for b in it]
it.close()
again = zj.BatchIterator(src, 8, epochs=2, seed=3)
again.set_state(state)
assert [np.asarray(b["x"]).tolist() for b in again] == rest and len(rest) == 2 * 6 - 4
try:
    next(it)
except ValueError as e:
    assert "is closed" in str(e)
else:
    raise AssertionError("a closed iterator went on")
print("ok")
"""
    r = subprocess.run([sys.executable, "-c", code, ds.fields["x"].path], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr

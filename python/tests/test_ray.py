"""zring.ray against a real local Ray instance (2 CPUs, a small object store)."""

import os
import subprocess
import sys

import numpy as np
import pytest
import ray

import zring
from zring.ray import ZringDatasink, ZringDatasource, read_zring

pytestmark = pytest.mark.slow  # a Ray cluster (scripts/test.sh --quick leaves these out)

N = 300


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=200 << 20, log_to_driver=False)
    ctx = ray.data.DataContext.get_current()
    ctx.execution_options.preserve_order = True
    ctx.enable_progress_bars = False
    yield
    ray.shutdown()


def _items(n=N):
    rng = np.random.default_rng(0)
    return [
        {
            "id": i,
            "image": rng.integers(0, 255, (4, 3), dtype=np.uint8),
            "tokens": np.arange(i % 7 + 1, dtype=np.int32) + i,
            "caption": f"record {i}",
        }
        for i in range(n)
    ]


FIELDS = {
    "id": zring.dense("int64"),
    "image": zring.dense("uint8", (4, 3)),
    "tokens": zring.ragged("int32"),
    "caption": "str",
}


def _check(rows, items):
    assert len(rows) == len(items)
    for got, want in zip(rows, items):
        assert got["id"] == want["id"]
        np.testing.assert_array_equal(got["image"], want["image"])
        np.testing.assert_array_equal(np.asarray(got["tokens"]), want["tokens"])
        assert got["caption"] == want["caption"]


def test_write_then_read_round_trip(tmp_path):
    items = _items()
    out = tmp_path / "ds"
    ray.data.from_items(items, override_num_blocks=4).write_datasink(ZringDatasink(out, FIELDS, codec="raw"))

    ds = zring.open_dataset(out)
    assert (len(ds), ds.version, ds.fields) == (N, 1, list(FIELDS))
    assert ds.shards >= 2  # one shard per write task, written in parallel
    _check([ds[i] for i in range(N)], items)
    assert sorted(os.listdir(tmp_path)) == ["ds"]  # nothing written beside the dataset

    back = read_zring(out, override_num_blocks=3)
    _check(back.take_all(), items)
    batch = next(iter(back.iter_batches(batch_size=16, batch_format="numpy")))
    assert batch["image"].shape == (16, 4, 3) and batch["image"].dtype == np.uint8
    assert batch["tokens"][5].tolist() == items[5]["tokens"].tolist()


def test_inferred_schemas_and_append(tmp_path):
    out = tmp_path / "ds"
    rows = [{"x": np.float32(i), "v": np.full(3, i, np.int16)} for i in range(40)]
    src = ray.data.from_items(rows, override_num_blocks=2)
    src.write_datasink(ZringDatasink(out))
    src.write_datasink(ZringDatasink(out, append=True))
    ds = zring.open_dataset(out)
    assert (ds.version, len(ds)) == (2, 80)
    assert read_zring(out, version=1).count() == 40  # a version, as opened
    assert list(ds.field_schemas["v"]["item_shape"]) == [3]
    got = ds.gather(np.arange(80))
    np.testing.assert_array_equal(got["x"], np.tile(np.arange(40, dtype=np.float32), 2))
    with pytest.raises(FileExistsError):
        src.write_datasink(ZringDatasink(out))
    # An append converts to the dataset's schemas: Python floats (float64 alone)
    # into the float32 field.
    more = ray.data.from_items([{"x": float(i), "v": [i] * 3} for i in range(6)], override_num_blocks=2)
    more.write_datasink(ZringDatasink(out, append=True))
    ds = zring.open_dataset(out)
    assert (ds.version, len(ds), ds.dtype("x"), ds.dtype("v")) == (3, 86, np.float32, np.int16)
    assert sorted(ds.gather(np.arange(80, 86))["x"].tolist()) == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


def test_failed_job_leaves_nothing(tmp_path):
    # Defined here so that Ray pickles it by value (workers cannot import this module).
    def _fail_on_250(batch):
        if (batch["id"] == 250).any():
            raise RuntimeError("injected failure")
        return batch

    out = tmp_path / "ds"
    failing = ray.data.from_items(_items(), override_num_blocks=4).map_batches(_fail_on_250, batch_format="numpy")
    with pytest.raises(Exception, match="injected failure"):
        failing.write_datasink(ZringDatasink(out, FIELDS))
    assert os.listdir(tmp_path) == []

    # A failed append leaves the published version as it was.
    ray.data.from_items(_items(10)).write_datasink(ZringDatasink(out, FIELDS))
    with pytest.raises(Exception, match="injected failure"):
        failing.write_datasink(ZringDatasink(out, FIELDS, append=True))
    ds = zring.open_dataset(out)
    assert (ds.version, len(ds)) == (1, 10)
    assert sorted(os.listdir(tmp_path)) == ["ds"]


def test_read_a_dataset_and_a_store(tmp_path):
    items = _items(50)
    zring.write_dataset(tmp_path / "ds", items, FIELDS, shard_records=20)
    store_path = tmp_path / "tokens.zr"
    extra = [np.arange(i + 1, dtype=np.int32) * -1 for i in range(30)]
    with zring.RaggedWriter(store_path, "int32", 1) as w:
        cu = np.concatenate([[0], np.cumsum([len(t) for t in extra])])
        w.append(zring.RaggedBatch(np.concatenate(extra), cu, np.array([[len(t)] for t in extra])))

    src = ZringDatasource([tmp_path / "ds", store_path], fields=["tokens"])
    # The estimate is the payload plus 8-byte offsets per ragged record.
    payload = sum(len(it["tokens"]) for it in items) * 4 + sum(len(t) for t in extra) * 4
    assert src.estimate_inmemory_data_size() == payload + 8 * (3 + 50 + 1 + 30)
    tasks = src.get_read_tasks(4)
    assert sum(t.metadata.num_rows for t in tasks) == 80 and len(tasks) >= 4

    rows = read_zring([tmp_path / "ds", store_path], fields=["tokens"], override_num_blocks=4).take_all()
    want = [it["tokens"] for it in items] + extra
    assert len(rows) == 80 and all(list(r.keys()) == ["tokens"] for r in rows)
    for got, w in zip(rows, want):
        np.testing.assert_array_equal(np.asarray(got["tokens"]), w)
    with pytest.raises(KeyError):
        ZringDatasource([tmp_path / "ds", store_path])  # the store has no "id" field


def test_import_zring_does_not_import_ray():
    code = "import sys, zring; assert 'ray' not in sys.modules, 'import zring imported ray'"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_blocks_are_built_over_the_gathered_arrays(tmp_path):
    from zring.ray import _arrow

    ds = zring.write_dataset(tmp_path / "ds", _items(20), FIELDS)
    got = ds.gather(slice(0, 20))
    schemas = ds.field_schemas
    ids = _arrow(got["id"], schemas["id"])
    assert ids.buffers()[1].address == got["id"].ctypes.data  # no copy
    tokens = _arrow(got["tokens"], schemas["tokens"])
    assert tokens.values.buffers()[1].address == got["tokens"].values.ctypes.data
    captions = _arrow(got["caption"], schemas["caption"])
    assert captions.buffers()[2].address == got["caption"].values.ctypes.data
    assert captions.to_pylist()[3] == "record 3"


def test_ragged_records_of_two_dimensions(tmp_path):
    boxes = [np.arange((i % 4 + 1) * 2, dtype=np.float32).reshape(-1, 2) + i for i in range(60)]
    out = tmp_path / "ds"
    ray.data.from_items([{"boxes": b} for b in boxes], override_num_blocks=2).write_datasink(
        ZringDatasink(out, {"boxes": zring.ragged("float32", 2)})
    )
    ds = zring.open_dataset(out)
    assert ds.field_schemas["boxes"]["ndim"] == 2
    rows = read_zring(out).take_all()
    for got, want in zip(rows, boxes):
        np.testing.assert_array_equal(got["boxes"], want)


def test_tasks_that_infer_different_schemas_publish_nothing(tmp_path):
    # The first block's records share one length (inferred dense), the second's do not.
    items = [{"v": np.arange(3)} for _ in range(10)] + [{"v": np.arange(i % 3 + 1)} for i in range(10)]
    with pytest.raises(Exception, match="different schemas"):
        ray.data.from_items(items, override_num_blocks=2).write_datasink(ZringDatasink(tmp_path / "ds"))
    assert os.listdir(tmp_path) == []


def test_records_per_shard_bundles_blocks(tmp_path):
    out = tmp_path / "ds"
    ray.data.range(400, override_num_blocks=8).write_datasink(ZringDatasink(out, records_per_shard=200))
    ds = zring.open_dataset(out)
    sizes = np.diff(ds.shard_starts)  # shard_starts ends with len(ds)
    assert sizes.sum() == 400 and (sizes[:-1] >= 200).all()
    np.testing.assert_array_equal(ds.gather(np.arange(400))["id"], np.arange(400))


def test_read_a_mixture_epoch(tmp_path):
    a = zring.write_dataset(tmp_path / "a", {"label": np.arange(40), "tokens": [np.arange(i % 4 + 1) for i in range(40)]})
    b = zring.write_dataset(tmp_path / "b", {"label": np.arange(1000, 1010), "tokens": [np.arange(i % 3 + 1) for i in range(10)]})
    mix = zring.mix([a, b], [1, 1], seed=2, length=30)
    rows = read_zring(mix, epoch=1, override_num_blocks=3).take_all()
    want = mix.gather(np.arange(30), epoch=1)
    assert [int(r["label"]) for r in rows] == want["label"].tolist()
    for r, w in zip(rows, want["tokens"]):
        np.testing.assert_array_equal(np.asarray(r["tokens"]), w)

"""zring.torch and zring.jax over a zring.Dataset (several fields, several shards,
written by zring.write_dataset): batches equal what ``ds.gather`` returns, through
the map-style Dataset, the IterableDataset's Rust loader and JAX's DataSource."""

import pickle

import numpy as np
import pytest

import zring

N = 101  # 6 shards of 17 records, the last one short


def rows():
    for i in range(N):
        yield {
            "id": i,
            "image": np.full((2, 3), i, np.float32),
            "tokens": np.arange(i % 7 + 1, dtype=np.int32) + i,
            "caption": f"record {i}",
        }


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    path = tmp_path_factory.mktemp("frameworks") / "ds"
    out = zring.write_dataset(path, rows(), shard_records=17, workers=2, progress=False)
    assert out.shards == 6
    return out


def ragged_records(values, offsets):
    return [values[offsets[k]:offsets[k + 1]].tolist() for k in range(len(offsets) - 1)]


def check_torch_batch(batch, ds, zt):
    """``batch`` (zring.torch's dict) holds exactly ``ds.gather`` of its ids."""
    ids = batch["id"].numpy()
    want = ds.gather(ids)
    np.testing.assert_array_equal(batch["image"].numpy(), want["image"])
    for name in ("tokens", "caption"):
        got = batch[name]
        assert isinstance(got, zt.Ragged)
        assert ragged_records(got.values.numpy(), got.offsets.numpy()) == \
            ragged_records(want[name].values, want[name].cu_seqlens)
    return ids.tolist()


def test_open_fields_takes_a_dataset_or_some_of_its_fields(ds, tmp_path):
    from zring._internal.frameworks import open_fields

    every = open_fields(ds)
    assert list(every) == ds.fields and all(len(v) == N for v in every.values())
    np.testing.assert_array_equal(every["image"][[3, 99]], ds.gather([3, 99], fields="image")["image"])
    # A dataset given for a field name stands for that field, next to a store.
    extra = np.arange(N, dtype=np.int64) * 10
    with zring.DenseWriter(tmp_path / "extra.zr", "int64", ()) as w:
        w.append(extra)
    some = open_fields({"id": ds, "extra": tmp_path / "extra.zr"})
    assert some["id"][[5, 7]].tolist() == [5, 7] and some["extra"][[5, 7]].tolist() == [50, 70]
    with pytest.raises(KeyError):
        open_fields({"no such field": ds})
    short = zring.write_dataset(tmp_path / "short", {"other": np.arange(3)}, progress=False)
    with pytest.raises(ValueError, match="different numbers of records"):
        open_fields({"id": ds, "other": short})


def test_torch_dataset_and_dataloader_batches_equal_gather(ds):
    torch = pytest.importorskip("torch")
    import zring.torch as zt

    tds = zt.Dataset(ds)
    assert len(tds) == N
    one = tds[40]
    assert one["id"].item() == 40 and one["tokens"].tolist() == list(range(40, 46))
    sampler = torch.utils.data.BatchSampler(
        torch.utils.data.RandomSampler(range(N), generator=torch.Generator().manual_seed(0)), 16, False
    )
    seen = []
    for workers in (0, 2):
        loader = torch.utils.data.DataLoader(tds, batch_sampler=sampler, collate_fn=zt.collate,
                                             num_workers=workers, multiprocessing_context="spawn" if workers else None)
        seen.append(sorted(i for b in loader for i in check_torch_batch(b, ds, zt)))
    assert seen == [list(range(N))] * 2


def test_torch_iterable_dataset_covers_every_record_once(ds):
    pytest.importorskip("torch")
    import zring.torch as zt

    for prefetch in (0, 2):
        it = zt.IterableDataset(ds, 16, shuffle=True, seed=3, epochs=1, prefetch=prefetch)
        assert len(it) == 7
        seen = [i for b in it for i in check_torch_batch(b, ds, zt)]
        assert sorted(seen) == list(range(N))
    # Two ranks with two worker processes each: every record once across them all.
    seen = []
    for rank in range(2):
        it = zt.IterableDataset(ds, 8, shuffle=False, epochs=1, rank=rank, world_size=2)
        loader = zt.DataLoader(it, num_workers=2, multiprocessing_context="spawn")
        seen.extend(i for b in loader for i in check_torch_batch(b, ds, zt))
    assert sorted(seen) == list(range(N))


def test_jax_data_source_items_equal_the_dataset(ds):
    jax = pytest.importorskip("jax")
    import zring.jax as zj

    src = zj.DataSource(ds)
    assert len(src) == N
    for i in (0, 17, 100):
        item, rec = src[i], ds[i]
        assert item["id"] == rec["id"] and item["tokens"].tolist() == rec["tokens"].tolist()
        assert bytes(item["caption"]) == rec["caption"].encode()
        np.testing.assert_array_equal(item["image"], rec["image"])
    ids = [100, 3, 50, 3]
    items = src.__getitems__(ids)
    want = ds.gather(ids)
    assert [int(x["id"]) for x in items] == ids
    assert [x["tokens"].tolist() for x in items] == [r.tolist() for r in want["tokens"].to_arrays()]
    batch = src.batch(ids)
    assert isinstance(batch["image"], jax.Array)
    np.testing.assert_array_equal(np.asarray(batch["image"]), want["image"])
    copy = pickle.loads(pickle.dumps(src))  # by the dataset's path and version
    assert copy[50]["tokens"].tolist() == ds[50]["tokens"].tolist()

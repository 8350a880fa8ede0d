"""Every dtype, both layouts and every codec survive write -> read byte for byte."""

import numpy as np
import pytest

import zring
from conftest import ALL_DTYPES, CODECS, np_dtype, sample, same_bytes


def codec_kwargs(codec, dictionary):
    return {"dict_bytes": dictionary} if codec == "zstd-dict" else {}


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_dense_round_trip_is_byte_exact(tmp_path, rng, dictionary, dtype, codec):
    data = sample(dtype, (40, 8, 32), rng)
    path = tmp_path / "d.zr"
    with zring.DenseWriter(path, dtype, (8, 32), codec=codec, **codec_kwargs(codec, dictionary)) as w:
        assert w.append(data[:25]) == range(0, 25)
        assert w.append(data[25:]) == range(25, 40)
        assert len(w) == 40
    store = zring.DenseStore(path)
    assert len(store) == 40
    assert store.dtype == np_dtype(dtype)
    assert store.item_shape == (8, 32)
    assert store.codec == codec
    assert same_bytes(store[:], data)
    idx = rng.integers(0, 40, 17)
    assert same_bytes(store[idx], data[idx])
    assert same_bytes(store[5], data[5])
    store.verify()
    stats = store.stats()
    if codec != "raw":
        # Low-entropy records shrink, so the compressed path was really exercised.
        assert stats["raw_records"] < 40
        assert stats["stored_bytes"] < stats["logical_bytes"]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_ragged_round_trip_is_byte_exact(tmp_path, rng, dictionary, dtype, codec):
    shapes = [(int(rng.integers(1, 6)), int(rng.integers(20, 90))) for _ in range(30)]
    records = [sample(dtype, s, rng) for s in shapes]
    path = tmp_path / "r.zr"
    with zring.RaggedWriter(path, dtype, 2, codec=codec, **codec_kwargs(codec, dictionary)) as w:
        w.append(records[:10])
        w.append(zring.RaggedBatch.from_records(records[10:]))
    store = zring.RaggedStore(path)
    assert len(store) == 30
    assert store.ndim == 2
    assert store.dtype == np_dtype(dtype)
    for i in (0, 13, 29):
        assert same_bytes(store[i], records[i])
        assert store.shape(i) == shapes[i]
    idx = [3, 3, 29, 0, 17]
    batch = store[idx]
    assert isinstance(batch, zring.RaggedBatch)
    assert len(batch) == len(idx)
    assert batch.shapes.tolist() == [list(shapes[i]) for i in idx]
    for got, i in zip(batch.to_arrays(), idx):
        assert same_bytes(got, records[i])
    whole = store[:]
    assert all(same_bytes(a, r) for a, r in zip(whole.to_arrays(), records))
    store.verify()
    if codec != "raw":
        assert store.stats()["raw_records"] < 30


def test_scalar_records_round_trip(tmp_path):
    labels = np.arange(50, dtype=np.int64) * 3
    store = zring.DenseStore(_write(tmp_path / "l.zr", labels))
    assert store.item_shape == ()
    assert store[7] == 21
    assert store[7].shape == ()
    assert store[[1, 2]].tolist() == [3, 6]


def test_metadata_and_schema_are_kept(tmp_path):
    path = tmp_path / "m.zr"
    with zring.DenseWriter(path, np.float32, 4, codec="zstd", level=5, metadata={"source": "unit"}) as w:
        w.append(np.zeros((3, 4), np.float32))
    store = zring.DenseStore(path)
    assert store.metadata == {"source": "unit"}
    schema = store.schema
    assert schema["layout"] == "dense"
    assert schema["dtype"] == "float32"
    assert schema["item_shape"] == [4]
    assert schema["codec"] == "zstd"
    assert schema["level"] == 5
    assert schema["record_count"] == 3


def test_train_dict_accepts_a_store_an_array_and_a_list(tmp_path, rng):
    data = rng.integers(0, 8, (400, 512), dtype=np.uint8)
    store = zring.DenseStore(_write(tmp_path / "s.zr", data))
    for source in (store, data, list(data)):
        d = zring.train_dict(source, size=2048)
        assert isinstance(d, bytes) and 0 < len(d) <= 2048
    with zring.DenseWriter(tmp_path / "dict.zr", "uint8", (512,), codec="zstd-dict", dict_bytes=d) as w:
        w.append(data)
    back = zring.DenseStore(tmp_path / "dict.zr")
    assert back.codec == "zstd-dict"
    assert back.schema["dict_id"] is not None
    assert same_bytes(back[:], data)


def test_open_returns_the_right_store_class(tmp_path):
    dense = _write(tmp_path / "d.zr", np.zeros((2, 3), np.uint8))
    with zring.RaggedWriter(tmp_path / "r.zr", "uint8") as w:
        w.append([np.ones(2, np.uint8)])
    assert isinstance(zring.open(dense), zring.DenseStore)
    assert isinstance(zring.open(tmp_path / "r.zr"), zring.RaggedStore)
    assert isinstance(zring.open(dense), zring.Store)


def _write(path, data):
    with zring.DenseWriter(path, data.dtype, data.shape[1:], codec="raw") as w:
        w.append(data)
    return path

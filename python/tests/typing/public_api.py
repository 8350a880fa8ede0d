"""The public API as a type checker sees it.

scripts/typecheck.sh runs ``mypy --strict`` over this file (``assert_type`` fails the
check when an inferred type drifts), and tests/test_docstrings.py runs ``main`` so that every
line is also real, working code.
"""

from __future__ import annotations

import os
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from typing_extensions import assert_type

import zring
import zring.loaderx
from zring.loaderx.sampler import Sampler as LoaderxSampler
from zring.loaderx.zrecord import Dense, DenseStore, DenseView, DenseWriter
from zring.types import CodecName, RecordIndices, Shard


def read_rows(store: zring.DenseStore, idx: RecordIndices) -> npt.NDArray[Any]:
    return store[idx]


def main(directory: str) -> None:
    dense_path = os.path.join(directory, "dense.zr")
    ragged_path = os.path.join(directory, "ragged.zr")

    with zring.DenseWriter(dense_path, np.float32, (2, 3), codec="zstd", metadata={"k": "v"}) as w:
        assert_type(w, zring.DenseWriter)
        ids = w.append(np.ones((11, 2, 3), np.float32))
        assert_type(ids, range)
        assert_type(w.item_shape, tuple[int, ...])
    assert_type(w.close(), int)

    with zring.RaggedWriter(ragged_path, "int32", 1, codec="raw") as rw:
        rw.append([np.arange(n + 1, dtype=np.int32) for n in range(10)])
        rw.append(zring.RaggedBatch.from_records([np.arange(3, dtype=np.int32)]))

    dense = zring.DenseStore(dense_path, backend="pread")
    assert_type(dense[0], npt.NDArray[Any])
    assert_type(dense[[1, 2]], npt.NDArray[Any])
    assert_type(dense[np.arange(3)], npt.NDArray[Any])
    assert_type(dense[0, 1], npt.NDArray[Any])
    assert_type(dense.gather(np.array([1, 2]), out=np.empty((2, 2, 3), np.float32)), npt.NDArray[Any])
    assert_type(read_rows(dense, slice(0, 4)), npt.NDArray[Any])
    assert_type(dense.codec, Literal["raw", "zstd", "zstd-dict"])
    assert_type(dense.metadata, dict[str, str])
    assert_type(dense.stats(), dict[str, int])
    assert_type(dense.dtype, np.dtype[Any])

    ragged = zring.RaggedStore(ragged_path)
    assert_type(ragged[3], npt.NDArray[Any])
    three: np.int64 = np.int64(3)
    assert_type(ragged[three], npt.NDArray[Any])
    assert_type(ragged[1:4], zring.RaggedBatch)
    assert_type(ragged[[0, 5]], zring.RaggedBatch)
    assert_type(ragged.gather(2), zring.RaggedBatch)
    assert_type(ragged.shape(0), tuple[int, ...])
    batch = ragged[:]
    assert_type(batch[0], npt.NDArray[Any])
    assert_type(batch[2:], zring.RaggedBatch)
    assert_type(batch.to_arrays(), list[npt.NDArray[Any]])

    opened = zring.open(ragged_path)
    assert_type(opened, "zring.DenseStore | zring.RaggedStore")  # noqa: F821
    assert isinstance(opened, zring.RaggedStore)

    sampler = zring.Sampler(len(dense), 4, zring.Sampler.Mode.CYCLIC, seed=1)
    mode: zring.Mode = sampler.mode
    assert mode == zring.Mode.CYCLIC
    assert_type(sampler.next(), npt.NDArray[np.uint64])
    assert_type(sampler.batch(7), npt.NDArray[np.uint64])
    assert_type(zring.Sampler(10, 2, "iid").step, int)

    with zring.Loader({"x": [dense], "t": ragged}, sampler, workers=1) as loader:
        assert_type(loader, zring.Loader[Shard])
        step = next(loader)
        assert_type(step, list[Shard])
        assert len(step) == 1
        loader.seek(loader.step)

    class Custom:
        def next(self) -> npt.NDArray[np.int64]:
            return np.arange(4)

    # zring.Loader(streams, Custom()) makes this same loader at runtime; type
    # checkers see the class they construct, so name SamplerLoader for its type.
    with zring.SamplerLoader({"x": [dense]}, Custom(), workers=0) as custom:
        assert_type(custom, zring.SamplerLoader)
        assert len(next(custom)) == 1

    d = zring.train_dict([np.arange(100, dtype=np.int32) % 7 for _ in range(200)], size=2048)
    assert_type(d, bytes)
    try:
        dense[len(dense)]
    except zring.ZringIndexError as e:
        assert isinstance(e, IndexError)
    assert first_record(dense_path).shape == (2, 3)

    # A transform's result is what each shard of a step holds.
    def total(shard: Shard) -> float:
        x = shard["x"]
        assert isinstance(x, np.ndarray)
        return float(x.sum())

    with zring.Loader({"x": [dense]}, zring.Sampler(len(dense), 2, "sequential"), transform=total) as summed:
        assert_type(summed, zring.Loader[float])
        assert_type(next(summed), list[float])
    with zring.Loader({"x": [dense]}, zring.Sampler(len(dense), 2, "sequential"), 1, 2, total) as positional:
        assert_type(positional, zring.Loader[float])
    dense.close()
    ragged.close()
    datasets(directory)
    loaderx(directory)


def datasets(directory: str) -> None:
    codec: CodecName = "raw"
    spec = zring.dense("float32", (2,))
    assert_type(spec, zring.FieldSpec)
    assert_type(zring.ragged("int32"), zring.FieldSpec)
    assert_type(zring.FieldSpec("int64", ()), zring.FieldSpec)
    assert_type(spec.shape, tuple[int, ...])
    assert_type(spec.kind, str | None)
    columns = {
        "x": np.ones((10, 2), np.float32),
        "label": np.arange(10),
        "text": [f"record {i}" for i in range(10)],
    }
    path = os.path.join(directory, "ds")
    written = zring.write_dataset(path, columns, {"x": spec, "label": zring.dense("int64"), "text": "str"}, codec=codec)
    assert_type(written, zring.Dataset)
    ds = zring.open_dataset(path)
    assert_type(ds, zring.Dataset)
    assert_type(zring.open_dataset(path, follow_links_out=True), zring.Dataset)
    assert len(ds) == 10 and ds.fields == ["x", "label", "text"]
    assert_type(ds.fields, list[str])
    assert_type(ds.version, int)
    gathered = ds.gather([1, 2], fields=["x", "label"])
    assert_type(gathered, dict[str, npt.NDArray[Any] | zring.RaggedBatch])
    assert_type(ds[np.arange(3)], dict[str, npt.NDArray[Any] | zring.RaggedBatch])
    record = ds[3]
    assert_type(record, dict[str, Any])
    assert record["text"] == "record 3"
    with zring.Loader(ds, zring.Sampler(len(ds), 5, "sequential"), workers=0) as loader:
        assert_type(loader, zring.Loader[Shard])
        assert list(next(loader)[0]) == ["x", "label", "text"]

    # Encoded images (PNG bytes made by hand: 1x1, one red pixel) decoded on read.
    png = bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010802000000907753de0000000c49444154"
        "789c63f8cfc0000003010100c9fe92ef0000000049454e44ae426082"
    )
    images = zring.write_dataset(os.path.join(directory, "img"), {"image": [png, png], "label": np.arange(2)})
    image = zring.decode.Image(size=(2, 2), crop="full")
    assert_type(image, zring.decode.Image)
    decoded = images.gather([1, 0], decode={"image": image}, epoch=1)
    assert_type(decoded, zring.decode.Decoded)
    assert decoded.indices == [1, 0] and decoded["image"].shape == (2, 2, 2, 3)
    with zring.Loader(images, zring.Sampler(2, 2, "sequential"), workers=0, decode={"image": image}) as loader:
        pixels = next(loader)[0]["image"]
        assert isinstance(pixels, np.ndarray) and pixels.shape == (2, 2, 2, 3)


def loaderx(directory: str) -> None:
    path = os.path.join(directory, "labels")
    with Dense.create(path, "int64", (), codec="zstd") as w:
        assert_type(w, DenseWriter)
        w.append(np.arange(16))
    store = Dense.open(path)
    assert_type(store, DenseStore)
    assert_type(store.item_shape, tuple[int, ...])
    view = store.bind(zring.loaderx.Allocator("cpu"))
    assert_type(view, DenseView)
    assert_type(view.item_shape, tuple[int, ...])
    sampler = LoaderxSampler(len(view), batch_size=4, mode=LoaderxSampler.IID, seed=42)
    assert_type(sampler, zring.loaderx.Sampler)
    assert_type(sampler.next(), npt.NDArray[np.uint64])
    assert_type(sampler.step, int)
    with zring.loaderx.Loader({"label": [view]}, sampler, workers=1) as loader:
        assert_type(loader, zring.loaderx.Loader)
        (shard,) = next(loader)
        assert shard["label"].shape == (4,)
    store.close()


def first_record(path: str) -> npt.NDArray[Any]:
    # __exit__ returns Literal[False]: a type checker knows `with` re-raises, so
    # this function needs no return after the block.
    with zring.DenseStore(path) as store:
        return store[0]

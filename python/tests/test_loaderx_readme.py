"""loaderx 2.8.19's README examples, run through zring.loaderx.

Each test is one example of loaderx's README with its ``loaderx`` imports pointed at
``zring.loaderx`` and small stand-ins for the data it names (``data.npy``, ``images``,
``seqs``, ...); the assertions are the results the README states (shapes, dtypes,
values, order). The examples that need a GPU, PyTorch, Numba or the network run
their CPU/NumPy equivalent instead, and say so. Where zring differs on purpose
(reads are NumPy arrays rather than ``DLTensor``; there is no ``"amdgpu"``
allocator; several workers still deliver steps in draw order), the test asserts
zring's behaviour; docs/loaderx.md lists every difference.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from zring.loaderx import Allocator, Loader, ZrecordError, dtypes
from zring.loaderx.sampler import Sampler
from zring.loaderx.zrecord import (
    DenseStore,
    DenseView,
    DenseWriter,
    RaggedBatch,
    RaggedStore,
    RaggedView,
    RaggedWriter,
    train_dict,
)


@pytest.fixture(autouse=True)
def in_tmp(tmp_path, monkeypatch):
    """The README's relative paths ('train_data', 'xsub/train/joint') land here."""
    monkeypatch.chdir(tmp_path)


def consume_into(out):
    return out.append


# -- Usage: Quick Start ---------------------------------------------------------------


def test_quick_start(capsys):
    n = 600  # not a multiple of 256: CYCLIC drops a different remainder every cycle
    np.save("data.npy", np.arange(n * 4, dtype=np.float32).reshape(n, 4))
    np.save("label.npy", np.arange(n, dtype=np.int64))

    # The README's program from here on (its imports point at zring.loaderx).
    data = np.load('data.npy', mmap_mode='r')
    label = np.load('label.npy', mmap_mode='r')
    with DenseWriter('train_data', data.dtype, data.shape[1:], codec='zstd') as ds:
        ds.append(data)  # a read-only mmap is a valid input
    with DenseWriter('train_label', label.dtype, label.shape[1:], codec='zstd') as ds:
        ds.append(label)

    seen = []
    with DenseStore('train_data') as data_store, \
            DenseStore('train_label') as label_store, \
            Allocator('cpu') as allocator:
        data_view = data_store.bind(allocator)
        label_view = label_store.bind(allocator)
        sampler = Sampler(len(data_view), 256, Sampler.Mode.CYCLIC, seed=42)
        loader = Loader({'data': [data_view], 'label': [label_view]}, sampler,
                        transform=lambda shards: shards)
        try:
            for i, shards in enumerate(loader):
                if i >= 256:
                    break
                shard = shards[0]
                assert len(shards) == 1  # a singleton view list: a one-element list
                seen.append(shard['label'].copy())
                # every stream of a shard is gathered with the same indices
                assert np.array_equal(shard['data'][:, 0], shard['label'] * 4)

            print(shard['data'].shape)
            print(shard['label'].shape)
        finally:
            loader.close()

    assert capsys.readouterr().out == "(256, 4)\n(256,)\n"
    assert shard['data'].dtype == np.float32 and shard['label'].dtype == np.int64
    # CYCLIC: two full batches per cycle of 600 records, no record twice in a cycle
    for cycle in range(128):
        drawn = np.concatenate(seen[2 * cycle : 2 * cycle + 2])
        assert len(np.unique(drawn)) == 512
    # and the steps are the sampler's, in order
    expected = Sampler(n, 256, Sampler.Mode.CYCLIC, seed=42)
    for step in seen[:10]:
        assert np.array_equal(step, expected.next())


# -- Records ----------------------------------------------------------------------


def test_records_dense():
    records = []
    consume = consume_into(records)

    data = np.arange(64, dtype=dtypes.float32).reshape(8, 2, 4)
    with DenseWriter('data', data.dtype, data.shape[1:], codec='zstd') as ds:
        ds.append(data)
    with DenseStore('data') as store, Allocator('cpu') as allocator:
        view = store.bind(allocator)
        record = view[0]                  # DLTensor (2, 4), no leading batch axis
        batch = view[0, 5, 2]             # DLTensor (3, 2, 4), requested order retained
        for record in view:                # each record is a DLTensor (2, 4)
            consume(record)

        assert isinstance(store, DenseStore) and isinstance(view, DenseView)
        assert view[0].shape == (2, 4)
        assert batch.shape == (3, 2, 4) and batch.dtype == np.float32
        assert np.array_equal(batch, data[[0, 5, 2]])
        # zring reads NumPy arrays, which are DLPack producers: np.from_dlpack works
        assert np.array_equal(np.from_dlpack(view[3]), data[3])
        # a Store is unbound: no indexing, no iteration
        with pytest.raises(TypeError):
            store[0]
        with pytest.raises(TypeError):
            iter(store)
        # indices must be in 0..len(view)-1
        with pytest.raises(IndexError):
            view[len(view)]
        with pytest.raises(IndexError):
            view[-1]
    assert [r.shape for r in records] == [(2, 4)] * 8
    assert np.array_equal(np.stack(records), data)


def test_records_ragged():
    tensors_seen = []
    consume = consume_into(tensors_seen)

    seqs = [np.arange(L, dtype=dtypes.int32) for L in (3, 1, 4, 1, 5)]
    with RaggedWriter('tokens', dtypes.int32, ndim=1, codec='zstd') as rs:
        rs.append(RaggedBatch.from_records(seqs))
    with RaggedStore('tokens') as store, Allocator('cpu') as allocator:
        view = store.bind(allocator)
        batch = view[0, 2, 4]             # RaggedBatch: values + cu_seqlens + shapes
        values = batch.values             # packed data, ready for a ragged-aware consumer
        tensors = batch.to_tensors()      # explicit per-record DLTensor views
        for tensor in tensors:            # each is one shape-restored DLTensor
            consume(tensor)

        assert isinstance(store, RaggedStore) and isinstance(view, RaggedView)
        assert isinstance(batch, RaggedBatch)
        assert values.dtype == np.int32 and values.ndim == 1
        assert values.tolist() == [0, 1, 2, 0, 1, 2, 3, 0, 1, 2, 3, 4]
        assert batch.cu_seqlens.dtype == np.int32 and batch.cu_seqlens.tolist() == [0, 3, 7, 12]
        assert batch.shapes.dtype == np.uint32 and batch.shapes.tolist() == [[3], [4], [5]]
        for field in (batch.values, batch.cu_seqlens, batch.shapes):
            assert field.flags.c_contiguous
        # integer indexing: a one-record RaggedBatch
        one = view[2]
        assert isinstance(one, RaggedBatch) and one.shapes.shape[0] == 1
        assert one.values.tolist() == [0, 1, 2, 3]
        # an empty read has cu_seqlens == [0]
        assert view[[]].cu_seqlens.tolist() == [0]
    assert [t.tolist() for t in tensors_seen] == [seqs[0].tolist(), seqs[2].tolist(), seqs[4].tolist()]


# -- Creating containers -------------------------------------------------------------


def test_creating_containers():
    images = np.random.default_rng(0).integers(0, 256, (10, 28, 28), dtype=np.uint8)
    sequences = [np.arange(k, dtype=np.int32) for k in (2, 7, 1)]

    # The README's example imports Allocator implicitly (from an earlier block).
    with DenseWriter('mnist/x', dtype=dtypes.uint8, item_shape=(28, 28),
                     codec='zstd', data_shards=4) as ds:
        ds.append(images)

    with RaggedWriter('tokens', dtype=dtypes.int32, ndim=1, codec='zstd') as tok:
        tok.append(RaggedBatch.from_records(sequences))

    with DenseStore('mnist/x') as store, Allocator('cpu') as allocator:
        view = store.bind(allocator)
        first_four = view[:4]              # the Store is read-only; the view materializes

        assert first_four.shape == (4, 28, 28) and first_four.dtype == np.uint8
        assert np.array_equal(first_four, images[:4])
        assert store.data_shards == 4
        with pytest.raises(RuntimeError):
            store.append(images)           # a read-only Store cannot be appended to
    with RaggedStore('tokens') as store, Allocator('cpu') as allocator:
        assert [t.tolist() for t in store.bind(allocator)[:].to_tensors()] == [s.tolist() for s in sequences]


def test_creating_containers_rules():
    # The required codec is "raw", "zstd" or "zstd_dict"; data_shards is 1..255.
    with pytest.raises(TypeError):
        DenseWriter('x', dtypes.uint8, (2,))  # codec is required
    for kw in ({"codec": "lz4"}, {"codec": "zstd", "data_shards": 0}, {"codec": "zstd", "data_shards": 256}):
        with pytest.raises(ValueError):
            DenseWriter('x', dtypes.uint8, (2,), **kw)
    # structured, object and non-native-endian dtypes are refused
    for dt in (np.dtype([('a', 'i4')]), np.dtype('O'), np.dtype('>i4')):
        with pytest.raises(ValueError):
            DenseWriter('x', dt, (), codec='raw')
    assert not os.path.lexists('x')  # invalid arguments leave nothing on disk

    # Append errors are reported by the current call; a writer cannot be read.
    with DenseWriter('d', dtypes.int32, (2,), codec='raw') as w:
        with pytest.raises(ValueError):
            w.append(np.zeros((3, 3), np.int32))           # not (batch, *item_shape)
        with pytest.raises(TypeError):
            w.append(np.zeros((3, 2), np.int64))           # not the store dtype
        with pytest.raises(ValueError):
            w.append(np.zeros((3, 4), np.int32)[:, :2])    # not C-contiguous
        with pytest.raises(RuntimeError):
            w[0]
        w.append(np.arange(6, dtype=np.int32).reshape(3, 2))
        w.append(np.arange(6, 10, dtype=np.int32).reshape(2, 2))  # successive calls extend
    with DenseStore('d') as store, Allocator('cpu') as allocator:
        assert store.bind(allocator)[:].tolist() == [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9]]
    # published containers are immutable: the destination path must be new
    with pytest.raises(ZrecordError) as e:
        DenseWriter('d', dtypes.int32, (2,), codec='raw')
    assert e.value.code == -12

    # Ragged offsets start at zero, strictly increase and span all values.
    v = np.arange(5, dtype=np.int32)
    for cu, shapes in (([1, 3, 5], [[2], [2]]), ([0, 3, 3, 5], [[3], [0], [2]]), ([0, 2, 4], [[2], [2]]),
                       ([0, 2, 5], [[2], [2]])):
        with pytest.raises(ValueError):
            RaggedBatch(v, np.asarray(cu, np.int32), np.asarray(shapes, np.uint32))

    # zring: a failed build publishes nothing (loaderx publishes what was appended).
    with pytest.raises(KeyError):
        with DenseWriter('failed', dtypes.int32, (2,), codec='raw') as w:
            w.append(np.zeros((3, 2), np.int32))
            raise KeyError("the source broke")
    assert not os.path.lexists('failed')


# -- Codec notes ------------------------------------------------------------------------


def token_records(n, seed):
    rng = np.random.default_rng(seed)
    vocab = rng.integers(0, 50_000, 64).astype(np.int32)  # a small shared vocabulary
    return [vocab[rng.integers(0, 64, int(rng.integers(16, 64)))] for _ in range(n)]


def test_codec_dictionary():
    sample = np.stack([r[:16] for r in token_records(2000, 1)])
    with DenseWriter('dict-sample', sample.dtype, sample.shape[1:], codec='zstd') as w:
        w.append(sample)
    token_list = token_records(500, 2)
    token_generator = (r for r in token_list)   # a finite iterable
    data = np.stack([r[:16] for r in token_records(300, 3)])

    # train once on a representative settled Zrecord sample
    with DenseStore('dict-sample') as sample_store, Allocator('cpu') as allocator:
        d = train_dict(sample_store.bind(allocator))

    # then any new store can install it and append explicitly
    with RaggedWriter('tokens', dtypes.int32, ndim=1,
                      codec='zstd_dict', dict_bytes=d) as ds:
        ds.append(RaggedBatch.from_records(token_generator))
    with DenseWriter('data', data.dtype, data.shape[1:],
                     codec='zstd_dict', dict_bytes=d) as ds:
        ds.append(data)

    assert isinstance(d, bytes) and 0 < len(d) <= 32 << 10
    with RaggedStore('tokens') as tokens, DenseStore('data') as dense, Allocator('cpu') as allocator:
        assert tokens.codec == 'zstd_dict' and dense.codec == 'zstd_dict'
        got = tokens.bind(allocator)[:].to_tensors()
        assert [t.tolist() for t in got] == [r.tolist() for r in token_list]
        assert np.array_equal(dense.bind(allocator)[:], data)
    # zstd_dict never trains automatically: dict_bytes is required
    with pytest.raises(ValueError):
        DenseWriter('nodict', dtypes.int32, (16,), codec='zstd_dict')


def test_changing_a_stores_codec():
    src = np.stack([r[:16] for r in token_records(2000, 4)])
    with DenseWriter('src', src.dtype, src.shape[1:], codec='raw') as w:
        w.append(src)

    with DenseStore("src") as source_store, Allocator("cpu") as allocator:
        source = source_store.bind(allocator)
        dictionary = train_dict(source)
        with DenseWriter(
            "dst", dtype=source.dtype, item_shape=source.item_shape,
            codec="zstd_dict", dict_bytes=dictionary,
        ) as destination:
            destination.append(source[:])             # DLTensor -> DLTensor

    with DenseStore("dst") as store, Allocator("cpu") as allocator:
        assert store.codec == "zstd_dict"
        assert np.array_equal(store.bind(allocator)[:], src)

    # Ragged: a batch read is the exact append input too.
    with RaggedWriter('rsrc', dtypes.int32, ndim=1, codec='raw') as w:
        w.append(RaggedBatch.from_records(token_records(50, 5)))
    with RaggedStore('rsrc') as source_store, Allocator('cpu') as allocator:
        source = source_store.bind(allocator)
        with RaggedWriter('rdst', dtype=source.dtype, ndim=source.ndim, codec='zstd') as destination:
            destination.append(source[:])
        expected = source[:]
    with RaggedStore('rdst') as store, Allocator('cpu') as allocator:
        got = store.bind(allocator)[:]
        for a, b in ((got.values, expected.values), (got.cu_seqlens, expected.cu_seqlens),
                     (got.shapes, expected.shapes)):
            assert np.array_equal(a, b)


# -- Offline Hugging Face conversion ------------------------------------------------------


def test_offline_hugging_face_conversion():
    pytest.importorskip("datasets")
    from datasets import Dataset, Features, Sequence, Value
    from zring.loaderx.converter import convert

    dataset = Dataset.from_dict(
        {"tokens": [[1, 2], [3], [4, 5, 6]]},
        features=Features({"tokens": Sequence(Value("int32"))}),
    )
    out = convert(dataset, "tokens", codec="zstd")

    assert out == "tokens"  # the output path
    with RaggedStore("tokens/tokens") as store, Allocator("cpu") as allocator:
        batch = store.bind(allocator)[:]
        assert batch.values.dtype == np.int32
        assert [t.tolist() for t in batch.to_tensors()] == [[1, 2], [3], [4, 5, 6]]

    # one dataset's aligned streams under one root: dataset/tokens, dataset/label
    both = Dataset.from_dict(
        {"tokens": [[1, 2], [3], [4, 5, 6]], "label": [0, 1, 0]},
        features=Features({"tokens": Sequence(Value("int32")), "label": Value("int64")}),
    )
    assert convert(both, "dataset", codec="zstd") == "dataset"
    assert sorted(os.listdir("dataset")) == ["label", "tokens"]
    with DenseStore("dataset/label") as store, Allocator("cpu") as allocator:
        labels = store.bind(allocator)[:]
        assert labels.dtype == np.int64 and labels.tolist() == [0, 1, 0]


# -- Loaders and multi-stream stores ---------------------------------------------------------


def skeletons(n):
    joint = np.arange(n * 6, dtype=np.float32).reshape(n, 3, 2)
    label = np.arange(n, dtype=np.int64)
    seqs = [np.full(int(i % 7) + 1, i, dtype=np.int32) for i in range(n)]
    return joint, label, seqs


def test_loaders_and_multi_stream_stores():
    joint, label, seqs = skeletons(512)

    root = "xsub/train"
    with DenseWriter(root + "/joint", joint.dtype, joint.shape[1:], codec="zstd") as s:
        s.append(joint)
    with DenseWriter(root + "/label", label.dtype, label.shape[1:], codec="zstd") as s:
        s.append(label)
    with RaggedWriter(root + "/token", dtypes.int32, ndim=1, codec="zstd") as s:
        s.append(RaggedBatch.from_records(seqs))

    stores = {
        "joint": DenseStore(root + "/joint"),
        "label": DenseStore(root + "/label"),
        "token": RaggedStore(root + "/token"),
    }
    with Allocator("cpu") as allocator:
        streams = {
            name: [store.bind(allocator)] for name, store in stores.items()
        }
        picked = streams["joint"][0][0, 5, 2]     # each view has its own index API
        sampler = Sampler(len(streams["joint"][0]), 256, Sampler.Mode.CYCLIC, seed=42)
        loader = Loader(streams, sampler)
        try:
            shards = next(loader)             # [{name: values}], index-aligned
            shard = shards[0]
        finally:
            loader.close()
    for store in stores.values():
        store.close()

    assert np.array_equal(picked, joint[[0, 5, 2]])
    assert len(shards) == 1 and set(shard) == {"joint", "label", "token"}
    idx = Sampler(512, 256, Sampler.Mode.CYCLIC, seed=42).next()
    assert np.array_equal(shard["label"], idx)
    assert shard["joint"].shape == (256, 3, 2) and np.array_equal(shard["joint"], joint[idx])
    assert isinstance(shard["token"], RaggedBatch)
    assert [int(t[0]) for t in shard["token"].to_tensors()] == idx.tolist()
    assert all(s.closed for s in stores.values())


def test_multiple_placement_views():
    joint, label, _ = skeletons(64)
    with DenseWriter("data", joint.dtype, joint.shape[1:], codec="raw") as s:
        s.append(joint)
    with DenseWriter("label", label.dtype, label.shape[1:], codec="raw") as s:
        s.append(label)
    # The README's allocators are two devices; zring has the CPU only, so two CPU
    # allocators stand in for them.
    with DenseStore("data") as data_store, DenseStore("label") as label_store, \
            Allocator("cpu") as allocator_0, Allocator("cpu") as allocator_1:
        streams = {
            "data": [
                data_store.bind(allocator_0),
                data_store.bind(allocator_1),
            ],
            "label": [
                label_store.bind(allocator_0),
                label_store.bind(allocator_1),
            ],
        }
        sampler = Sampler(64, 16, Sampler.Mode.IID, seed=7)
        with Loader(streams, sampler, workers=0) as loader:
            shards = next(loader)
    # the global batch splits into contiguous shards, one per view position
    idx = Sampler(64, 16, Sampler.Mode.IID, seed=7).next()
    assert len(shards) == 2
    assert np.array_equal(shards[0]["label"], idx[:8]) and np.array_equal(shards[1]["label"], idx[8:])
    assert shards[1]["data"].shape == (8, 3, 2) and np.array_equal(shards[1]["data"], joint[idx[8:]])
    # the global batch must divide evenly by the number of views
    with DenseStore("label") as label_store, Allocator("cpu") as allocator:
        views = [label_store.bind(allocator), label_store.bind(allocator)]
        with Loader({"label": views}, Sampler(64, 15, Sampler.Mode.IID), workers=0) as loader:
            with pytest.raises(ValueError):
                next(loader)
        # view lists must be nonempty and equally long
        with pytest.raises(ValueError):
            Loader({"label": []}, Sampler(64, 16, Sampler.Mode.IID))


def test_collate_transform():
    n = 100
    tokens = np.arange(n * 8, dtype=np.int32).reshape(n, 8)
    with DenseWriter("tokens", tokens.dtype, tokens.shape[1:], codec="zstd") as s:
        s.append(tokens)
    with DenseWriter("labels", np.int64, (), codec="zstd") as s:
        s.append(np.arange(n, dtype=np.int64) % 3)
    with DenseStore("tokens") as a, DenseStore("labels") as b, Allocator("cpu") as allocator:
        dense_tokens, labelset = a.bind(allocator), b.bind(allocator)

        def collate(batch):
            return [
                {'input_ids': shard['tokens'], 'label': shard['label']}
                for shard in batch
            ]

        sampler = Sampler(len(dense_tokens), 32, Sampler.Mode.CYCLIC, seed=42)
        loader = Loader({'tokens': [dense_tokens], 'label': [labelset]}, sampler,
                        transform=collate)
        shards = next(loader)
        loader.close()

    idx = Sampler(n, 32, Sampler.Mode.CYCLIC, seed=42).next()
    assert isinstance(shards, list) and len(shards) == 1 and set(shards[0]) == {"input_ids", "label"}
    assert shards[0]["input_ids"].shape == (32, 8)
    assert np.array_equal(shards[0]["input_ids"], tokens[idx])
    assert np.array_equal(shards[0]["label"], idx % 3)


def make_images(n=16):
    img = np.random.default_rng(3).integers(0, 256, (n, 3, 8, 8), dtype=np.uint8)
    with DenseWriter("image", img.dtype, img.shape[1:], codec="raw") as s:
        s.append(img)
    return img


def test_execution_policies_and_transform_errors():
    img = make_images()
    with DenseStore("image") as store, Allocator("cpu") as allocator:
        streams = {"image": [store.bind(allocator)]}

        def to_torch(shards):  # the README's light handoff; NumPy stands in for torch
            return [{k: np.from_dlpack(v) for k, v in s.items()} for s in shards]

        def tokenize_and_collate(shards):
            return [{"image": s["image"].astype(np.float32)} for s in shards]

        # Light handoff: synchronous delivery.
        expected = Sampler(16, 4, Sampler.Mode.SEQUENTIAL)
        loader = Loader(streams, Sampler(16, 4, Sampler.Mode.SEQUENTIAL), workers=0, transform=to_torch)
        for _ in range(6):
            assert np.array_equal(next(loader)[0]["image"], img[expected.next()])
        loader.close()

        # Expensive thread-safe transform. With several workers loaderx delivers in
        # completion order; zring keeps draw order, which this asserts.
        expected = Sampler(16, 4, Sampler.Mode.IID, seed=1)
        loader = Loader(streams, Sampler(16, 4, Sampler.Mode.IID, seed=1), workers=4, prefetch=4,
                        transform=tokenize_and_collate)
        for _ in range(20):
            (shard,) = next(loader)
            assert shard["image"].dtype == np.float32
            assert np.array_equal(shard["image"], img[expected.next()])
        loader.close()

        # The transform's exceptions propagate to the consumer.
        def broken(shards):
            raise KeyError("bad batch")

        with Loader(streams, Sampler(16, 4, Sampler.Mode.IID), workers=1, prefetch=1, transform=broken) as loader:
            with pytest.raises(KeyError, match="bad batch"):
                next(loader)


def test_numba_transform():
    # Numba is optional in the README; without it the same function runs as Python.
    try:
        import numba
        njit = numba.njit
    except ImportError:
        def njit(**_):
            return lambda f: f

    img = make_images()

    @njit(nogil=True, parallel=False)
    def normalize_u8(x):
        out = np.empty(x.shape, dtype=dtypes.float32)
        for i in range(x.size):
            out.flat[i] = x.flat[i] / 255.0
        return out

    normalize_u8(np.zeros((1, 3, 224, 224), dtype=dtypes.uint8))  # compile warmup

    def transform(batch):
        for shard in batch:
            shard["image"] = normalize_u8(np.from_dlpack(shard["image"]))
        return batch

    with DenseStore("image") as store, Allocator("cpu") as allocator:
        sampler = Sampler(16, 8, Sampler.Mode.SEQUENTIAL)
        with Loader({"image": [store.bind(allocator)]}, sampler, workers=0, transform=transform) as loader:
            (shard,) = next(loader)
    assert shard["image"].dtype == np.float32
    assert np.allclose(shard["image"], img[:8] / 255.0)


# -- CPU -> GPU transfer ------------------------------------------------------------------------


def test_cpu_to_device_in_transform():
    joint, label, _ = skeletons(512)
    root = "xsub/train"
    with DenseWriter(root + "/joint", joint.dtype, joint.shape[1:], codec="zstd") as s:
        s.append(joint)
    with DenseWriter(root + "/label", label.dtype, label.shape[1:], codec="zstd") as s:
        s.append(label)

    # torch.from_dlpack(v).to(device) in the README; np.from_dlpack is the same
    # DLPack handoff without a GPU.
    def to_device(shards):
        return [
            {k: np.from_dlpack(v) for k, v in shard.items()}
            for shard in shards
        ]

    seen = []

    class Done(Exception):
        pass

    def model(shard):
        seen.append(shard)
        if len(seen) == 3:
            raise Done

    with pytest.raises(Done):
        with DenseStore(root + "/joint") as joint_store, \
                DenseStore(root + "/label") as label_store, \
                Allocator("cpu") as allocator:
            streams = {
                "joint": [joint_store.bind(allocator)],
                "label": [label_store.bind(allocator)],
            }
            sampler = Sampler(len(streams["joint"][0]), 256, Sampler.Mode.CYCLIC, seed=42)
            loader = Loader(streams, sampler, transform=to_device)
            try:
                for shards in loader:
                    model(shards[0])                # already on device
            finally:
                loader.close()
    assert loader.closed
    assert [s["joint"].shape for s in seen] == [(256, 3, 2)] * 3
    for s in seen:
        assert np.array_equal(s["joint"], joint[s["label"]])


# -- Storage -> GPU transfer ---------------------------------------------------------------------


def test_storage_to_device_allocation():
    data = np.arange(40, dtype=np.int16).reshape(10, 4)
    with DenseWriter("store", data.dtype, data.shape[1:], codec="raw") as s:
        s.append(data)
    path, idxs = "store", np.array([9, 0, 4])
    consumed = []
    consume = consume_into(consumed)

    # zring has no device allocator: Allocator("amdgpu", 0) is refused up front.
    with pytest.raises(ValueError, match="amdgpu"):
        Allocator("amdgpu", 0)

    allocator = Allocator("cpu", 0)
    try:
        with DenseStore(path) as store:
            view = store.bind(allocator)
            batch = view[idxs]                           # lazily sized allocation
            gpu_tensor = np.from_dlpack(batch)           # torch.from_dlpack on a GPU
            consume(gpu_tensor)
    finally:
        allocator.close()
    assert allocator.closed
    assert np.array_equal(consumed[0], data[idxs])
    assert batch.__dlpack_device__() == (1, 0)  # kDLCPU, device 0
    # a closed allocator takes no new views
    with DenseStore(path) as store:
        with pytest.raises(RuntimeError):
            store.bind(allocator)


# -- GPU -> Storage append ------------------------------------------------------------------------


def test_append_dlpack_round_trip():
    # The README builds these on a GPU with torch; CPU NumPy arrays are the same
    # DLPack inputs (zring's writers take CPU data only).
    dense = np.arange(12, dtype=np.int32).reshape(3, 2, 2)
    values = np.array([3, 5, 7, 11, 13, 17, 19], dtype=np.int32)
    cu_seqlens = np.array([0, 2, 6, 7], dtype=np.int32)
    shapes = np.array([[1, 2], [2, 2], [1, 1]], dtype=np.uint32)

    with DenseWriter("dense", dtypes.int32, (2, 2), codec="zstd") as writer:
        writer.append(dense)

    with RaggedWriter("ragged", dtypes.int32, ndim=2, codec="zstd") as writer:
        writer.append(RaggedBatch(values, cu_seqlens, shapes))

    # Closing the writers publishes the stores; reopening proves persistence.
    with DenseStore("dense") as dense_store, RaggedStore("ragged") as ragged_store, \
            Allocator("cpu") as allocator:
        dense_view = dense_store.bind(allocator)
        ragged_view = ragged_store.bind(allocator)
        np.testing.assert_array_equal(
            np.from_dlpack(dense_view[:]), np.arange(12, dtype=dtypes.int32).reshape(3, 2, 2),
        )
        batch = ragged_view[:]
        np.testing.assert_array_equal(
            np.from_dlpack(batch.values),
            np.asarray([3, 5, 7, 11, 13, 17, 19], dtype=dtypes.int32),
        )
        assert [t.shape for t in batch.to_tensors()] == [(1, 2), (2, 2), (1, 1)]
        assert batch.shapes.tolist() == shapes.tolist()


# -- Sampler --------------------------------------------------------------------------------------


def test_sampler():
    sampler = Sampler(1_000_000, 256, Sampler.Mode.IID, seed=42)
    indices = sampler.next()       # borrowed until this sampler's next draw
    saved = indices.copy()         # retain across draws only when needed

    assert indices.dtype == np.uint64 and indices.shape == (256,)
    assert indices.flags.c_contiguous and int(indices.max()) < 1_000_000
    again = sampler.next()
    assert np.shares_memory(again, indices)      # one reusable buffer
    assert np.array_equal(indices, again) and not np.array_equal(saved, again)
    sampler.seek(0)                              # O(1) resume, no replay
    assert np.array_equal(sampler.next(), saved)
    # next(), seek() and iteration only: no indices, close() or context manager
    for name in ("indices", "close", "__enter__"):
        assert not hasattr(sampler, name)

    # Sequential traverses records in order and wraps at the end.
    seq = Sampler(5, 3, Sampler.Mode.SEQUENTIAL)
    assert [seq.next().tolist() for _ in range(3)] == [[0, 1, 2], [3, 4, 0], [1, 2, 3]]
    # Cyclic: full batches of a fresh permutation; a remainder is omitted each cycle.
    cyc = Sampler(10, 4, Sampler.Mode.CYCLIC, seed=3)
    for _ in range(5):
        cycle = np.concatenate([cyc.next().copy(), cyc.next().copy()])
        assert len(np.unique(cycle)) == 8 and int(cycle.max()) < 10


def test_sampler_iteration():
    sampler = Sampler(100, 8, Sampler.Mode.IID, seed=5)
    expected = Sampler(100, 8, Sampler.Mode.IID, seed=5)
    for step, indices in zip(range(3), sampler):
        assert np.array_equal(indices, expected.next())


# -- Module layout and the earlier spelling ---------------------------------------------------------


def test_module_paths_and_both_spellings():
    import zring.loaderx as loaderx
    from zring.loaderx.allocator import Allocator as A
    from zring.loaderx.converter import convert
    from zring.loaderx.dataloader import Loader as L
    from zring.loaderx.zrecord import Dense, Ragged

    assert A is Allocator and L is Loader and convert is loaderx.convert
    assert loaderx.DenseWriter is DenseWriter and loaderx.RaggedStore is RaggedStore

    # Dense.create / Dense.open (earlier 2.8 releases) make the same objects.
    with Dense.create("a", dtypes.int64, (), codec="raw") as w:
        assert type(w) is DenseWriter
        w.append(np.arange(4, dtype=np.int64))
    with Ragged.create("r", dtypes.int32, 1, codec="raw") as rw:
        assert type(rw) is RaggedWriter
        rw.append(RaggedBatch.from_records([np.arange(2, dtype=np.int32)]))
    with Dense.open("a") as store, Ragged.open("r") as rstore, DenseStore("a") as again:
        assert type(store) is DenseStore and type(rstore) is RaggedStore
        with Allocator("cpu") as allocator:
            assert store.bind(allocator)[:].tolist() == again.bind(allocator)[:].tolist() == [0, 1, 2, 3]
    with pytest.raises(TypeError):
        Dense()


def test_store_close_invalidates_views():
    with DenseWriter("d", dtypes.int8, (2,), codec="raw") as w:
        w.append(np.zeros((3, 2), np.int8))
    allocator = Allocator("cpu")
    store = DenseStore("d")
    view = store.bind(allocator)
    kept = view[:]
    store.close()
    with pytest.raises(RuntimeError):
        view[0]
    assert kept.shape == (3, 2)  # batches already read stay valid
    with pytest.raises(FileNotFoundError):
        DenseStore("missing")

"""zring.torch with real torch: the map-style Dataset under DataLoader (batched
__getitems__, workers under fork / spawn / forkserver), the IterableDataset's order,
sharding and exact resume, and the device helpers (on CPU)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import zring  # noqa: E402
import zring.torch as zt  # noqa: E402
from conftest import write_dense, write_ragged  # noqa: E402

N = 103


@pytest.fixture(scope="module")
def fields(tmp_path_factory):
    d = tmp_path_factory.mktemp("torch")
    ids = np.arange(N, dtype=np.int64)
    images = (np.arange(N * 12, dtype=np.float32) % 251).reshape(N, 3, 4)
    tokens = [np.full(1 + i % 6, i, np.int32) for i in range(N)]
    write_dense(d / "id.zr", ids)
    write_dense(d / "img.zr", images, codec="zstd")
    write_ragged(d / "tok.zr", tokens, "int32", codec="zstd")
    paths = {"id": d / "id.zr", "image": d / "img.zr", "tokens": d / "tok.zr"}
    return paths, images, tokens


def check_batch(batch, images, tokens):
    ids = batch["id"].numpy()
    np.testing.assert_array_equal(batch["image"].numpy(), images[ids])
    tok = batch["tokens"]
    assert isinstance(tok, zt.Ragged)
    off = tok.offsets.numpy()
    for k, i in enumerate(ids):
        assert tok.values[off[k]:off[k + 1]].tolist() == tokens[i].tolist()
    return ids


def test_getitems_is_one_gather_per_field_and_zero_copy(fields):
    paths, images, tokens = fields
    ds = zt.Dataset(paths)
    assert len(ds) == N
    batch = zt.collate(ds.__getitems__([5, 0, 5, 102]))
    assert check_batch(batch, images, tokens).tolist() == [5, 0, 5, 102]
    one = ds[7]
    assert one["image"].shape == (3, 4) and one["tokens"].tolist() == [7, 7]
    arr = ds.fields["image"][[1, 2]]
    t = zt.to_tensor(arr)
    assert t.data_ptr() == arr.base.address


def test_ragged_fields_padded_and_nested(fields):
    paths, _, tokens = fields
    padded = zt.Dataset({"tokens": paths["tokens"]}, ragged="padded", pad_value=-1)
    p = zt.collate(padded.__getitems__([0, 5, 11]))["tokens"]
    assert p.values.shape == (3, 6) and p.lengths.tolist() == [1, 6, 6]
    assert p.values[0].tolist() == [0, -1, -1, -1, -1, -1]
    nested = zt.Dataset({"tokens": paths["tokens"]}, ragged="nested")
    nt = zt.collate(nested.__getitems__([3, 1]))["tokens"]
    assert [x.tolist() for x in nt.unbind()] == [tokens[3].tolist(), tokens[1].tolist()]
    assert nt.layout == torch.jagged
    with pytest.raises(ValueError, match="ragged must be one of"):
        zt.Dataset(paths, ragged="bogus")


def test_fields_must_be_aligned(fields, tmp_path):
    paths, _, _ = fields
    short = write_dense(tmp_path / "short.zr", np.zeros(3, np.int8))
    with pytest.raises(ValueError, match="different numbers of records"):
        zt.Dataset({"id": paths["id"], "short": short})


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_dataloader_workers_under_every_start_method(fields, method):
    paths, images, tokens = fields
    ds = zt.Dataset(paths)
    ds.fields["id"][0]  # opened in the parent before the workers start
    sampler = torch.utils.data.BatchSampler(
        torch.utils.data.RandomSampler(range(N), generator=torch.Generator().manual_seed(0)), 16, False
    )
    loader = torch.utils.data.DataLoader(
        ds, batch_sampler=sampler, collate_fn=zt.collate, num_workers=2, multiprocessing_context=method
    )
    seen = np.concatenate([check_batch(b, images, tokens) for b in loader])
    assert sorted(seen.tolist()) == list(range(N))


def test_dataset_loader_helper_reads_every_record_in_order(fields):
    paths, images, tokens = fields
    loader = zt.Dataset(paths).loader(batch_size=32, shuffle=False)
    seen = np.concatenate([check_batch(b, images, tokens) for b in loader])
    assert seen.tolist() == list(range(N))


# Pinned host memory and the CUDA stream path need a GPU; on the CPU-only CI machine
# these skip (saying so), and the CPU path is what test_to_device_and_prefetcher_on_cpu
# checks.
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (pinned memory, CUDA streams)")


@needs_cuda
def test_pinned_batches_from_the_loader_helper(fields):
    paths, images, tokens = fields
    loader = zt.Dataset(paths).loader(batch_size=32, shuffle=False, pin_memory=True)
    for b in loader:
        assert b["image"].is_pinned() and b["tokens"].values.is_pinned()
        check_batch(b, images, tokens)


@needs_cuda
def test_device_prefetcher_on_cuda(fields):
    paths, images, tokens = fields
    want = ids_of(zt.IterableDataset(paths, 8, seed=0, epochs=1))
    got = []
    for b in zt.DevicePrefetcher(zt.DataLoader(zt.IterableDataset(paths, 8, seed=0, epochs=1)), "cuda"):
        assert b["image"].device.type == "cuda" and b["tokens"].values.device.type == "cuda"
        got.append(check_batch(zt.to_device(b, "cpu", non_blocking=False), images, tokens).tolist())
    assert got == want


def ids_of(batches):
    return [b["id"].tolist() for b in batches]


def test_plan_covers_each_epoch_once_per_rank_split(fields):
    paths, _, _ = fields
    for drop_last in (False, True):
        per_epoch = {}
        for rank in range(2):
            ds = zt.IterableDataset(paths, 8, epochs=2, drop_last=drop_last, rank=rank, world_size=2, seed=5)
            spe = ds.steps_per_epoch
            assert len(ds) == 2 * spe
            for step, b in enumerate(ids_of(ds)):
                per_epoch.setdefault(step // spe, []).extend(b)
        for epoch, ids in per_epoch.items():
            if drop_last:
                assert len(ids) == (N // 16) * 16 and len(set(ids)) == len(ids)
            else:
                assert sorted(ids) == list(range(N)), epoch
        assert per_epoch[0] != per_epoch[1]  # a fresh permutation per epoch


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_two_ranks_two_workers_cover_every_record_once_per_epoch(fields, method):
    paths, images, tokens = fields
    seen = {0: [], 1: [], 2: []}
    for rank in range(2):
        ds = zt.IterableDataset(paths, 8, epochs=3, rank=rank, world_size=2, seed=1)
        loader = zt.DataLoader(ds, num_workers=2, multiprocessing_context=method)
        for step, b in enumerate(loader):
            seen[step // ds.steps_per_epoch].extend(check_batch(b, images, tokens).tolist())
    for epoch in seen.values():
        assert sorted(epoch) == list(range(N))


def test_evaluation_pass_is_exactly_once_in_order_across_ranks(fields):
    paths, _, _ = fields
    got = []
    for rank in range(3):
        ds = zt.IterableDataset(paths, 10, shuffle=False, epochs=1, rank=rank, world_size=3)
        got.append([i for b in ids_of(ds) for i in b])
    assert sorted(got[0] + got[1] + got[2]) == list(range(N))
    assert len(got[0]) == len(got[1]) == 34 and len(got[2]) == 35


def uninterrupted(paths, steps, **kw):
    return ids_of(b for _, b in zip(range(steps), zt.IterableDataset(paths, 8, seed=3, **kw)))


@pytest.mark.parametrize(
    "before,after,method",
    [(1, 1, "fork"), (2, 2, "fork"), (4, 4, "fork"), (2, 4, "fork"), (4, 1, "fork"), (0, 2, "fork"),
     # The workers of a resumed loader receive the dataset, and its step, pickled.
     (2, 1, "spawn"), (2, 1, "forkserver")],
)
def test_resume_yields_exactly_the_uninterrupted_batches(fields, before, after, method):
    paths, _, _ = fields
    want = uninterrupted(paths, 30, epochs=3)  # crosses epoch boundaries (13 steps each)
    ds = zt.IterableDataset(paths, 8, seed=3, epochs=3)
    loader = zt.DataLoader(ds, num_workers=before, multiprocessing_context=method if before else None)
    first = []
    for b in loader:
        first.append(b["id"].tolist())
        if len(first) == 11:
            state = loader.state_dict()
            break
    assert state["step"] == 11
    del loader
    ds2 = zt.IterableDataset(paths, 8, seed=3, epochs=3)
    loader2 = zt.DataLoader(ds2, num_workers=after, multiprocessing_context=method if after else None)
    loader2.load_state_dict(state)
    rest = [b["id"].tolist() for _, b in zip(range(19), loader2)]
    assert first + rest == want
    assert loader2.state_dict()["step"] == 30


def test_endless_mode_and_direct_iteration_state(fields):
    paths, _, _ = fields
    ds = zt.IterableDataset(paths, 8, seed=3)
    with pytest.raises(TypeError):
        len(ds)
    it = iter(ds)
    first = [next(it)["id"].tolist() for _ in range(40)]  # three epochs and more
    assert ds.state_dict()["step"] == 40
    assert first == uninterrupted(paths, 40)
    ds2 = zt.IterableDataset(paths, 8, seed=3)
    ds2.load_state_dict({"step": 17})
    assert next(iter(ds2))["id"].tolist() == first[17]
    with pytest.raises(ValueError, match="another order"):
        zt.IterableDataset(paths, 8, seed=4).load_state_dict(ds.state_dict())


def test_rank_and_world_come_from_the_environment(fields, monkeypatch):
    paths, _, _ = fields
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    ds = zt.IterableDataset(paths, 4, shuffle=False, epochs=1)
    assert (ds.rank, ds.world_size) == (1, 2)
    assert ids_of(ds)[0] == [4, 5, 6, 7]


def test_to_device_and_prefetcher_on_cpu(fields):
    paths, images, tokens = fields
    ds = zt.IterableDataset(paths, 8, seed=0, epochs=1)
    want = ids_of(ds)
    got = []
    for b in zt.DevicePrefetcher(zt.DataLoader(zt.IterableDataset(paths, 8, seed=0, epochs=1)), "cpu"):
        assert b["image"].device.type == "cpu" and isinstance(b["tokens"], zt.Ragged)
        got.append(check_batch(b, images, tokens).tolist())
    assert got == want
    moved = zt.to_device({"a": [torch.ones(2)], "b": (torch.zeros(1), 3)}, "cpu")
    assert moved["a"][0].tolist() == [1, 1] and moved["b"][1] == 3


def test_bfloat16_stores_become_bfloat16_tensors(tmp_path):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    data = np.linspace(-1, 1, 8).astype(ml_dtypes.bfloat16).reshape(4, 2)
    write_dense(tmp_path / "bf.zr", data)
    t = zt.collate(zt.Dataset({"x": tmp_path / "bf.zr"}).__getitems__([2, 3]))["x"]
    assert t.dtype == torch.bfloat16
    assert t.float().numpy().tolist() == data[[2, 3]].astype(np.float32).tolist()


def test_batch_sampler_feeds_getitems_with_arrays(fields):
    paths, images, tokens = fields
    ds = zt.Dataset(paths)
    seen = []
    for rank in range(2):
        bs = zt.BatchSampler(N, 8, seed=2, rank=rank, world_size=2)
        bs.set_epoch(1)
        assert len(bs) == 7
        loader = torch.utils.data.DataLoader(ds, batch_sampler=bs, collate_fn=zt.collate)
        seen.extend(i for b in loader for i in check_batch(b, images, tokens).tolist())
    assert sorted(seen) == list(range(N))
    a, b = zt.BatchSampler(N, 8, seed=2, rank=0, world_size=1), zt.BatchSampler(N, 8, seed=2, rank=0, world_size=1)
    b.set_epoch(1)
    assert next(iter(a)).tolist() != next(iter(b)).tolist()


def test_batch_sampler_state_resumes_mid_epoch(fields):
    full = [b.tolist() for b in zt.BatchSampler(N, 8, seed=2)]
    bs = zt.BatchSampler(N, 8, seed=2)
    bs.set_epoch(1)
    epoch1 = [b.tolist() for b in bs]
    assert epoch1 != full and len(epoch1) == 13
    it = iter(bs)
    assert bs.state_dict()["step"] == 0  # before the first batch: the epoch's start
    taken = [next(it).tolist() for _ in range(4)]
    state = bs.state_dict()
    assert (state["epoch"], state["step"]) == (1, 4)
    again = zt.BatchSampler(N, 8, seed=2)
    again.load_state_dict(state)
    assert again.state_dict()["step"] == 4
    assert taken + [b.tolist() for b in again] == epoch1
    again.set_epoch(0)  # the next epochs start at their beginning
    assert [b.tolist() for b in again] == full
    with pytest.raises(ValueError, match="another order"):
        zt.BatchSampler(N, 8, seed=3).load_state_dict(state)
    with pytest.raises(ValueError, match="not a position"):
        zt.BatchSampler(N, 8, seed=2).load_state_dict({"epoch": 0, "step": 14})


@pytest.mark.parametrize("workers", [0, 2])
def test_torchdata_stateful_dataloader_resumes_a_map_style_dataset(fields, workers):
    tsd = pytest.importorskip("torchdata.stateful_dataloader")
    paths, images, tokens = fields
    ds = zt.Dataset(paths)

    def loader():
        sampler = zt.BatchSampler(N, 8, seed=2)
        ctx = "fork" if workers else None
        dl = tsd.StatefulDataLoader(ds, batch_sampler=sampler, collate_fn=zt.collate,
                                    num_workers=workers, multiprocessing_context=ctx)
        return sampler, dl

    def epochs(sampler, dl, first_epoch, stop_after=None):
        got = []
        for epoch in range(first_epoch, 3):
            sampler.set_epoch(epoch)  # before iter(dl), which applies a loaded state
            for b in dl:
                got.append(check_batch(b, images, tokens).tolist())
                if len(got) == stop_after:
                    return got, dl.state_dict()
        return got, None

    want, _ = epochs(*loader(), 0)
    assert len(want) == 3 * 13
    first, state = epochs(*loader(), 0, stop_after=13 + 5)  # in epoch 1, after 5 batches
    sampler, dl = loader()
    dl.load_state_dict(state)
    rest, _ = epochs(sampler, dl, 1)  # the training loop restarts at the saved epoch
    assert first + rest == want


def test_zring_dataloader_over_the_map_style_dataset(fields):
    paths, images, tokens = fields
    ds = zt.Dataset(paths)
    for workers in (0, 2):
        loader = zt.DataLoader(ds, batch_sampler=zt.BatchSampler(N, 16, seed=4), num_workers=workers)
        assert len(loader) == 7
        seen = [i for b in loader for i in check_batch(b, images, tokens).tolist()]
        assert sorted(seen) == list(range(N))


@pytest.mark.parametrize("prefetch", [0, 1, 5])
def test_prefetch_depth_does_not_change_the_batches(fields, prefetch):
    paths, _, _ = fields
    ds = zt.IterableDataset(paths, 8, seed=3, epochs=2, prefetch=prefetch)
    assert ids_of(ds) == uninterrupted(paths, 2 * ds.steps_per_epoch, epochs=2)
    it = iter(zt.IterableDataset(paths, 8, seed=3, prefetch=prefetch))
    next(it)
    it.close()  # abandoning an endless iteration stops its prefetch thread


def test_a_failing_transform_surfaces_at_its_step(fields):
    paths, _, _ = fields
    calls = []

    def transform(batch):
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("bad batch")
        return batch

    it = iter(zt.IterableDataset(paths, 8, seed=3, transform=transform))
    next(it), next(it)
    with pytest.raises(RuntimeError, match="bad batch"):
        next(it)


@pytest.mark.parametrize("workers", [0, 2])
def test_torchdata_stateful_dataloader_resumes_exactly(fields, workers):
    tsd = pytest.importorskip("torchdata.stateful_dataloader")
    paths, _, _ = fields
    want = uninterrupted(paths, 20, epochs=2)

    def loader():
        ds = zt.IterableDataset(paths, 8, seed=3, epochs=2)
        ctx = "fork" if workers else None
        return tsd.StatefulDataLoader(ds, batch_size=None, num_workers=workers, multiprocessing_context=ctx)

    first, dl = [], loader()
    for b in dl:
        first.append(b["id"].tolist())
        if len(first) == 7:
            state = dl.state_dict()
            break
    del dl
    dl = loader()
    dl.load_state_dict(state)
    rest = [b["id"].tolist() for _, b in zip(range(13), dl)]
    assert first + rest == want


@pytest.mark.parametrize("ragged", ["offsets", "padded", "nested"])
def test_iteration_runs_a_zring_loader_and_equals_the_batch_function(fields, ragged, monkeypatch):
    # Rank 1 of 3, batch 8: global steps of 24, the last of each epoch (7 records)
    # split 2/2/3: a short step per epoch, gathered by the Rust loader.
    paths, _, _ = fields
    made = []
    real = zt.Loader

    def spy(*args, **kwargs):
        loader = real(*args, **kwargs)
        made.append((loader, loader.options["workers"]))
        return loader

    monkeypatch.setattr(zt, "Loader", spy)
    for prefetch in (0, 2):
        ds = zt.IterableDataset(paths, 8, seed=6, epochs=2, rank=1, world_size=3, ragged=ragged,
                                prefetch=prefetch)
        got = list(ds)
        assert len(got) == len(ds) == 10 and len(got[4]["id"]) == 2
        for step, b in enumerate(got):
            want = ds.batch(step)
            assert b["id"].tolist() == want["id"].tolist()
            assert torch.equal(b["image"], want["image"])
            if ragged == "offsets":
                assert all(torch.equal(x, y) for x, y in zip(b["tokens"], want["tokens"]))
            elif ragged == "padded":
                assert torch.equal(b["tokens"].values, want["tokens"].values)
            else:
                assert [t.tolist() for t in b["tokens"].unbind()] == [t.tolist() for t in want["tokens"].unbind()]
        loader, workers = made[-1]
        assert loader.closed  # the finite loader ended and was closed
        assert workers == (1 if prefetch else 0)
    # The dataset pickles after iterating (the loader is never kept on it), with its
    # position: at the end; from step 4 on it repeats the batches.
    import pickle

    copy = pickle.loads(pickle.dumps(ds))
    assert ids_of(copy) == []
    copy.load_state_dict({"step": 4})
    assert ids_of(copy) == ids_of(got[4:])


def same_batch(a, b):
    """Equal batches: the same keys, and tensors (also inside Ragged / Padded) of the
    same dtype, shape and values."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype
        if a.is_nested:
            assert b.is_nested and len(a.unbind()) == len(b.unbind())
            for x, y in zip(a.unbind(), b.unbind()):
                same_batch(x, y)
            return
        assert a.shape == b.shape and torch.equal(a, b)
    elif isinstance(a, tuple):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            same_batch(x, y)
    else:
        assert isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys()
        for k in a:
            same_batch(a[k], b[k])


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("ragged", ["offsets", "padded", "nested"])
def test_plain_dataloader_with_the_default_collate_gives_the_collate_batches(fields, workers, ragged):
    paths, images, tokens = fields
    ds = zt.Dataset(paths, ragged=ragged, pad_value=-1)
    kw = dict(batch_size=8, num_workers=workers)
    plain = list(torch.utils.data.DataLoader(ds, **kw))
    fast = list(torch.utils.data.DataLoader(ds, collate_fn=zt.collate, **kw))
    assert len(plain) == len(fast) == -(-N // 8)
    for a, b in zip(plain, fast):
        same_batch(a, b)
    if ragged == "offsets":
        seen = np.concatenate([check_batch(b, images, tokens) for b in plain])
        assert seen.tolist() == list(range(N))
    shuffled = torch.utils.data.DataLoader(ds, batch_size=8, shuffle=True,
                                           generator=torch.Generator().manual_seed(3))
    assert sorted(torch.cat([b["id"] for b in shuffled]).tolist()) == list(range(N))


def test_getitems_is_a_list_of_records_over_one_gathered_batch(fields):
    paths, images, tokens = fields
    ds = zt.Dataset(paths)
    items = ds.__getitems__([9, 2, 9])
    assert isinstance(items, list) and len(items) == 3
    rec = items[1]
    assert set(rec) == {"id", "image", "tokens"} and int(rec["id"]) == 2
    np.testing.assert_array_equal(rec["image"].numpy(), images[2])
    assert rec["tokens"].tolist() == tokens[2].tolist()
    # The whole list is handed over as gathered, by either collate.
    default = torch.utils.data.default_collate(items)
    assert default is zt.collate(items)
    assert default["id"].tolist() == [9, 2, 9]
    # A part of it, or its records reordered, is put together again.
    part = torch.utils.data.default_collate(items[1:])
    assert part["id"].tolist() == [2, 9] and check_batch(part, images, tokens).tolist() == [2, 9]
    same_batch(zt.collate(items[::-1]), zt.collate(ds.__getitems__([9, 2, 9])))
    # No reference cycle: the gathered memory goes when the list does, without gc.
    import gc
    import weakref

    gc.disable()
    try:
        gone = weakref.ref(ds.__getitems__([1, 2]))
        assert gone() is None
    finally:
        gc.enable()


def test_default_collate_applies_the_transform_once_per_batch(fields):
    paths, _, _ = fields
    calls = []

    def transform(batch):
        calls.append(len(batch["id"]))
        return {"id": batch["id"] * 2}

    ds = zt.Dataset({"id": paths["id"]}, transform=transform)
    got = [b["id"].tolist() for b in torch.utils.data.DataLoader(ds, batch_size=4)][:2]
    assert got == [[0, 2, 4, 6], [8, 10, 12, 14]] and calls[:2] == [4, 4]

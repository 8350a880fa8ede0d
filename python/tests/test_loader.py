"""Loader (bound to the Rust zring-loader): aligned streams, shards, step order,
seek, transforms, errors and prompt close."""

import os
import time

import numpy as np
import pytest

import zring
from conftest import write_dense, write_ragged

N = 64


@pytest.fixture
def stores(tmp_path):
    """Three aligned streams: record i has image i*10.., label i, tokens [i]*(1+i%5)."""
    images = np.arange(N * 6, dtype=np.float32).reshape(N, 2, 3)
    labels = np.arange(N, dtype=np.int64)
    tokens = [np.full(1 + i % 5, i, np.int32) for i in range(N)]
    return (
        write_dense(tmp_path / "img.zr", images, codec="zstd"),
        write_dense(tmp_path / "lbl.zr", labels),
        write_ragged(tmp_path / "tok.zr", tokens, "int32", codec="zstd"),
        images,
    )


def check_aligned(shard, images):
    labels = shard["label"]
    np.testing.assert_array_equal(shard["image"], images[labels])
    toks = shard["tokens"]
    assert isinstance(toks, zring.RaggedBatch) and len(toks) == len(labels)
    for rec, lbl in zip(toks.to_arrays(), labels):
        assert rec.tolist() == [lbl] * (1 + lbl % 5)


@pytest.mark.parametrize("workers", [0, 1, 3])
def test_streams_stay_aligned_across_shards(stores, workers):
    img, lbl, tok, images = stores
    sampler = zring.Sampler(N, 8, zring.Sampler.Mode.IID, seed=11)
    ref = zring.Sampler(N, 8, zring.Sampler.Mode.IID, seed=11)
    streams = {"image": [img, img], "label": [lbl, lbl], "tokens": [tok, tok]}
    with zring.Loader(streams, sampler, workers=workers, prefetch=2) as loader:
        assert loader.shards == 2 and list(loader.stream_names) == ["image", "label", "tokens"]
        for step, shards in zip(range(6), loader):
            assert isinstance(shards, list) and len(shards) == 2
            for shard in shards:
                assert set(shard) == {"image", "label", "tokens"}
                assert shard["image"].shape == (4, 2, 3)
                assert isinstance(shard["image"].base, zring.EngineBuffer)
                check_aligned(shard, images)
            got = np.concatenate([s["label"] for s in shards])
            np.testing.assert_array_equal(got, ref.batch(step).astype(np.int64))


def test_ordered_delivery_follows_the_sampler_and_seek_resumes(stores):
    _, lbl, _, _ = stores
    ref = zring.Sampler(N, 4, "cyclic", seed=5)
    with zring.Loader({"label": [lbl]}, zring.Sampler(N, 4, "cyclic", seed=5), workers=3, prefetch=4) as loader:
        first = [next(loader)[0]["label"] for _ in range(10)]
        assert loader.step == 10
        for k, got in enumerate(first):
            np.testing.assert_array_equal(got, ref.batch(k).astype(np.int64))
        loader.seek(3)
        assert loader.step == 3
        np.testing.assert_array_equal(next(loader)[0]["label"], first[3])
        np.testing.assert_array_equal(next(loader)[0]["label"], first[4])


def test_loader_starts_at_the_samplers_step(stores):
    _, lbl, _, _ = stores
    sampler = zring.Sampler(N, 4, "iid", seed=1)
    sampler.seek(7)
    with zring.Loader({"label": [lbl]}, sampler) as loader:
        np.testing.assert_array_equal(next(loader)[0]["label"], sampler.batch(7).astype(np.int64))


def test_unordered_delivery_still_delivers_every_step_once(stores):
    _, lbl, _, _ = stores
    ref = zring.Sampler(N, 4, "sequential")
    with zring.Loader(
        {"label": [lbl]}, zring.Sampler(N, 4, "sequential"), workers=3, prefetch=4, ordered=False
    ) as loader:
        got = [tuple(next(loader)[0]["label"].tolist()) for _ in range(12)]
    # Steps may overtake each other, but only within the read-ahead window, and none
    # is delivered twice.
    window = {tuple(ref.batch(k).tolist()) for k in range(12 + 3 + 4)}
    assert len(set(got)) == 12 and set(got) <= window


@pytest.mark.parametrize("workers", [0, 2])
def test_transform_runs_per_shard_and_its_errors_arrive_at_their_step(stores, workers):
    img, lbl, _, _ = stores

    def transform(shard):
        if shard["label"][0] == 12:  # step 3 of a sequential sampler with batch 4
            raise KeyError("bad record")
        return {"sum": shard["image"].sum(), "label": shard["label"] + 1000}

    loader = zring.Loader({"image": [img], "label": [lbl]}, zring.Sampler(N, 4, "sequential"), workers=workers, transform=transform)
    for step in range(3):
        (out,) = next(loader)
        assert out["label"].tolist() == [1000 + 4 * step + k for k in range(4)]
    with pytest.raises(KeyError, match="bad record"):
        next(loader)
    with pytest.raises(StopIteration):
        next(loader)
    loader.close()


def close_is_prompt(loader):
    t0 = time.perf_counter()
    loader.close()
    return time.perf_counter() - t0 < 5


def threads_now():
    return len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else None


def test_close_joins_blocked_workers_promptly(stores):
    img, lbl, _, _ = stores
    before = threads_now()
    loader = zring.Loader({"image": [img], "label": [lbl]}, zring.Sampler(N, 8, "iid"), workers=3, prefetch=1)
    kept = next(loader)
    time.sleep(0.2)  # the workers fill the prefetch slot and block on it
    assert close_is_prompt(loader)
    assert loader.closed
    with pytest.raises(StopIteration):
        next(loader)
    loader.close()
    with pytest.raises(zring.ClosedError):
        loader.seek(0)
    if before is not None:
        assert threads_now() <= before
    # Arrays delivered before close stay valid.
    assert kept[0]["image"].shape == (8, 2, 3)


def test_close_with_a_transform_waiting_for_the_gil(stores):
    _, lbl, _, _ = stores
    loader = zring.Loader({"label": [lbl]}, zring.Sampler(N, 4, "iid"), workers=2, prefetch=1, transform=lambda d: d)
    next(loader)
    time.sleep(0.1)
    assert close_is_prompt(loader)


def test_pinned_views_deliver_page_locked_buffers_or_a_clear_error(stores):
    img, lbl, _, images = stores
    with zring.Loader({"image": [img], "label": [lbl]}, zring.Sampler(N, 4, "iid"), pinned=True) as loader:
        try:
            (shard,) = next(loader)
        except MemoryError as e:  # RLIMIT_MEMLOCK too small on this machine
            assert "mlock" in str(e) or "pin" in str(e)
            return
    assert shard["image"].base.pinned
    np.testing.assert_array_equal(shard["image"], images[shard["label"]])


def test_memory_is_recycled_in_a_steady_run(stores):
    img, lbl, _, _ = stores
    workers, prefetch, buffers_per_step = 2, 2, 2
    bound = buffers_per_step * (workers + prefetch + 2)
    with zring.Loader({"image": [img], "label": [lbl]}, zring.Sampler(N, 8, "iid"), workers=workers, prefetch=prefetch) as loader:
        for _ in range(40):
            next(loader)
        stats = loader.stats()
    # 40 steps x 2 buffers were delivered, but only the few ever alive at once were
    # allocated: the rest were recycled.
    assert stats["allocations"] <= bound
    assert stats["reuses"] >= 80 - bound
    assert stats["live_high_water"] <= bound


@pytest.mark.parametrize(
    "streams_fn, sampler_args, exc, match",
    [
        (lambda s: {}, (N, 4), ValueError, "at least one stream"),
        (lambda s: {"a": [s[0]], "b": [s[0], s[0]]}, (N, 4), ValueError, "views"),
        (lambda s: {"a": [s[0]]}, (N, 3), None, None),
        (lambda s: {"a": [s[0], s[0]]}, (N, 3), ValueError, "divisible|split"),
        (lambda s: {"a": [s[0]]}, (N + 1, 4), ValueError, "records"),
        (lambda s: {"a": ["not a store"]}, (N, 4), TypeError, "DenseStore"),
        (lambda s: {"a": []}, (N, 4), ValueError, "no views"),
    ],
)
def test_bad_loader_arguments(stores, streams_fn, sampler_args, exc, match):
    sampler = zring.Sampler(*sampler_args, "iid")
    if exc is None:
        zring.Loader(streams_fn(stores), sampler).close()
        return
    with pytest.raises(exc, match=match):
        zring.Loader(streams_fn(stores), sampler)


def test_mismatched_record_counts_are_refused(tmp_path, stores):
    img = stores[0]
    short = write_dense(tmp_path / "short.zr", np.arange(N - 1, dtype=np.int64))
    with pytest.raises(ValueError, match="align"):
        zring.Loader({"image": [img], "label": [short]}, zring.Sampler(N - 1, 4, "iid"))


def test_closed_store_cannot_join_a_loader(stores):
    img = stores[0]
    img.close()
    with pytest.raises(zring.ClosedError):
        zring.Loader({"image": [img]}, zring.Sampler(N, 4, "iid"))

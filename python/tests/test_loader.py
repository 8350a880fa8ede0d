"""Loader (bound to the Rust zring-loader): aligned streams, shards, step order,
seek, transforms, errors and prompt close."""

import faulthandler
import os
import resource
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


def close_returns(loader):
    """Closes `loader`; returning at all means every worker was woken and joined.
    No duration is asserted (a loaded machine makes any threshold flake); a hang is
    turned into a failure by faulthandler after a generous timeout."""
    faulthandler.dump_traceback_later(300, exit=True)
    try:
        loader.close()
    finally:
        faulthandler.cancel_dump_traceback_later()
    return loader.closed


def threads_now():
    """The loader's threads alive in this process (named zring-loader-k): other
    libraries the suite imports (JAX, torch) start threads of their own at any time."""
    if not os.path.isdir("/proc/self/task"):
        return None
    count = 0
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/comm") as f:
                count += f.read().startswith("zring-loader")
        except OSError:
            pass  # the thread ended while we looked
    return count


def test_close_joins_blocked_workers_promptly(stores):
    img, lbl, _, _ = stores
    # The engine's worker pool lives as long as the process; start it first so that
    # only the loader's own threads are counted.
    # close_returns' faulthandler watchdog thread lives on after its first use too.
    warm = zring.Loader({"image": [img]}, zring.Sampler(N, 8, "iid"), workers=1)
    next(warm)
    assert close_returns(warm)
    before = threads_now()
    loader = zring.Loader({"image": [img], "label": [lbl]}, zring.Sampler(N, 8, "iid"), workers=3, prefetch=1)
    kept = next(loader)
    # The workers fill the prefetch slot and block on it: then every step the loader
    # lets be alive is (workers + prefetch + 1, the consumer's included), each of two
    # buffers (image, label). An event, not a sleep that a loaded machine outlasts.
    wait_for_live(loader, 2 * (3 + 1 + 1))
    assert close_returns(loader)
    assert loader.closed
    with pytest.raises(zring.ClosedError):
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
    assert close_returns(loader)


def locked_bytes_at(addr):
    """Locked bytes of the mapping holding `addr`, from /proc/self/smaps."""
    inside = False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split(" ", 1)[0]
            if "-" in head and all(c in "0123456789abcdef-" for c in head):
                lo, hi = (int(x, 16) for x in head.split("-"))
                inside = lo <= addr < hi
            elif inside and line.startswith("Locked:"):
                return int(line.split()[1]) * 1024
    return 0


def test_pinned_views_deliver_page_locked_buffers_or_a_clear_error(stores):
    img, lbl, _, images = stores
    with zring.Loader({"image": [img], "label": [lbl]}, zring.Sampler(N, 4, "iid"), pinned=True) as loader:
        try:
            (shard,) = next(loader)
        except MemoryError as e:
            # Only where RLIMIT_MEMLOCK is too small (root may always lock memory).
            soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
            assert os.geteuid() != 0 and soft != resource.RLIM_INFINITY and soft < 16 << 20, e
            assert "mlock" in str(e) or "pin" in str(e)
            return
    assert shard["image"].base.pinned
    assert locked_bytes_at(shard["image"].ctypes.data) >= shard["image"].nbytes  # the kernel agrees
    np.testing.assert_array_equal(shard["image"], images[shard["label"]])


def test_memory_is_recycled_in_a_steady_run(stores):
    img, lbl, _, _ = stores
    workers, prefetch, buffers_per_step = 2, 2, 2
    # docs/python.md: live batch memory is at most workers + prefetch + 1 steps
    # besides what the consumer holds (here nothing between calls).
    bound = buffers_per_step * (workers + prefetch + 1)
    with zring.Loader({"image": [img], "label": [lbl]}, zring.Sampler(N, 8, "iid"), workers=workers, prefetch=prefetch) as loader:
        for _ in range(40):
            next(loader)
        stats = loader.stats()
    # 40 steps x 2 buffers were delivered, but only the few ever alive at once were
    # allocated: the rest were recycled.
    assert stats["allocations"] <= bound
    assert stats["reuses"] >= 80 - bound
    assert stats["live_high_water"] <= bound


def anonymous_bytes():
    """The process's anonymous resident memory, as the kernel counts it."""
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            if line.startswith("Anonymous:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no Anonymous line in smaps_rollup")


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps_rollup"), reason="needs Linux /proc/self/smaps_rollup")
def test_the_memory_bound_holds_in_resident_memory(tmp_path):
    """The documented bound, measured by the OS rather than by the loader's counters:
    every step buffer is its own anonymous mapping, touched in full by the gather, and
    a buffer back in the pool stays mapped, so the growth of anonymous resident memory
    over a steady run is what the loader ever had alive at once."""
    step_bytes = 4 << 20  # 64 records of 64 KiB: one buffer per step, mmap-backed
    records = np.random.default_rng(3).integers(0, 255, (256, 64 << 10), dtype=np.uint8)
    store = write_dense(tmp_path / "big.zr", records)
    workers, prefetch = 2, 2
    # While the consumer holds one step at a time, at most workers + prefetch + 1 steps
    # are alive, its own included (the loader's max_live_steps): `prefetch` finished
    # steps waiting in their places, one more held by each worker, and the consumer's.
    steps_alive = workers + prefetch + 1
    sampler = zring.Sampler(len(records), 64, "iid")
    # The engine's pool, thread stacks and allocator arenas first, outside the count.
    with zring.Loader({"x": [store]}, sampler, workers=workers, prefetch=prefetch) as warm:
        next(warm)
    zring.trim_buffers()
    before = anonymous_bytes()
    with zring.Loader({"x": [store]}, sampler, workers=workers, prefetch=prefetch) as loader:
        for k in range(60):
            (shard,) = next(loader)
            if k % 15 == 0:
                # A slow consumer, holding its step: the workers run ahead as far as
                # the loader lets them, so a loader that went past the bound would
                # have the extra step's buffer mapped by the end.
                wait_for_live(loader, steps_alive)
                time.sleep(0.1)
            del shard
        grown = anonymous_bytes() - before
        stats = loader.stats()
    # One more step alive than the bound would add a whole 4 MiB buffer; the rest of
    # the process may grow by less than half of one.
    assert grown <= steps_alive * step_bytes + step_bytes // 2, (
        f"anonymous memory grew by {grown / 2**20:.1f} MiB for a bound of "
        f"{steps_alive} steps of {step_bytes >> 20} MiB"
    )
    # The run did reach the bound, so the growth above measured it.
    assert stats["live_high_water"] == steps_alive, stats


def wait_for_live(loader, n):
    """Returns once `n` step buffers of `loader` are alive (an event, not a timing; a
    loader that never gets there fails through faulthandler after a generous
    timeout)."""
    faulthandler.dump_traceback_later(300, exit=True)
    try:
        while loader.stats()["live"] < n:
            time.sleep(0.001)
    finally:
        faulthandler.cancel_dump_traceback_later()


def test_a_lookahead_budget_sizes_the_loader_and_bounds_its_memory(tmp_path):
    """lookahead_bytes: steps in flight are sized from the device's queue, and the
    budget wins over the workers and prefetch asked for; options tells what was
    chosen, and the data is the sampler's whatever the depth."""
    records = np.arange(256 * 1024, dtype=np.uint8).reshape(256, 1024)
    store = write_dense(tmp_path / "x.zr", records)
    step_bytes = 16 * 1024
    ref = zring.Sampler(len(records), 16, "iid", seed=2)

    def run(**kw):
        with zring.Loader({"x": [store]}, zring.Sampler(len(records), 16, "iid", seed=2), **kw) as loader:
            for k in range(12):
                np.testing.assert_array_equal(next(loader)[0]["x"], records[ref.batch(k)])
            return loader.options, loader.stats()

    fixed, _ = run(workers=3, prefetch=5, lookahead_bytes=None)
    assert fixed == {"workers": 3, "prefetch": 5, "lookahead_bytes": None, "ordered": True}
    # The default budget: this store is in the page cache and read through its
    # mapping, so no device queue needs filling and the asked depth stands.
    default, _ = run(workers=3, prefetch=5)
    assert default == {"workers": 3, "prefetch": 5, "lookahead_bytes": 512 << 20, "ordered": True}
    # Room for 3 live steps only: one worker and one ready step, whatever was asked.
    tight, stats = run(workers=4, prefetch=8, lookahead_bytes=3 * step_bytes)
    assert tight == {"workers": 1, "prefetch": 1, "lookahead_bytes": 3 * step_bytes, "ordered": True}
    assert stats["live_high_water"] <= 3
    # A roomy budget keeps at least what was asked, and fits the budget.
    roomy, stats = run(workers=2, prefetch=2, lookahead_bytes=64 << 20)
    assert roomy["workers"] >= 2 and roomy["prefetch"] >= 2
    assert (roomy["workers"] + roomy["prefetch"] + 1) * step_bytes <= 64 << 20
    assert stats["live_high_water"] <= roomy["workers"] + roomy["prefetch"] + 1


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


def reference_indices(n, batch, mode, seed, drop_last, rank, world, step):
    """The epoch plan as zring._internal.frameworks.Plan computed it in Python before it ran on
    the Rust plan: the reference its ids must keep matching."""
    g = batch * world
    full, rest = divmod(n, g)
    spe = full + (1 if rest and not drop_last else 0)
    epoch, j = divmod(step, spe)
    base = epoch * n + j * g
    size = min(g, n - j * g)
    if size == g:
        lo, hi = rank * batch, (rank + 1) * batch
    else:
        lo, hi = size * rank // world, size * (rank + 1) // world
    return zring.Sampler(n, 1, mode, seed=seed).positions(base + lo, hi - lo)


@pytest.mark.parametrize("mode", ["cyclic", "sequential", "iid"])
def test_the_epoch_plan_matches_the_python_reference(mode):
    from zring._internal.frameworks import Plan

    for n, batch, world, drop_last in [(103, 8, 1, False), (103, 8, 3, False), (103, 8, 3, True),
                                       (7, 2, 3, False), (64, 16, 2, False), (5, 9, 1, False)]:
        for rank in range(world):
            plan = Plan(n, batch, mode=mode, seed=4, epochs=3, drop_last=drop_last, rank=rank, world_size=world)
            for step in range(plan.total_steps):
                want = reference_indices(n, batch, mode, 4, drop_last, rank, world, step)
                np.testing.assert_array_equal(plan.indices(step), want)
                assert plan.indices(step).dtype == np.uint64
            with pytest.raises(IndexError):
                plan.indices(plan.total_steps)


@pytest.mark.parametrize("workers", [0, 2])
def test_a_finite_epoch_plan_ends_and_delivers_exactly_the_planned_ids(stores, workers):
    from zring._internal.frameworks import Plan

    img, lbl, tok, images = stores
    # 64 records, 5 per rank, 3 ranks: global steps of 15, the last (4 records)
    # split 1/1/2; rank 2's worker 1 of 2 makes steps 1, 3, 5, ... from step 2 on.
    plan = Plan(N, 5, mode="cyclic", seed=2, epochs=2, rank=2, world_size=3)
    schedule = plan.schedule(2, 1, 2)
    want = [plan.indices(k).astype(np.int64).tolist() for k in plan.worker_steps(2, 1, 2)]
    assert schedule.steps == len(want) and any(len(w) == 2 for w in want)
    streams = {"image": img, "label": lbl, "tokens": tok}
    with zring.Loader(streams, schedule, workers=workers, prefetch=2) as loader:
        got = []
        for (shard,) in loader:
            check_aligned(shard, images)
            got.append(shard["label"].tolist())
        assert got == want
        with pytest.raises(StopIteration):
            next(loader)
        assert loader.step == len(want)


def test_an_epoch_plan_whose_short_step_cannot_split_is_refused(stores):
    from zring._internal.frameworks import Plan

    img, _, _, _ = stores
    plan = Plan(N, 6, mode="sequential", epochs=1)  # 10 steps of 6, then 4
    with zring.Loader({"image": [img, img]}, plan.schedule(0, 0, 1), workers=0) as loader:
        assert [len(shards[0]["image"]) for shards in loader] == [3] * 10 + [2]
    odd = Plan(N, 6, mode="sequential", epochs=1, rank=0, world_size=3)  # 3 steps of 18, 10 left: 3/3/4
    with pytest.raises(zring.InvalidArgumentError, match="cannot be split"):
        zring.Loader({"image": [img, img]}, odd.schedule(0, 0, 1), workers=0)

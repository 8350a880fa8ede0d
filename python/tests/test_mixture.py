"""zring.mix: weighted mixtures of datasets read wherever a dataset is, with the
sources' own epochs, exact and elastic resume, and bad input refused."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import zring


def _source(path, tag: int, n: int, ragged: bool = True):
    """A dataset of `n` records: label tag * 1_000_000 + i, tokens [label] * (i % 5 + 1)."""
    labels = np.arange(n, dtype=np.int64) + tag * 1_000_000
    fields = {"label": labels}
    if ragged:
        fields["tokens"] = [np.full(i % 5 + 1, lab, dtype=np.int32) for i, lab in enumerate(labels)]
    return zring.write_dataset(str(path), fields)


@pytest.fixture
def sources(tmp_path):
    return [
        _source(tmp_path / "web", 1, 3000),
        _source(tmp_path / "code", 2, 500),
        _source(tmp_path / "books", 3, 50),
    ]


def _labels(mix, idx, epoch=0):
    """What each position should read: its source's label, from sources_of."""
    s, r = mix.sources_of(idx, epoch)
    return (s + 1) * 1_000_000 + r.astype(np.int64)


def test_every_window_of_10000_positions_holds_each_source_within_1_percent(sources):
    m = zring.mix(sources, [0.5, 0.3, 0.2], seed=7)
    assert len(m) == 3550 and m.fields == ["label", "tokens"]
    counts = []
    for epoch in range(15):
        s, _ = m.sources_of(np.arange(len(m)), epoch)
        counts.append(s)
    stream = np.concatenate(counts)
    for start in (0, 1234, 17_777, 40_000):
        window = stream[start:start + 10_000]
        share = np.bincount(window, minlength=3) / 10_000
        assert np.abs(share - [0.5, 0.3, 0.2]).max() <= 0.01, (start, share)


def test_records_are_the_sources_own_and_each_source_runs_through_its_passes(sources):
    m = zring.mix(sources, [0.5, 0.3, 0.2], seed=7)
    ids = np.arange(len(m))
    got = m.gather(ids)
    assert (got["label"] == _labels(m, ids)).all()
    for k in (0, 17, 3549):
        assert (got["tokens"][k] == got["label"][k]).all()
        assert len(got["tokens"][k]) == (got["label"][k] % 1_000_000) % 5 + 1
    # Over two epochs the small source (50 records, 20% of positions) wraps many
    # times; each pass of it is a permutation of its records.
    stream = np.concatenate([m.sources_of(ids, e) for e in range(2)], axis=1)
    books = stream[1][stream[0] == 2]
    for p in range(len(books) // 50):
        assert sorted(books[p * 50:(p + 1) * 50].tolist()) == list(range(50))
    # The large source's first pass reads each of its 3,000 records once: epoch 0
    # reads 1,775 of them, and epoch 1 goes on with the other 1,225 first.
    web0 = m.sources_of(ids, 0)[1][m.sources_of(ids, 0)[0] == 0]
    web1 = m.sources_of(ids, 1)[1][m.sources_of(ids, 1)[0] == 0]
    assert len(set(web0.tolist())) == 1775
    assert sorted(web0.tolist() + web1[:1225].tolist()) == list(range(3000))
    # One record, a slice, a mask, negative indices: what a dataset takes.
    assert m[5]["label"] == _labels(m, [5])[0]
    assert (m.gather(slice(10, 20))["label"] == _labels(m, np.arange(10, 20))).all()
    mask = np.zeros(len(m), bool)
    mask[[3, 9]] = True
    assert (m[mask]["label"] == _labels(m, [3, 9])).all()
    assert m.gather(-1)["label"] == _labels(m, [len(m) - 1])[0]


def test_a_loader_reads_the_mixture_epoch_after_epoch_and_resumes_exactly(sources):
    m = zring.mix(sources, [2, 1, 1], seed=3, length=1000)
    sampler = zring.Sampler(len(m), 100, "cyclic", seed=5)
    plan = zring.Sampler(len(m), 100, "cyclic", seed=5)
    with zring.Loader(m, sampler, workers=2) as loader:
        steps = [step[0] for _, step in zip(range(25), loader)]
        resumed = pickle.loads(pickle.dumps(loader))
    for k, step in enumerate(steps):
        epoch, ids = divmod(k, 10)[0], plan.batch(k)
        assert (step["label"] == _labels(m, ids, epoch)).all(), k
        assert step["tokens"].values.size == int(((step["label"] % 1_000_000) % 5 + 1).sum())
    with resumed:
        again = next(resumed)[0]
    assert (again["label"] == _labels(m, plan.batch(25), 2)).all()
    # Later epochs read new positions of the sources, not the first epoch's again.
    first = set(np.concatenate([s["label"] for s in steps[:10]]).tolist())
    second = set(np.concatenate([s["label"] for s in steps[10:20]]).tolist())
    assert len(first & second) < 0.2 * len(first)


def test_torch_datasets_read_a_mixture_with_its_epochs_and_resume_elastically(sources):
    torch = pytest.importorskip("torch")
    import zring.torch as zt

    m = zring.mix(sources, [2, 1, 1], seed=3, length=600)
    ds = zt.Dataset(m)
    ds.set_epoch(2)
    assert int(ds[7]["label"]) == _labels(m, [7], 2)[0]
    batch = zt.collate(ds.__getitems__([1, 2, 3]))
    assert torch.equal(batch["label"], torch.from_numpy(_labels(m, [1, 2, 3], 2)))

    def global_order(world, start_state=None, steps=None):
        out = []
        parts = []
        for rank in range(world):
            it = zt.IterableDataset(m, 120 // world, shuffle=False, rank=rank, world_size=world)
            if start_state is not None:
                it.load_state_dict(start_state)
            parts.append([b["label"].numpy() for _, b in zip(range(steps), it)])
        for k in range(steps):
            out.append(np.concatenate([p[k] for p in parts]))
        return out

    whole = global_order(1, steps=12)
    # In order, the global stream is the mixture's positions one after another.
    flat = np.concatenate(whole)
    expected = np.concatenate([_labels(m, np.arange(600), e) for e in range(3)])[: len(flat)]
    assert (flat == expected).all()
    # Two ranks for 4 steps, then one rank resumes from their state: the same stream.
    two = zt.IterableDataset(m, 60, shuffle=False, rank=0, world_size=2)
    for _, _b in zip(range(4), two):
        pass
    state = two.state_dict()
    assert "mixture" in state
    resumed = global_order(1, start_state=state, steps=8)
    assert (np.concatenate(resumed) == flat[4 * 120:12 * 120]).all()

    # A state of another mixture is refused; a reweighted one is accepted.
    other = zring.mix(sources, [1, 1, 1], seed=3, length=600)
    fresh = zt.IterableDataset(other, 120, shuffle=False, rank=0, world_size=1)
    with pytest.raises(ValueError, match="different mixture"):
        fresh.load_state_dict(state)
    reweighted = zt.IterableDataset(m.reweighted([1, 1, 1], at=4 * 120), 120, shuffle=False,
                                    rank=0, world_size=1)
    reweighted.load_state_dict(state)


def test_reweighting_keeps_every_source_where_it_was(sources):
    m = zring.mix(sources, [2, 1, 1], seed=1)
    at = 1000
    before = m.consumed(at)
    r = m.reweighted([1, 0, 3], at=at)
    assert r.consumed(at) == before
    s, rec = r.sources_of(np.arange(at, at + 400))
    assert 1 not in set(s.tolist())
    # Source 0 continues exactly where it was: its next records are the ones the
    # old mixture would have given it next.
    old_s, old_r = m.sources_of(np.arange(0, 3 * at))
    next_web = old_r[old_s == 0][before[0]:before[0] + 5]
    assert (rec[s == 0][:5] == next_web).all()
    with pytest.raises(zring.InvalidArgumentError, match="before this mixture's start"):
        r.sources_of([at - 1])
    again = pickle.loads(pickle.dumps(r))
    assert (again.sources_of(np.arange(at, at + 400))[1] == rec).all()


def test_stores_mix_as_one_field_sources(tmp_path):
    for name, tag in (("a.zr", 1), ("b.zr", 2)):
        with zring.RaggedWriter(str(tmp_path / name), "int32", 1) as w:
            for i in range(20):
                w.append([np.full(i + 1, tag, dtype=np.int32)])
    m = zring.mix([str(tmp_path / "a.zr"), zring.open(str(tmp_path / "b.zr"))], [1, 1], field="tokens")
    assert m.fields == ["tokens"]
    got = m.gather(np.arange(40))["tokens"]
    s, r = m.sources_of(np.arange(40))
    for k in range(40):
        assert (got[k] == s[k] + 1).all() and len(got[k]) == r[k] + 1


def test_bad_mixtures_are_refused_with_what_is_wrong(sources, tmp_path):
    for weights, match in (
        ([1, -1, 1], "weight 1 is -1"),
        ([1, float("nan"), 1], "weight 1 is NaN"),
        ([0, 0, 0], "every mixture weight is 0"),
        ([1, 1], "needs 3 weights"),
    ):
        with pytest.raises(zring.InvalidArgumentError, match=match):
            zring.mix(sources, weights)
    with pytest.raises(zring.InvalidArgumentError, match="at least one source"):
        zring.mix([])
    other = zring.write_dataset(str(tmp_path / "other"), {"label": np.arange(3)})
    with pytest.raises(zring.InvalidArgumentError, match="dataset 1 has fields"):
        zring.mix([sources[0], other])
    m = zring.mix(sources)
    with pytest.raises(zring.ZringIndexError, match="out of range"):
        m.gather([0, len(m)])
    with pytest.raises(TypeError):
        m.gather([0.5])
    with pytest.raises(TypeError):
        zring.mix(sources[0])


def test_jax_batches_of_a_mixture_are_prefetched_epoch_by_epoch(sources):
    pytest.importorskip("jax")
    import zring.jax as zj

    m = zring.mix(sources, [2, 1, 1], seed=3, length=400)
    source = zj.DataSource(m)
    got = [np.asarray(b["label"]) for b in zj.batches(source, 100, shuffle=False, epochs=2,
                                                         rank=0, world_size=1, prefetch=2)]
    assert len(got) == 8
    want = np.concatenate([_labels(m, np.arange(400), e) for e in range(2)])
    # JAX without x64 holds int64 labels as int32: they fit.
    assert (np.concatenate(got) == want).all()
    # Random access reads the epoch set last (as for decoded images).
    source.set_epoch(1)
    assert int(np.asarray(source[5]["label"])) == _labels(m, [5], 1)[0]

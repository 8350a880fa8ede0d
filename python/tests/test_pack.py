"""zring.pack: packed batches of real ragged token stores, mixtures, exact resume."""

from __future__ import annotations

import numpy as np
import pytest

import zring


def _write(path, lengths, base):
    """A ragged int32 store; sequence i holds base + i repeated, then 0..len-1 added."""
    with zring.RaggedWriter(str(path), "int32", 1) as w:
        for i, n in enumerate(lengths):
            w.append([np.arange(n, dtype=np.int32) + (base + i) * 1000])
    return [np.arange(n, dtype=np.int32) + (base + i) * 1000 for i, n in enumerate(lengths)]


@pytest.fixture
def stores(tmp_path):
    rng = np.random.default_rng(0)
    web = _write(tmp_path / "web.zr", rng.integers(1, 300, 200), base=0)
    code = _write(tmp_path / "code.zr", rng.integers(1, 300, 50), base=10_000)
    return tmp_path / "web.zr", web, tmp_path / "code.zr", code


def _check(batch, rows, seq_len, records):
    tokens, pos, cu = batch["tokens"], batch["position_ids"], batch["cu_seqlens"]
    assert tokens.shape == (rows, seq_len) and pos.shape == (rows, seq_len)
    assert cu.dtype == np.int32 and cu[0] == 0 and cu[-1] == rows * seq_len
    flat_pos = pos.reshape(-1)
    for a, b in zip(cu[:-1], cu[1:]):
        assert b > a
        assert (flat_pos[a:b] == np.arange(b - a)).all()
    assert batch["max_seqlen"] == int(np.diff(cu).max())
    # Each piece holds its sequence's tokens from its start: the first token names
    # the record (id * 1000 + offset).
    flat = tokens.reshape(-1)
    at = np.zeros(rows, dtype=np.int64)
    for start, row in zip(batch["starts"].tolist(), batch["rows"].tolist()):
        first = flat[row * seq_len + at[row]]
        record_id, offset = divmod(int(first), 1000)
        assert offset == start
        seq = records[record_id]
        n = min(len(seq) - start, seq_len - at[row])
        got = flat[row * seq_len + at[row] : row * seq_len + at[row] + n]
        assert (got == seq[start : start + n]).all()
        at[row] += n


def test_concat_and_first_fit_pack_exactly_the_stores_tokens(stores):
    web_path, web, code_path, code = stores
    records = {i: s for i, s in enumerate(web)}
    records.update({10_000 + i: s for i, s in enumerate(code)})
    for strategy in ("concat", "first_fit"):
        with zring.pack([web_path, code_path], 512, rows=4, strategy=strategy, weights=[3, 1]) as p:
            for _ in range(10):
                _check(next(p), 4, 512, records)


def test_first_fit_pads_with_pad_id_and_never_splits(stores):
    web_path, web, _, _ = stores
    with zring.pack(web_path, 256, rows=2, strategy="first_fit", pad_id=-7) as p:
        for _ in range(5):
            b = next(p)
            assert (b["starts"] == 0).all()
            real = int(np.diff(b["cu_seqlens"]).sum())
            assert real == 2 * 256
            assert (b["tokens"] == -7).sum() < 2 * 256


def test_state_dict_resumes_exactly_mid_row(stores):
    web_path, _, code_path, _ = stores
    args = dict(rows=3, strategy="concat", weights=[1.0, 2.0], seed=5)
    with zring.pack([web_path, code_path], 300, **args) as p:
        all_batches = [next(p) for _ in range(12)]
    with zring.pack([web_path, code_path], 300, **args) as p:
        for _ in range(5):
            next(p)
        state = p.state_dict()
    assert state["offset"] != 0 or state["batches"] == 5
    with zring.pack([web_path, code_path], 300, state=state, **args) as p:
        for expected in all_batches[5:]:
            got = next(p)
            for key in ("tokens", "position_ids", "cu_seqlens", "positions"):
                assert (got[key] == expected[key]).all()
    # A state of another packing is refused by name.
    with pytest.raises(zring.InvalidArgumentError, match="different packing"):
        zring.pack([web_path, code_path], 301, state=state, **args)


def test_bad_input_is_refused_with_clear_errors(stores, tmp_path):
    web_path, _, code_path, _ = stores
    with pytest.raises(zring.InvalidArgumentError, match="seq_len"):
        zring.pack(web_path, 0, rows=2)
    with pytest.raises(zring.InvalidArgumentError, match="strategy"):
        zring.pack(web_path, 8, rows=2, strategy="best_fit")  # type: ignore[arg-type]
    with pytest.raises(zring.InvalidArgumentError, match="weight"):
        zring.pack([web_path, code_path], 8, rows=2, weights=[1.0, -1.0])
    with pytest.raises(zring.InvalidArgumentError, match="weight is 0"):
        zring.pack([web_path, code_path], 8, rows=2, weights=[0.0, 0.0])
    dense = tmp_path / "dense.zr"
    with zring.DenseWriter(str(dense), "int32", (4,)) as w:
        w.append(np.zeros((3, 4), dtype=np.int32))
    with pytest.raises(zring.InvalidArgumentError, match="ragged"):
        zring.pack(dense, 8, rows=2)


def _dataset(path, sequences, base):
    """A dataset of the sequences with their record id as a label field."""
    labels = np.arange(len(sequences), dtype=np.int64) + base
    return zring.write_dataset(str(path), {"tokens": sequences, "label": labels})


def test_a_dataset_field_and_a_mixture_pack_their_records_with_fields_carried(stores, tmp_path):
    _, web, _, code = stores
    a = _dataset(tmp_path / "a", web, 0)
    b = _dataset(tmp_path / "b", code, 10_000)
    records = {i: s for i, s in enumerate(web)}
    records.update({10_000 + i: s for i, s in enumerate(code)})
    mix = zring.mix([a, b], [3, 1], seed=4)
    with zring.pack(mix, 512, rows=4, field="tokens", carry=["label"]) as p:
        for _ in range(6):
            batch = next(p)
            _check(batch, 4, 512, records)
            # Each segment's carried label is its sequence's record id, the one its
            # first token encodes, and the mixture's record at that position.
            flat = batch["tokens"].reshape(-1)
            firsts = flat[batch["cu_seqlens"][:-1]][: len(batch["positions"])]
            assert (batch["carry"]["label"] == firsts // 1000).all()
            positions = batch["positions"]
            assert positions.max() < len(mix)  # still the mixture's epoch 0
            assert (batch["carry"]["label"] == mix.gather(positions, fields="label")["label"]).all()
    # The same stream from the datasets' list with the same weights and seed.
    with zring.pack([a, b], 512, rows=4, field="tokens", weights=[3, 1], seed=4) as p, \
            zring.pack(mix, 512, rows=4, field="tokens") as q:
        for _ in range(3):
            assert (next(p)["tokens"] == next(q)["tokens"]).all()
    # A dataset path packs its field; a dense field is refused as a store's is.
    with zring.pack(str(tmp_path / "a"), 256, rows=2, field="tokens", strategy="first_fit") as p:
        _check(next(p), 2, 256, records)
    with pytest.raises(zring.InvalidArgumentError, match="ragged"):
        zring.pack(a, 256, rows=2, field="label")
    with pytest.raises(zring.InvalidArgumentError, match="field="):
        zring.pack(a, 256, rows=2)
    with pytest.raises(zring.InvalidArgumentError, match="its own weights"):
        zring.pack(mix, 256, rows=2, field="tokens", weights=[1, 1])


def test_ranks_pack_their_rows_of_one_global_batch_and_resume_on_another_world(stores):
    web_path, _, code_path, _ = stores
    args = dict(strategy="first_fit", weights=[2, 1], seed=3)
    with zring.pack([web_path, code_path], 256, rows=4, **args) as whole:
        global_batches = [next(whole) for _ in range(8)]
    ranks = [zring.pack([web_path, code_path], 256, rows=2, rank=r, world_size=2, **args) for r in range(2)]
    try:
        for g in global_batches[:5]:
            for r, p in enumerate(ranks):
                b = next(p)
                assert (b["tokens"] == g["tokens"][2 * r:2 * r + 2]).all()
                assert (b["position_ids"] == g["position_ids"][2 * r:2 * r + 2]).all()
        state = ranks[0].state_dict()
        assert state == ranks[1].state_dict()
    finally:
        for p in ranks:
            p.close()
    # Two ranks' state, resumed by one rank with the same global rows.
    with zring.pack([web_path, code_path], 256, rows=4, state=state, **args) as one:
        for g in global_batches[5:]:
            assert (next(one)["tokens"] == g["tokens"]).all()
    with pytest.raises(zring.InvalidArgumentError, match="rank 2 is not in a world of 2"):
        zring.pack(web_path, 256, rows=2, rank=2, world_size=2)


def test_torch_and_jax_forms_deliver_the_packed_batches_and_resume(stores):
    torch = pytest.importorskip("torch")
    pytest.importorskip("jax")
    import zring.jax as zj
    import zring.torch as zt

    web_path, _, code_path, _ = stores
    args = dict(rows=2, strategy="concat", weights=[1, 1], seed=9)
    with zring.pack([web_path, code_path], 128, **args) as p:
        want = [next(p)["tokens"] for _ in range(6)]
    ds = zt.PackedIterableDataset([web_path, code_path], 128, rank=0, world_size=1, **args)
    loader = torch.utils.data.DataLoader(ds, batch_size=None)
    got = []
    for _, b in zip(range(3), loader):
        assert b["cu_seqlens"].dtype == torch.int32
        got.append(b["tokens"].numpy())
    state = ds.state_dict()
    resumed = zt.PackedIterableDataset([web_path, code_path], 128, rank=0, world_size=1, **args)
    resumed.load_state_dict(state)
    got += [b["tokens"].numpy() for _, b in zip(range(3), resumed)]
    for g, w in zip(got, want):
        assert (g == w).all()
    with zj.packed([web_path, code_path], 128, rank=0, world_size=1, **args) as jp:
        for w in want[:2]:
            assert (np.asarray(next(jp)["tokens"]) == w).all()
        jstate = jp.state_dict()
    with zj.packed([web_path, code_path], 128, rank=0, world_size=1, state=jstate, **args) as jp:
        assert (np.asarray(next(jp)["tokens"]) == want[2]).all()
    with pytest.raises(RuntimeError, match="num_workers=0"):
        next(iter(torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2)))

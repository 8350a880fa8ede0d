#!/usr/bin/env python3
"""Language-model data: a mixture of three sources against one source, and
zring.pack against Grain's first-fit packing, in one run (workloads W3, W14).

Data: 200,000 W3 token sequences (int32, 16..512 long, median ~130, values below
50,000; the generator of bench_jax), written --codec raw (the default) just before
timing and read once, so the page cache is warm:

  sources a, b, c  three datasets (zring.write_dataset, field "tokens") of the
                   first 100,000, the next 60,000 and the last 40,000 sequences
  one              one dataset of all 200,000, in the same order
  store            one ragged int32 store (zring.RaggedWriter) of all 200,000

1. Mixture, tokens/s (step[0]["tokens"].values.size per step), batch 256, cyclic:
     mix      zring.Loader(zring.mix([a, b, c], [0.5, 0.3, 0.2], seed=0),
                           zring.Sampler(len(mix), 256, "cyclic"), workers=2)
     one      zring.Loader(one, zring.Sampler(len(one), 256, "cyclic"), workers=2)
     gather   one.gather(ids, fields="tokens") in the caller's thread, the ids of
              the same sampler (the plain gather, for reference)
   Reported: mix / one (target >= 0.95) and one / gather; and, to explain the
   difference, the time the mixture's own per-step work takes alone (mapping a
   batch of stream positions to source records, native, one thread).

2. Packing, non-pad tokens/s and efficiency (non-pad / all tokens) of batches of
   8 rows of 2,048 tokens, first fit, over the same 200,000 sequences of the store:
     zring    zring.pack(store, 2048, rows=8, strategy="first_fit", seed=0, pad_id=-1)
              (each pass over the store in a fresh permutation, seed 0)
     grain    grain.MapDataset.source(zring.jax.DataSource({"tokens": store}))
                .shuffle(seed=0).repeat().to_iter_dataset()   (ReadOptions default)
              -> grain.experimental.FirstFitPackIterDataset(length_struct=
                 {"tokens": 2048}, num_packing_bins=8, shuffle_bins=False)
              -> .batch(8): tokens, tokens_segment_ids, tokens_positions [8, 2048]
     grain-t0 the same with to_iter_dataset(grain.ReadOptions(num_threads=0)):
              records read in the consumer's thread (what Grain advises for
              data in memory)
   Both sides pack every record once per pass, never split a sequence, and give
   tokens and positions per row with segment boundaries (cu_seqlens for zring,
   segment ids for Grain). Non-pad tokens are counted as tokens != -1 (zring) and
   segment_ids != 0 (Grain). Reported: zring / the faster Grain (target >= 5).

Every contender is timed in alternating rounds (--rounds) until each has
accumulated --seconds, after 3 untimed warm-up steps, so that a shared machine's
drift affects them alike; the consumer only counts each batch's tokens.

    python python/bench/bench_lm.py            # full sizes (~0.4 GB under --dir)
    python python/bench/bench_lm.py --quick    # small sizes, a smoke test
    python python/bench/bench_lm.py --check    # tiny sizes, batches checked, nothing timed

Before anything is timed, the first batches of every contender are checked against
the generated sequences: the mixture loader's steps are mix.gather of the plan's
positions (epoch by epoch) and the sources' records there; the one-source loader
and the gather are the sampler's records; every packed segment is its stream
position's sequence, whole, in order, with positions counting from 0, and the
padding fills each row to its end; every Grain segment is one of the sequences.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Iterator

import numpy as np

import grain
import zring
import zring.jax as zj
from bench_gather import warm
from bench_jax import token_lengths  # the W3 lengths of the JAX and torch benches
from rounds import add_timing_args, apply_quick, timed

BATCH = 256
SEQ_LEN = 2048
ROWS = 8
WEIGHTS = [0.5, 0.3, 0.2]
PAD = -1  # not a token id (ids are 0..49,999), so non-pad tokens are tokens != PAD


class Corpus:
    """n W3 sequences: values, offsets, lengths and per-sequence views."""

    def __init__(self, n: int, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        self.lengths = token_lengths(n, rng)
        self.offsets = np.zeros(n + 1, np.int64)
        np.cumsum(self.lengths, out=self.offsets[1:])
        self.values = rng.integers(0, 50_000, int(self.offsets[-1]), dtype=np.int32)
        self.seqs = [self.values[self.offsets[i] : self.offsets[i + 1]] for i in range(n)]


def warm_tree(path: str) -> None:
    for root, _, files in os.walk(path):
        for f in files:
            warm(os.path.join(root, f))


def build(d: str, corpus: Corpus, codec: str) -> dict:
    n = len(corpus.seqs)
    cut = np.cumsum([int(n * w) for w in WEIGHTS])  # 50% / 30% / 20% of the sequences
    bounds = [0, int(cut[0]), int(cut[1]), n]
    parts = []
    for k, name in enumerate("abc"):
        seqs = corpus.seqs[bounds[k] : bounds[k + 1]]
        parts.append(zring.write_dataset(os.path.join(d, name), {"tokens": seqs}, codec=codec, overwrite=True))
    one = zring.write_dataset(os.path.join(d, "one"), {"tokens": corpus.seqs}, codec=codec, overwrite=True)
    store = os.path.join(d, "tokens.zr")
    with zring.RaggedWriter(store, "int32", 1, codec=codec, overwrite=True) as w:
        w.append(zring.RaggedBatch(corpus.values, corpus.offsets, corpus.lengths.reshape(-1, 1)))
    for name in ("a", "b", "c", "one"):
        warm_tree(os.path.join(d, name))
    warm(store)
    return {"parts": parts, "bounds": bounds, "one": one, "store": store}


# -- 1. mixture ---------------------------------------------------------------------


def mixture_contenders(data: dict) -> dict:
    """The mixture, the loaders (to close at the end) and each contender's endless
    iterator of delivered token batches (RaggedBatch)."""
    mix = zring.mix(data["parts"], WEIGHTS, seed=0)
    one = data["one"]
    mix_loader = zring.Loader(mix, zring.Sampler(len(mix), BATCH, "cyclic"), workers=2)
    one_loader = zring.Loader(one, zring.Sampler(len(one), BATCH, "cyclic"), workers=2)
    gather_sampler = zring.Sampler(len(one), BATCH, "cyclic")

    def loader_batches(loader: zring.Loader) -> Iterator:
        for step in loader:
            yield step[0]["tokens"]

    def gather() -> Iterator:
        while True:
            yield one.gather(gather_sampler.next(), fields="tokens")["tokens"]

    return {
        "mix": mix,
        "loaders": [mix_loader, one_loader],
        "its": {"mix": loader_batches(mix_loader), "one": loader_batches(one_loader), "gather": gather()},
    }


def seqs_of(batch) -> list[np.ndarray]:
    cu = batch.cu_seqlens
    return [batch.values[cu[k] : cu[k + 1]] for k in range(len(cu) - 1)]


def same_seqs(got: list[np.ndarray], want: list[np.ndarray], what: str) -> None:
    assert len(got) == len(want), f"{what}: {len(got)} sequences, expected {len(want)}"
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and np.array_equal(g, w), f"{what}: a sequence differs from the source"


def check_mixture(m: dict, data: dict, corpus: Corpus, steps: int = 10) -> None:
    """The mixture loader's steps are mix.gather of its plan's positions (epoch by
    epoch) and the source records they map to; the one-source loader's and the
    gather's are the sampler's records. `steps` crosses an epoch of the tiny data."""
    mix = m["mix"]
    plan = mix.plan_of(zring.Sampler(len(mix), BATCH, "cyclic"))
    ref = zring.Sampler(len(data["one"]), BATCH, "cyclic")
    bounds = data["bounds"]
    seen = set()
    for step in range(steps):
        epoch = step // plan.steps_per_epoch
        ids = plan.indices(step)
        got = seqs_of(next(m["its"]["mix"]))
        same_seqs(got, seqs_of(mix.gather(ids, fields="tokens", epoch=epoch)["tokens"]), f"mix step {step}")
        sources, records = mix.sources_of(ids, epoch=epoch)
        want = [corpus.seqs[bounds[s] + int(r)] for s, r in zip(sources, records)]
        same_seqs(got, want, f"mix step {step} (source records)")
        seen.update(int(s) for s in sources)
        want = [corpus.seqs[int(i)] for i in ref.next()]
        same_seqs(seqs_of(next(m["its"]["one"])), want, f"one step {step}")
        same_seqs(seqs_of(next(m["its"]["gather"])), want, f"gather step {step}")
    assert seen == {0, 1, 2}, "the mixture read every source"


def pick_us(mix: zring.Mixture, batches: int = 200, repeat: int = 3) -> float:
    """Microseconds to map one batch of stream positions to the joined sources'
    records in native code (what the loader does per step for a mixture, and the
    one-source loader does not), in the caller's thread."""
    plan = mix.plan_of(zring.Sampler(len(mix), BATCH, "cyclic"))
    positions = [mix.positions(plan.indices(step))[0] for step in range(batches)]
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for p in positions:
            mix._native.indices(p)
        best = min(best, (time.perf_counter() - t0) / batches)
    return best * 1e6


# -- 2. packing ---------------------------------------------------------------------


def grain_packed(store: str, read_options=None) -> Iterator[dict]:
    source = zj.DataSource({"tokens": store})
    ds = grain.MapDataset.source(source).shuffle(seed=0).repeat().to_iter_dataset(read_options)
    packed = grain.experimental.FirstFitPackIterDataset(
        ds, length_struct={"tokens": SEQ_LEN}, num_packing_bins=ROWS, shuffle_bins=False
    )
    return iter(packed.batch(ROWS))


def packing_contenders(store: str) -> tuple[list, dict]:
    packed = zring.pack(store, SEQ_LEN, rows=ROWS, strategy="first_fit", seed=0, pad_id=PAD)
    return [packed], {
        "zring": packed,
        "grain": grain_packed(store),
        "grain-t0": grain_packed(store, grain.ReadOptions(num_threads=0)),
    }


def check_zring_pack(batch: dict, mix: zring.Mixture, corpus: Corpus) -> None:
    """Every non-pad segment is its stream position's sequence, whole and in order
    (first fit never splits; no W3 sequence is longer than a row), positions count
    from 0 in each segment, and a row's padding is one segment up to its end."""
    tokens, pos, cu = batch["tokens"].reshape(-1), batch["position_ids"].reshape(-1), batch["cu_seqlens"]
    assert batch["tokens"].shape == (ROWS, SEQ_LEN) and cu.dtype == np.int32
    assert cu[0] == 0 and cu[-1] == ROWS * SEQ_LEN and np.all(np.diff(cu) > 0)
    positions = batch["positions"].astype(np.int64)
    records = np.empty(len(positions), np.int64)
    for epoch in np.unique(positions // len(mix)):  # position p is record p % len of pass p // len
        at = positions // len(mix) == epoch
        records[at] = mix.sources_of(positions[at] % len(mix), epoch=int(epoch))[1]
    assert np.all(batch["starts"] == 0), "first fit splits no sequence"
    j = 0
    for s in range(len(cu) - 1):
        a, b = int(cu[s]), int(cu[s + 1])
        row = a // SEQ_LEN
        assert (b - 1) // SEQ_LEN == row, "a segment stays within its row"
        assert np.array_equal(pos[a:b], np.arange(b - a)), "positions count from 0 in each segment"
        if j < len(positions) and int(batch["rows"][j]) == row and not (tokens[a] == PAD):
            want = corpus.seqs[int(records[j])]
            assert np.array_equal(tokens[a:b], want), f"packed segment {j} differs from its sequence"
            j += 1
        else:
            assert b % SEQ_LEN == 0 and np.all(tokens[a:b] == PAD), "padding fills its row to the end"
    assert j == len(positions), "every non-pad segment was found in order"


def check_grain_pack(batch: dict, known: dict) -> None:
    """Every Grain segment is one of the sequences, whole, positions from 0."""
    assert batch["tokens"].shape == (ROWS, SEQ_LEN)
    for tokens, seg, pos in zip(batch["tokens"], batch["tokens_segment_ids"], batch["tokens_positions"]):
        for k in range(1, int(seg.max()) + 1):
            at = np.flatnonzero(seg == k)
            assert np.array_equal(at, np.arange(at[0], at[0] + len(at))), "a segment is contiguous"
            assert np.array_equal(pos[at], np.arange(len(at))), "positions count from 0"
            assert tokens[at].tobytes() in known, "a Grain segment is one of the sequences"


def check_packing(its: dict, store: str, corpus: Corpus, steps: int = 4) -> None:
    mix = zring.mix([store], [1.0], seed=0)  # the packer's stream (one source, seed 0)
    known = {s.tobytes() for s in corpus.seqs}
    for _ in range(steps):
        check_zring_pack(next(its["zring"]), mix, corpus)
        for k in ("grain", "grain-t0"):
            check_grain_pack(next(its[k]), known)


def non_pad(batch: dict) -> int:
    if "tokens_segment_ids" in batch:
        return int(np.count_nonzero(batch["tokens_segment_ids"]))
    return int(np.count_nonzero(batch["tokens"] != PAD))


# -- timing -------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default="/tmp/zring-bench-lm", help="where the datasets and the store go")
    ap.add_argument("--codec", default="raw", help="codec of the datasets and the store")
    add_timing_args(ap)
    a = ap.parse_args()
    apply_quick(a)
    n = 2_000 if a.check else 20_000 if a.quick else 200_000
    os.makedirs(a.dir, exist_ok=True)
    corpus = Corpus(n)
    data = build(a.dir, corpus, a.codec)
    out: dict = {"sequences": n, "tokens": int(corpus.offsets[-1]), "codec": a.codec,
                 "median_length": float(np.median(corpus.lengths))}

    m = mixture_contenders(data)
    check_mixture(m, data, corpus)
    if a.check:
        print("bench_lm mixture: the loaders' and the gather's batches are the source records")
    else:
        r = timed(m["its"], a.seconds, a.rounds, lambda b: b.values.size)
        out["mixture"] = r
        out["mixture_pick_us"] = pick_us(m["mix"])
    for loader in m["loaders"]:
        loader.close()

    owned, its = packing_contenders(data["store"])
    check_packing(its, data["store"], corpus)
    if a.check:
        print("bench_lm packing: zring's packed segments are the sequences in order; Grain's are sequences")
    else:
        # Efficiency over every batch timed, and non-pad tokens/s.
        r = timed(its, a.seconds, a.rounds, non_pad)
        for v in r.values():
            v["efficiency"] = v["units"] / (v["batches"] * ROWS * SEQ_LEN)
        out["packing"] = r
    for p in owned:
        p.close()
    if a.check:
        return

    mx, pk = out["mixture"], out["packing"]
    print(f"W3 x {n:,} ({out['tokens'] / 1e6:.1f} M tokens, median {out['median_length']:.0f}), {a.codec}, "
          f"batch {BATCH}, cyclic, warm page cache:")
    for k, v in mx.items():
        print(f"  {k:8s} {v['per_s'] / 1e6:8.2f} M tokens/s {v['batches_s']:9.1f} batches/s")
    print(f"  mix / one    = {mx['mix']['per_s'] / mx['one']['per_s']:.3f}   (target >= 0.95)")
    print(f"  one / gather = {mx['one']['per_s'] / mx['gather']['per_s']:.3f}")
    pick = out["mixture_pick_us"]
    print(f"  the mixture's picks ({BATCH} positions to records, one thread): {pick:.1f} us per batch, "
          f"{pick * 1e3 / BATCH:.0f} ns per position")
    print(f"\nW14 first fit, {ROWS} rows x {SEQ_LEN} tokens:")
    for k, v in pk.items():
        print(f"  {k:8s} {v['per_s'] / 1e6:8.2f} M non-pad tokens/s {v['batches_s']:9.1f} batches/s "
              f"efficiency {v['efficiency']:.4f}")
    best = max(("grain", "grain-t0"), key=lambda k: pk[k]["per_s"])
    print(f"  zring / {best} = {pk['zring']['per_s'] / pk[best]['per_s']:.2f}   (target >= 5; the faster Grain)")
    out["ratios"] = {
        "mix_over_one": mx["mix"]["per_s"] / mx["one"]["per_s"],
        "one_over_gather": mx["one"]["per_s"] / mx["gather"]["per_s"],
        "zring_over_grain": pk["zring"]["per_s"] / pk[best]["per_s"],
        "grain_baseline": best,
    }
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()

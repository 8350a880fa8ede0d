"""Timing in alternating rounds, shared by the Python benches: each contender
runs for ``seconds / rounds`` in turn, ``rounds`` times, so a machine whose
speed drifts (other work, frequency) drifts for every contender alike."""

from __future__ import annotations

import time
from typing import Any, Callable, Iterator


def timed(its: dict[str, Iterator[Any]], seconds: float, rounds: int,
          count: Callable[[Any], int] = lambda _batch: 1) -> dict[str, dict[str, float]]:
    """Per contender: ``count(batch)`` units per second (``per_s``), batches per
    second (``batches_s``), and the totals (``units``, ``batches``), after three
    warm-up batches each."""
    spent = {k: 0.0 for k in its}
    units = {k: 0 for k in its}
    batches = {k: 0 for k in its}
    for it in its.values():  # warm-up
        for _ in range(3):
            next(it)
    per_round = seconds / rounds
    for _ in range(rounds):
        for k, it in its.items():
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < per_round:
                units[k] += count(next(it))
                batches[k] += 1
            spent[k] += time.perf_counter() - t0
    return {k: {"per_s": units[k] / spent[k], "batches_s": batches[k] / spent[k], "units": units[k],
                "batches": batches[k]} for k in its}


def batch_rates(its: dict[str, Iterator[Any]], seconds: float, rounds: int) -> dict[str, float]:
    """Batches per second of each contender (see :func:`timed`)."""
    return {k: r["batches_s"] for k, r in timed(its, seconds, rounds).items()}

"""Timing in alternating rounds, shared by the Python benches: each contender
runs for ``seconds / rounds`` in turn, ``rounds`` times, so a machine whose
speed drifts (other work, frequency) drifts for every contender alike."""

from __future__ import annotations

import argparse
import time
from typing import Any, Callable, Iterator


def add_timing_args(ap: argparse.ArgumentParser) -> None:
    """The options every timed bench has: --seconds, --rounds, --quick, --json and
    --check (call :func:`apply_quick` on the parsed arguments)."""
    ap.add_argument("--seconds", type=float, default=6.0, help="timed seconds per contender")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--quick", action="store_true", help="small workloads, short timing (smoke test)")
    ap.add_argument("--json", help="also write the results to this file")
    ap.add_argument("--check", action="store_true", help="tiny sizes: check every contender's batches, time nothing")


def apply_quick(a: argparse.Namespace) -> None:
    """--quick: at most 0.6 s per contender, in 2 rounds."""
    if a.quick:
        a.seconds, a.rounds = min(a.seconds, 0.6), 2


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

"""Loader: the Rust loader (zring-loader) with Python-side lifetime management."""

from __future__ import annotations

import atexit
import weakref

from ._zring import _Loader

_live: "weakref.WeakSet[Loader]" = weakref.WeakSet()


class Loader(_Loader):
    """Endless, step-based, multi-stream prefetching loader.

    ``Loader(streams, sampler, workers=2, prefetch=4, transform=None, ordered=True,
    *, pinned=False)``

    - ``streams``: ``{name: [store, ...]}``, one store (view) per placement; every
      stream has the same number of views and every store the same number of
      records (record ``i`` of every stream belongs together). A single store stands
      for a one-element list.
    - ``sampler``: a :class:`zring.Sampler`. The loader draws from a copy of it,
      starting at its current ``step``; its global batch must be divisible by the
      number of views.
    - ``workers``: Rust threads that each make whole steps (draw, gather, transform)
      in parallel, without the GIL for the gathers; ``0`` makes each step in the
      consumer's thread on demand. ``prefetch``: finished steps kept ready. Live
      batch memory is bounded by ``workers + prefetch + 1`` steps plus what the
      consumer holds.
    - ``transform``: called in the worker, with the GIL, once per shard with the
      shard's dict; its result replaces the dict. An exception it raises is raised
      by the consumer's ``next()`` at that step, after every earlier step.
    - ``ordered``: deliver steps in step order (reproducible, exact ``seek``) or as
      they finish.
    - ``pinned``: gather into page-locked buffers (needs ``RLIMIT_MEMLOCK`` room).

    Iterating yields, per step, a list with one dict per shard:
    ``{name: ndarray | RaggedBatch}`` whose arrays are zero-copy views of the
    loader's pooled buffers (they return to the pool when the arrays die).
    ``step``, ``seek(step)``, ``close()`` and ``with`` work as their names say;
    ``close()`` joins every worker promptly.
    """

    def __init__(self, *args, **kwargs):
        # The native constructor did the work; remember the loader so that its
        # threads are joined before the interpreter shuts down.
        _live.add(self)

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"step={self.step}"
        return f"Loader(streams={list(self.stream_names)}, shards={self.shards}, {state})"


@atexit.register
def _close_all() -> None:
    # Worker threads that hold or wait for the GIL must not outlive the interpreter.
    for loader in list(_live):
        loader.close()

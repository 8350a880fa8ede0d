"""loaderx 2.8's ``Loader`` on zring's sampler-driven loader."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn

import numpy as np
import numpy.typing as npt

from .._internal.loader import _live
from .._internal.sampler_loader import IndexSampler, SamplerLoader
from .zrecord import Store, Writer, _strict_int

__all__ = ["Loader"]


def _check_view(name: str, view: Any) -> None:
    if isinstance(view, (Store, Writer)):
        raise ValueError(
            f"stream {name!r} holds a {type(view).__name__}; give views opened for reading: store.bind(Allocator('cpu'))"
        )
    if not (hasattr(view, "__getitems__") and hasattr(view, "__len__")):
        raise ValueError(f"stream {name!r} holds a {type(view).__name__}, which has no __getitems__/__len__")
    if getattr(view, "writable", False):
        raise ValueError(f"stream {name!r} holds a writable view")


class Loader(SamplerLoader):
    """``Loader(streams, sampler, *, workers=4, prefetch=4, transform=None)``

    - ``streams``: ``{name: [view, ...]}``, one bound view per placement, every list
      the same length, every view the same (non-zero) number of records.
    - ``sampler``: any object whose ``next()`` returns a 1-D integer index array (a
      :class:`zring.loaderx.sampler.Sampler`, a weighted sampler, ...). It is
      borrowed, never closed; each step's batch must split into equal shards.
    - ``workers``: threads that draw, gather and transform (0: every step is made in
      the consumer's ``next()``); ``prefetch``: finished steps kept ready.
    - ``transform``: the collate step, called once per step with the complete list of
      shard dicts; its result is what the step delivers, unchanged.

    Each step is a list with one dict per placement ``{name: batch}`` (or the
    transform's result). The loader is
    endless (``len()`` is a ``TypeError``); an exception in a worker is raised by the
    consumer's ``next()`` at its step; ``close()`` (or ``with``) joins the workers and
    later ``next()`` calls raise ``StopIteration``.

    Unlike loaderx, steps come in draw order even with several workers (loaderx
    delivers them in completion order), and gathers of different workers overlap
    (loaderx serializes draw and gather under one lock).
    """

    # loaderx ends iteration after close() instead of raising ClosedError.
    _raise_when_closed = False

    def __init__(
        self,
        streams: Mapping[str, Sequence[Any]],
        sampler: IndexSampler,
        *,
        workers: int = 4,
        prefetch: int = 4,
        transform: Callable[[list[dict[str, Any]]], Any] | None = None,
    ) -> None:
        workers = _strict_int(workers, "workers")
        prefetch = _strict_int(prefetch, "prefetch")
        if workers < 0:
            raise ValueError(f"workers must be >= 0, got {workers}")
        if prefetch < 1:
            raise ValueError(f"prefetch must be >= 1, got {prefetch}")
        if not isinstance(streams, dict) or not streams:
            raise ValueError("streams must be a non-empty dict {name: [view, ...]}")
        for name, views in streams.items():
            if not isinstance(views, (list, tuple)) or not views:
                raise ValueError(f"stream {name!r} must be a non-empty list of views")
            for v in views:
                _check_view(name, v)
        if any(len(v) == 0 for views in streams.values() for v in views):
            raise ValueError("every view must hold at least one record")
        if transform is not None and not callable(transform):
            raise TypeError("transform must be callable")
        # loaderx's transform collates a whole step, where SamplerLoader's maps each
        # shard: the shard list is made without one and handed over in _make.
        self._collate = transform
        super().__init__(streams, sampler, workers, prefetch, None, True)
        _live.add(self)

    def _make(self, idx: npt.NDArray[np.integer[Any]]) -> Any:
        step = super()._make(idx)
        if self._collate is None:
            return step
        return self._collate(step)

    def __next__(self) -> Any:
        """The next step: its shard list, or what ``transform`` made of it."""
        return super().__next__()

    def __len__(self) -> NoReturn:
        raise TypeError("a Loader is endless; it has no len()")

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"step={self.step}"
        return f"Loader(streams={self.stream_names}, shards={self.shards}, {state})"

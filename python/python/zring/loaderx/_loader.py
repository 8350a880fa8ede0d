"""loaderx 2.8's ``Loader`` on zring's sampler-driven loader."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn

from .._loader import _live
from .._sampler_loader import IndexSampler, SamplerLoader
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
    - ``transform``: called with each shard's dict; its result replaces it.

    Each step is a list with one dict per placement ``{name: batch}``. The loader is
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
        transform: Callable[[dict[str, Any]], Any] | None = None,
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
        super().__init__(streams, sampler, workers, prefetch, transform, True)
        _live.add(self)

    def __len__(self) -> NoReturn:
        raise TypeError("a Loader is endless; it has no len()")

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"step={self.step}"
        return f"Loader(streams={self.stream_names}, shards={self.shards}, {state})"

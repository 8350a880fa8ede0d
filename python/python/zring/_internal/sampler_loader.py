"""A loader driven by any sampler object with ``next()``.

zring's Rust loader draws from a ``zring.Sampler`` it copies, which is what makes it
fast and exactly resumable. Custom samplers (weighted, curriculum, a loaderx
``Sampler``) are Python objects, so this loader runs the same protocol with Python
threads: a worker draws under a lock (samplers, loaderx's included, may return a
buffer they reuse, so the indices are copied before the lock is released), then
gathers every stream of every shard and runs the transform *outside* the lock, so
gathers (which release the GIL) overlap across workers. Steps are delivered in draw
order by default; ``prefetch`` bounds the finished steps waiting for the consumer.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, NoReturn, Protocol, Union

import numpy as np
import numpy.typing as npt

from .errors import ClosedError

if TYPE_CHECKING:
    from typing_extensions import Self, TypeAlias


class IndexSampler(Protocol):
    """What a loader draws from: each ``next()`` is one step's global batch of record
    indices (a 1-D integer array-like). A sampler that also has ``step`` and
    ``seek(step)`` makes the loader resumable."""

    def next(self) -> npt.ArrayLike: ...


#: A shard's dict, or what the transform made of it.
ShardResult: TypeAlias = Any
#: One step's result, or the exception to raise at that step.
_Result: TypeAlias = Union[list[ShardResult], "_Failed"]

__all__ = ["SamplerLoader", "IndexSampler"]


class _Failed:
    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


def _gatherer(view: Any) -> Callable[[npt.NDArray[np.integer[Any]]], Any]:
    """How to read a batch of records from one stream view."""
    many = getattr(view, "__getitems__", None)
    if many is not None:
        return many  # type: ignore[no-any-return]
    return view.__getitem__  # type: ignore[no-any-return]


def _views(name: str, views: Any) -> list[Any]:
    from .._zring import _Store

    if isinstance(views, _Store):
        return [views]
    if not isinstance(views, (list, tuple)):
        raise TypeError(f"stream {name!r} must be a list of views (one per placement)")
    if not views:
        raise ValueError(f"stream {name!r} has no views (give one per placement)")
    return list(views)


class SamplerLoader:
    """``SamplerLoader(streams, sampler, workers=2, prefetch=4, transform=None, ordered=True)``

    The loader ``zring.Loader`` becomes when its sampler is not a ``zring.Sampler``:
    ``sampler.next()`` returns each step's global batch of indices (any 1-D integer
    array-like), which is cut into one equal contiguous shard per view. Iterating
    yields, per step, a list with one dict per shard ``{name: batch}``.
    ``step`` counts delivered steps (starting at the sampler's ``step`` when it has
    one); ``seek(step)`` needs a sampler with ``seek``.
    """

    def __init__(
        self,
        streams: Mapping[str, Any],
        sampler: IndexSampler,
        workers: int = 2,
        prefetch: int = 4,
        transform: Callable[[dict[str, Any]], Any] | None = None,
        ordered: bool = True,
        *,
        pinned: bool = False,
    ) -> None:
        if pinned:
            raise ValueError("pinned=True needs a zring.Sampler (the Rust loader); custom samplers gather unpinned")
        if not callable(getattr(sampler, "next", None)):
            raise TypeError(f"sampler must have a next() method, got {type(sampler).__name__}")
        if not isinstance(streams, dict) or not streams:
            raise ValueError("streams must be a non-empty dict {name: [view, ...]}")
        lists = {name: _views(name, v) for name, v in streams.items()}
        shards = {len(v) for v in lists.values()}
        if len(shards) != 1:
            raise ValueError(f"every stream needs the same number of views, got {sorted(shards)}")
        lengths = {len(v) for vs in lists.values() for v in vs}
        if len(lengths) != 1:
            raise ValueError(f"every view needs the same number of records, got {sorted(lengths)}")
        workers, prefetch = int(workers), int(prefetch)
        if workers < 0 or prefetch < 1:
            raise ValueError(f"workers must be >= 0 and prefetch >= 1, got {workers} and {prefetch}")
        self._names = list(lists)
        self._shards = shards.pop()
        self._gather = [[_gatherer(lists[n][j]) for n in self._names] for j in range(self._shards)]
        self._sampler: IndexSampler | None = sampler
        self._transform = transform
        self._workers = workers
        self._prefetch = prefetch
        self._ordered = ordered
        self._cond = threading.Condition()
        self._draw_lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._closed = False
        self._start(int(getattr(sampler, "step", 0)))

    # -- the producer side -------------------------------------------------------

    def _start(self, step: int) -> None:
        self._base = step  # the step number of draw 0
        self._drawn = 0  # draws made
        self._delivered = 0  # steps handed to the consumer
        self._ready: dict[int, _Result] = {}  # ordered: by draw number
        self._queue: deque[tuple[int, _Result]] = deque()  # unordered: as finished
        self._pending: set[int] = set()  # draws not yet delivered
        self._stopping = False
        self._ended = False
        self._threads = [
            threading.Thread(target=self._work, name=f"zring-loader-{k}", daemon=True) for k in range(self._workers)
        ]
        for t in self._threads:
            t.start()

    def _draw(self) -> tuple[int, npt.NDArray[np.integer[Any]]]:
        """The next draw's sequence number and its indices (a private copy)."""
        seq = self._drawn
        self._drawn += 1
        with self._cond:
            self._pending.add(seq)
        if self._sampler is None:
            raise ClosedError("the loader is closed")
        idx = np.array(self._sampler.next(), copy=True)
        if idx.ndim != 1 or idx.dtype.kind not in "iu":
            raise TypeError(f"sampler.next() must return a 1-D integer array, got {idx.dtype} of shape {idx.shape}")
        return seq, idx

    def _make(self, idx: npt.NDArray[np.integer[Any]]) -> list[ShardResult]:
        n = len(idx)
        if n == 0 or n % self._shards:
            raise ValueError(f"a batch of {n} indices cannot be split into {self._shards} equal non-empty shards")
        size = n // self._shards
        step: list[ShardResult] = []
        for j, gathers in enumerate(self._gather):
            part = idx[j * size : (j + 1) * size]
            shard: ShardResult = {name: g(part) for name, g in zip(self._names, gathers)}
            if self._transform is not None:
                shard = self._transform(shard)
            step.append(shard)
        return step

    def _work(self) -> None:
        while True:
            result: _Result
            idx: npt.NDArray[np.integer[Any]] | None
            with self._draw_lock:
                if self._stopping:
                    return
                try:
                    seq, idx = self._draw()
                except BaseException as e:  # delivered to the consumer at this step
                    seq, result = self._drawn - 1, _Failed(e)
                    self._stopping = True
                    idx = None
            if idx is not None:
                try:
                    result = self._make(idx)
                except BaseException as e:
                    result = _Failed(e)
            if not self._put(seq, result):
                return

    def _put(self, seq: int, result: _Result) -> bool:
        with self._cond:
            if self._ordered:
                self._cond.wait_for(lambda: self._stopping_all() or seq < self._delivered + self._prefetch)
            elif isinstance(result, _Failed):
                # An error ends the stream: every earlier step goes out first.
                self._cond.wait_for(lambda: self._stopping_all() or min(self._pending) == seq)
            else:
                self._cond.wait_for(lambda: self._stopping_all() or len(self._queue) < self._prefetch)
            if self._stopping_all():
                return False
            if self._ordered:
                self._ready[seq] = result
            else:
                self._queue.append((seq, result))
            self._cond.notify_all()
            return not isinstance(result, _Failed)

    def _stopping_all(self) -> bool:
        return self._closed or self._ended

    # -- the consumer side -------------------------------------------------------

    def __iter__(self) -> Self:
        return self

    # A closed loader's next() raises ClosedError, like every read after close();
    # zring.loaderx keeps loaderx's StopIteration.
    _raise_when_closed = True

    def _stop(self) -> NoReturn:
        if self._closed and self._raise_when_closed:
            raise ClosedError("the loader is closed")
        raise StopIteration

    def __next__(self) -> list[ShardResult]:
        if self._closed or self._ended:
            self._stop()
        result: _Result
        if self._workers == 0:
            try:
                with self._draw_lock:
                    _, idx = self._draw()
                result = self._make(idx)
            except BaseException:
                self._ended = True
                raise
        else:
            with self._cond:
                if self._ordered:
                    key = self._delivered
                    self._cond.wait_for(lambda: self._stopping_all() or key in self._ready)
                    if self._stopping_all():
                        self._stop()
                    result = self._ready.pop(key)
                    self._pending.discard(key)
                else:
                    self._cond.wait_for(lambda: self._stopping_all() or bool(self._queue))
                    if self._stopping_all():
                        self._stop()
                    seq, result = self._queue.popleft()
                    self._pending.discard(seq)
                self._delivered += 1
                self._cond.notify_all()
        if self._workers == 0:
            self._delivered += 1
            self._pending.clear()
        if isinstance(result, _Failed):
            self._end()
            raise result.error
        return result

    def _end(self) -> None:
        with self._cond:
            self._ended = True
            self._stopping = True
            self._cond.notify_all()
        self._join()

    def _join(self) -> None:
        me = threading.current_thread()
        for t in self._threads:
            if t is not me:
                t.join()

    @property
    def step(self) -> int:
        """The step the next delivered batch belongs to."""
        return self._base + self._delivered

    def seek(self, step: int) -> None:
        """Restarts at ``step`` (needs a sampler with ``seek``); steps drawn ahead are
        discarded."""
        if self._closed:
            raise ClosedError("the loader is closed")
        seek = getattr(self._sampler, "seek", None)
        if seek is None:
            raise TypeError(f"{type(self._sampler).__name__} has no seek(); this loader cannot resume")
        self._end()
        seek(step)
        self._start(int(step))

    def close(self) -> None:
        """Stops and joins every worker (idempotent); delivered batches stay valid."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._stopping = True
            self._cond.notify_all()
        self._join()
        self._ready.clear()
        self._queue.clear()
        self._sampler = None

    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called."""
        return self._closed

    @property
    def shards(self) -> int:
        """Shards per step (views per stream)."""
        return self._shards

    @property
    def stream_names(self) -> list[str]:
        """Stream names, in the order of the dicts' keys."""
        return list(self._names)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Literal[False]:
        self.close()
        return False

    def __del__(self) -> None:
        if not getattr(self, "_closed", True):
            self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"step={self.step}"
        return f"SamplerLoader(streams={self._names}, shards={self._shards}, {state})"

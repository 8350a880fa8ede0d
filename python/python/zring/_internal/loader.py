"""Loader: the Rust loader (zring-loader) with Python-side lifetime management."""

from __future__ import annotations

import atexit
import copy
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

from .mixture import Mixture, MixtureField, mixture_of
from .sampler_loader import IndexSampler, SamplerLoader
from .._zring import Sampler, _Dataset, _EpochPlan, _Loader
from ..decode import Image, _specs

if TYPE_CHECKING:
    from typing_extensions import Self

    from .._zring import _DatasetField, _Store
    from ..types import Shard

    #: A loader's streams: ``{name: [store, ...]}`` (a lone store for one view) or a dataset.
    _Streams = Mapping[str, _Store | _DatasetField | Sequence[_Store | _DatasetField]] | _Dataset

_live: weakref.WeakSet[Any] = weakref.WeakSet()

#: What each shard of a step is: the shard's dict, or what ``transform`` returns.
_T = TypeVar("_T")


class Loader(_Loader, Generic[_T]):
    """Step-based, multi-stream prefetching loader (endless over a ``Sampler``).

    ``Loader(streams, sampler, workers=2, prefetch=4, transform=None, ordered=True,
    *, pinned=False, lookahead_bytes=512 << 20)``

    - ``streams``: ``{name: [store, ...]}``, one store (view) per placement; every
      stream has the same number of views and every store the same number of
      records (record ``i`` of every stream belongs together). A single store stands
      for a one-element list. A :class:`zring.Dataset` stands for one stream per
      field, and ``dataset.field(name)`` is accepted wherever a store is.
    - ``sampler``: a :class:`zring.Sampler`. The loader draws from a copy of it,
      starting at its current ``step``; its global batch must be divisible by the
      number of views. Any other object with a ``next()`` method returning an
      integer index array (a weighted or curriculum sampler, a
      ``zring.loaderx.Sampler``) works too: the loader is then a
      :class:`zring.SamplerLoader`, which draws from that very object under a lock
      and gathers in Python threads (same options but ``pinned``; ``seek`` needs
      the sampler's own ``seek``). An epoch plan (what ``zring.torch.IterableDataset``
      passes: epochs whose last step may be shorter, split across ranks and
      workers) is accepted too; a *finite* plan (``epochs`` set) makes the loader
      raise ``StopIteration`` after its last step. With several views, every step
      (the short one included) must split into equal shards.
    - ``workers``: Rust threads that each make whole steps (draw, gather, transform)
      in parallel, without the GIL for the gathers; ``0`` makes each step in the
      consumer's thread on demand. ``prefetch``: finished steps kept ready. Live
      batch memory is bounded by ``workers + prefetch + 1`` steps, the one step
      the consumer holds included (steps it keeps longer come on top).
    - ``transform``: called in the worker, with the GIL, once per shard with the
      shard's dict; its result replaces the dict. An exception it raises is raised
      by the consumer's ``next()`` at that step, after every earlier step.
    - ``ordered``: deliver steps in step order (reproducible, exact ``seek``) or as
      they finish.
    - ``pinned``: gather into page-locked buffers (needs ``RLIMIT_MEMLOCK`` room).
    - ``lookahead_bytes`` (512 MiB by default): make as many steps at once as keep
      the storage device's queue full across step boundaries (from the reads one
      step plans into and the device's queue depth), within this many bytes of live
      steps (an int, or a size with units: ``"1G"``); ``workers`` and ``prefetch`` are floors, and the budget wins over them.
      A store read through its mapping (``auto`` maps one that is in the page
      cache) has no device queue to fill and keeps exactly ``workers`` and
      ``prefetch``. ``None`` uses ``workers`` and ``prefetch`` as given.
      ``options`` tells what was chosen. (Rust sampler only, like ``pinned``.)
    - ``decode``: ``{name: zring.decode.Image(...)}`` decodes those streams'
      encoded images (JPEG or PNG records) in native code, on the engine's threads,
      into ``uint8`` pixel arrays ``(B, h, w, 3)`` (or ``(B, 3, h, w)``), with each
      step's epoch: random crops change from epoch to epoch and are the same for
      any ``workers`` and after ``seek``. A bad image raises
      :class:`zring.ImageDecodeError` at its step, or, with ``on_error="skip"`` or
      ``"substitute"``, is left out of (replaced in) every stream of its shard;
      ``stats()`` counts them in the steps delivered so far (``images_skipped``,
      ``images_substituted``).
      (Rust sampler only.)

    Iterating yields, per step, a list with one dict per shard:
    ``{name: ndarray | RaggedBatch}`` whose arrays are zero-copy views of the
    loader's pooled buffers (they return to the pool when the arrays die).
    ``step``, ``seek(step)``, ``close()`` and ``with`` work as their names say;
    ``close()`` joins every worker promptly.

    Raises ``InvalidArgumentError`` when the streams do not line up (different view
    counts or record counts, a batch that does not split into the shards) and
    ``ClosedError`` for a closed store; a gather's error is raised by ``next()`` at
    its step.

    >>> import os, tempfile, numpy as np, zring
    >>> path = os.path.join(tempfile.mkdtemp(), "x.zr")
    >>> with zring.DenseWriter(path, "int64", ()) as w:
    ...     w.append(np.arange(8))
    range(0, 8)
    >>> store = zring.DenseStore(path)
    >>> sampler = zring.Sampler(len(store), 4, "sequential")
    >>> with zring.Loader({"x": [store]}, sampler, workers=1) as loader:
    ...     [step[0]["x"].tolist() for _, step in zip(range(3), loader)]
    [[0, 1, 2, 3], [4, 5, 6, 7], [0, 1, 2, 3]]
    """

    @overload
    def __new__(
        cls,
        streams: _Streams,
        sampler: Sampler | _EpochPlan,
        workers: int = 2,
        prefetch: int = 4,
        transform: Callable[[Shard], Any] | None = None,
        ordered: bool = True,
        *,
        pinned: bool = False,
        lookahead_bytes: int | str | None = 512 << 20,
        decode: Mapping[str, Image] | None = None,
    ) -> Self: ...
    @overload
    def __new__(  # type: ignore[misc]  # a custom sampler makes a SamplerLoader
        cls,
        streams: Mapping[str, Any] | _Dataset,
        sampler: IndexSampler,
        workers: int = 2,
        prefetch: int = 4,
        transform: Callable[[dict[str, Any]], Any] | None = None,
        ordered: bool = True,
    ) -> SamplerLoader: ...
    def __new__(cls, streams: Any, sampler: Any, *args: Any, **kwargs: Any) -> Any:
        # A dataset stands for one stream per field (and is read like a store).
        native = isinstance(sampler, (Sampler, _EpochPlan))
        mixture = mixture_of(streams)
        if mixture is not None and native:
            # The joined sources' fields, read at the indices the mixture maps the
            # plan's positions to (epoch by epoch).
            streams = {name: mixture.joined.field(name) for name in mixture.fields}
            if isinstance(sampler, Sampler):
                sampler = mixture.plan_of(sampler)
            kwargs = {**kwargs, "mixture": mixture._native}
        elif isinstance(streams, Mixture):
            streams = {name: [MixtureField(streams, name)] for name in streams.fields}
        if isinstance(streams, _Dataset):
            if native:
                streams = {name: streams.field(name) for name in streams.fields}
            else:
                from .dataset import FieldView

                streams = {name: [FieldView(streams, name)] for name in streams.fields}
        if not native:
            if kwargs.get("decode") is not None:
                raise TypeError(
                    "decode= needs a zring.Sampler or an epoch plan (the Rust loader decodes); "
                    "a custom sampler's loader gathers in Python"
                )
            loader = SamplerLoader(streams, sampler, *args, **kwargs)
            _live.add(loader)
            return loader
        if kwargs.get("decode") is not None:
            kwargs = {**kwargs, "decode": _specs(kwargs["decode"])}
        return super().__new__(cls, streams, sampler, *args, **kwargs)

    # The type parameter is what a step's list holds: a Shard dict without a
    # transform, else what the transform returns (given by position or keyword).
    # Type checkers take it from __init__, so the overloads are here.
    @overload
    def __init__(
        self: Loader[Shard],
        streams: _Streams,
        sampler: Sampler | _EpochPlan,
        workers: int = 2,
        prefetch: int = 4,
        transform: None = None,
        ordered: bool = True,
        *,
        pinned: bool = False,
        lookahead_bytes: int | str | None = 512 << 20,
        decode: Mapping[str, Image] | None = None,
    ) -> None: ...
    @overload
    def __init__(
        self: Loader[_T],
        streams: _Streams,
        sampler: Sampler | _EpochPlan,
        workers: int,
        prefetch: int,
        transform: Callable[[Shard], _T],
        ordered: bool = True,
        *,
        pinned: bool = False,
        lookahead_bytes: int | str | None = 512 << 20,
        decode: Mapping[str, Image] | None = None,
    ) -> None: ...
    @overload
    def __init__(
        self: Loader[_T],
        streams: _Streams,
        sampler: Sampler | _EpochPlan,
        workers: int = 2,
        prefetch: int = 4,
        *,
        transform: Callable[[Shard], _T],
        ordered: bool = True,
        pinned: bool = False,
        lookahead_bytes: int | str | None = 512 << 20,
        decode: Mapping[str, Image] | None = None,
    ) -> None: ...
    @overload
    def __init__(
        self: Loader[Any],
        streams: Mapping[str, Any] | _Dataset,
        sampler: IndexSampler,
        workers: int = 2,
        prefetch: int = 4,
        transform: Callable[[dict[str, Any]], Any] | None = None,
        ordered: bool = True,
    ) -> None: ...
    def __init__(self, streams: Any, sampler: Any, *args: Any, **kwargs: Any) -> None:
        # The native constructor did the work; remember the loader so that its
        # threads are joined before the interpreter shuts down, and what defines it
        # for pickling.
        # (A dataset is kept as itself: it pickles by path and version.)
        if not isinstance(streams, (_Dataset, Mixture)):
            streams = dict(streams)
        self._definition = (streams, sampler, args, kwargs)
        _live.add(self)

    if TYPE_CHECKING:
        # The native methods, typed with the shard type.
        def __iter__(self) -> Self: ...
        def __next__(self) -> list[_T]: ...

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickles what defines the loader (its streams' stores, a copy of the
        sampler at the next step to deliver, the options), not its threads: the
        copy starts its own workers and continues exactly where this one is."""
        streams, sampler, args, kwargs = self._definition
        sampler = copy.copy(sampler)
        sampler.seek(self.step)
        return (_rebuild, (streams, sampler, args, kwargs))

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"step={self.step}"
        return f"Loader(streams={list(self.stream_names)}, shards={self.shards}, {state})"


def _rebuild(streams: Any, sampler: Any, args: Any, kwargs: Any) -> Loader[Any]:
    return Loader(streams, sampler, *args, **kwargs)


@atexit.register
def _close_all() -> None:
    # Worker threads that hold or wait for the GIL must not outlive the interpreter.
    for loader in list(_live):
        loader.close()

"""``zring.mix``: several datasets (or stores) with the same fields read as one
weighted mixture, usable wherever a dataset is."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Union

import numpy as np

from .dataset import Dataset
from .errors import InvalidArgumentError, ZringIndexError
from .._zring import Sampler, _EpochPlan, _Mixture
from .._zring import _Store as Store

if TYPE_CHECKING:
    import numpy.typing as npt

    from .ragged import RaggedBatch
    from ..decode import Decoded, Image
    from ..types import RecordIndex, RecordIndices

#: What a mixture's source may be: a dataset, a store, or the path of either.
Source = Union[Dataset, Store, str, "os.PathLike[str]"]


def _open(source: Source, field: str) -> tuple[Dataset | tuple[str, Store], Source]:
    """``(part, what pickles)``: a dataset, or a store as the pair ``(field, store)``."""
    if isinstance(source, Dataset):
        return source, source
    if isinstance(source, Store):
        return (field, source), source
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if os.path.isdir(path) or "://" in path:
            ds = Dataset(path)
            return ds, ds
        from .._zring import open as open_store

        store = open_store(path)
        return (field, store), store
    raise TypeError(
        f"a mixture's sources are zring.Dataset objects, stores or their paths, got {type(source).__name__}"
    )


class Mixture:
    """A weighted mixture of datasets (or stores) with the same fields; see :func:`mix`.

    Record ``i`` of epoch ``e`` is position ``e * len(mix) + i`` of the mixture's
    endless stream, which reads one source's record by a counter-based rule: any
    window of positions holds each source in proportion to its weight (within 2
    positions), and each source runs through its own permutations, a new one per
    pass. ``len(mix)`` is the positions of one epoch (``length=``, by default the
    sources' records together).

    - ``mix.gather(idx, fields=None, *, decode=None, epoch=0)``, ``mix[i]`` and
      ``mix[idx]``: what a :class:`zring.Dataset` gives for the records at those
      positions of epoch ``epoch``.
    - ``mix.sources_of(idx, epoch=0)``: which source and which of its records each
      position reads.
    - ``zring.Loader(mix, sampler)``, ``zring.torch.Dataset(mix)`` /
      ``IterableDataset(mix, ...)`` and ``zring.jax.DataSource(mix)`` read it like
      a dataset; their epochs are the mixture's epochs, so every epoch reads new
      positions (a small source's next passes, a large one's unread records).
    - ``mix.reweighted(weights, at=position)``: the same sources continued with
      new weights from ``at``; see :meth:`reweighted`.
    """

    def __init__(
        self,
        sources: Sequence[Source],
        weights: Sequence[float] | None = None,
        *,
        seed: int = 0,
        length: int | None = None,
        field: str = "data",
    ) -> None:
        if isinstance(sources, (str, os.PathLike, Dataset, Store)) or not isinstance(sources, Sequence):
            raise TypeError("sources must be a list of datasets, stores or paths")
        if not sources:
            raise InvalidArgumentError("a mixture needs at least one source (got none)")
        opened = [_open(s, field) for s in sources]
        self._parts = [part for part, _ in opened]
        self.sources: list[Source] = [kept for _, kept in opened]
        # The sources read as one, numbered one after another: what a gather and the
        # loader read, at the indices the mixture picks.
        self._joined = Dataset.__new__(Dataset, "", _parts=self._parts)
        self.lens = [len(s) for s in self.sources]  # type: ignore[arg-type]
        if weights is None:
            weights = [1.0] * len(self.lens)
        if isinstance(weights, (str, bytes)) or not isinstance(weights, Sequence):
            raise TypeError("weights must be a list of numbers, one per source")
        self.weights = [float(w) for w in weights]
        self._initial_weights = self.weights
        self.seed = int(seed)
        self.field = field
        self._native = _Mixture(self.lens, self.weights, self.seed)
        # Every reweighting since the first weights: what a pickle replays.
        self._history: list[tuple[int, list[float]]] = []
        total = sum(self.lens)
        self.length = total if length is None else int(length)
        if self.length < 1:
            raise InvalidArgumentError(f"a mixture's length must be >= 1, got {self.length}")

    # --- what a dataset has -------------------------------------------------------

    def __len__(self) -> int:
        return self.length

    @property
    def fields(self) -> list[str]:
        """The field names, in the first source's order."""
        return self._joined.fields

    @property
    def schema(self) -> list[dict[str, Any]]:
        """The fields' schemas (the first source's metadata)."""
        return self._joined.schema

    @property
    def field_schemas(self) -> dict[str, dict[str, Any]]:
        """``{name: schema dict}``, in field order."""
        return self._joined.field_schemas

    def dtype(self, name: str) -> np.dtype[Any]:
        """Field ``name``'s NumPy dtype."""
        return self._joined.dtype(name)

    @property
    def joined(self) -> Dataset:
        """The sources read as one dataset, numbered one after another (source
        ``s``'s record ``r`` is ``r`` plus the records of the sources before it):
        what :meth:`indices` index."""
        return self._joined

    def positions(self, idx: RecordIndex | RecordIndices, epoch: int = 0) -> tuple[np.ndarray[Any, Any], bool]:
        """``(positions, one)``: the stream positions of records ``idx`` of epoch
        ``epoch`` (uint64; ``idx`` as a dataset's gather takes it), and whether
        ``idx`` was a single int."""
        epoch = int(epoch)
        if epoch < 0:
            raise ZringIndexError(f"epoch {epoch} is outside the mixture's stream (2^63 positions)")
        return self._native.positions(idx, self.length, epoch)

    def indices(self, idx: RecordIndex | RecordIndices, epoch: int = 0) -> np.ndarray[Any, Any]:
        """Where records ``idx`` of epoch ``epoch`` read, as indices of :attr:`joined`."""
        positions, _ = self.positions(idx, epoch)
        return self._native.indices(positions)

    def sources_of(self, idx: RecordIndex | RecordIndices, epoch: int = 0) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        """``(sources, records)``: for records ``idx`` of epoch ``epoch``, the index
        of the source each reads (int64, into ``sources``) and its record there
        (uint64)."""
        positions, _ = self.positions(idx, epoch)
        return self._native.picks(positions)

    def gather(
        self,
        idx: RecordIndex | RecordIndices,
        fields: str | Sequence[str] | None = None,
        *,
        decode: Mapping[str, Image] | None = None,
        epoch: int = 0,
    ) -> dict[str, npt.NDArray[Any] | RaggedBatch] | Decoded:
        """Records ``idx`` of epoch ``epoch``, as :meth:`zring.Dataset.gather` gives
        them (one parallel read of every field). With ``decode``, the result's
        ``kept`` are indices of :attr:`joined`."""
        positions, one = self.positions(idx, epoch)
        ids = self._native.indices(positions)
        target: Any = int(ids[0]) if one else ids
        return self._joined.gather(target, fields, decode=decode, epoch=epoch)

    def __getitem__(self, key: RecordIndex | RecordIndices) -> dict[str, Any]:
        if isinstance(key, str):
            raise TypeError(f"mix[{key!r}]: select a field with mix.gather(idx, fields={key!r})")
        positions, one = self.positions(key)
        ids = self._native.indices(positions)
        if one:
            return self._joined[int(ids[0])]
        return self._joined.gather(ids)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        """The records of epoch 0, one by one."""
        for i in range(len(self)):
            yield self[i]

    # --- the mixture's own --------------------------------------------------------

    @property
    def quotas(self) -> list[int]:
        """The integer quotas of one period of the interleave, in source order."""
        return self._native.quotas

    def consumed(self, position: int) -> list[int]:
        """How many positions before ``position`` each source served: each source's
        progress there (since the first weights)."""
        return self._native.consumed(int(position))

    def reweighted(self, weights: Sequence[float], *, at: int) -> Mixture:
        """The same sources continued from stream position ``at`` with new weights.

        Kept: each source's progress (:meth:`consumed` at ``at``), so no record of
        a pass is read twice or skipped because the weights changed. Restarted: the
        interleave, from ``at``. Positions before ``at`` are refused by the new
        mixture. A loader resumed at step ``k`` of an in-order plan (``shuffle=False``)
        is at position ``k * global_batch``; a shuffled plan reads an epoch's
        positions in another order, so reweight it at an epoch boundary
        (``epoch * len(mix)``).
        """
        other = Mixture.__new__(Mixture)
        other.__dict__.update(self.__dict__)
        other.weights = [float(w) for w in weights]
        other._native = self._native.reweighted(int(at), other.weights)
        other._history = [*self._history, (int(at), other.weights)]
        return other

    def fingerprint(self) -> tuple[Any, ...]:
        """What defines the mixture's stream: a resumed run must have the same."""
        return (
            tuple(self.lens),
            tuple(self.quotas),
            self.seed,
            self.length,
            self._native.start,
            tuple(self._native.base),
        )

    def check_resume(self, saved: tuple[Any, ...]) -> None:
        """Refuses a saved :meth:`fingerprint` of another mixture: other sources
        (their sizes), seed or length, or other weights unless this mixture is a
        :meth:`reweighted` one (which keeps every source's progress)."""
        now = self.fingerprint()
        if tuple(saved) == now:
            return
        if self._history and len(saved) == len(now) and (saved[0], saved[2], saved[3]) == (now[0], now[2], now[3]):
            return
        raise InvalidArgumentError(
            "the state belongs to a different mixture (its sources' sizes, weights, seed or length "
            f"differ; change weights with mix.reweighted): saved {saved}, now {now}"
        )

    def plan_of(self, sampler: Sampler) -> _EpochPlan:
        """The epoch plan that reads this mixture as ``sampler`` reads a dataset of
        ``len(mix)`` records: its batch, mode, seed, rank and step, with full
        batches only (an epoch's positions past the last full global batch are not
        read)."""
        if sampler.length != self.length:
            raise InvalidArgumentError(
                f"the sampler draws from {sampler.length} records, the mixture has {self.length} per epoch"
            )
        plan = _EpochPlan(self.length, sampler.batch_size, sampler.mode, sampler.seed, None, True,
                          sampler.rank, sampler.world_size)
        plan.seek(sampler.step)
        return plan

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (self.sources, self._initial_weights, self.seed, self.length, self.field,
                           self._history))

    def __repr__(self) -> str:
        return (
            f"zring.Mixture(sources={len(self.sources)}, weights={self.weights}, seed={self.seed}, "
            f"len={self.length}, fields={self.fields})"
        )


def _rebuild(sources: Sequence[Source], weights: list[float], seed: int, length: int, field: str,
             history: list[tuple[int, list[float]]]) -> Mixture:
    mix = Mixture(sources, weights, seed=seed, length=length, field=field)
    for at, w in history:
        mix = mix.reweighted(w, at=at)
    return mix


class MixtureField:
    """Field ``name`` of a mixture where the framework adapters take a store:
    ``view[idx]`` is the field of records ``idx`` of epoch 0, :meth:`read` of any
    epoch, and iterating it yields the native field of the joined sources (what
    :class:`zring.Loader` reads, mapping its plan's positions through the
    mixture)."""

    def __init__(self, mixture: Mixture, name: str) -> None:
        if name not in mixture.fields:
            raise KeyError(f"no field {name!r} (fields: {mixture.fields})")
        self.mixture, self.name = mixture, name

    def __len__(self) -> int:
        return len(self.mixture)

    def read(self, idx: RecordIndex | RecordIndices, epoch: int) -> Any:
        return self.mixture.gather(idx, fields=self.name, epoch=epoch)[self.name]

    def __getitem__(self, idx: RecordIndex | RecordIndices) -> Any:
        return self.read(idx, 0)

    def __iter__(self) -> Iterator[Any]:
        yield self.mixture.joined.field(self.name)

    def __repr__(self) -> str:
        return f"MixtureField({self.name!r} of {self.mixture!r})"


def mixture_of(streams: Any) -> Mixture | None:
    """The mixture ``streams`` read: a :class:`Mixture`, or a mapping whose values
    are fields of one (``None`` when they are not; an error when they mix)."""
    if isinstance(streams, Mixture):
        return streams
    if not isinstance(streams, Mapping):
        return None
    found = {id(v.mixture): v.mixture for v in streams.values() if isinstance(v, MixtureField)}
    if not found:
        return None
    if len(found) > 1 or len(streams) != sum(isinstance(v, MixtureField) for v in streams.values()):
        raise InvalidArgumentError("every stream must be a field of the same mixture")
    return next(iter(found.values()))


def mix(
    sources: Sequence[Source],
    weights: Sequence[float] | None = None,
    *,
    seed: int = 0,
    length: int | None = None,
    field: str = "data",
) -> Mixture:
    """Mixes ``sources`` (datasets, stores or their paths; every source with the
    same fields) in proportion to ``weights`` (equal by default); see
    :class:`Mixture`.

    ``seed`` picks every source's permutations; ``length`` is the positions of one
    epoch (default: the sources' records together). A store is a source of one
    field, named ``field``. Raises ``InvalidArgumentError`` for weights that are
    negative, NaN, infinite, all zero or not one per source, for sources whose
    fields differ, and for no source.

    >>> import os, tempfile, numpy as np, zring
    >>> d = tempfile.mkdtemp()
    >>> web = zring.write_dataset(os.path.join(d, "web"), {"x": np.arange(100)})
    >>> code = zring.write_dataset(os.path.join(d, "code"), {"x": np.arange(1000, 1010)})
    >>> m = zring.mix([web, code], [3, 1], seed=0)
    >>> len(m), m.fields
    (110, ['x'])
    >>> sources, _ = m.sources_of(np.arange(len(m)))
    >>> np.bincount(sources).tolist()
    [83, 27]
    """
    return Mixture(sources, weights, seed=seed, length=length, field=field)

"""What the framework adapters (zring.torch, zring.jax) share: fields of aligned
stores, and the plan that cuts one global order into epochs, steps, ranks and
workers."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Iterator, Mapping

import numpy as np

from .dataset import FieldView
from .mixture import Mixture, MixtureField, mixture_of
from .._zring import Sampler, _Dataset, _decode_images, _EpochPlan
from .._zring import _Store as Store
from .._zring import open as _open
from ..decode import Image

if TYPE_CHECKING:
    from ..types import ModeName


class DatasetFieldView(FieldView):
    """Field ``name`` of a dataset where the adapters take a store: ``view[idx]``
    gathers it through the dataset (``ds.gather(idx, fields=name)[name]``), and
    :class:`zring.Loader` reads it as the one-view list ``[ds.field(name)]`` (the
    native field it gathers without Python), which is what iterating it yields.
    Pickles by the dataset's path and version."""

    def __iter__(self) -> Iterator[Any]:
        yield self.dataset.field(self.name)


def open_fields(fields: Mapping[str, Any] | _Dataset) -> dict[str, Any]:
    """``{name: store, DatasetFieldView or MixtureField}`` from ``{name: store,
    path, dataset or mixture}`` (a dataset or mixture stands for its field of that
    name) or from a :class:`zring.Dataset` or :class:`zring.Mixture` (every
    field); every field the same length."""
    if isinstance(fields, Mixture):
        return {name: MixtureField(fields, name) for name in fields.fields}
    if isinstance(fields, _Dataset):
        fields = {name: fields for name in fields.fields}
    if not isinstance(fields, Mapping) or not fields:
        raise TypeError("fields must be a zring.Dataset or a non-empty dict {name: store, path or dataset}")
    out: dict[str, Any] = {}
    for name, s in fields.items():
        if not isinstance(name, str):
            raise TypeError(f"field names must be strings, got {name!r}")
        if isinstance(s, (Store, MixtureField)):
            out[name] = s
        elif isinstance(s, Mixture):
            out[name] = MixtureField(s, name)
        elif isinstance(s, _Dataset):
            out[name] = DatasetFieldView(s, name)
        else:
            out[name] = _open(os.fspath(s))
    lengths = {name: len(s) for name, s in out.items()}
    if len(set(lengths.values())) != 1:
        raise ValueError(f"the fields hold different numbers of records: {lengths}")
    return out


def check_decode(fields: Mapping[str, Any], decode: Mapping[str, Image] | None) -> dict[str, Image]:
    """``decode`` checked against the fields: ``{name: zring.decode.Image}``."""
    if decode is None:
        return {}
    out = dict(decode)
    for name, image in out.items():
        if name not in fields:
            raise KeyError(f"decode names field {name!r}, which is not one of {list(fields)}")
        if not isinstance(image, Image):
            raise TypeError(f"decode[{name!r}] must be a zring.decode.Image, got {type(image).__name__}")
    return out


def read_fields(fields: Mapping[str, Any], ids: Any, decode: Mapping[str, Image],
                epoch: int) -> tuple[dict[str, Any], int]:
    """``({name: store[ids]}, records)``, with the fields of ``decode`` decoded to
    pixels for ``epoch`` first (in native code, on the engine's threads) and the
    others read for the records the decode kept (a bad image skipped or substituted
    is skipped or substituted in every field). Fields of a mixture read its
    records ``ids`` of ``epoch``."""
    mixture = mixture_of(fields)
    if mixture is not None:
        # The positions of `epoch` as indices of the joined sources, read there.
        ids = mixture.indices(ids, epoch)
        fields = {name: DatasetFieldView(mixture.joined, name) for name in fields}
    if not decode:
        return {name: store[ids] for name, store in fields.items()}, len(ids)
    names = list(decode)
    sources = [_native(fields[name]) for name in names]
    specs = [decode[name]._spec() for name in names]
    arrays, kept, _, _ = _decode_images(sources, names, ids, specs, int(epoch))
    kept_ids = np.asarray(kept, dtype=np.int64)
    pixels = dict(zip(names, arrays))
    out = {name: pixels[name] if name in pixels else store[kept_ids] for name, store in fields.items()}
    return out, len(kept)


def _native(source: Any) -> Any:
    """What the native decode reads: a store, or a dataset view's native field."""
    if isinstance(source, DatasetFieldView):
        return source.dataset.field(source.name)
    return source


def as_int_indices(indices: Any) -> np.ndarray[Any, Any]:
    """A 1-D integer array from a list / array of record ids (as DataLoader passes)."""
    ids = np.asarray(indices)
    if ids.dtype.kind not in "iu":
        if ids.size:
            raise TypeError(f"record indices must be integers, got dtype {ids.dtype}")
        ids = ids.astype(np.int64)
    return ids.reshape(-1)


def rank_and_world(env: Mapping[str, str]) -> tuple[int, int]:
    """``RANK`` and ``WORLD_SIZE`` from the environment (as torchrun sets them): the
    global rank, unique across nodes. ``LOCAL_RANK`` (the rank within a node) is not
    read: it picks a process's device, which is the caller's business, and sharding by
    it would give the same records to rank ``r`` of every node."""
    world = int(env.get("WORLD_SIZE", "1"))
    rank = int(env.get("RANK", "0"))
    return rank, world


class Plan:
    """One global order of records cut into steps, ranks and workers.

    Epoch ``e`` is the positions ``[e*N, (e+1)*N)`` of zring's counter-based
    sequence (``mode``: ``"cyclic"`` is a fresh permutation per epoch,
    ``"sequential"`` is ``0..N-1`` every epoch, ``"iid"`` draws with replacement).
    Global step ``j`` of an epoch holds its next ``batch_size * world_size`` positions and
    rank ``r`` takes slice ``r`` of it. An epoch's last, partial global step is
    dropped (``drop_last``) or split evenly across the ranks. This rank's step ``k``
    is epoch ``k // steps_per_epoch``, step ``k % steps_per_epoch``: a pure function
    of the configuration, so any step can be recomputed anywhere.

    ``rank`` and ``world_size`` are the global rank and world size (``RANK`` /
    ``WORLD_SIZE`` under torchrun, ``jax.process_index()`` / ``process_count()``),
    never ``LOCAL_RANK``, which only tells a process which device of its node to use.
    """

    def __init__(self, n: int, batch_size: int, *,
                 mode: Sampler.Mode | ModeName = "cyclic", seed: int = 0,
                 epochs: int | None = None, drop_last: bool = False,
                 rank: int = 0, world_size: int = 1) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if world_size < 1 or not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is not in a world of {world_size}")
        if epochs is not None and epochs < 0:
            raise ValueError(f"epochs must be >= 0 or None, got {epochs}")
        self.n = int(n)
        self.batch_size = int(batch_size)
        self.rank, self.world_size = int(rank), int(world_size)
        self.global_batch = self.batch_size * self.world_size
        self.epochs = epochs
        self.drop_last = bool(drop_last)
        self.sampler = Sampler(self.n, 1, mode, seed=seed)
        full, rest = divmod(self.n, self.global_batch)
        self.steps_per_epoch = full + (1 if rest and not self.drop_last else 0)
        if self.steps_per_epoch == 0:
            raise ValueError(
                f"drop_last with {self.n} records and a global batch of "
                f"{self.global_batch} leaves no step"
            )
        self._plan = _EpochPlan(self.n, self.batch_size, self.sampler.mode, self.sampler.seed,
                                epochs, self.drop_last, self.rank, self.world_size)

    @property
    def total_steps(self) -> int | None:
        return None if self.epochs is None else self.epochs * self.steps_per_epoch

    def fingerprint(self) -> tuple[int, int, int, int, int | None, bool]:
        """What defines the order (a resumed run must have the same)."""
        s = self.sampler
        return (self.n, self.global_batch, int(s.mode), s.seed, self.epochs, self.drop_last)

    def indices(self, step: int) -> np.ndarray[Any, Any]:
        """This rank's record ids at ``step`` (uint64)."""
        total = self.total_steps
        if step < 0 or (total is not None and step >= total):
            raise IndexError(f"step {step} is outside the plan's {total} steps")
        return self._plan.indices(step)

    def worker_steps(self, start: int, worker: int, workers: int) -> Iterator[int]:
        """Worker ``worker`` of ``workers`` makes steps ``start + worker``, then every
        ``workers``-th: delivered round-robin, they are ``start, start + 1, ...``."""
        total = self.total_steps
        k = start + worker
        while total is None or k < total:
            yield k
            k += workers

    def schedule(self, start: int, worker: int, workers: int) -> _EpochPlan:
        """The steps of :meth:`worker_steps` as a schedule for :class:`zring.Loader`:
        its step ``s`` is this plan's step ``start + worker + s * workers`` (and it
        ends with the plan when ``epochs`` is set)."""
        if workers < 1 or not 0 <= worker < workers or start < 0:
            raise ValueError(f"worker {worker} of {workers} from step {start} is not a worker share")
        return self._plan.strided(start + worker, workers)

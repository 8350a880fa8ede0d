"""PyTorch datasets over zring stores (needs ``torch``; ``import zring`` does not).

- :class:`Dataset`: map-style, over one or several aligned stores (fields by name).
  ``__getitems__`` reads a whole batch with one zring gather per field, so a
  ``DataLoader(ds, batch_size=256)`` makes one engine call per field per batch
  instead of 256 ``__getitem__`` calls, and its default collate hands over that
  batch as it was gathered (so does ``collate_fn=zring.torch.collate``).
- :class:`IterableDataset`: batches in one global order (epochs of a shuffled,
  sequential or IID sequence), split into disjoint deterministic parts across
  distributed ranks and DataLoader workers; finite (``epochs=``) or endless, and
  resumable mid-epoch (``state_dict`` / ``load_state_dict``). Its batches are
  gathered by zring's Rust :class:`zring.Loader` (one per iteration, per worker).
- :class:`PackedIterableDataset`: :func:`zring.pack`'s packed batches (tokens,
  ``cu_seqlens`` for variable-length attention) as tensors, split across ranks by
  rows of one global batch, resumable on another number of ranks.
- :class:`DataLoader`: ``torch.utils.data.DataLoader`` that counts the batches it
  delivered, so ``state_dict()`` resumes an :class:`IterableDataset` exactly, with
  the same or another number of workers.
- :func:`to_device` and :class:`DevicePrefetcher`: host-to-device copies. On CUDA
  they are meant to be asynchronous, from pinned memory, overlapping the next
  batch's copy with the current step; that branch runs only where CUDA is present
  and is not exercised by the CI here (CPU only), where the CPU path is tested.

Tensors share the memory of zring's arrays (``torch.from_numpy``, or DLPack for
dtypes it does not take), without a copy. Ragged fields come
out as :class:`Ragged` (values + offsets + shapes), or on request as :class:`Padded`
(``ragged="padded"``) or nested tensors (``ragged="nested"``: jagged layout over the
gathered values for 1-D records, no copy; a strided copy for records of more
dimensions).

Stores pickle by path, so datasets cross to ``spawn`` and ``forkserver`` workers,
where each store reopens on first use (and checks it is still the same file).
"""

from __future__ import annotations

import operator
import os
from collections.abc import Mapping as _MappingABC
from typing import (
    TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping, NamedTuple, TypeVar,
)

try:
    import torch
    import torch.utils.data as _tud
except ImportError as _missing:  # pragma: no cover - exercised only without torch
    raise ImportError("zring.torch needs PyTorch: pip install torch") from _missing

import numpy as np

from ._internal.frameworks import (
    Plan,
    as_int_indices,
    check_decode,
    open_fields,
    rank_and_world,
    read_fields,
)
from ._internal.loader import Loader
from ._internal.torch_pack import PackedIterableDataset
from ._internal.mixture import mixture_of
from ._internal.ragged import RaggedBatch
from ._zring import _share_threads
from .decode import Image

if TYPE_CHECKING:
    from ._internal.dataset import Dataset as ZringDataset
    from .types import ModeName, RaggedMode

__all__ = [
    "Dataset",
    "IterableDataset",
    "PackedIterableDataset",
    "DataLoader",
    "BatchSampler",
    "Ragged",
    "Padded",
    "collate",
    "to_tensor",
    "to_device",
    "DevicePrefetcher",
    "distributed_rank_and_world",
]

_T = TypeVar("_T")

RAGGED_MODES = ("offsets", "padded", "nested")


class Ragged(NamedTuple):
    """A ragged field of a batch: ``values`` (1-D, every record's elements back to
    back), ``offsets`` (int64, ``n + 1``; record ``i`` is
    ``values[offsets[i]:offsets[i + 1]]``) and ``shapes`` (int64, ``(n, ndim)``)."""

    values: torch.Tensor
    offsets: torch.Tensor
    shapes: torch.Tensor


class Padded(NamedTuple):
    """A ragged field padded to the largest record: ``values`` of shape
    ``(n, *max_shape)`` and ``lengths`` (int64, ``(n,)`` for 1-D records, else the
    ``(n, ndim)`` shapes)."""

    values: torch.Tensor
    lengths: torch.Tensor


# NumPy dtypes that NumPy's DLPack export refuses and torch knows: viewed as
# same-width integers, handed over, and viewed back on the torch side.
_VIEW_AS = {
    "bfloat16": (np.uint16, "bfloat16"),
    "float8_e4m3fn": (np.uint8, "float8_e4m3fn"),
    "float8_e5m2": (np.uint8, "float8_e5m2"),
}


def _first(batch: Any) -> np.ndarray[Any, Any]:
    """Record 0 of a one-record batch (an array or a ``RaggedBatch``)."""
    return np.asarray(batch[0])


def to_tensor(a: np.ndarray[Any, Any]) -> torch.Tensor:
    """A tensor over the same memory as ``a`` (no copy)."""
    if a.dtype.kind in "biufc":
        try:
            # Zero-copy like DLPack, and several microseconds cheaper per tensor.
            return torch.from_numpy(a)
        except TypeError:
            return torch.from_dlpack(a)  # dtypes from_numpy does not take
    view = _VIEW_AS.get(a.dtype.name)
    if view is not None:
        return torch.from_dlpack(a.view(view[0])).view(getattr(torch, view[1]))
    return torch.from_dlpack(a)


def _pad(batch: RaggedBatch, pad_value: Any) -> Padded:
    n, ndim = batch.shapes.shape
    shapes = batch.shapes
    max_shape = tuple(int(d) for d in shapes.max(axis=0)) if n else (0,) * ndim
    out = np.full((n, *max_shape), pad_value, dtype=batch.dtype)
    if ndim == 1:
        lengths = np.diff(batch.cu_seqlens)
        rows = np.repeat(np.arange(n), lengths)
        cols = np.arange(len(batch.values)) - np.repeat(batch.cu_seqlens[:-1], lengths)
        out[rows, cols] = batch.values
        return Padded(to_tensor(out), torch.from_numpy(lengths.astype(np.int64)))
    for i, rec in enumerate(batch.to_arrays()):
        region: tuple[int | slice, ...] = (i, *(slice(0, d) for d in rec.shape))
        out[region] = rec
    return Padded(to_tensor(out), torch.from_numpy(np.ascontiguousarray(shapes)))


def _convert(value: Any, ragged: str, pad_value: Any) -> Any:
    if isinstance(value, RaggedBatch):
        if ragged == "offsets":
            return Ragged(
                to_tensor(value.values),
                torch.from_numpy(value.cu_seqlens),
                torch.from_numpy(value.shapes),
            )
        if ragged == "padded":
            return _pad(value, pad_value)
        if value.ndim == 1:
            # Jagged layout over the gathered values and offsets: no copy.
            return torch.nested.nested_tensor_from_jagged(
                to_tensor(value.values), offsets=torch.from_numpy(value.cu_seqlens)
            )
        return torch.nested.nested_tensor([to_tensor(r) for r in value.to_arrays()])
    return to_tensor(np.asarray(value))


def _check_ragged_mode(ragged: str) -> str:
    if ragged not in RAGGED_MODES:
        raise ValueError(f"ragged must be one of {RAGGED_MODES}, got {ragged!r}")
    return ragged


def _finish(gathered: Iterable[tuple[str, Any]], ragged: str, pad_value: Any,
            transform: Callable[[dict[str, Any]], Any] | None) -> Any:
    """A batch from its gathered fields: each converted to tensors (ragged ones as
    ``ragged`` asks), then ``transform`` applied to the dict."""
    out = {name: _convert(value, ragged, pad_value) for name, value in gathered}
    return transform(out) if transform is not None else out


class _Gathered(NamedTuple):
    """A batch's fields as gathered (``{name: ndarray | RaggedBatch}``) and how its
    dataset converts a batch (shared by the batch's records, which refer to this and
    not to the list that holds them: no reference cycle keeps the memory alive)."""

    fields: dict[str, Any]
    ragged: str
    pad_value: Any
    transform: Callable[[dict[str, Any]], Any] | None


class _Record(_MappingABC[str, Any]):
    """One record of a batch that :meth:`Dataset.__getitems__` read: a read-only
    mapping ``{name: tensor}`` of its fields as ``ds[i]`` gives them before any
    ``transform`` (views into the gathered batch, made when a field is asked for)."""

    __slots__ = ("_src", "_i")

    def __init__(self, src: _Gathered, i: int) -> None:
        self._src = src
        self._i = i

    def _value(self, name: str) -> Any:
        """The record's field ``name`` as NumPy (a view into the gathered batch)."""
        col = self._src.fields[name]
        return col[self._i] if isinstance(col, RaggedBatch) else col[self._i, ...]

    def __getitem__(self, name: str) -> Any:
        return to_tensor(np.asarray(self._value(name)))

    def __iter__(self) -> Iterator[str]:
        return iter(self._src.fields)

    def __len__(self) -> int:
        return len(self._src.fields)

    def __repr__(self) -> str:
        return f"<zring.torch record {self._i} of a gathered batch: {list(self)}>"


class _Batch(list):  # type: ignore[type-arg]
    """What :meth:`Dataset.__getitems__` returns: a list of the batch's records (one
    :class:`_Record` each, as ``DataLoader``'s collate functions expect of a batch of
    samples) that carries the batch gathered once and converted (``.batch``).
    :func:`collate`, and ``default_collate`` (where this module registers records),
    hand ``.batch`` over instead of stacking the records again."""

    def __init__(self, src: _Gathered, n: int, batch: Any) -> None:
        self.batch = batch
        self._records = tuple([_Record(src, k) for k in range(n)])
        super().__init__(self._records)

    def _intact(self) -> bool:
        """Still exactly the records it was made with, in order."""
        return len(self) == len(self._records) and all(map(operator.is_, self, self._records))


def _collate_records(batch: Any, *, collate_fn_map: Any = None) -> Any:
    """A batch of :class:`_Record`: the gathered batch when ``batch`` is a whole
    :class:`_Batch`, as read; else (a part of one, records reordered or from several
    batches) the records' fields put together again and converted as their dataset
    converts a batch (the first record's settings)."""
    if isinstance(batch, _Batch) and batch._intact():
        return batch.batch
    records = list(batch)
    first = records[0]._src
    gathered: list[tuple[str, Any]] = []
    for name, col in first.fields.items():
        values = [r._value(name) for r in records]
        if isinstance(col, RaggedBatch):
            gathered.append((name, RaggedBatch.from_records(values, dtype=col.dtype)))
        else:
            gathered.append((name, np.stack(values)))
    return _finish(gathered, first.ragged, first.pad_value, first.transform)


try:
    # torch's documented way to teach default_collate a type (its docstring,
    # "Option 2"): a list of records becomes the batch it was read as.
    from torch.utils.data._utils.collate import default_collate_fn_map as _default_map
except ImportError:  # pragma: no cover - torch before 1.13: records are stacked as dicts
    pass
else:
    _default_map[_Record] = _collate_records


def collate(batch: _T) -> _T:
    """The ``collate_fn`` for :class:`Dataset`: its ``__getitems__`` already
    gathered and converted the whole batch, which this returns as it is (a list of
    its records, cut or reordered, is put together again). Anything else is
    returned unchanged. ``DataLoader``'s default collate gives the same batches."""
    if isinstance(batch, list) and batch and isinstance(batch[0], _Record):
        out: _T = _collate_records(batch)
        return out
    return batch


def distributed_rank_and_world() -> tuple[int, int]:
    """This process's rank and the world size: from ``torch.distributed`` when it is
    initialised, else the ``RANK`` / ``WORLD_SIZE`` variables (as ``torchrun`` sets
    them), else ``(0, 1)``.

    This is the global rank, which the data is sharded by. ``LOCAL_RANK`` (the rank
    within one node) is not read: it only says which of the node's devices the
    process uses (``torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))``), and zring
    leaves choosing the device to the training script."""
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return rank_and_world(os.environ)


# Whether this process took its share of the cores (see _take_worker_share).
_share_taken = False


def _take_worker_share() -> None:
    """In a DataLoader worker process, before its first read: zring's worker pool
    takes this worker's share of the cores (cores // num_workers, at least one
    thread), so that W workers run about as many gather threads as there are cores
    rather than W pools of one thread per core each; PyTorch caps its own intra-op
    threads in workers for the same reason. ``ZRING_THREADS`` or a pool the worker
    already built wins. In the main process, nothing changes."""
    global _share_taken
    if _share_taken:
        return
    info = _tud.get_worker_info()
    if info is None:
        return
    _share_taken = True
    _share_threads(info.num_workers)


# torch is not followed by mypy (pyproject.toml), so its base classes are Any.
class Dataset(_tud.Dataset):  # type: ignore[misc]
    """Map-style dataset over aligned stores: record ``i`` of every field belongs
    together.

    ``Dataset(fields, *, ragged="offsets", pad_value=0, transform=None, decode=None)``

    - ``fields``: ``{name: store, path or dataset}`` (paths are opened with
      ``zring.open``; a :class:`zring.Dataset` stands for its field of that name), or
      a :class:`zring.Dataset` (all its fields); every field has the same number of
      records.
    - ``ds[i]``: ``{name: tensor}`` for one record (a ragged record is a tensor of
      its own shape).
    - ``ds.__getitems__(indices)`` (what ``DataLoader`` calls with a batch of
      indices) reads the batch with one gather per field: a list of the records
      (read-only ``{name: tensor}`` mappings, views into the gathered batch) that
      ``DataLoader``'s default collate and ``collate_fn=zring.torch.collate`` both
      turn into ``{name: tensor | Ragged | Padded | nested tensor}`` (the batch as
      gathered and converted, not stacked again).
    - ``transform(batch_dict)``: applied to every batch (and single record) dict.
    - ``decode={"image": zring.decode.Image(...)}``: those fields' encoded images
      are decoded in native code into ``uint8`` pixel tensors; random crops use the
      epoch set by ``set_epoch(epoch)`` (0 until then), as ``DistributedSampler``'s.
      A bad image skipped (``on_error="skip"``) makes its batch shorter.
    """

    def __init__(self, fields: Mapping[str, Any] | ZringDataset, *, ragged: RaggedMode = "offsets", pad_value: Any = 0,
                 transform: Callable[[dict[str, Any]], Any] | None = None,
                 decode: Mapping[str, Image] | None = None) -> None:
        self.fields = open_fields(fields)
        self.ragged = _check_ragged_mode(ragged)
        self.pad_value = pad_value
        self.transform = transform
        self.decode = check_decode(self.fields, decode)
        self.epoch = 0
        self._len = len(next(iter(self.fields.values())))

    def set_epoch(self, epoch: int) -> None:
        """The epoch of the random crops of ``decode`` and of a mixture's records
        (call it before each epoch, as ``DistributedSampler.set_epoch``)."""
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, i: Any) -> Any:
        _take_worker_share()
        # Every read goes through read_fields (images decoded, a mixture's epoch
        # read), one record as a gather of one id: its record 0 is what store[i]
        # is. int() keeps the keys store[int(i)] took, as zring.jax's does.
        one, n = read_fields(self.fields, as_int_indices([int(i)]), self.decode, self.epoch)
        if n == 0:
            raise IndexError(f"record {i} was skipped: its image cannot be decoded")
        out = {name: to_tensor(_first(v)) for name, v in one.items()}
        return self.transform(out) if self.transform is not None else out

    def __getitems__(self, indices: Any) -> Any:
        _take_worker_share()
        ids = as_int_indices(indices)
        gathered, n = read_fields(self.fields, ids, self.decode, self.epoch)
        batch = _finish(gathered.items(), self.ragged, self.pad_value, self.transform)
        src = _Gathered(gathered, self.ragged, self.pad_value, self.transform)
        return _Batch(src, n, batch)

    def _batch(self, indices: Any) -> Any:
        """The batch ``collate(self.__getitems__(indices))`` gives, without making
        the per-record views (about 0.2 us a record) nobody will look at."""
        ids = as_int_indices(indices)
        gathered, _ = read_fields(self.fields, ids, self.decode, self.epoch)
        return _finish(gathered.items(), self.ragged, self.pad_value, self.transform)

    def loader(self, batch_size: int, **kwargs: Any) -> "_tud.DataLoader":
        """A ``torch.utils.data.DataLoader`` over this dataset with ``batch_size``
        and ``collate_fn=collate`` (other keyword arguments are passed on)."""
        kwargs.setdefault("collate_fn", collate)
        return _tud.DataLoader(self, batch_size=batch_size, **kwargs)


class IterableDataset(_tud.IterableDataset):  # type: ignore[misc]
    """Batches of aligned stores in one global order, split across ranks and
    DataLoader workers.

    ``IterableDataset(fields, batch_size, *, shuffle=True, mode=None, seed=0,
    epochs=None, drop_last=False, rank=None, world_size=None, ragged="offsets",
    pad_value=0, transform=None, prefetch=2, decode=None)``

    - ``batch_size``: records per batch on each rank; the global batch is
      ``batch_size * world_size``.
    - The global order: epoch ``e`` is the positions ``[e*N, (e+1)*N)`` of zring's
      counter-based sequence (``shuffle=True``: ``"cyclic"``, a fresh permutation
      per epoch; ``False``: ``"sequential"``; or ``mode="iid"``, with replacement).
      Global step ``j`` of an epoch holds its next ``batch_size * world_size``
      positions; rank ``r`` takes slice ``r``. The last, partial global step of an
      epoch is dropped with ``drop_last=True``, else split evenly across ranks (every
      rank still has the same number of steps; a rank's last batch may be smaller,
      and is empty only when the remainder is smaller than the world).
    - ``epochs``: finite (iteration ends after that many epochs; with
      ``shuffle=False, epochs=1`` every record is read exactly once across all
      ranks: an evaluation pass), or ``None`` (endless).
    - ``rank`` / ``world_size``: default :func:`distributed_rank_and_world`.
    - DataLoader worker ``w`` of ``W`` makes this rank's steps ``w, w + W, ...``,
      which ``DataLoader`` (in order) delivers as ``0, 1, 2, ...``: the same batches
      whatever the number of workers. Use ``batch_size=None`` in the DataLoader (or
      :class:`DataLoader`, which sets it).
    - ``state_dict()`` / ``load_state_dict()``: the next step to deliver. Iterated
      directly (or with ``num_workers=0``) the dataset counts itself; with worker
      processes use :class:`zring.torch.DataLoader`, whose ``state_dict`` counts the
      batches it delivered.
    - ``prefetch``: batches gathered ahead by a :class:`zring.Loader` worker thread
      in each process (Rust, without the GIL, so reading overlaps the training
      step); ``0`` gathers each batch when asked, in the consumer's thread.
    - Each batch is ``{name: tensor | Ragged | Padded | nested tensor}``.
    - ``decode={"image": zring.decode.Image(...)}``: those fields' encoded images
      are decoded by the loader, in native code, into ``uint8`` pixel tensors, with
      the epoch of each step: random crops change per epoch, and are the same for
      any number of DataLoader workers and after ``load_state_dict``.

    Iterating builds a :class:`zring.Loader` over the fields (lazily, in the process
    that iterates: the dataset pickles without it) whose schedule is this rank's
    and this worker's share of the plan; a finite plan (``epochs``) makes it end
    after its last step. The loader gathers; the conversion to tensors and
    ``transform`` run in the iterating thread as each batch is taken, so the
    transform sees the batches in step order and an exception it raises surfaces
    at its own step, after every earlier batch.
    """

    def __init__(
        self,
        fields: Mapping[str, Any] | ZringDataset,
        batch_size: int,
        *,
        shuffle: bool = True,
        mode: ModeName | None = None,
        seed: int = 0,
        epochs: int | None = None,
        drop_last: bool = False,
        rank: int | None = None,
        world_size: int | None = None,
        ragged: RaggedMode = "offsets",
        pad_value: Any = 0,
        transform: Callable[[dict[str, Any]], Any] | None = None,
        prefetch: int = 2,
        decode: Mapping[str, Image] | None = None,
    ) -> None:
        self.fields = open_fields(fields)
        self.decode = check_decode(self.fields, decode)
        n = len(next(iter(self.fields.values())))
        if prefetch < 0:
            raise ValueError(f"prefetch must be >= 0, got {prefetch}")
        self.prefetch = int(prefetch)
        if rank is None or world_size is None:
            r, w = distributed_rank_and_world()
            rank = r if rank is None else rank
            world_size = w if world_size is None else world_size
        if mode is None:
            mode = "cyclic" if shuffle else "sequential"
        self.plan = Plan(n, batch_size, mode=mode, seed=seed, epochs=epochs,
                         drop_last=drop_last, rank=rank, world_size=world_size)
        self.ragged = _check_ragged_mode(ragged)
        self.pad_value = pad_value
        self.transform = transform
        self._step = 0

    @property
    def rank(self) -> int:
        """This process's rank in the world the batches are split across."""
        return self.plan.rank

    @property
    def world_size(self) -> int:
        """The number of ranks the global batches are split across."""
        return self.plan.world_size

    @property
    def steps_per_epoch(self) -> int:
        """Batches this rank delivers per epoch."""
        return self.plan.steps_per_epoch

    def __len__(self) -> int:
        """Batches this rank delivers in all (finite mode only)."""
        total = self.plan.total_steps
        if total is None:
            raise TypeError("an endless IterableDataset has no length (pass epochs=)")
        return total

    def batch(self, step: int) -> Any:
        """Batch ``step`` of this rank (a pure function of the configuration)."""
        ids = self.plan.indices(step)
        epoch = step // max(self.plan.steps_per_epoch, 1)
        gathered, _ = read_fields(self.fields, ids, self.decode, epoch)
        return _finish(gathered.items(), self.ragged, self.pad_value, self.transform)

    def __iter__(self) -> Iterator[Any]:
        _take_worker_share()
        info = _tud.get_worker_info()
        wid, nw = (info.id, info.num_workers) if info is not None else (0, 1)
        start = self._step
        schedule = self.plan.schedule(start, wid, nw)
        # prefetch=0: no thread, each batch gathered when asked; else one Rust worker
        # keeps up to `prefetch` batches ready (the consumer helps when it waits).
        # Exactly that (lookahead_bytes=None): a DataLoader runs one of these per
        # worker process, and `prefetch` is the memory the user asked for.
        workers, ready = (1, self.prefetch) if self.prefetch else (0, 1)
        loader = Loader(self.fields, schedule, workers=workers, prefetch=ready, lookahead_bytes=None,
                        decode=self.decode or None)
        try:
            for s, shards in enumerate(loader):
                batch = _finish(shards[0].items(), self.ragged, self.pad_value, self.transform)
                # This was step `start + wid + s * nw`. Counted before the yield, so
                # that state_dict() taken after this batch resumes with the next one:
                # the start from which this worker's next step is `start + wid` (in
                # the main process simply `step + 1`; in a worker, what torchdata's
                # StatefulDataLoader saves and gives back).
                self._step = start + (s + 1) * nw
                yield batch
        finally:
            loader.close()

    def state_dict(self) -> dict[str, Any]:
        """Where to resume: the next step, and what defines the order (checked)."""
        state: dict[str, Any] = {"step": self._step, "order": self.plan.fingerprint()}
        mixture = mixture_of(self.fields)
        if mixture is not None:
            state["mixture"] = mixture.fingerprint()
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resumes at ``state["step"]``; the order must be the one that was saved."""
        order = state.get("order")
        if order is not None and tuple(order) != self.plan.fingerprint():
            raise ValueError(
                f"this state is from another order (records, global batch, mode, seed, "
                f"epochs, drop_last): saved {tuple(order)}, now {self.plan.fingerprint()}"
            )
        mixture = mixture_of(self.fields)
        saved = state.get("mixture")
        if mixture is not None and saved is not None:
            mixture.check_resume(tuple(saved))
        step = int(state["step"])
        if step < 0:
            raise ValueError(f"step must be >= 0, got {step}")
        self._step = step


class BatchSampler(_tud.Sampler):  # type: ignore[misc]
    """Batches of record ids for a map-style :class:`Dataset`, one epoch per
    iteration, in zring's global order (what ``DistributedSampler`` plus
    ``BatchSampler`` do, without materialising a permutation or a list of ints).

    ``BatchSampler(length, batch_size, *, shuffle=True, seed=0, drop_last=False,
    rank=None, world_size=None)``: epoch ``e`` (``set_epoch(e)``) is a fresh
    permutation (or in order with ``shuffle=False``); each global step holds
    ``batch_size * world_size`` ids and this rank takes its slice (rank and world
    default to :func:`distributed_rank_and_world`). Each batch is a uint64 NumPy
    array, which ``Dataset.__getitems__`` reads as is:
    ``DataLoader(ds, batch_sampler=BatchSampler(len(ds), 256), collate_fn=collate)``.

    ``state_dict()`` / ``load_state_dict()`` (torchdata's ``Stateful`` protocol): the
    epoch and how many of its batches this sampler has yielded, so torchdata's
    ``StatefulDataLoader(ds, batch_sampler=sampler, collate_fn=collate)`` resumes a
    map-style dataset mid-epoch (it saves the sampler's state as of the last batch it
    delivered, whatever its workers had prefetched). After ``load_state_dict`` the
    next iteration yields that epoch from that step on; later ones start at step 0
    of the epoch ``set_epoch`` names.
    """

    def __init__(self, length: int, batch_size: int, *, shuffle: bool = True, seed: int = 0,
                 drop_last: bool = False, rank: int | None = None,
                 world_size: int | None = None) -> None:
        if rank is None or world_size is None:
            r, w = distributed_rank_and_world()
            rank = r if rank is None else rank
            world_size = w if world_size is None else world_size
        self.plan = Plan(length, batch_size, mode="cyclic" if shuffle else "sequential", seed=seed,
                         epochs=None, drop_last=drop_last, rank=rank, world_size=world_size)
        self.epoch = 0
        # Batches of `epoch` yielded by the current (or last) iteration; and the step
        # the next iteration starts at, when a state was loaded.
        self._yielded = 0
        self._resume: int | None = None

    def set_epoch(self, epoch: int) -> None:
        """The epoch the next iteration yields (each epoch is a fresh order)."""
        self.epoch = int(epoch)
        self._yielded = 0

    def __len__(self) -> int:
        return self.plan.steps_per_epoch

    def __iter__(self) -> Iterator[np.ndarray[Any, Any]]:
        # The position is taken when the iteration is made, not at its first batch,
        # so that a state saved before that batch is this iteration's start.
        start = self._resume if self._resume is not None else 0
        self._resume = None
        self._yielded = start
        return self._batches(self.epoch, start)

    def _batches(self, epoch: int, start: int) -> Iterator[np.ndarray[Any, Any]]:
        base = epoch * self.plan.steps_per_epoch
        for j in range(start, self.plan.steps_per_epoch):
            # Counted before the yield: a state taken after this batch resumes after it.
            self._yielded = j + 1
            yield self.plan.indices(base + j)

    def state_dict(self) -> dict[str, Any]:
        """The epoch, the batches of it yielded so far, and what defines the order."""
        step = self._resume if self._resume is not None else self._yielded
        return {"epoch": self.epoch, "step": step, "order": self.plan.fingerprint()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """The next iteration yields epoch ``state["epoch"]`` from batch
        ``state["step"]``; the order must be the one that was saved."""
        order = state.get("order")
        if order is not None and tuple(order) != self.plan.fingerprint():
            raise ValueError(
                f"this state is from another order (records, global batch, mode, seed, "
                f"epochs, drop_last): saved {tuple(order)}, now {self.plan.fingerprint()}"
            )
        epoch, step = int(state["epoch"]), int(state["step"])
        if epoch < 0 or not 0 <= step <= self.plan.steps_per_epoch:
            raise ValueError(
                f"epoch {epoch}, step {step} is not a position in epochs of "
                f"{self.plan.steps_per_epoch} steps"
            )
        self.epoch = epoch
        self._resume = step


class DataLoader(_tud.DataLoader):  # type: ignore[misc]
    """``torch.utils.data.DataLoader`` for zring datasets, resumable exactly.

    For an :class:`IterableDataset` it sets ``batch_size=None`` (the dataset makes
    the batches) and counts the batches it delivered, so ``state_dict()`` taken
    between batches and ``load_state_dict()`` on a new DataLoader (any number of
    workers) continue with exactly the batches an uninterrupted run would have
    delivered. For a map-style :class:`Dataset` it sets ``collate_fn=collate``, and
    without worker processes (and without ``pin_memory``) it calls
    ``__getitems__`` once per batch of its batch sampler directly.
    """

    def __init__(self, dataset: Any, *args: Any, **kwargs: Any) -> None:
        if isinstance(dataset, IterableDataset):
            kwargs.setdefault("batch_size", None)
        kwargs.setdefault("collate_fn", collate)
        super().__init__(dataset, *args, **kwargs)

    def __iter__(self) -> Iterator[Any]:
        ds = self.dataset
        if not isinstance(ds, IterableDataset):
            if self.num_workers == 0 and not self.pin_memory and isinstance(ds, Dataset) and self.batch_sampler is not None:
                # In this process, each batch is one __getitems__ call: skip torch's
                # per-batch iterator bookkeeping, which costs as much as a small
                # ragged gather (measured in docs/benchmarks.md).
                collate_fn = self.collate_fn
                if collate_fn is collate:
                    for ids in self.batch_sampler:
                        yield ds._batch(ids)
                    return
                for ids in self.batch_sampler:
                    yield collate_fn(ds.__getitems__(ids))
                return
            yield from super().__iter__()
            return
        # The workers receive the dataset (and its starting step) when the
        # iterator is created; from then on this process counts deliveries.
        start = ds._step
        for k, batch in enumerate(super().__iter__()):
            ds._step = start + k + 1
            yield batch

    def state_dict(self) -> dict[str, Any]:
        """The :class:`IterableDataset`'s state after the batches this loader
        delivered (``TypeError`` for a map-style dataset)."""
        if not isinstance(self.dataset, IterableDataset):
            raise TypeError("state_dict() is for zring.torch.IterableDataset loaders")
        return self.dataset.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resumes the :class:`IterableDataset` at ``state`` (from :meth:`state_dict`;
        ``TypeError`` for a map-style dataset)."""
        if not isinstance(self.dataset, IterableDataset):
            raise TypeError("load_state_dict() is for zring.torch.IterableDataset loaders")
        self.dataset.load_state_dict(state)


def to_device(batch: Any, device: Any, non_blocking: bool = True) -> Any:
    """``batch`` (tensors in dicts, lists, tuples and named tuples) moved to
    ``device``. From pinned memory to CUDA the copies are asynchronous."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=non_blocking)
    if isinstance(batch, dict):
        return {k: to_device(v, device, non_blocking) for k, v in batch.items()}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(to_device(v, device, non_blocking) for v in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(to_device(v, device, non_blocking) for v in batch)
    return batch


class DevicePrefetcher:
    """Iterates ``loader`` with every batch already on ``device``.

    On CUDA, batch ``k + 1`` is pinned (unless already) and copied on a side stream
    while the caller works on batch ``k``; the caller's stream waits for the copy
    before the batch is handed over. Elsewhere (CPU) it is ``to_device`` per batch.
    The CUDA branch runs only with a CUDA device: the CI here has none, so only the
    CPU branch is tested there (the CUDA test skips), and neither its correctness on
    a GPU nor its overlap has been checked.
    """

    def __init__(self, loader: Iterable[Any], device: Any, pin: bool = True) -> None:
        self.loader = loader
        self.device = torch.device(device)
        self.pin = pin

    def __iter__(self) -> Iterator[Any]:
        if self.device.type != "cuda":
            for batch in self.loader:
                yield to_device(batch, self.device, non_blocking=False)
            return
        stream = torch.cuda.Stream(self.device)
        it = iter(self.loader)

        def load() -> Any:
            try:
                batch = next(it)
            except StopIteration:
                return None
            if self.pin:
                batch = _pin(batch)
            with torch.cuda.stream(stream):
                return to_device(batch, self.device, non_blocking=True)

        nxt = load()
        while nxt is not None:
            torch.cuda.current_stream(self.device).wait_stream(stream)
            cur = nxt
            _record(cur, torch.cuda.current_stream(self.device))
            nxt = load()
            yield cur


def _pin(batch: Any) -> Any:
    if isinstance(batch, torch.Tensor):
        return batch if batch.is_pinned() else batch.pin_memory()
    if isinstance(batch, dict):
        return {k: _pin(v) for k, v in batch.items()}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(_pin(v) for v in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(_pin(v) for v in batch)
    return batch


def _record(batch: Any, stream: Any) -> None:
    # Tensors made on the side stream and used on another must tell the caching
    # allocator, or their memory could be reused while the other stream reads it.
    if isinstance(batch, torch.Tensor):
        batch.record_stream(stream)
    elif isinstance(batch, dict):
        for v in batch.values():
            _record(v, stream)
    elif isinstance(batch, (list, tuple)):
        for v in batch:
            _record(v, stream)

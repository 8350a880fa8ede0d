"""JAX over zring stores (needs ``jax``; ``import zring`` does not).

:class:`DataSource` is a Grain-compatible random-access data source (``__len__``,
``__getitem__``, and the batched read ``_getitems`` of Grain's
``SupportsBatchedReadRandomAccessDataSource``) over one or several aligned stores,
and :meth:`DataSource.batch` returns ``jax.numpy`` arrays over zring's memory through
DLPack. It pickles by its stores' paths, so Grain's worker processes reopen the
stores themselves.

:func:`batches` iterates zring's global order, gathered ahead by a
:class:`zring.Loader` thread, as this process's ``jax.Array`` batches or (with
``sharding=``) as global arrays across processes. :class:`BatchIterator` is the same
stream as a checkpointable Grain ``DatasetIterator`` (``get_state`` /
``set_state``), and :class:`BatchDataset` the Grain ``IterDataset`` that makes it.
"""

from __future__ import annotations

import abc
import warnings
from typing import TYPE_CHECKING, Any, Generator, Mapping, Sequence

try:
    import jax
    import jax.numpy as jnp
except ImportError as _missing:  # pragma: no cover - exercised only without jax
    raise ImportError("zring.jax needs JAX: pip install 'jax[cpu]'") from _missing

import numpy as np

try:
    import grain
except ImportError:  # pragma: no cover - exercised only without grain
    grain = None

from ._internal.frameworks import DatasetFieldView, Plan, as_int_indices, check_decode, open_fields, read_fields
from ._internal.loader import Loader
from ._internal.pack import Packed, pack
from ._internal.ragged import RaggedBatch
from ._zring import RaggedStore
from .decode import Image

if TYPE_CHECKING:
    from ._internal.dataset import Dataset as ZringDataset

__all__ = ["DataSource", "to_jax", "batches", "BatchIterator", "BatchDataset", "packed", "PackedBatches"]


def to_jax(a: Any) -> Any:
    """A ``jax.Array`` from a zring array through DLPack, or a ``RaggedBatch`` as a
    ``(values, cu_seqlens, shapes)`` tuple of them.

    On CPU the array shares the zring array's memory (no copy) when JAX can take the
    buffer as it is. JAX copies instead (the result is the same values) when:

    - the buffer is not aligned as XLA's CPU backend requires (64 bytes: zring's
      gather buffers are; a ragged field's ``values`` are the start of its gather
      buffer too);
    - the dtype is 64-bit (``int64``, ``uint64``, ``float64``, ``complex128``) and
      ``jax_enable_x64`` is off, JAX's default: it becomes the 32-bit dtype;
    - NumPy cannot export the dtype through DLPack (ml_dtypes' ``bfloat16`` and
      ``float8_*``), or the array is 0-d: ``jnp.asarray`` copies it.

    A ragged field's ``cu_seqlens`` and ``shapes`` (int64, ``n + 1`` and
    ``(n, ndim)`` values) are always copied."""
    if isinstance(a, RaggedBatch):
        return (to_jax(a.values), jnp.asarray(a.cu_seqlens), jnp.asarray(a.shapes))
    a = np.asarray(a)
    try:
        return jax.dlpack.from_dlpack(a)
    except (TypeError, ValueError, RuntimeError, BufferError):
        # dtypes NumPy cannot export (ml_dtypes' bfloat16 / float8) and 0-d arrays.
        return jnp.asarray(a)


class DataSource:
    """Random access to aligned stores: record ``i`` is ``{name: ndarray}``.

    ``DataSource(fields, *, decode=None)`` with ``fields = {name: store, path or
    dataset}`` or a :class:`zring.Dataset` (all its fields).

    - ``len(ds)``; ``ds[i]``: one record as NumPy arrays (what Grain's
      ``MapDataset`` / ``DataLoader`` expect of a ``RandomAccessDataSource``).
    - ``ds._getitems(ids)``: a batch, one gather per field, as a list of per-record
      dicts (the dicts share the gathered arrays). This is the method of Grain's
      batched-read protocol, ``SupportsBatchedReadRandomAccessDataSource``: a
      ``grain.MapDataset.source(ds)`` pipeline calls it when a batch of records is
      read at once (its own ``_getitems``). Grain 0.2 keeps ``MapDataset.batch``'s
      use of it behind an experiment that is off in its releases, so there
      ``batch`` still reads record by record through ``ds[i]``.
      ``ds.__getitems__(ids)`` is the same method under PyTorch's name.
    - ``ds.batch(ids)``: ``{name: jax.Array}`` for a batch (ragged fields as
      ``(values, cu_seqlens, shapes)``), over the gathered memory where
      :func:`to_jax` can hand it over without a copy.
    - ``decode={"image": zring.decode.Image(...)}``: those fields' encoded images
      are decoded in native code into ``uint8`` pixel arrays, with the random crops
      of the epoch set by ``set_epoch(epoch)`` (:func:`batches` sets it per step).
    """

    def __init__(self, fields: Mapping[str, Any] | ZringDataset, *,
                 decode: Mapping[str, Image] | None = None) -> None:
        self.fields = open_fields(fields)
        self.decode = check_decode(self.fields, decode)
        self.epoch = 0
        self._len = len(next(iter(self.fields.values())))

    def set_epoch(self, epoch: int) -> None:
        """The epoch of the random crops of ``decode`` and of a mixture's records
        (:func:`batches` sets it for every step)."""
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, record_key: int) -> dict[str, np.ndarray[Any, Any]]:
        # Every read goes through read_fields, one record as a gather of one id. A
        # gather's record 0 is what store[i] is (a ragged record its own shape, a
        # scalar field a 0-d array); int() keeps the keys store[int(i)] took (bool,
        # integral floats), which as_int_indices alone refuses.
        one, n = read_fields(self.fields, as_int_indices([int(record_key)]), self.decode, self.epoch)
        if n == 0:
            raise IndexError(f"record {record_key} was skipped: its image cannot be decoded")
        return {name: np.asarray(v[0]) for name, v in one.items()}

    def _getitems(self, record_keys: Sequence[int]) -> list[dict[str, Any]]:
        """The records ``record_keys`` (one gather per field), as Grain's batched read
        returns them: a list of per-record ``{name: ndarray}`` dicts."""
        ids = as_int_indices(record_keys)
        cols, n = read_fields(self.fields, ids, self.decode, self.epoch)
        return [{name: col[k] for name, col in cols.items()} for k in range(n)]

    def __getitems__(self, record_keys: Sequence[int]) -> list[dict[str, Any]]:
        """:meth:`_getitems` under the name PyTorch's batched read uses."""
        return self._getitems(record_keys)

    def read(self, ids: Any) -> dict[str, Any]:
        """``{name: ndarray | RaggedBatch}`` for the records ``ids`` (one gather per field)."""
        idx = as_int_indices(ids)
        return read_fields(self.fields, idx, self.decode, self.epoch)[0]

    def batch(self, ids: Any) -> dict[str, Any]:
        """``{name: jax.Array}`` for the records ``ids``."""
        return {name: to_jax(v) for name, v in self.read(ids).items()}

    def __repr__(self) -> str:
        return f"zring.jax.DataSource(fields={list(self.fields)}, len={self._len})"


def _plan(source: DataSource, batch_size: int, *, shuffle: bool, seed: int, epochs: int | None,
          drop_last: bool, start: int, rank: int | None, world_size: int | None, prefetch: int,
          sharding: jax.sharding.Sharding | None) -> Plan:
    """The checked plan of :func:`batches` and :class:`BatchIterator`."""
    if prefetch < 0:
        raise ValueError(f"prefetch must be >= 0, got {prefetch}")
    if start < 0:
        raise ValueError(f"start must be >= 0, got {start}")
    if sharding is not None:
        if not isinstance(sharding, jax.sharding.Sharding):
            raise TypeError(f"sharding must be a jax.sharding.Sharding, got {type(sharding).__name__}")
        # A global array is put together from every process's rows by JAX's own
        # process index: reading another share than jax.process_index()'s would
        # place it where another process's rows belong.
        here = (jax.process_index(), jax.process_count())
        asked = (here[0] if rank is None else rank, here[1] if world_size is None else world_size)
        if asked != here:
            raise ValueError(
                f"sharding= reads the share of jax.process_index() {here[0]} of "
                f"jax.process_count() {here[1]}; got rank={rank}, world_size={world_size}"
            )
        # Decoded images are dense pixels, whatever their stored bytes are.
        ragged = [name for name, store in source.fields.items()
                  if name not in source.decode and _is_ragged(store)]
        if ragged:
            raise TypeError(
                f"sharding= makes global jax.Arrays of dense fields; {ragged} "
                f"{'is' if len(ragged) == 1 else 'are'} ragged (records of different shapes "
                "have no global array: read them without sharding=, or pad them into a dense field)"
            )
    if rank is None:
        rank = jax.process_index()
    if world_size is None:
        world_size = jax.process_count()
    plan = Plan(len(source), batch_size, mode="cyclic" if shuffle else "sequential", seed=seed,
                epochs=epochs, drop_last=drop_last, rank=rank, world_size=world_size)
    if sharding is not None and plan.n % plan.global_batch and not plan.drop_last:
        # The short last step of an epoch splits unevenly across processes (some
        # get a record fewer, or none), and every process must bring the same rows.
        raise ValueError(
            f"sharding= needs every global batch the same shape: {plan.n} records in global "
            f"batches of {plan.global_batch} leave a short last step; use drop_last=True"
        )
    return plan


def _is_ragged(store: Any) -> bool:
    """Whether a field's records can have different shapes: a ragged store, or a
    dataset's ragged field."""
    if isinstance(store, RaggedStore):
        return True
    if isinstance(store, DatasetFieldView):
        return any(f["name"] == store.name and f["layout"] == "ragged" for f in store.dataset.schema)
    return False


def batches(source: DataSource, batch_size: int, *, shuffle: bool = True, seed: int = 0,
            epochs: int | None = 1, drop_last: bool = True, start: int = 0,
            rank: int | None = None, world_size: int | None = None,
            process_index: int | None = None,
            process_count: int | None = None, prefetch: int = 2,
            sharding: jax.sharding.Sharding | None = None) -> Generator[dict[str, Any], None, None]:
    """Batches of ``jax.Array`` from ``source`` in zring's global order: epochs of a
    fresh permutation (or in order with ``shuffle=False``), this process's slice of
    every global batch (``rank`` / ``world_size``, spelled as everywhere in zring,
    default to ``jax.process_index()`` / ``jax.process_count()``), from step
    ``start`` (resume at the number of batches already consumed).
    ``process_index`` / ``process_count`` are the deprecated old names of ``rank`` /
    ``world_size``.

    - ``prefetch`` (2): a :class:`zring.Loader` thread gathers up to this many batches
      ahead, without the GIL, while the caller computes (decoded images included);
      ``0`` gathers each batch in the caller's thread when it is asked for. Either
      way the batches are the same, in the same order. The loader's thread ends when
      the iteration does, or when the generator is closed or garbage-collected.
    - ``sharding``: a ``jax.sharding.Sharding`` of the global batch (such as
      ``NamedSharding(mesh, PartitionSpec("data"))``). Each process reads its own
      share (``rank`` / ``world_size`` must then be JAX's, the default) and every
      field becomes one global array of the global batch,
      ``jax.make_array_from_process_local_data(sharding, local_rows)``: with a 1-D
      mesh over ``jax.devices()`` process ``p`` holds rows
      ``[p * batch_size, (p + 1) * batch_size)``, so the global array is the global
      batch in zring's order. Only dense fields (decoded images included) have a
      global array: a ragged field is refused with a ``TypeError`` when the
      generator is made, and so is a plan whose epochs end in a short step
      (``drop_last=False`` with records left over), which would split unevenly.

    Arguments are checked when the generator is made; the loader starts at the
    first batch."""
    if process_index is not None:
        warnings.warn("zring.jax.batches(process_index=...) is now rank=...",
                      DeprecationWarning, stacklevel=2)
        rank = process_index if rank is None else rank
    if process_count is not None:
        warnings.warn("zring.jax.batches(process_count=...) is now world_size=...",
                      DeprecationWarning, stacklevel=2)
        world_size = process_count if world_size is None else world_size
    plan = _plan(source, batch_size, shuffle=shuffle, seed=seed, epochs=epochs, drop_last=drop_last,
                 start=start, rank=rank, world_size=world_size, prefetch=prefetch, sharding=sharding)
    return _batches(source, plan, start, prefetch, sharding)


def _batches(source: DataSource, plan: Plan, start: int, prefetch: int,
             sharding: jax.sharding.Sharding | None) -> Generator[dict[str, Any], None, None]:
    """The batches of ``plan`` from step ``start`` (see :func:`batches`)."""
    per_epoch = max(plan.steps_per_epoch, 1)
    if not prefetch:
        # The gather in the caller's thread, step by step.
        for step in plan.worker_steps(start, 0, 1):
            # Decoded images crop by the step's epoch.
            source.set_epoch(step // per_epoch)
            yield _convert(source.read(plan.indices(step)), sharding)
        return
    # One Rust worker keeps up to `prefetch` batches ready (exactly that:
    # lookahead_bytes=None, `prefetch` is the memory the caller asked for), as
    # zring.torch.IterableDataset does per DataLoader worker. It decodes images with
    # each step's epoch itself.
    loader = Loader(source.fields, plan.schedule(start, 0, 1), workers=1, prefetch=prefetch,
                    lookahead_bytes=None, decode=source.decode or None)
    try:
        for s, shards in enumerate(loader):
            # The source's epoch follows the delivered step, as without prefetch.
            source.set_epoch((start + s) // per_epoch)
            shard = shards[0]
            yield _convert({name: shard[name] for name in source.fields}, sharding)
    finally:
        # Joins the worker thread, also where the generator stops early
        # (GeneratorExit): close(), or the caller's loop left by break or an
        # exception, the generator then being collected.
        loader.close()


def _convert(fields: Mapping[str, Any], sharding: jax.sharding.Sharding | None) -> dict[str, Any]:
    """A gathered batch as ``jax.Array`` s: this process's (:func:`to_jax`), or the
    global arrays of ``sharding`` made from this process's rows."""
    if sharding is None:
        return {name: to_jax(v) for name, v in fields.items()}
    out = {}
    for name, v in fields.items():
        if isinstance(v, RaggedBatch):  # _plan refused ragged fields; a safety net
            raise TypeError(f"sharding= makes global arrays of dense fields; {name!r} is ragged")
        out[name] = jax.make_array_from_process_local_data(sharding, np.asarray(v))
    return out


class _NoGrainIterator:
    """What :class:`BatchIterator` takes from ``grain.DatasetIterator`` where Grain
    is not installed: it is then a plain iterator with the same state methods."""

    def __iter__(self) -> Any:
        return self

    def close(self) -> None:
        """Marks the iterator closed (as Grain's does); :class:`BatchIterator`
        closes its loader."""
        self._closed = True


class _NoGrainDataset:
    """The base of :class:`BatchDataset` where Grain is not installed."""


# Grain's classes where Grain is installed (then the iterator and the dataset plug
# into Grain pipelines and checkpoints), else the stand-ins above.
_DatasetIterator: Any = getattr(grain, "DatasetIterator", _NoGrainIterator)
_IterDataset: Any = getattr(grain, "IterDataset", _NoGrainDataset)


# metaclass=ABCMeta: Grain's classes are ABCs (IterDataset's metaclass is a subclass of
# ABCMeta, which Python then picks), which their Any type here cannot tell the type
# checkers; without it the static and runtime classes differ in their metaclass.
class BatchIterator(_DatasetIterator, metaclass=abc.ABCMeta):  # type: ignore[misc]  # Grain's class, untyped here
    """The batches of :func:`batches` as a checkpointable iterator: a Grain
    ``DatasetIterator`` (where Grain is installed) whose state is the next step.

    ``BatchIterator(source, batch_size, *, shuffle=True, seed=0, epochs=1,
    drop_last=True, start=0, rank=None, world_size=None, prefetch=2,
    sharding=None)``: the options of :func:`batches`, with the same batches in the
    same order, prefetched the same way.

    - ``get_state()``: ``{"step": next step, "order": [...]}`` (JSON-serialisable,
      as Grain's and Orbax's checkpoints write it), taken at any point: the step
      counts the batches this iterator has returned, not those its loader has
      gathered ahead.
    - ``set_state(state)``: continue from that step (the order, ``"order"``: records,
      global batch, mode, seed, epochs, drop_last, must be this iterator's); the
      next batch is the one that followed when the state was taken.
    - ``close()`` ends the loader's thread (so does garbage collection).
    """

    def __init__(self, source: DataSource, batch_size: int, *, shuffle: bool = True, seed: int = 0,
                 epochs: int | None = 1, drop_last: bool = True, start: int = 0,
                 rank: int | None = None, world_size: int | None = None, prefetch: int = 2,
                 sharding: jax.sharding.Sharding | None = None) -> None:
        # Set first: Grain's __del__ calls close(), even after a failed __init__.
        self._batches: Generator[dict[str, Any], None, None] | None = None
        super().__init__()
        self._plan = _plan(source, batch_size, shuffle=shuffle, seed=seed, epochs=epochs,
                           drop_last=drop_last, start=start, rank=rank, world_size=world_size,
                           prefetch=prefetch, sharding=sharding)
        self._source, self._prefetch, self._sharding = source, int(prefetch), sharding
        self._step = int(start)

    def __next__(self) -> dict[str, Any]:
        if getattr(self, "_closed", False):
            raise ValueError(f"{self!r} is closed")
        if self._batches is None:
            self._batches = _batches(self._source, self._plan, self._step, self._prefetch, self._sharding)
        batch = next(self._batches)
        self._step += 1
        return batch

    def get_state(self) -> dict[str, Any]:
        """Where to continue: the next step, and what defines the order."""
        return {"step": self._step, "order": list(self._plan.fingerprint())}

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Continues at ``state["step"]``; the order must be this iterator's."""
        order = state.get("order")
        if order is not None and tuple(order) != self._plan.fingerprint():
            raise ValueError(
                f"this state is from another order (records, global batch, mode, seed, "
                f"epochs, drop_last): saved {tuple(order)}, this iterator {self._plan.fingerprint()}"
            )
        step = int(state["step"])
        if step < 0:
            raise ValueError(f"step must be >= 0, got {step}")
        # The batches gathered ahead are for the old position: drop them (and the
        # loader's thread); the next batch starts a loader at the new step.
        self._stop()
        self._step = step

    def close(self) -> None:
        """Ends the loader's thread; the iterator cannot continue."""
        self._stop()
        super().close()

    def _stop(self) -> None:
        batches, self._batches = self._batches, None
        if batches is not None:
            # Runs the generator's finally: the loader is closed and its thread joined.
            batches.close()

    def __repr__(self) -> str:
        return f"zring.jax.BatchIterator(step={self._step}, fields={list(self._source.fields)})"


class BatchDataset(_IterDataset, metaclass=abc.ABCMeta):  # type: ignore[misc]  # Grain's class, untyped here
    """The batches of :func:`batches` as a Grain ``IterDataset``: ``iter(ds)`` is a
    new :class:`BatchIterator` (a checkpointable ``DatasetIterator``) from step
    ``start``, and Grain's transformations (``ds.map(f)``, ...) apply to its
    batches. Same arguments as :class:`BatchIterator`, checked here."""

    def __init__(self, source: DataSource, batch_size: int, **options: Any) -> None:
        super().__init__()
        BatchIterator(source, batch_size, **options).close()  # the arguments' checks
        self._source, self._batch_size, self._options = source, batch_size, options

    def __iter__(self) -> BatchIterator:
        return BatchIterator(self._source, self._batch_size, **self._options)

    def __str__(self) -> str:
        return f"zring.jax.BatchDataset(fields={list(self._source.fields)}, batch_size={self._batch_size})"


class PackedBatches:
    """:func:`zring.pack`'s batches as ``jax.Array`` (see :func:`packed`): an
    endless iterator with ``state_dict()``, ``close()`` and ``with``."""

    def __init__(self, inner: Packed) -> None:
        self._inner = inner

    def __iter__(self) -> PackedBatches:
        return self

    def __next__(self) -> dict[str, Any]:
        batch = next(self._inner)
        out: dict[str, Any] = {}
        for k, v in batch.items():
            if isinstance(v, np.ndarray):
                out[k] = to_jax(v)
            elif isinstance(v, Mapping):
                out[k] = {name: to_jax(a) for name, a in v.items()}
            else:
                out[k] = v
        return out

    def state_dict(self) -> dict[str, Any]:
        """Where packing stands after the last batch delivered (positions, not tokens)."""
        return self._inner.state_dict()

    def close(self) -> None:
        """Stops the thread that makes batches ahead."""
        self._inner.close()

    def __enter__(self) -> PackedBatches:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def packed(source: Any, seq_len: int, *, rows: int, rank: int | None = None,
           world_size: int | None = None, **options: Any) -> PackedBatches:
    """:func:`zring.pack` with its batches as ``jax.Array`` (``tokens``,
    ``position_ids``, ``cu_seqlens``, ...; ``max_seqlen`` an int), made ahead on a
    Rust thread without the GIL. ``rows`` rows per process of a global batch of
    ``rows * world_size`` rows; ``rank`` / ``world_size`` default to
    ``jax.process_index()`` / ``jax.process_count()``. ``state=`` (a
    ``state_dict()``) resumes exactly, on any number of processes with the same
    global rows. Other options are :func:`zring.pack`'s."""
    rank = jax.process_index() if rank is None else rank
    world_size = jax.process_count() if world_size is None else world_size
    return PackedBatches(pack(source, seq_len, rows=rows, rank=rank, world_size=world_size, **options))

"""JAX over zring stores (needs ``jax``; ``import zring`` does not).

:class:`DataSource` is a Grain-compatible random-access data source (``__len__``,
``__getitem__``, and the batched read ``_getitems`` of Grain's
``SupportsBatchedReadRandomAccessDataSource``) over one or several aligned stores,
and :meth:`DataSource.batch` returns ``jax.numpy`` arrays over zring's memory through
DLPack. It pickles by its stores' paths, so Grain's worker processes reopen the
stores themselves.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Sequence

try:
    import jax
    import jax.numpy as jnp
except ImportError as _missing:  # pragma: no cover - exercised only without jax
    raise ImportError("zring.jax needs JAX: pip install 'jax[cpu]'") from _missing

import numpy as np

from ._internal.frameworks import Plan, as_int_indices, check_decode, open_fields, read_fields
from ._internal.ragged import RaggedBatch
from .decode import Image

if TYPE_CHECKING:
    from ._internal.dataset import Dataset as ZringDataset

__all__ = ["DataSource", "to_jax", "batches"]


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
        """The epoch of the random crops of ``decode``."""
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, record_key: int) -> dict[str, np.ndarray[Any, Any]]:
        if self.decode:
            one, n = read_fields(self.fields, as_int_indices([record_key]), self.decode, self.epoch)
            if n == 0:
                raise IndexError(f"record {record_key} was skipped: its image cannot be decoded")
            return {name: np.asarray(v[0]) for name, v in one.items()}
        return {name: np.asarray(store[int(record_key)]) for name, store in self.fields.items()}

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


def batches(source: DataSource, batch_size: int, *, shuffle: bool = True, seed: int = 0,
            epochs: int | None = 1, drop_last: bool = True, start: int = 0,
            rank: int | None = None, world_size: int | None = None,
            process_index: int | None = None,
            process_count: int | None = None) -> Iterator[dict[str, Any]]:
    """Batches of ``jax.Array`` from ``source`` in zring's global order: epochs of a
    fresh permutation (or in order with ``shuffle=False``), this process's slice of
    every global batch (``rank`` / ``world_size``, spelled as everywhere in zring,
    default to ``jax.process_index()`` / ``jax.process_count()``), from step
    ``start`` (resume at the number of batches already consumed).
    ``process_index`` / ``process_count`` are the deprecated old names of ``rank`` /
    ``world_size``."""
    if process_index is not None:
        warnings.warn("zring.jax.batches(process_index=...) is now rank=...",
                      DeprecationWarning, stacklevel=2)
        rank = process_index if rank is None else rank
    if process_count is not None:
        warnings.warn("zring.jax.batches(process_count=...) is now world_size=...",
                      DeprecationWarning, stacklevel=2)
        world_size = process_count if world_size is None else world_size
    if rank is None:
        rank = jax.process_index()
    if world_size is None:
        world_size = jax.process_count()
    plan = Plan(len(source), batch_size, mode="cyclic" if shuffle else "sequential", seed=seed,
                epochs=epochs, drop_last=drop_last, rank=rank, world_size=world_size)
    for step in plan.worker_steps(start, 0, 1):
        # Decoded images crop by the step's epoch.
        source.set_epoch(step // max(plan.steps_per_epoch, 1))
        yield source.batch(plan.indices(step))

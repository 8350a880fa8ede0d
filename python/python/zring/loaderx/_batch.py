"""loaderx's RaggedBatch: int32 ``cu_seqlens``, uint32 ``shapes``, ``to_tensors()``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from .._internal.ragged import RaggedBatch as _ZringRaggedBatch

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["RaggedBatch"]

_INT32_MAX = np.iinfo(np.int32).max
_UINT32_MAX = np.iinfo(np.uint32).max


def _as(obj: npt.ArrayLike, dtype: npt.DTypeLike, limit: int, name: str) -> npt.NDArray[Any]:
    arr = np.asarray(obj)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{name} must be an integer array, got dtype {arr.dtype}")
    if arr.size and (arr.min() < 0 or arr.max() > limit):
        raise ValueError(f"{name} must hold values in 0..{limit}")
    return np.ascontiguousarray(arr, dtype=dtype)


class RaggedBatch(_ZringRaggedBatch):
    """Variable-shape records packed in one ``values`` array, as loaderx 2.8 has them.

    - ``values``: 1-D array of every record's elements, record after record.
    - ``cu_seqlens``: int32 ``[n + 1]`` element offsets starting at 0, strictly
      increasing (records are never empty).
    - ``shapes``: uint32 ``[n, ndim]``, each record's shape.

    All three are NumPy arrays, which are DLPack tensors (``torch.from_dlpack``,
    ``jax.dlpack.from_dlpack`` take them without a copy). :meth:`to_tensors` gives
    every record as a zero-copy view of ``values``. A batch is also a
    ``zring.RaggedBatch`` (``batch[i]``, slicing, ``to_arrays()``).
    """

    __slots__ = ()

    def __init__(self, values: npt.ArrayLike, cu_seqlens: npt.ArrayLike, shapes: npt.ArrayLike) -> None:
        values = np.asarray(values)
        if values.ndim != 1:
            raise ValueError(f"values must be 1-D, got shape {values.shape}")
        cu = _as(cu_seqlens, np.int32, _INT32_MAX, "cu_seqlens")
        if cu.ndim != 1 or cu.size < 1:
            raise ValueError("ragged cu_seqlens length must equal records + 1")
        if cu[0] != 0 or cu[-1] != values.size:
            raise ValueError("ragged cu_seqlens must span all values (start at 0, end at the value count)")
        if np.any(np.diff(cu) <= 0):
            raise ValueError("ragged cu_seqlens must be strictly increasing")
        shp = _as(shapes, np.uint32, _UINT32_MAX, "shapes")
        n = cu.size - 1
        if shp.ndim != 2 or shp.shape[0] != n:
            raise ValueError(f"shapes must have shape ({n}, ndim), got {shp.shape}")
        if not np.array_equal(np.prod(shp, axis=1, dtype=np.int64), np.diff(cu).astype(np.int64)):
            raise ValueError("ragged cu_seqlens do not match record shapes")
        self.values = values
        self.cu_seqlens = cu
        self.shapes = shp

    @classmethod
    def _from_zring(cls, batch: _ZringRaggedBatch) -> Self:
        """loaderx's field types for a batch zring read (values stay zero-copy)."""
        cu = batch.cu_seqlens
        if cu.size and cu[-1] > _INT32_MAX:
            raise ValueError("ragged batch exceeds int32 cu_seqlens capacity; gather fewer records")
        return cls._from_parts(batch.values, cu.astype(np.int32), batch.shapes.astype(np.uint32))

    @classmethod
    def from_records(cls, records: Iterable[npt.ArrayLike], dtype: npt.DTypeLike | None = None) -> Self:
        """Packs a list of arrays (same dtype and ndim) into one batch (a copy)."""
        return cls._from_zring(_ZringRaggedBatch.from_records(records, dtype))

    def to_tensors(self) -> list[npt.NDArray[Any]]:
        """Every record as an array of its own shape: views into ``values``."""
        return self.to_arrays()

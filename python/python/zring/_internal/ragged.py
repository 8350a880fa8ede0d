"""RaggedBatch: variable-shape records packed back to back."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, overload

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from typing_extensions import Self


def _int_array(obj: npt.ArrayLike, name: str) -> npt.NDArray[np.int64]:
    arr = np.asarray(obj)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{name} must be an integer array, got dtype {arr.dtype}")
    return arr.astype(np.int64, copy=False)


class RaggedBatch:
    """Records of different shapes in one flat ``values`` array.

    - ``values``: 1-D array of every record's elements, record after record.
    - ``cu_seqlens``: int64 array of ``n + 1`` element offsets; record ``i`` is
      ``values[cu_seqlens[i]:cu_seqlens[i + 1]]``.
    - ``shapes``: int64 array ``(n, ndim)``, the shape of each record.

    Gathers from a :class:`RaggedStore` return one (``values`` is engine-owned
    memory, zero-copy); :meth:`RaggedWriter.append` takes one. ``batch[i]`` and
    :meth:`to_arrays` give views into ``values``, never copies.
    """

    __slots__ = {
        "values": "1-D array of every record's elements, record after record.",
        "cu_seqlens": "Integer array of n + 1 element offsets; record i is values[cu_seqlens[i]:cu_seqlens[i + 1]].",
        "shapes": "Integer array (n, ndim): the shape of each record.",
    }

    values: npt.NDArray[Any]
    cu_seqlens: npt.NDArray[np.integer[Any]]
    shapes: npt.NDArray[np.integer[Any]]

    def __init__(self, values: npt.ArrayLike, cu_seqlens: npt.ArrayLike, shapes: npt.ArrayLike) -> None:
        values = np.asarray(values)
        if values.ndim != 1:
            raise ValueError(f"values must be 1-D, got shape {values.shape}")
        cu = _int_array(cu_seqlens, "cu_seqlens")
        if cu.ndim != 1 or len(cu) < 1:
            raise ValueError("cu_seqlens must be 1-D with n + 1 offsets")
        if cu[0] != 0:
            raise ValueError(f"cu_seqlens must start at 0, starts at {cu[0]}")
        if np.any(np.diff(cu) < 0):
            raise ValueError("cu_seqlens must be non-decreasing")
        if cu[-1] != len(values):
            raise ValueError(
                f"cu_seqlens ends at {cu[-1]} but values holds {len(values)} elements"
            )
        shp = _int_array(shapes, "shapes")
        n = len(cu) - 1
        if shp.ndim != 2 or shp.shape[0] != n:
            raise ValueError(f"shapes must have shape ({n}, ndim), got {shp.shape}")
        if np.any(shp < 0):
            raise ValueError("shapes must not be negative")
        if not np.array_equal(np.prod(shp, axis=1), np.diff(cu)):
            raise ValueError("shapes do not match the record lengths given by cu_seqlens")
        self.values = values
        self.cu_seqlens = cu
        self.shapes = shp

    @classmethod
    def _from_parts(
        cls, values: npt.NDArray[Any], cu_seqlens: npt.NDArray[np.integer[Any]], shapes: npt.NDArray[np.integer[Any]]
    ) -> Self:
        """Builds a batch from arrays the engine already validated."""
        self = object.__new__(cls)
        self.values = values
        self.cu_seqlens = cu_seqlens
        self.shapes = shapes
        return self

    @classmethod
    def from_records(cls, records: Iterable[npt.ArrayLike], dtype: npt.DTypeLike | None = None) -> Self:
        """Packs a list of arrays (same dtype and ndim) into one batch (a copy)."""
        arrays = [np.asarray(r) for r in records]
        if not arrays:
            if dtype is None:
                raise ValueError("from_records([]) needs a dtype")
            return cls(np.empty(0, dtype), np.zeros(1, np.int64), np.zeros((0, 1), np.int64))
        ndim = arrays[0].ndim
        want = np.dtype(dtype) if dtype is not None else arrays[0].dtype
        for k, a in enumerate(arrays):
            if a.ndim != ndim:
                raise ValueError(f"record {k} has {a.ndim} dimensions, record 0 has {ndim}")
            if a.dtype != want:
                raise TypeError(f"record {k} has dtype {a.dtype}, expected {want}")
            if ndim == 0:
                raise ValueError("records must have at least one dimension")
        shapes = np.array([a.shape for a in arrays], dtype=np.int64).reshape(len(arrays), ndim)
        cu = np.zeros(len(arrays) + 1, np.int64)
        np.cumsum(np.prod(shapes, axis=1), out=cu[1:])
        values = np.concatenate([a.ravel() for a in arrays]) if cu[-1] else np.empty(0, want)
        return cls._from_parts(values.astype(want, copy=False), cu, shapes)

    @property
    def ndim(self) -> int:
        """Dimensions of every record."""
        return int(self.shapes.shape[1])

    @property
    def dtype(self) -> np.dtype[Any]:
        """The element type of ``values``."""
        return self.values.dtype

    def __len__(self) -> int:
        return len(self.cu_seqlens) - 1

    def _record(self, i: int) -> npt.NDArray[Any]:
        a, b = self.cu_seqlens[i], self.cu_seqlens[i + 1]
        return self.values[a:b].reshape(tuple(self.shapes[i]))

    @overload
    def __getitem__(self, key: int | np.integer[Any]) -> npt.NDArray[Any]: ...
    @overload
    def __getitem__(self, key: slice) -> Self: ...
    def __getitem__(self, key: int | np.integer[Any] | slice) -> npt.NDArray[Any] | Self:
        """``batch[i]`` is record ``i`` (a view; negative counts from the end);
        ``batch[a:b]`` is a RaggedBatch of those records (values still a view)."""
        n = len(self)
        if isinstance(key, slice):
            start, stop, step = key.indices(n)
            if step != 1:
                return type(self).from_records([self._record(i) for i in range(start, stop, step)], self.dtype)
            stop = max(start, stop)
            cu = self.cu_seqlens[start : stop + 1]
            return self._from_parts(
                self.values[cu[0] : cu[-1]], cu - cu[0], self.shapes[start:stop]
            )
        if isinstance(key, (bool, np.bool_)):
            raise TypeError("a bool is not a record index")
        i = int(np.asarray(key).__index__()) if not isinstance(key, int) else key
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"record index {key} is out of range for a batch of {n} records")
        return self._record(i)

    def __iter__(self) -> Iterator[npt.NDArray[Any]]:
        for i in range(len(self)):
            yield self._record(i)

    def to_arrays(self) -> list[npt.NDArray[Any]]:
        """Every record as an array of its shape: views into ``values``."""
        cu = self.cu_seqlens.tolist()
        shapes = [tuple(s) for s in self.shapes.tolist()]
        v = self.values
        return [v[cu[i] : cu[i + 1]].reshape(shapes[i]) for i in range(len(shapes))]

    def __repr__(self) -> str:
        return f"RaggedBatch(records={len(self)}, ndim={self.ndim}, dtype={self.dtype}, elements={len(self.values)})"

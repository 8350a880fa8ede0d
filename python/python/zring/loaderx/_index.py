"""loaderx's index forms, turned into one flat array of record ids.

loaderx indexes the record axis only: an int selects one record; a slice, a list, a
tuple (``view[0, 5, 2]`` is three records), a ``range`` or an integer array of any
shape (flattened) select records in that order, duplicates allowed; a boolean array
of exactly ``len(view)`` elements is a mask. Negative indices are refused (they do
not count from the end), as are scalar bools and non-integer arrays.
"""

from __future__ import annotations

import operator

from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["record_ids"]


def _out_of_range(i: int, n: int) -> IndexError:
    return IndexError(f"record index {i} is out of range for a store of {n} records")


def _slice_ids(key: slice, n: int) -> np.ndarray:
    for part, name in ((key.start, "start"), (key.stop, "stop")):
        if part is not None and operator.index(part) < 0:
            raise IndexError(f"slice {name} {part} is negative; loaderx slices do not count from the end")
    step = 1 if key.step is None else operator.index(key.step)
    if step == 0:
        raise ValueError("slice step cannot be zero")
    return np.arange(*key.indices(n), dtype=np.int64)


def record_ids(key: Any, n: int) -> tuple[npt.NDArray[np.int64], bool]:
    """``(ids, scalar)``: the selected record ids as a 1-D int64 array, and whether
    ``key`` was a single integer (the result then drops the batch axis)."""
    if isinstance(key, (bool, np.bool_)):
        raise TypeError("a bool is not a record index")
    if isinstance(key, (int, np.integer)):
        i = int(key)
        if not 0 <= i < n:
            raise _out_of_range(i, n)
        return np.array([i], dtype=np.int64), True
    if isinstance(key, slice):
        return _slice_ids(key, n), False
    if isinstance(key, range):
        key = np.arange(key.start, key.stop, key.step, dtype=np.int64)
    try:
        arr = np.asarray(key)
    except ValueError as e:  # ragged nesting
        raise TypeError(f"cannot index records with {type(key).__name__}: {e}") from e
    if arr.dtype == np.bool_:
        if arr.ndim != 1 or arr.size != n:
            raise IndexError(f"a boolean mask must be 1-D with {n} elements, got shape {arr.shape}")
        return np.flatnonzero(arr).astype(np.int64), False
    if arr.size == 0 and arr.dtype.kind in "fO":  # [] or ()
        return np.empty(0, dtype=np.int64), False
    if arr.dtype.kind not in "iu":
        raise TypeError(f"record indices must be integers, got dtype {arr.dtype}")
    flat = arr.reshape(-1)
    if flat.size:
        lo, hi = int(flat.min()), int(flat.max())
        if lo < 0:
            raise _out_of_range(lo, n)
        if hi >= n:
            raise _out_of_range(hi, n)
    return flat.astype(np.int64, copy=False), False

"""``convert``: a Hugging Face ``datasets.Dataset`` to one store per column.

The declared features decide each column's layout, as loaderx 2.8 does: a ``Value``
(numeric or bool) or ``ClassLabel`` is a scalar Dense store; lists of fixed length
(``List(..., length=k)``, ``Sequence(..., length=k)``) and ``Array2D``..``Array5D``
with fixed shapes are Dense stores of that shape; a list of variable length (or an
``ArrayND`` whose first dimension is ``None``) is a Ragged store with one dimension
per list level. Strings, binary, nested dicts, nulls and empty records are refused.
Rows are read as Arrow batches (at most 32,768 rows and about 64 MiB each), so any
dataset size streams through bounded memory.

The stores are built in a hidden sibling directory and renamed to ``output`` only
when every column is complete; any error removes it, so ``output`` is either whole
or absent.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any, Union

import numpy as np

from .zrecord import Dense, DenseWriter, Ragged, RaggedWriter, _strict_int

from ..types import StrPath

__all__ = ["convert"]

_MAX_ROWS = 32768
_BATCH_BYTES = 64 << 20
_NUMERIC = {
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64",
}


def _leaf_dtype(column: str, dtype: str) -> str:
    if dtype not in _NUMERIC:
        raise ValueError(f"column {column!r} holds {dtype} values; only numeric and bool columns can be stored")
    return dtype


def _plan(column: str, feature: Any) -> tuple[str, list[int | None]]:
    """``(dtype, dims)``: the leaf dtype and one entry per list level (an int for a
    fixed length, ``None`` for a variable one)."""
    from datasets import features as F

    if isinstance(feature, F.ClassLabel):
        return "int64", []
    if isinstance(feature, F.Value):
        return _leaf_dtype(column, feature.dtype), []
    if isinstance(feature, (F.Array2D, F.Array3D, F.Array4D, F.Array5D)):
        shape: list[int | None] = list(feature.shape)
        if any(d is None for d in shape[1:]):
            raise ValueError(f"column {column!r}: only the first dimension of {type(feature).__name__} may be None")
        return _leaf_dtype(column, feature.dtype), shape
    list_types = tuple(t for t in (getattr(F, n, None) for n in ("List", "LargeList", "Sequence")) if isinstance(t, type))
    if isinstance(feature, list_types) or isinstance(feature, list):
        inner: Any = feature[0] if isinstance(feature, list) else getattr(feature, "feature")
        if isinstance(inner, dict):
            raise ValueError(f"column {column!r} holds nested dicts, which cannot be stored")
        dtype, dims = _plan(column, inner)
        length = getattr(feature, "length", -1)
        return dtype, [length if length is not None and length >= 0 else None, *dims]
    raise ValueError(f"column {column!r} has feature {type(feature).__name__}, which cannot be stored")


def _flatten(column: str, arr: Any, depth: int) -> tuple[list[np.ndarray], np.ndarray]:
    """Per-level list lengths and the leaf values of an Arrow column."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    lengths = []
    for _ in range(depth):
        if isinstance(arr, pa.ExtensionArray):
            arr = arr.storage
        if arr.null_count:
            raise ValueError(f"column {column!r} holds nulls, which cannot be stored")
        lengths.append(pc.list_value_length(arr).to_numpy(zero_copy_only=False).astype(np.int64))
        arr = arr.flatten()
    if isinstance(arr, pa.ExtensionArray):
        arr = arr.storage
    if arr.null_count:
        raise ValueError(f"column {column!r} holds nulls, which cannot be stored")
    return lengths, arr.to_numpy(zero_copy_only=False)


def _shapes(column: str, lengths: list[np.ndarray], n: int) -> np.ndarray:
    """Each record's shape from the per-level lengths; records must be rectangular."""
    shapes = np.zeros((n, len(lengths)), dtype=np.int64)
    count = np.ones(n, dtype=np.int64)  # elements of this level owned by each record
    for k, lens in enumerate(lengths):
        # Record i owns count[i] consecutive entries of lens; all must be equal.
        has = count > 0
        if has.any():
            starts = (np.cumsum(count) - count)[has]
            lo, hi = np.minimum.reduceat(lens, starts), np.maximum.reduceat(lens, starts)
            if np.any(lo != hi):
                raise ValueError(f"column {column!r} has a record that is not rectangular")
            shapes[has, k] = lo
        count = count * shapes[:, k]
    return shapes


def _rows_per_batch(dataset: Any) -> int:
    head = dataset.with_format("arrow")[: min(64, len(dataset))]
    per_row = max(1, head.nbytes // max(1, head.num_rows))
    return int(min(_MAX_ROWS, max(1, _BATCH_BYTES // per_row)))


def _check_column_name(name: object) -> None:
    if not isinstance(name, str) or name in ("", ".", "..") or "/" in name or os.sep in name:
        raise ValueError(f"column name {name!r} must be a single path component")


def convert(dataset: Any, output: StrPath, *, codec: str, data_shards: int = 4) -> str:
    """Writes every column of ``dataset`` (a ``datasets.Dataset``) to its own store
    ``output/<column>``; ``codec`` is ``"raw"`` or ``"zstd"``. ``output`` must not
    exist. Returns ``output`` as a string, once the directory is published."""
    try:
        import datasets
    except ImportError as e:
        raise ImportError("convert() needs the datasets package (pip install datasets)") from e
    if not isinstance(dataset, datasets.Dataset):
        raise TypeError(
            f"convert() takes a datasets.Dataset, got {type(dataset).__name__} "
            "(convert each split of a DatasetDict on its own)"
        )
    if codec not in ("raw", "zstd"):
        raise ValueError(f"convert() codec must be 'raw' or 'zstd', got {codec!r}")
    shards = _strict_int(data_shards, "data_shards")
    given = str(os.fspath(output))
    output = os.path.abspath(given)
    if os.path.lexists(output):
        raise FileExistsError(f"{output} already exists")
    if len(dataset) == 0:
        raise ValueError("the dataset is empty")
    plans = {}
    for name, feature in dataset.features.items():
        _check_column_name(name)
        plans[name] = _plan(name, feature)
    if not plans:
        raise ValueError("the dataset has no columns")

    parent, base = os.path.split(output)
    tmp = tempfile.mkdtemp(prefix=f".{base}.", dir=parent)
    writers: dict[str, Union[DenseWriter, RaggedWriter]] = {}
    try:
        for name, (dtype, dims) in plans.items():
            path = os.path.join(tmp, name)
            if all(d is not None for d in dims):
                writers[name] = Dense.create(path, dtype, [d for d in dims if d is not None], codec=codec, data_shards=shards)
            else:
                writers[name] = Ragged.create(path, dtype, len(dims), codec=codec, data_shards=shards)
        for table in dataset.with_format("arrow").iter(batch_size=_rows_per_batch(dataset)):
            n = table.num_rows
            for name, (dtype, dims) in plans.items():
                lengths, values = _flatten(name, table.column(name), len(dims))
                values = np.ascontiguousarray(values, dtype=dtype)
                shapes = _shapes(name, lengths, n)
                if np.any(shapes == 0):
                    raise ValueError(f"column {name!r} has an empty record, which cannot be stored")
                if all(d is not None for d in dims):
                    if dims and np.any(shapes != np.asarray(dims)):
                        raise ValueError(f"column {name!r} has a record whose shape is not {tuple(dims)}")
                    writers[name].append(values.reshape(n, *dims))
                else:
                    from ._batch import RaggedBatch

                    cu = np.zeros(n + 1, dtype=np.int64)
                    np.cumsum(np.prod(shapes, axis=1), out=cu[1:])
                    writers[name].append(RaggedBatch(values, cu, shapes))
        for w in writers.values():
            w.close()
        os.rename(tmp, output)
    except BaseException:
        for w in writers.values():
            w.abort()
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return given

"""Exporting a dataset (or a selection of it) back to Arrow, Parquet and Hugging Face.

Field kinds map back to the Arrow types the writers read: scalars to primitive
arrays, fixed shapes to nested fixed-size lists, 1-D ragged fields to large lists
(strings and bytes to large_string / large_binary), and n-D ragged fields to
``struct{values: large_list, shape: fixed_size_list<uint32>[ndim]}``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from .dataset import Dataset
    from .ragged import RaggedBatch
    from ..types import StrPath


def _selection(ds: Dataset, idx: Any) -> npt.NDArray[np.int64]:
    if idx is None:
        return np.arange(len(ds), dtype=np.int64)
    if isinstance(idx, slice):
        return np.arange(len(ds), dtype=np.int64)[idx]
    arr = np.asarray(idx)
    if arr.dtype == bool:
        return np.flatnonzero(arr).astype(np.int64)
    return arr.astype(np.int64).reshape(-1)


def _dense(pa: Any, arr: npt.NDArray[Any]) -> Any:
    n = arr.shape[0]
    flat = pa.array(np.ascontiguousarray(arr).reshape(-1))
    for dim in reversed(arr.shape[1:]):
        flat = pa.FixedSizeListArray.from_arrays(flat, int(dim))
    assert len(flat) == n
    return flat


def _ragged(pa: Any, batch: RaggedBatch, meta: dict[str, str]) -> Any:
    offsets = pa.array(np.asarray(batch.cu_seqlens, dtype=np.int64))
    values = np.asarray(batch.values)
    kind = meta.get("zring.kind")
    if kind in ("str", "bytes"):
        typ = pa.large_string() if kind == "str" else pa.large_binary()
        data = pa.py_buffer(np.ascontiguousarray(values).view(np.uint8))
        return pa.Array.from_buffers(typ, len(batch), [None, offsets.buffers()[1], data])
    lists = pa.LargeListArray.from_arrays(offsets, pa.array(values))
    if batch.ndim == 1:
        return lists
    shapes = np.asarray(batch.shapes, dtype=np.uint32).reshape(-1)
    shape_arr = pa.FixedSizeListArray.from_arrays(pa.array(shapes), batch.ndim)
    return pa.StructArray.from_arrays([lists, shape_arr], names=["values", "shape"])


def _record_batches(
    ds: Dataset, idx: Any, fields: str | list[str] | None, batch_records: int
) -> Iterator[Any]:
    import pyarrow as pa

    sel = _selection(ds, idx)
    names = list(ds.fields if fields is None else ([fields] if isinstance(fields, str) else fields))
    schemas = ds.field_schemas
    for start in range(0, max(len(sel), 1), batch_records):
        part = sel[start : start + batch_records]
        out = ds.gather(part, fields=names)
        arrays = []
        for name in names:
            s = schemas[name]
            if s["layout"] == "dense":
                arrays.append(_dense(pa, np.asarray(out[name])))
            else:
                arrays.append(_ragged(pa, cast("RaggedBatch", out[name]), s["metadata"]))
        yield pa.RecordBatch.from_arrays(arrays, names=names)


def to_arrow(ds: Dataset, idx: Any = None, fields: str | list[str] | None = None, *, batch_records: int = 4096) -> Any:
    import pyarrow as pa

    batches = list(_record_batches(ds, idx, fields, batch_records))
    return pa.Table.from_batches(batches)


def to_parquet(
    ds: Dataset,
    path: StrPath,
    idx: Any = None,
    fields: str | list[str] | None = None,
    *,
    batch_records: int = 4096,
    **kwargs: Any,
) -> str:
    import pyarrow.parquet as pq

    writer = None
    try:
        for rb in _record_batches(ds, idx, fields, batch_records):
            if writer is None:
                writer = pq.ParquetWriter(str(path), rb.schema, **kwargs)
            writer.write_batch(rb)
    finally:
        if writer is not None:
            writer.close()
    return str(path)

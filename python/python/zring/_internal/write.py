"""write_dataset: any source of records in, one published zring dataset out.

Sources are normalised into batches of columns (``_Column``: a dense array or a
ragged values + shapes pair). Batches are cut into shards of ``shard_records``
records (or ``shard_bytes`` bytes, whichever comes first); each shard is written by
one worker thread (one zring writer per field, whose appends run without the GIL),
and at most ``workers + 1`` shards are in memory at once, so memory is bounded by
the shard size, not by the input. The manifest is published once every shard is
complete: a conversion killed before that leaves the previous version (or no
dataset), and the stores it wrote are never named by any manifest.
"""

from __future__ import annotations

import itertools
import os
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping, Sequence, Union, cast

import numpy as np
import numpy.typing as npt

from .._zring import DenseWriter, RaggedWriter, _DatasetBuilder, parse_size

if TYPE_CHECKING:
    from .dataset import Dataset
    from ..types import CodecName

#: What a field's schema may be given as (see :meth:`FieldSpec.parse`).
FieldSpecLike = Union["FieldSpec", str, Mapping[str, Any]]
#: ``(pyarrow module, iterator of RecordBatch, number of records or None)``.
_ArrowBatches = tuple[Any, Iterator[Any], Union[int, None]]

#: Bytes of input the readers aim to decode per batch.
BATCH_BYTES = 8 << 20
#: Default upper bound of a shard's logical bytes. Up to ``workers + 1`` shards are
#: in memory (as the batches they were cut from; a shard is never concatenated).
SHARD_BYTES = 32 << 20


class _Column:
    """One field's records of one batch: ``dense`` is ``(n, *shape)``; a ragged
    column is ``values`` (1-D) and ``shapes`` (``(n, ndim)`` int64)."""

    __slots__ = ("dense", "values", "shapes", "_cu")

    # Any: the arrays of the layout the column does not have are None, which the
    # methods tell apart by ``dense is None`` rather than per attribute.
    dense: Any
    values: Any
    shapes: Any
    _cu: npt.NDArray[np.int64] | None

    def __init__(self, dense: Any = None, values: Any = None, shapes: Any = None) -> None:
        self.dense, self.values, self.shapes, self._cu = dense, values, shapes, None

    def __len__(self) -> int:
        return int(len(self.dense) if self.dense is not None else len(self.shapes))

    @property
    def cu(self) -> npt.NDArray[np.int64]:
        if self._cu is None:
            sizes = np.prod(self.shapes, axis=1, dtype=np.int64) if self.shapes.size else np.zeros(len(self.shapes), np.int64)
            self._cu = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        return self._cu

    @property
    def nbytes(self) -> int:
        return int((self.dense if self.dense is not None else self.values).nbytes)

    def slice(self, a: int, b: int) -> "_Column":
        if self.dense is not None:
            return _Column(dense=self.dense[a:b])
        cu = self.cu
        return _Column(values=self.values[cu[a] : cu[b]], shapes=self.shapes[a:b])

    @staticmethod
    def concat(parts: list[_Column]) -> "_Column":
        if len(parts) == 1:
            return parts[0]
        if parts[0].dense is not None:
            return _Column(dense=np.concatenate([p.dense for p in parts]))
        return _Column(
            values=np.concatenate([p.values for p in parts]),
            shapes=np.concatenate([p.shapes for p in parts]),
        )


class FieldSpec:
    """A field's schema: dtype, dense ``shape`` or ragged ``ndim``, and metadata."""

    def __init__(self, dtype: npt.DTypeLike, shape: Iterable[int] | None = None, *,
                 ragged: bool = False, ndim: int = 1, metadata: Mapping[str, str] | None = None,
                 kind: str | None = None) -> None:
        self.dtype = np.dtype(dtype)
        self.ragged = bool(ragged)
        self.shape = tuple(int(d) for d in (shape or ()))
        self.ndim = int(ndim)
        self.metadata = dict(metadata or {})
        if kind is not None:
            self.metadata["zring.kind"] = kind
            if kind == "str":
                self.metadata.setdefault("encoding", "utf-8")

    @classmethod
    def parse(cls, spec: FieldSpecLike) -> "FieldSpec":
        """A FieldSpec from itself, ``"str"`` / ``"bytes"``, or a dict such as
        ``{"dtype": "int32", "ragged": True}`` or ``{"dtype": "uint8", "shape": (3, 224, 224)}``."""
        if isinstance(spec, FieldSpec):
            return spec
        if spec in ("str", "bytes"):
            return cls(np.uint8, ragged=True, kind=spec)
        if isinstance(spec, dict):
            return cls(**spec)
        raise TypeError(f"a field schema is a FieldSpec, 'str', 'bytes' or a dict, got {spec!r}")

    @property
    def kind(self) -> str | None:
        """``"str"`` or ``"bytes"`` for text and binary fields (stored as ragged
        uint8), else ``None``."""
        return self.metadata.get("zring.kind")

    def native(self, name: str) -> tuple[str, np.dtype[Any], str, Any, dict[str, str]]:
        """The ``(name, dtype, layout, shape_or_ndim, metadata)`` tuple the native
        dataset builder takes for this field."""
        if self.ragged:
            return (name, self.dtype, "ragged", self.ndim, self.metadata)
        return (name, self.dtype, "dense", list(self.shape), self.metadata)

    def __repr__(self) -> str:
        what = f"ragged ndim={self.ndim}" if self.ragged else f"shape={self.shape}"
        return f"FieldSpec({self.dtype}, {what}, metadata={self.metadata})"


def dataset_specs(path: str | os.PathLike[str]) -> dict[str, FieldSpec]:
    """The field schemas of the dataset at ``path`` (a directory or URL), in field
    order: what records appended to it are converted to, whatever a new batch alone
    would infer (Python floats are float64, a dataset's field may be float32). Reads
    the manifest only, not the stores (at a URL, one GET)."""
    return builder_specs(_DatasetBuilder(str(path), [], append=True))


def builder_specs(builder: _DatasetBuilder) -> dict[str, FieldSpec]:
    """The field schemas of the dataset ``builder`` appends to (see dataset_specs)."""
    out: dict[str, FieldSpec] = {}
    for f, dtype in zip(builder.fields, builder.dtypes):
        name = f["name"]
        if f["layout"] == "dense":
            out[name] = FieldSpec(dtype, f["item_shape"], metadata=f["metadata"])
        else:
            out[name] = FieldSpec(dtype, ragged=True, ndim=f["ndim"], metadata=f["metadata"])
    return out


def with_dataset_specs(given: Mapping[str, FieldSpec], existing: Mapping[str, FieldSpec]) -> dict[str, FieldSpec]:
    """``existing`` (a dataset's schemas) for an append, after checking that no
    schema the caller gave disagrees with it."""
    for name, spec in given.items():
        have = existing.get(name)
        if have is not None and spec.native(name)[:4] != have.native(name)[:4]:
            raise ValueError(f"field {name!r}: the schema given, {spec}, is not the dataset's, {have}")
    return {**given, **existing}


def dense(dtype: npt.DTypeLike, shape: Iterable[int] = ()) -> FieldSpec:
    """A fixed-shape field."""
    return FieldSpec(dtype, shape)


def ragged(dtype: npt.DTypeLike, ndim: int = 1) -> FieldSpec:
    """A variable-shape field of ``ndim`` dimensions."""
    return FieldSpec(dtype, ragged=True, ndim=ndim)


# ---------------------------------------------------------------- column conversion


def _from_values(values: Sequence[Any], spec: FieldSpec | None, name: str) -> tuple[_Column, FieldSpec]:
    """A column (and its inferred spec) from a list of Python / NumPy values."""
    first = values[0] if values else None
    if spec is None:
        if isinstance(first, str):
            spec = FieldSpec(np.uint8, ragged=True, kind="str")
        elif isinstance(first, (bytes, bytearray, memoryview)):
            spec = FieldSpec(np.uint8, ragged=True, kind="bytes")
        elif isinstance(first, np.ndarray):
            shapes = {np.shape(v) for v in values}
            if len(shapes) == 1:
                spec = FieldSpec(first.dtype, first.shape)
            else:
                spec = FieldSpec(first.dtype, ragged=True, ndim=first.ndim)
        elif isinstance(first, (list, tuple)):
            arr = np.asarray(first)
            spec = FieldSpec(arr.dtype if arr.size else np.float64, ragged=True, ndim=max(arr.ndim, 1))
        else:
            spec = FieldSpec(np.asarray(first).dtype)
    if spec.kind in ("str", "bytes"):
        enc = spec.metadata.get("encoding", "utf-8")
        raw = [v.encode(enc) if isinstance(v, str) else bytes(v) for v in values]
        lens = np.fromiter((len(b) for b in raw), dtype=np.int64, count=len(raw))
        buf = np.frombuffer(b"".join(raw), dtype=np.uint8)
        return _Column(values=buf, shapes=lens.reshape(-1, 1)), spec
    if spec.ragged:
        arrs = [np.asarray(v, dtype=spec.dtype) for v in values]
        for k, a in enumerate(arrs):
            if a.ndim != spec.ndim:
                raise ValueError(f"field {name!r}: a record has shape {a.shape}, expected {spec.ndim} dimensions")
        shape_rows = np.array([a.shape for a in arrs], dtype=np.int64).reshape(len(arrs), spec.ndim)
        vals = np.concatenate([a.reshape(-1) for a in arrs]) if arrs else np.zeros(0, spec.dtype)
        return _Column(values=vals, shapes=shape_rows), spec
    arr = np.asarray(values, dtype=spec.dtype)
    if arr.shape[1:] != spec.shape:
        raise ValueError(f"field {name!r}: records of shape {arr.shape[1:]}, the schema says {spec.shape}")
    return _Column(dense=arr), spec


def _from_numpy(arr: Any, spec: FieldSpec | None, name: str) -> tuple[_Column, FieldSpec]:
    if not isinstance(arr, np.ndarray):
        if spec is not None and spec.ragged:
            return _from_values(list(arr), spec, name)
        try:
            arr = np.asarray(arr)
        except ValueError:  # a list of sequences of different lengths
            return _from_values(list(arr), spec, name)
    if arr.dtype == object or arr.dtype.kind in "USV" or (spec is not None and spec.ragged):
        return _from_values(list(arr), spec, name)
    if spec is None:
        spec = FieldSpec(arr.dtype, arr.shape[1:])
    elif arr.shape[1:] != spec.shape:
        raise ValueError(f"field {name!r}: records of shape {arr.shape[1:]}, the schema says {spec.shape}")
    return _Column(dense=np.ascontiguousarray(arr, dtype=spec.dtype)), spec


def _arrow_spec(pa: Any, typ: Any, name: str) -> FieldSpec:
    """The field a pyarrow type is stored as."""
    t = pa.types
    if t.is_string(typ) or t.is_large_string(typ):
        return FieldSpec(np.uint8, ragged=True, kind="str")
    if t.is_binary(typ) or t.is_large_binary(typ):
        return FieldSpec(np.uint8, ragged=True, kind="bytes")
    if t.is_fixed_size_binary(typ):
        return FieldSpec(np.uint8, (typ.byte_width,), kind="bytes")
    if t.is_boolean(typ) or t.is_integer(typ) or t.is_floating(typ):
        return FieldSpec(typ.to_pandas_dtype())
    if t.is_fixed_size_list(typ):
        inner = _arrow_spec(pa, typ.value_type, name)
        if inner.ragged:
            raise TypeError(f"field {name!r}: fixed-size lists of variable-size values are not supported")
        return FieldSpec(inner.dtype, (typ.list_size,) + inner.shape)
    if t.is_list(typ) or t.is_large_list(typ):
        inner = _arrow_spec(pa, typ.value_type, name)
        if inner.ragged or inner.kind:
            raise TypeError(f"field {name!r}: lists of variable-size values are not supported; give one field per level")
        return FieldSpec(inner.dtype, ragged=True, ndim=1 + len(inner.shape))
    if t.is_struct(typ) and {typ.field(i).name for i in range(typ.num_fields)} == {"values", "shape"}:
        inner = _arrow_spec(pa, typ.field("values").type, name)
        return FieldSpec(inner.dtype, ragged=True, ndim=typ.field("shape").type.list_size)
    if t.is_dictionary(typ):
        return _arrow_spec(pa, typ.value_type, name)
    raise TypeError(f"field {name!r}: Arrow type {typ} is not supported (give it explicitly or drop the column)")


def _arrow_column(pa: Any, arr: Any, spec: FieldSpec, name: str) -> _Column:
    """One Arrow array as a column of ``spec`` (zero-copy where Arrow allows)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    if arr.null_count:
        raise ValueError(f"field {name!r} holds {arr.null_count} null values; zring fields have no nulls")
    t = pa.types
    typ = arr.type
    n = len(arr)
    if t.is_string(typ) or t.is_large_string(typ) or t.is_binary(typ) or t.is_large_binary(typ):
        off_dtype = np.int64 if (t.is_large_string(typ) or t.is_large_binary(typ)) else np.int32
        offsets = np.frombuffer(arr.buffers()[1], dtype=off_dtype)[arr.offset : arr.offset + n + 1]
        data = arr.buffers()[2]
        values = np.frombuffer(data, dtype=np.uint8)[offsets[0] : offsets[-1]] if data is not None else np.zeros(0, np.uint8)
        lens = np.diff(offsets).astype(np.int64)
        return _Column(values=values, shapes=lens.reshape(-1, 1))
    if t.is_fixed_size_binary(typ):
        return _Column(dense=np.frombuffer(arr.buffers()[1], np.uint8)[arr.offset * typ.byte_width :][: n * typ.byte_width].reshape(n, typ.byte_width))
    if t.is_list(typ) or t.is_large_list(typ):
        offsets = _arrow_numpy(pa, arr.offsets).astype(np.int64)
        flat = arr.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
        lens = np.diff(offsets)
        inner = _flat_numpy(pa, flat, spec.dtype, name)
        rest = inner.shape[1:]
        shapes = np.concatenate([lens.reshape(-1, 1), np.tile(np.array(rest, dtype=np.int64), (n, 1))], axis=1)
        if not spec.ragged:  # lists into a dense field (an append to one): equal shapes only
            return _dense_of_lists(inner, shapes, spec, name)
        return _Column(values=inner.reshape(-1), shapes=shapes.reshape(n, spec.ndim))
    if t.is_struct(typ):
        values = arr.field("values")
        shape = _arrow_numpy(pa, arr.field("shape").values).astype(np.int64).reshape(n, spec.ndim)
        offsets = _arrow_numpy(pa, values.offsets).astype(np.int64)
        flat = values.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
        return _Column(values=_flat_numpy(pa, flat, spec.dtype, name).reshape(-1), shapes=shape)
    return _Column(dense=_flat_numpy(pa, arr, spec.dtype, name).reshape((n,) + spec.shape))


def _dense_of_lists(values: npt.NDArray[Any], shapes: npt.NDArray[Any], spec: FieldSpec, name: str) -> _Column:
    """Arrow lists as a column of the dense ``spec``: every record must have its shape."""
    want = np.array(spec.shape, dtype=np.int64)
    if shapes.shape[1] != len(want):
        raise ValueError(f"field {name!r} is dense of shape {spec.shape}; its records have {shapes.shape[1]} dimension(s)")
    wrong = np.flatnonzero((shapes != want).any(axis=1))
    if wrong.size:
        k = int(wrong[0])
        raise ValueError(f"field {name!r} is dense of shape {spec.shape}; record {k} has shape {tuple(shapes[k].tolist())}")
    return _Column(dense=values.reshape((len(shapes),) + spec.shape))


def _arrow_numpy(pa: Any, arr: Any) -> npt.NDArray[Any]:
    """A 1-D NumPy view of an Arrow array without nulls: zero-copy from its data buffer
    for integers and floats. Not ``Array.to_numpy`` (nor ``np.asarray``): those import
    pandas, ~0.4 s of a converter's start-up with compiled bytecode and ~2 s without."""
    typ = arr.type
    t = pa.types
    if t.is_integer(typ):
        dt = np.dtype(f"{'i' if t.is_signed_integer(typ) else 'u'}{typ.bit_width // 8}")
    elif t.is_floating(typ):
        dt = np.dtype(f"f{typ.bit_width // 8}")
    else:
        return np.asarray(arr.to_numpy(zero_copy_only=False))
    data = arr.buffers()[1]
    if data is None:
        return np.zeros(0, dt)
    return np.frombuffer(data, dtype=dt)[arr.offset : arr.offset + len(arr)]


def _flat_numpy(pa: Any, arr: Any, dtype: npt.DTypeLike, name: str) -> npt.NDArray[Any]:
    """A primitive or (nested) fixed-size-list Arrow array as ``(n, *shape)`` NumPy."""
    shape = []
    while pa.types.is_fixed_size_list(arr.type):
        shape.append(arr.type.list_size)
        arr = arr.flatten()
    if arr.null_count:
        raise ValueError(f"field {name!r} holds null values; zring fields have no nulls")
    out = _arrow_numpy(pa, arr)
    return np.ascontiguousarray(out, dtype=dtype).reshape((-1, *shape)) if shape else np.ascontiguousarray(out, dtype=dtype)


# ---------------------------------------------------------------- sources


def _arrow_batches(source: Any, batch_records: int | None) -> _ArrowBatches | None:
    """(pyarrow module, iterator of RecordBatch) for an Arrow-ish source, else None."""
    try:
        import pyarrow as pa
    except ImportError:
        return None
    if isinstance(source, pa.Table):
        rows = batch_records or _rows_for(source.nbytes, source.num_rows)
        return pa, source.to_batches(max_chunksize=rows), source.num_rows
    if isinstance(source, pa.RecordBatch):
        return pa, iter([source]), source.num_rows
    if isinstance(source, pa.RecordBatchReader):
        return pa, iter(source), None
    try:
        import datasets as hf
    except ImportError:
        hf = None
    if hf is not None and isinstance(source, hf.Dataset):
        table = source.data.table
        rows = batch_records or _rows_for(table.nbytes, max(table.num_rows, 1))
        if getattr(source, "_indices", None) is None:
            files = _hf_files(source.data)
            if files is not None:
                return pa, _ipc_file_batches(pa, files, table.schema.names), len(source)
            return pa, table.to_batches(max_chunksize=rows), len(source)
        arrow = source.with_format("arrow")
        batches = (rb for t in arrow.iter(batch_size=rows) for rb in t.to_batches())
        return pa, batches, len(source)
    return None


#: Hugging Face table transformations that streaming its Arrow files reproduces
#: (schema metadata does not matter to zring; ``select`` picks columns by name).
_HF_REPLAYS = {"replace_schema_metadata", "select"}


def _hf_files(table: Any) -> list[str] | None:
    """The Arrow stream files a Hugging Face table is read from, in order, if it is
    exactly their rows (memory-mapped, transformed only by column selection), else
    None. Streaming the files reads each batch into memory and frees it; iterating
    the memory-mapped table instead leaves every page it touched mapped, so the
    reader's RSS grows with the dataset."""
    from datasets.table import ConcatenationTable, MemoryMappedTable

    def plain(t: Any) -> str | None:
        if not isinstance(t, MemoryMappedTable) or not t.path:
            return None
        if any(r[0] not in _HF_REPLAYS for r in (t.replays or [])):
            return None
        return str(t.path)

    if isinstance(table, MemoryMappedTable):
        one = plain(table)
        return [one] if one else None
    if isinstance(table, ConcatenationTable):
        paths = [plain(row[0]) if len(row) == 1 else None for row in table.blocks]
        if paths and all(paths):
            return cast("list[str]", paths)
    return None


def _ipc_file_batches(pa: Any, paths: Sequence[str], columns: Sequence[str]) -> Iterator[Any]:
    """The record batches of Arrow IPC stream files, read (not mapped), with
    ``columns`` selected."""
    for path in paths:
        with pa.OSFile(path) as f:
            for rb in pa.ipc.open_stream(f):
                yield rb.select(list(columns))


def _rows_for(nbytes: int, rows: int) -> int:
    per_row = max(1, nbytes // max(rows, 1))
    return max(1, min(65536, BATCH_BYTES // per_row))


def _dict_batches(
    source: Iterable[Mapping[str, Any]], batch_records: int | None
) -> Iterator[dict[str, list[Any]]]:
    """Batches of ``{name: list}`` from an iterable of dicts."""
    rows = batch_records or 256
    batch: dict[str, list[Any]] = {}
    count = 0
    for rec in source:
        if not batch:
            batch = {k: [] for k in rec}
        if rec.keys() != batch.keys():
            raise ValueError(f"record {count} has fields {sorted(rec)}, the first record {sorted(batch)}")
        for k, v in rec.items():
            batch[k].append(v)
        count += 1
        if len(next(iter(batch.values()))) >= rows:
            yield batch
            batch = {}
    if batch:
        yield batch


#: How many values of a binary column are looked at to tell whether it holds images.
_IMAGE_SNIFF = 1024


def _note_image_kind(spec: FieldSpec, col: Any) -> None:
    """Records ``zring.image`` (``jpeg``, ``png`` or ``jpeg,png``) in the metadata of a
    bytes field whose first values (up to ``_IMAGE_SNIFF``, nulls and empties
    passed) are all JPEG or PNG images, by their signatures: the read-side decode
    (``decode=``) takes such a field, and ``zring info`` shows the format."""
    if spec.kind != "bytes" or not spec.ragged:
        return
    kinds = set()
    for value in col.slice(0, _IMAGE_SNIFF).to_pylist():
        if not value:
            continue
        if value.startswith(b"\xff\xd8\xff"):
            kinds.add("jpeg")
        elif value.startswith(b"\x89PNG\r\n\x1a\n"):
            kinds.add("png")
        else:
            return
    if kinds:
        spec.metadata["zring.image"] = ",".join(sorted(kinds))


def _flatten_into(pa: Any, out: dict[str, Any], name: str, arr: Any) -> None:
    """Adds column ``name`` to ``out``, struct children as ``name.child``. (A module
    function, not a recursive closure: a closure that calls itself is a reference
    cycle, and each one kept its batch's Arrow memory alive until the garbage
    collector ran, so a conversion's memory grew with its input.)"""
    typ = arr.type
    if pa.types.is_struct(typ):
        names = {typ.field(i).name for i in range(typ.num_fields)}
        if names == {"values", "shape"}:
            out[name] = arr
            return
        if "bytes" in names and names <= {"bytes", "path", "sampling_rate"}:
            out[name] = arr.field("bytes")
            return
        for i in range(typ.num_fields):
            _flatten_into(pa, out, f"{name}.{typ.field(i).name}", arr.field(i))
        return
    out[name] = arr


class _Source:
    """Turns any supported source into batches of ``{name: _Column}`` with fixed specs."""

    def __init__(self, source: Any, fields: Iterable[str] | Mapping[str, FieldSpecLike] | None,
                 batch_records: int | None) -> None:
        self.specs: dict[str, FieldSpec] | None = None
        self.total: int | None = None
        self.select: list[str] | None = None
        self.batches: Iterator[Any]
        self.given: dict[str, FieldSpec]
        if isinstance(fields, dict):
            self.given = {k: FieldSpec.parse(v) for k, v in fields.items()}
            self.select = list(fields)
        else:
            self.given = {}
            if fields is not None:
                self.select = list(fields)
        arrow = _arrow_batches(source, batch_records)
        if arrow is not None:
            self.pa, batches, self.total = arrow
            self.kind = "arrow"
            self.batches = batches
        elif isinstance(source, dict):
            self.kind = "columns"
            self.total = len(next(iter(source.values()))) if source else 0
            self.batches = self._numpy_batches(source, batch_records)
        else:
            self.kind = "rows"
            try:
                self.total = len(source)
            except TypeError:
                self.total = None
            self.batches = _dict_batches(source, batch_records)

    def _numpy_batches(self, cols: Mapping[str, Any], batch_records: int | None) -> Iterator[dict[str, Any]]:
        n = self.total or 0
        lengths = {k: len(v) for k, v in cols.items()}
        if len(set(lengths.values())) > 1:
            raise ValueError(f"columns have different lengths: {lengths}")
        first = {k: np.asarray(v[:1]) if hasattr(v, "__getitem__") else None for k, v in cols.items()}
        row_bytes = sum(a.nbytes for a in first.values() if a is not None and a.dtype != object) or 64
        rows = batch_records or max(1, BATCH_BYTES // row_bytes)
        for a in range(0, n, rows):
            yield {k: v[a : a + rows] for k, v in cols.items()}

    def _names(self, available: Iterable[str]) -> list[str]:
        if self.select is None:
            return list(available)
        have = list(available)
        missing = [k for k in self.select if k not in have]
        if missing:
            raise KeyError(f"fields {missing} are not in the source (it has {have})")
        return self.select

    def _flatten_arrow(self, rb: Any) -> dict[str, Any]:
        """Struct columns become ``parent.child`` fields; Hugging Face Image / Audio
        structs (``bytes`` + ``path``) keep their encoded bytes under the parent's name."""
        out: dict[str, Any] = {}
        for name, col in zip(rb.schema.names, rb.columns):
            _flatten_into(self.pa, out, name, col)
        return out

    def __iter__(self) -> Iterator[dict[str, _Column]]:
        for batch in self.batches:
            if self.kind == "arrow":
                cols = self._flatten_arrow(batch)
            else:
                cols = batch
            names = self._names(cols)
            if self.specs is None:
                self.specs = {}
                for k in names:
                    if k in self.given:
                        self.specs[k] = self.given[k]
                    elif self.kind == "arrow":
                        self.specs[k] = _arrow_spec(self.pa, cols[k].type, k)
                        _note_image_kind(self.specs[k], cols[k])
            out: dict[str, _Column] = {}
            for k in names:
                spec = self.specs.get(k)
                if self.kind == "arrow":
                    # Every arrow field's spec was set from the first batch.
                    out[k] = _arrow_column(self.pa, cols[k], cast(FieldSpec, spec), k)
                elif self.kind == "columns":
                    out[k], self.specs[k] = _from_numpy(cols[k], spec, k)
                else:
                    out[k], self.specs[k] = _from_values(cols[k], spec, k)
            yield out


# ---------------------------------------------------------------- writing


def _progress(total: int | None, enabled: bool | None) -> Any:
    if enabled is False:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    if enabled is None and not (hasattr(sys.stderr, "isatty") and sys.stderr.isatty()):
        return None
    return tqdm(total=total, unit="rec", unit_scale=True, desc="zring")


#: Batches smaller than this are concatenated before they are appended (each append
#: is one parallel compression of its bytes; large batches are appended as they are).
APPEND_BYTES = 4 << 20


def _coalesce(cols: list[_Column]) -> list[_Column]:
    """``cols`` with runs of small columns concatenated into ~``APPEND_BYTES`` ones."""
    out: list[_Column] = []
    run: list[_Column] = []
    size = 0
    for c in cols:
        if c.nbytes >= APPEND_BYTES:  # large: appended as it is, never copied
            if run:
                out.append(_Column.concat(run))
                run, size = [], 0
            out.append(c)
            continue
        run.append(c)
        size += c.nbytes
        if size >= APPEND_BYTES:
            out.append(_Column.concat(run))
            run, size = [], 0
    if run:
        out.append(_Column.concat(run))
    return out


def _write_shard(paths: Sequence[str], names: Sequence[str], specs: Mapping[str, FieldSpec],
                 parts: Sequence[Mapping[str, _Column]], codec: str, level: int, dict_bytes: int | None) -> int:
    """Writes one shard's stores from its batches (``parts``, appended one after the
    other: no concatenated copy of the shard is made); returns its record count."""
    n = sum(len(p[names[0]]) for p in parts)
    for path, name in zip(paths, names):
        spec = specs[name]
        cols = _coalesce([p[name] for p in parts if len(p[name])])
        meta = dict(spec.metadata)
        # threads=0: every writer compresses on all cores, so a conversion of few
        # shards (or a last, lone shard) still uses the whole machine.
        kwargs: dict[str, Any] = dict(codec=codec, level=level, overwrite=True, threads=0, metadata=meta)
        if spec.ragged:
            rw = RaggedWriter(path, spec.dtype, spec.ndim, **kwargs)
            with rw:
                for col in cols:
                    # The writer reads a RaggedBatch's three arrays by name.
                    values = np.ascontiguousarray(col.values)
                    rw.append(cast(Any, SimpleNamespace(values=values, cu_seqlens=col.cu, shapes=col.shapes)))
        else:
            dw = DenseWriter(path, spec.dtype, spec.shape, **kwargs)
            with dw:
                for col in cols:
                    dw.append(col.dense)
    return n


def write_dataset(
    path: str | os.PathLike[str],
    source: Any,
    fields: Iterable[str] | Mapping[str, FieldSpecLike] | None = None,
    *,
    shard_records: int | None = None,
    shard_bytes: int | str = SHARD_BYTES,
    workers: int | None = None,
    codec: CodecName = "zstd",
    level: int = 3,
    append: bool = False,
    overwrite: bool = False,
    batch_records: int | None = None,
    progress: bool | None = None,
    follow_links_out: bool = False,
) -> Dataset:
    """Writes ``source`` as a zring dataset in directory ``path`` and returns it opened.

    ``source``: an iterable of dicts (one per record), a dict of NumPy columns, a
    ``pyarrow.Table`` / ``RecordBatch`` / ``RecordBatchReader``, or a Hugging Face
    ``datasets.Dataset``. ``fields``: ``None`` (every column, schemas inferred), a
    list of column names, or ``{name: schema}`` where a schema is a
    :class:`FieldSpec` (``zring.dense(dtype, shape)``, ``zring.ragged(dtype, ndim)``),
    ``"str"``, ``"bytes"`` or a dict of FieldSpec's arguments.

    Inference: numbers are dense scalars; equal-shape arrays dense; lists and arrays
    of varying shape ragged; ``str`` / ``bytes`` ragged uint8 with the kind (and
    encoding) kept in the field's metadata. Arrow: primitives, fixed-size lists
    (dense), lists (ragged), strings and binaries (ragged uint8), structs (one field
    per child, ``parent.child``; Hugging Face Image / Audio keep their encoded bytes).

    Shards of ``shard_records`` records (default: as many as fit in ``shard_bytes``,
    an int or a size with units such as ``"256M"``)
    are written by ``workers`` threads (default: one per core) with ``codec`` /
    ``level``. ``append`` adds the shards to the existing dataset as a new version;
    ``overwrite`` replaces an existing dataset. A progress bar shows when tqdm is
    installed and stderr is a terminal (``progress=True`` / ``False`` to force).
    ``follow_links_out``: the read setting of :func:`open_dataset`, for appending to
    a dataset whose stores are symbolic links to files outside its directory; without
    it such an append is refused before anything is written.

    Returns the written dataset, opened at the version this call published
    (:class:`Dataset`). The dataset is published atomically: until it returns
    nothing new is visible at ``path``, and after an error an existing dataset
    there is unchanged. Several processes may write to one dataset at once: each
    publication is its own version, and a writer that another one beat to the
    next version gets ``VersionConflictError`` and publishes nothing.

    Raises ``VersionConflictError`` (a ``RuntimeError``) when another writer
    published a version since this one started; ``StorePermissionError`` when
    appending to a dataset with stores linked in from outside it and
    ``follow_links_out`` is not given; ``StoreExistsError`` (a
    ``FileExistsError``) when ``path`` holds a
    dataset and neither ``append`` nor ``overwrite`` is given; ``ValueError`` for a
    source without records and fields, records whose fields or shapes disagree
    with the schema, appended fields that differ from the dataset's, or an unknown
    codec; ``TypeError`` for a source or schema of an unsupported kind.

    >>> import os, tempfile, numpy as np, zring
    >>> path = os.path.join(tempfile.mkdtemp(), "ds")
    >>> ds = zring.write_dataset(path, [{"x": np.full(2, i, np.float32), "tokens": list(range(i + 1))} for i in range(3)])
    >>> len(ds), ds.fields, ds.shards
    (3, ['x', 'tokens'], 1)
    >>> ds[2]["tokens"].tolist()
    [0, 1, 2]
    >>> len(zring.write_dataset(path, {"x": np.zeros((2, 2), np.float32), "tokens": [[7], [8, 9]]}, append=True))
    5
    """
    from .dataset import open_dataset

    workers = workers or os.cpu_count() or 1
    shard_bytes = parse_size(shard_bytes)
    src = _Source(source, fields, batch_records)
    caller_gave = bool(src.given)
    if append:
        # Its manifest read first: the dataset's schemas are the new records' (see
        # dataset_specs). Stores linked in from outside are refused before anything
        # is written (unless follow_links_out), not after publishing.
        builder = _DatasetBuilder(str(path), [], append=True, follow_links_out=follow_links_out)
        src.given = with_dataset_specs(src.given, builder_specs(builder))
    it = iter(src)
    first = next(it, None)
    if first is None:
        if not src.specs and not caller_gave:
            raise ValueError("the source holds no records and no fields were given")
        src.specs = src.specs or src.given
    # Set by the first batch, or just above when there is none.
    specs = cast("dict[str, FieldSpec]", src.specs)
    names = list(specs)
    if append:
        have = [f["name"] for f in builder.fields]
        if have != names:
            raise ValueError(f"appending fields {names} to a dataset of fields {have}")
    else:
        builder = _DatasetBuilder(str(path), [specs[k].native(k) for k in names], overwrite=overwrite)
    bar = _progress(src.total, progress)
    limit = threading.BoundedSemaphore(workers + 1)
    futures: list[Future[int]] = []
    shard_no = 0

    def done(f: Future[int]) -> None:
        limit.release()
        if bar and not f.exception():
            bar.update(f.result())

    def submit(parts: list[dict[str, _Column]]) -> None:
        nonlocal shard_no
        limit.acquire()
        fut = pool.submit(_write_shard, builder.shard_paths(shard_no), names, specs, parts, codec, level, None)
        fut.add_done_callback(done)
        futures.append(fut)
        shard_no += 1

    pending: list[dict[str, _Column]] = []
    pending_n = 0
    pending_bytes = 0
    try:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for batch in itertools.chain([first] if first is not None else [], it):
                n = len(batch[names[0]])
                start = 0
                while start < n:
                    room = (shard_records or 1 << 62) - pending_n
                    take = min(room, n - start)
                    part = {k: c.slice(start, start + take) if (start or take < n) else c for k, c in batch.items()}
                    pending.append(part)
                    pending_n += take
                    pending_bytes += sum(c.nbytes for c in part.values())
                    start += take
                    if pending_n >= (shard_records or 1 << 62) or pending_bytes >= shard_bytes:
                        submit(pending)
                        pending, pending_n, pending_bytes = [], 0, 0
                # Stop early on a failed shard instead of converting the rest.
                for f in futures:
                    error = f.exception() if f.done() else None
                    if error:
                        raise error
            if pending:
                submit(pending)
        builder.add_shards([f.result() for f in futures])
        version = builder.publish()
    finally:
        if bar is not None:
            bar.close()
    # Exactly the version this call published: another writer may have published a
    # newer one since.
    return open_dataset(path, version=version, follow_links_out=follow_links_out)

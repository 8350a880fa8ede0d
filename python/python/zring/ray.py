"""Ray Data: read zring datasets and stores as a ``ray.data.Dataset``, and write one
from a distributed pipeline.

- :func:`read_zring` splits the records of one or more datasets / stores into
  contiguous ranges, one per read task; each task gathers its range with the engine
  and hands Ray Arrow blocks built over the gathered NumPy arrays without copying
  (dense fields; ragged ``values`` become the child array of an Arrow list).
- :class:`ZringDatasink` writes one shard per write task (a zring writer per field,
  fed block by block) into the dataset's ``data/`` under names of the job's own, at
  a local path or a URL, and publishes the manifest once, in ``on_write_complete``,
  after every task succeeded. A failed job publishes nothing.

This module imports Ray; ``import zring`` does not.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping, Sequence, Union, cast

import pyarrow as pa

try:
    from ray.data import Datasink, read_datasource
    from ray.data.block import BlockAccessor, BlockMetadata
    from ray.data.datasource import Datasource, ReadTask
    from ray.data.extensions import ArrowTensorArray, ArrowVariableShapedTensorArray
except ImportError as _missing:  # pragma: no cover - depends on the environment
    raise ImportError("zring.ray needs Ray Data: pip install 'ray[data]'") from _missing

from ._internal.dataset import open_dataset
from ._internal.errors import StoreNotFoundError
from ._internal.mixture import Mixture
from ._internal.write import FieldSpec, _arrow_column, _arrow_spec, _from_numpy, dataset_specs, with_dataset_specs
from ._zring import DenseWriter, RaggedWriter, _DatasetBuilder
from ._zring import open as open_store

if TYPE_CHECKING:
    from ._internal.write import FieldSpecLike, _Column
    from .types import CodecName

#: A dataset directory or store file, or a list of them.
_Paths = Union[str, "os.PathLike[str]", Sequence[Union[str, "os.PathLike[str]"]]]

__all__ = ["read_zring", "ZringDatasource", "ZringDatasink"]

#: The keyword arguments of :func:`read_zring` that are read settings (passed to
#: every dataset and store it opens, on the driver and in the read tasks).
READ_SETTINGS = ("backend", "verify_checksums", "threads", "queue_depth", "direct", "follow_links_out",
                 "remote")

#: Logical bytes a read task puts in one block (Ray's default target is 128 MiB).
BLOCK_BYTES = 32 << 20


# ---------------------------------------------------------------- reading


def _is_url(path: str) -> bool:
    return "://" in path


def _store_name(path: str) -> str:
    """A store's single field name: its file (or object) name up to the first dot."""
    return path.rstrip("/").rsplit("/", 1)[-1].split(".")[0]


class _Source:
    """One dataset or store, opened on the driver; pickles as what reopens it."""

    def __init__(self, path: str | os.PathLike[str], version: int | None = None,
                 options: Mapping[str, Any] | None = None) -> None:
        self.path = os.fspath(path)
        self.version: int | None
        self.options = dict(options or {})
        ds = self._open_dataset(version)
        if ds is not None:
            self.version = ds.version
            self.len = len(ds)
            self.schemas = ds.field_schemas
            self.store_paths = ds.store_paths()
        else:
            store = self._open_store()
            self.version = None
            self.len = len(store)
            schema = dict(store.schema)
            schema["name"] = _store_name(self.path)
            schema["metadata"] = dict(store.metadata)
            self.schemas = {schema["name"]: schema}
            self.store_paths = [self.path]

    def _open_dataset(self, version: int | None) -> Any:
        """The dataset at ``path``, or None when ``path`` names a store. A local path
        is a dataset when it is a directory; a URL when it has a manifest (an object
        store has no directories to ask about)."""
        if not _is_url(self.path):
            return open_dataset(self.path, version=version, **self.options) if os.path.isdir(self.path) else None
        try:
            return open_dataset(self.path, version=version, **self.options)
        except StoreNotFoundError as no_manifest:
            try:
                self._open_store()
            except StoreNotFoundError:
                raise StoreNotFoundError(
                    f"{self.path}: neither a dataset (no {self.path.rstrip('/')}/manifest.json) "
                    "nor a store object"
                ) from no_manifest
            return None

    def _open_store(self) -> Any:
        return open_store(self.path, **self.options)

    def reader(self, fields: list[str]) -> Callable[[int, int], dict[str, Any]]:
        """``read(start, stop)`` -> ``{name: ndarray | RaggedBatch}``, over the source
        opened once (in the read task's process)."""
        if self.version is None:
            (name,) = self.schemas
            store = self._open_store()
            return lambda a, b: {name: store[a:b]}
        ds = open_dataset(self.path, version=self.version, **self.options)
        return lambda a, b: ds.gather(slice(a, b), fields=fields)

    def logical_bytes(self, fields: list[str]) -> int:
        """Bytes the records of ``fields`` take in memory once read (payload plus
        the 8-byte Arrow offsets of ragged fields), from the stores' headers."""
        return _logical_bytes(self.store_paths, self.schemas, fields, self.options)


def _logical_bytes(store_paths: list[str], schemas: dict[str, Any], fields: list[str],
                   options: Mapping[str, Any]) -> int:
    """What :meth:`_Source.logical_bytes` says, for stores listed shard by shard,
    each shard's in the field order of ``schemas``."""
    names = list(schemas)
    total = 0
    for k, p in enumerate(store_paths):
        name = names[k % len(names)]
        if name in fields:
            store = open_store(p, **options)
            total += int(store.stats()["logical_bytes"])
            if schemas[name]["layout"] == "ragged":
                total += 8 * (len(store) + 1)
    return total


class _MixtureSource:
    """Epoch ``epoch`` of a mixture: its ``len(mix)`` positions read like a dataset's
    records (the mixture pickles as its sources, reopened in each read task)."""

    def __init__(self, mixture: Mixture, epoch: int) -> None:
        self.mixture, self.epoch = mixture, int(epoch)
        self.path = repr(mixture)
        self.len = len(mixture)
        self.schemas = mixture.field_schemas

    def reader(self, fields: list[str]) -> Callable[[int, int], dict[str, Any]]:
        mixture, epoch = self.mixture, self.epoch
        return lambda a, b: mixture.gather(slice(a, b), fields=fields, epoch=epoch)

    def logical_bytes(self, fields: list[str]) -> int:
        """The joined sources' bytes per record, times the positions of an epoch."""
        joined = self.mixture.joined
        nbytes = _logical_bytes(joined.store_paths(), self.schemas, fields, {})
        return nbytes * self.len // max(len(joined), 1)


def _arrow(column: Any, schema: dict[str, Any]) -> pa.Array:
    """A gathered column as an Arrow array over the same memory where Arrow allows:
    dense scalars as primitives, dense arrays as Ray tensors, ragged 1-D records as
    ``large_list`` (``str`` / ``bytes`` fields as ``large_string`` / ``large_binary``),
    ragged records of more dimensions as Ray variable-shaped tensors."""
    if schema["layout"] == "dense":
        if column.ndim == 1:
            return pa.array(column)
        return ArrowTensorArray.from_numpy(column)
    values, cu = column.values, column.cu_seqlens
    n = len(cu) - 1
    kind = schema.get("metadata", {}).get("zring.kind")
    if kind in ("str", "bytes"):
        typ = pa.large_string() if kind == "str" else pa.large_binary()
        return pa.Array.from_buffers(typ, n, [None, pa.py_buffer(cu), pa.py_buffer(values)])
    if column.shapes.shape[1] == 1:
        return pa.LargeListArray.from_arrays(pa.array(cu), pa.array(values))
    return ArrowVariableShapedTensorArray.from_numpy(column.to_arrays())


def _read_range(
    source: _Source, start: int, stop: int, fields: list[str], block_records: int
) -> Iterator[pa.Table]:
    read = source.reader(fields)
    for a in range(start, stop, block_records):
        b = min(stop, a + block_records)
        out = read(a, b)
        yield pa.table({k: _arrow(out[k], source.schemas[k]) for k in fields})


# Ray is not followed by mypy (pyproject.toml), so its base classes are Any.
class ZringDatasource(Datasource):  # type: ignore[misc]
    """The records of ``paths`` (zring dataset directories and store files, read one
    after another, or a mixture's epoch) as a Ray datasource. See :func:`read_zring`."""

    def __init__(self, paths: _Paths | Mixture, fields: str | Iterable[str] | None = None, *,
                 version: int | None = None, block_records: int | None = None,
                 epoch: int = 0, **options: Any) -> None:
        super().__init__()
        if isinstance(paths, (str, os.PathLike)):
            paths = [paths]
        if isinstance(paths, Mixture):
            self.sources: list[Any] = [_MixtureSource(paths, epoch)]
        elif not paths:
            raise ValueError("read_zring needs at least one dataset or store path")
        else:
            self.sources = [_Source(p, version, options) for p in paths]
        first = self.sources[0]
        self.fields = list(first.schemas) if fields is None else [fields] if isinstance(fields, str) else list(fields)
        for s in self.sources:
            missing = [f for f in self.fields if f not in s.schemas]
            if missing:
                raise KeyError(f"{s.path} has no field(s) {missing}; it has {list(s.schemas)}")
            for f in self.fields:
                a, b = _comparable(first.schemas[f]), _comparable(s.schemas[f])
                if a != b:
                    raise ValueError(f"field {f!r} is {a} in {first.path} but {b} in {s.path}")
        self.total = sum(s.len for s in self.sources)
        self.source_bytes = [int(s.logical_bytes(self.fields)) for s in self.sources]
        self.nbytes = sum(self.source_bytes)
        if block_records is None:
            per_record = max(1, self.nbytes // max(self.total, 1))
            block_records = max(1, BLOCK_BYTES // per_record)
        self.block_records = int(block_records)

    def estimate_inmemory_data_size(self) -> int:
        return self.nbytes

    def get_read_tasks(self, parallelism: int, per_task_row_limit: int | None = None,
                       data_context: Any = None) -> list[Any]:
        # Contiguous ranges of about total / parallelism records, never across sources.
        per_task = max(1, -(-self.total // max(1, parallelism)))
        tasks = []
        for s, nbytes in zip(self.sources, self.source_bytes):
            for a in range(0, s.len, per_task):
                b = min(s.len, a + per_task)
                meta = BlockMetadata(
                    num_rows=b - a,
                    size_bytes=nbytes * (b - a) // max(s.len, 1),
                    exec_stats=None,
                    input_files=(s.path,),
                )
                fields, block_records = self.fields, self.block_records
                tasks.append(
                    ReadTask(
                        lambda s=s, a=a, b=b: _read_range(s, a, b, fields, block_records),
                        meta,
                        per_task_row_limit=per_task_row_limit,
                    )
                )
        return tasks

    def get_name(self) -> str:
        return "ReadZring"


def _comparable(schema: dict[str, Any]) -> tuple[Any, Any, Any]:
    shape = tuple(schema.get("item_shape") or ()) if schema["layout"] == "dense" else schema.get("ndim")
    return (schema["layout"], schema["dtype"], shape)


def read_zring(paths: _Paths | Mixture, fields: str | Iterable[str] | None = None, *,
               version: int | None = None, block_records: int | None = None,
               override_num_blocks: int | None = None, epoch: int = 0, **kwargs: Any) -> Any:
    """A ``ray.data.Dataset`` over the records of ``paths``: one zring dataset
    directory or store file, or a list of them (their records one after another;
    every path must hold the requested fields with the same schemas; a store's
    single field is named by its file name up to the first dot).

    ``fields``: the field names to read (default: all of the first path's).
    ``version``: the manifest version of dataset paths (default: current; read
    tasks read the version opened here even if a writer publishes another).
    ``override_num_blocks``: the number of read tasks (each a contiguous record
    range; default: chosen by Ray from the size). ``block_records``: records per
    block a task yields (default: about 32 MiB). The read settings ``backend``,
    ``verify_checksums``, ``threads``, ``queue_depth``, ``direct``,
    ``follow_links_out`` and ``remote`` apply to every dataset and store opened, on
    the driver and in the read tasks;
    other keyword arguments (``concurrency``, ``ray_remote_args``, ...) go to
    ``ray.data.read_datasource``.

    Paths may be URLs (``s3://bucket/prefix``, ...): a URL is a dataset when
    ``URL/manifest.json`` exists, else a store object, so read tasks on nodes that
    share no file system read straight from object storage.

    ``paths`` may also be a :class:`zring.Mixture`: the records of its epoch
    ``epoch`` (``len(mix)`` positions, each read from its source), every read task
    reopening the mixture's sources.

    Columns: dense scalar fields are Arrow primitives and dense array fields Ray
    tensors (NumPy ``(n, *shape)`` arrays in numpy batches); ragged 1-D fields are
    Arrow ``large_list`` (object arrays of 1-D arrays in numpy batches), ``str`` /
    ``bytes`` fields Arrow strings / binaries, ragged fields of more dimensions Ray
    variable-shaped tensors.
    """
    options = {k: kwargs.pop(k) for k in READ_SETTINGS if k in kwargs}
    source = ZringDatasource(paths, fields, version=version, block_records=block_records, epoch=epoch,
                             **options)
    return read_datasource(source, override_num_blocks=override_num_blocks, **kwargs)


# ---------------------------------------------------------------- writing


def _columns(
    block: Any, names: list[str] | None, specs: dict[str, FieldSpec]
) -> tuple[list[str], dict[str, _Column]]:
    """A Ray block as ``{name: _Column}`` with the specs of ``specs`` (filled in by
    inference from this block for the names it lacks)."""
    table = BlockAccessor.for_block(block).to_arrow()
    names = names or table.column_names
    out: dict[str, _Column] = {}
    for name in names:
        if name not in table.column_names:
            raise KeyError(f"field {name!r} is not a column of the dataset (it has {table.column_names})")
        col = table.column(name).combine_chunks()
        if isinstance(col.type, pa.ExtensionType):
            # Ray tensors: fixed-shape ones come out as (n, *shape), variable-shaped
            # ones as an object array of arrays.
            arr = col.to_numpy(zero_copy_only=False)
            out[name], specs[name] = _from_numpy(arr, specs.get(name), name)
        else:
            spec = specs.get(name) or _arrow_spec(pa, col.type, name)
            out[name], specs[name] = _arrow_column(pa, col, spec, name), spec
    return names, out


class ZringDatasink(Datasink):  # type: ignore[misc]
    """Writes a Ray dataset as the zring dataset at ``path``: a directory, or a URL
    prefix (``s3://bucket/datasets/name``, ...), so the workers need no shared file
    system.

    ``fields``: ``None`` (every column, schemas inferred per write task and checked
    equal before publishing), a list of column names, or ``{name: schema}`` as for
    :func:`zring.write_dataset` (give schemas when inference could differ between
    tasks, such as a ragged column whose records happen to share a shape in one).
    ``records_per_shard``: Ray bundles at least this many records per write task.
    ``append`` / ``overwrite`` as for :func:`zring.write_dataset`; ``codec``,
    ``level`` for the stores.

    Each write task writes (or uploads) one shard's stores straight into the
    dataset's ``data/``, under names of this job's own (led by the version it will
    publish, so ``zring gc`` can tell a killed job's stores from a running one's)
    that no manifest names yet;
    ``on_write_complete`` adds them as shards (shard order = write task order, which
    is the dataset's order when Ray preserves order) and publishes one manifest. A
    failed job publishes nothing; on a local disk it also removes what its tasks
    wrote (at a URL those objects stay, named by no manifest).
    """

    def __init__(
        self, path: str | os.PathLike[str], fields: Iterable[str] | Mapping[str, FieldSpecLike] | None = None,
        *, records_per_shard: int | None = None, codec: CodecName = "zstd", level: int = 3,
        append: bool = False, overwrite: bool = False
    ) -> None:
        text = os.fspath(path)
        self.path = text.rstrip("/") if _is_url(text) else os.path.abspath(text)
        self.specs = {k: FieldSpec.parse(v) for k, v in fields.items()} if isinstance(fields, dict) else {}
        self.names = list(fields) if fields is not None else None
        self.records_per_shard = records_per_shard
        self.codec, self.level = codec, level
        self.append, self.overwrite = append, overwrite
        # This job's part of its store names (unique, so no other writer's stores
        # are ever named the same).
        self.job = uuid.uuid4().hex[:16]
        # The version this job will publish, set by on_write_start: it leads the
        # store names, as the builder's do, so `zring gc` removes the stores of a
        # job killed before its commit once a newer version is current, and never
        # those of a job still writing.
        self.version = 1

    @property
    def min_rows_per_write(self) -> int | None:
        return self.records_per_shard

    def _at(self, rel: str) -> str:
        return f"{self.path}/{rel}" if _is_url(self.path) else os.path.join(self.path, rel)

    def on_write_start(self, schema: Any = None) -> None:
        current = _current_version(self.path)
        if current and not (self.append or self.overwrite):
            raise FileExistsError(f"{self.path} is already a zring dataset (pass append=True or overwrite=True)")
        if self.append and not current:
            raise FileNotFoundError(f"{self.path} is not a zring dataset to append to")
        if self.append:
            # Every write task converts its blocks to the dataset's schemas instead of
            # inferring its own (see dataset_specs).
            self.specs = with_dataset_specs(self.specs, dataset_specs(self.path))
        self.version = current + 1

    def write(self, blocks: Iterable[Any], ctx: Any) -> dict[str, Any] | None:
        if not _is_url(self.path):
            os.makedirs(self._at(_DATA), exist_ok=True)
        specs = dict(self.specs)
        names = self.names
        writers: dict[str, DenseWriter | RaggedWriter] = {}
        files: dict[str, str] = {}
        records = 0
        tag = f"v{self.version:06}-ray-{self.job}-{ctx.task_idx:06}-{uuid.uuid4().hex[:8]}"
        try:
            for block in blocks:
                if BlockAccessor.for_block(block).num_rows() == 0:
                    continue
                names, cols = _columns(block, names, specs)
                if not writers:
                    for name in names:
                        files[name] = f"{_DATA}/{tag}.{name}.zr"
                        writers[name] = _open_writer(self._at(files[name]), specs[name], self.codec, self.level)
                for name in names:
                    _append(writers[name], cols[name], specs[name], name)
                records += len(cols[names[0]])
            for w in writers.values():
                w.close()
        except BaseException:
            for w in writers.values():
                w.abort()
            for rel in files.values():
                self._remove(rel)
            raise
        if not records:
            return None
        names = cast("list[str]", names)  # set by the blocks that held the records
        return {
            "task": ctx.task_idx,
            "records": records,
            "names": names,
            "files": files,
            "specs": {k: specs[k].native(k) for k in names},
        }

    def on_write_complete(self, write_result: Any) -> None:
        shards = sorted((r for r in write_result.write_returns if r), key=lambda r: r["task"])
        try:
            if not shards:
                raise ValueError("the Ray dataset holds no records; no zring dataset was written")
            first = shards[0]
            for r in shards[1:]:
                if r["specs"] != first["specs"]:
                    diff = [k for k in first["specs"] if first["specs"][k] != r["specs"].get(k)]
                    raise ValueError(
                        f"write tasks inferred different schemas for field(s) {diff}: "
                        f"{[first['specs'][k] for k in diff]} vs {[r['specs'].get(k) for k in diff]}; "
                        "give them in ZringDatasink(fields={...})"
                    )
            names = first["names"]
            if self.append:
                builder = _DatasetBuilder(self.path, [], append=True)
                have = [f["name"] for f in builder.fields]
                if have != names:
                    raise ValueError(f"appending fields {names} to a dataset of fields {have}")
            else:
                builder = _DatasetBuilder(self.path, [first["specs"][k] for k in names], overwrite=self.overwrite)
            for r in shards:
                builder.add_shard_files(r["records"], [r["files"][name] for name in names])
            builder.publish()
        except BaseException:
            for r in shards:
                for rel in r["files"].values():
                    self._remove(rel)
            self._tidy()
            raise

    def on_write_failed(self, error: Exception) -> None:
        # The tasks that succeeded wrote stores no manifest will name.
        if not _is_url(self.path):
            for p in Path(self._at(_DATA)).glob(f"v*-ray-{self.job}-*.zr"):
                _remove(str(p))
        self._tidy()

    def _tidy(self) -> None:
        """Removes the directories a failed job made for a dataset that does not
        exist (each only if empty: another writer's files stay)."""
        if _is_url(self.path):
            return
        for d in (self._at(_DATA), self._at("manifests"), self.path):
            try:
                os.rmdir(d)
            except OSError:
                pass

    def _remove(self, rel: str) -> None:
        # Objects at a URL are left: named by no manifest, no reader sees them.
        if not _is_url(self.path):
            _remove(self._at(rel))

    def get_name(self) -> str:
        return "WriteZring"


#: The directory of a dataset's stores.
_DATA = "data"


def _current_version(path: str) -> int:
    """The current version of the dataset at ``path``, 0 when there is none."""
    if not _is_url(path) and not os.path.exists(os.path.join(path, "manifest.json")):
        return 0
    try:
        return int(open_dataset(path, remote={"no_cache": True}).version)
    except StoreNotFoundError:
        return 0


def _open_writer(path: str, spec: FieldSpec, codec: str, level: int) -> DenseWriter | RaggedWriter:
    kwargs: dict[str, Any] = dict(codec=codec, level=level, metadata=dict(spec.metadata))
    if spec.ragged:
        return RaggedWriter(path, spec.dtype, spec.ndim, **kwargs)
    return DenseWriter(path, spec.dtype, spec.shape, **kwargs)


def _append(writer: Any, col: _Column, spec: FieldSpec, name: str) -> None:
    if not spec.ragged:
        writer.append(col.dense)
        return
    writer.append(SimpleNamespace(values=col.values, cu_seqlens=col.cu, shapes=col.shapes))


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass

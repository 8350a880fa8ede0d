"""Dataset: a zring dataset (named fields x shards) read as one object."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, overload

import numpy as np
import numpy.typing as npt

from .ragged import RaggedBatch
from .._zring import _Dataset
from ..decode import Decoded, Image, _specs
from ..types import BackendName, RecordIndex, RecordIndices, StrPath


def _decode_one(value: Any, meta: dict[str, str]) -> Any:
    """A string field's record as ``str`` and a bytes field's as ``bytes``."""
    kind = meta.get("zring.kind")
    if kind == "str":
        return value.tobytes().decode(meta.get("encoding", "utf-8"))
    if kind == "bytes":
        return value.tobytes()
    return value


class Dataset(_Dataset):
    """A zring dataset opened at one manifest version.

    ``Dataset(path, *, version=None, backend="auto", verify_checksums=True, threads=0,
    queue_depth=64, direct=False, follow_links_out=False, remote=None)`` (or
    :func:`zring.open_dataset`). ``path`` may be a URL (``s3://bucket/prefix``,
    ``gs://``, ``az://``, ``http(s)://``, ``file://``); ``remote`` is a dict of remote
    read options (see docs/remote.md); the other settings are the stores'
    (docs/python.md). ``len(ds)`` records, numbered globally across shards.

    A store of a local dataset that symbolic links lead out of its directory is
    refused (``StorePermissionError``, naming the store and where the link leads):
    a dataset directory cannot make a reader open files elsewhere.
    ``follow_links_out=True`` opens such stores, for a trusted dataset whose stores
    are linked in on purpose (shared with another dataset, moved to another disk).

    - ``ds.gather(idx, fields=None)`` -> ``{name: ndarray | RaggedBatch}`` for the
      records ``idx`` (int, slice, list, 1-D array or mask) of ``fields`` (a name, a
      list of names, or all), every field and shard read in parallel without the GIL;
      ``decode={"image": zring.decode.Image(...)}`` decodes image fields to pixels.
    - ``ds[i]`` -> one record as ``{name: value}``: arrays, with string fields as
      ``str`` and bytes fields as ``bytes``; ``ds[idx]`` -> ``ds.gather(idx)``.
    - ``ds.field(name)`` is accepted by :class:`zring.Loader` wherever a store is;
      ``zring.Loader(ds, sampler)`` streams every field.
    - ``ds.version`` is the manifest version read: a dataset grown later by another
      writer keeps reading what it opened, and pickles by path and version.
    - ``to_arrow(idx=None)``, ``to_parquet(path, idx=None)``, ``to_hf(idx=None)``
      export records (all, or a selection) back to Arrow, Parquet and Hugging Face.

    Raises ``StoreNotFoundError`` (a ``FileNotFoundError``) when ``path`` holds no
    dataset (or not ``version``), ``CorruptStoreError`` for a damaged manifest or
    store, ``StorePermissionError`` (a ``PermissionError``) for a store linked in
    from outside without ``follow_links_out``, ``ValueError`` for an unknown
    ``backend``; reads raise
    ``ZringIndexError`` for records outside the dataset and ``KeyError`` for an
    unknown field.

    >>> import os, tempfile, numpy as np, zring
    >>> path = os.path.join(tempfile.mkdtemp(), "points")
    >>> _ = zring.write_dataset(path, {"xy": np.arange(8.0).reshape(4, 2), "name": ["a", "b", "c", "d"]})
    >>> ds = zring.Dataset(path)
    >>> len(ds), ds.fields
    (4, ['xy', 'name'])
    >>> ds[2]
    {'xy': array([4., 5.]), 'name': 'c'}
    >>> ds.gather([3, 0], fields="xy")["xy"].tolist()
    [[6.0, 7.0], [0.0, 1.0]]
    """

    def __init__(
        self,
        path: StrPath,
        *,
        version: int | None = None,
        backend: BackendName = "auto",
        verify_checksums: bool = True,
        threads: int = 0,
        queue_depth: int = 64,
        direct: bool = False,
        follow_links_out: bool = False,
        remote: Mapping[str, Any] | None = None,
    ) -> None:
        # The native constructor opened the dataset and keeps its read settings,
        # which a pickle carries (`_settings`, the engine's JSON).
        pass

    def __reduce__(self) -> tuple[Any, ...]:
        return (_reopen, (self.path, self.version, self._settings))

    @property
    def field_schemas(self) -> dict[str, dict[str, Any]]:
        """``{name: schema dict}``, in field order."""
        return {s["name"]: s for s in self.schema}

    # One record: arrays, str and bytes values by field. Several: what gather returns.
    @overload
    def __getitem__(self, key: RecordIndex) -> dict[str, Any]: ...
    @overload
    def __getitem__(self, key: RecordIndices) -> dict[str, npt.NDArray[Any] | RaggedBatch]: ...
    def __getitem__(self, key: RecordIndex | RecordIndices) -> dict[str, Any]:
        if isinstance(key, (int, np.integer)):
            out = self.gather(int(key))
            schemas = self.field_schemas
            return {k: _decode_one(v, schemas[k]["metadata"]) for k, v in out.items()}
        if isinstance(key, str):
            raise TypeError(f"ds[{key!r}]: select a field with ds.gather(idx, fields={key!r})")
        return self.gather(key)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for i in range(len(self)):
            yield self[i]

    # Without decode, what the native gather returns; with it, a Decoded dict.
    @overload
    def gather(
        self,
        idx: RecordIndex | RecordIndices,
        fields: str | Sequence[str] | None = None,
        *,
        decode: None = None,
        epoch: int = 0,
    ) -> dict[str, npt.NDArray[Any] | RaggedBatch]: ...
    @overload
    def gather(
        self,
        idx: RecordIndex | RecordIndices,
        fields: str | Sequence[str] | None = None,
        *,
        decode: Mapping[str, Image],
        epoch: int = 0,
    ) -> Decoded: ...
    def gather(  # adds keyword-only decode and epoch to the native gather
        self,
        idx: RecordIndex | RecordIndices,
        fields: str | Sequence[str] | None = None,
        *,
        decode: Mapping[str, Image] | None = None,
        epoch: int = 0,
    ) -> dict[str, npt.NDArray[Any] | RaggedBatch] | Decoded:
        """Records ``idx`` of ``fields`` (a name, a list of names, or all) in one
        parallel read: ``{name: ndarray | RaggedBatch}``.

        ``decode={"image": zring.decode.Image(...)}`` decodes fields of encoded
        images (JPEG or PNG bytes) in native code, on the engine's threads, into
        ``uint8`` pixel arrays ``(n, h, w, 3)`` (or ``(n, 3, h, w)``); random crops
        and flips are a pure function of ``(seed, epoch, record)``. The result is
        then a :class:`zring.decode.Decoded`, which also tells the records kept
        (``on_error="skip"`` leaves bad ones out of every field).
        """
        specs = _specs(decode)
        if not specs:
            return super().gather(idx, fields)
        out, kept, skipped, substituted = self._gather_decoded(idx, fields, specs, int(epoch))
        return Decoded(out, kept, skipped, substituted)

    def to_arrow(
        self, idx: RecordIndices | None = None, fields: str | list[str] | None = None, *, batch_records: int = 4096
    ) -> Any:
        """The records ``idx`` (default: all) as a ``pyarrow.Table``."""
        from .export import to_arrow

        return to_arrow(self, idx, fields, batch_records=batch_records)

    def to_parquet(
        self,
        path: StrPath,
        idx: RecordIndices | None = None,
        fields: str | list[str] | None = None,
        *,
        batch_records: int = 4096,
        **kwargs: Any,
    ) -> str:
        """Writes the records ``idx`` (default: all) to a Parquet file, streaming."""
        from .export import to_parquet

        return to_parquet(self, path, idx, fields, batch_records=batch_records, **kwargs)

    def to_hf(self, idx: RecordIndices | None = None, fields: str | list[str] | None = None) -> Any:
        """The records ``idx`` (default: all) as a Hugging Face ``datasets.Dataset``."""
        import datasets

        return datasets.Dataset(self.to_arrow(idx, fields))

    def cleanup(self, keep: int = 1, *, dry_run: bool = False) -> dict[str, Any]:
        """Removes the dataset's old versions (what ``zring gc DIR --keep N`` does):
        manifests older than the newest ``keep`` versions (the current one is always
        kept), stores that none of those versions name, and temporary files of
        writers that died. Stores of a version being written are never touched.

        Readers holding an older version keep reading it on a local file system
        (their stores are open); reopening a removed version fails. Returns
        ``{"current", "kept_versions", "manifests", "stores", "temps", "bytes"}``
        with the removed paths (with ``dry_run``, what would be removed).
        """
        from .._zring import _collect_garbage

        return _collect_garbage(self.path, keep, dry_run)

    def __repr__(self) -> str:
        return (
            f"zring.Dataset({self.path!r}, version={self.version}, records={len(self)}, "
            f"shards={self.shards}, fields={self.fields})"
        )


class FieldView:
    """One field of a dataset indexed like a store: ``view[idx]`` is
    ``ds.gather(idx, fields=name)[name]`` (what Python-side gatherers such as
    :class:`zring.SamplerLoader` call)."""

    def __init__(self, ds: _Dataset, name: str):
        if name not in ds.fields:
            raise KeyError(f"no field {name!r} (fields: {ds.fields})")
        self.dataset, self.name = ds, name

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, idx: RecordIndex | RecordIndices) -> npt.NDArray[Any] | RaggedBatch:
        return self.dataset.gather(idx, fields=self.name)[self.name]

    def __repr__(self) -> str:
        return f"FieldView({self.name!r} of {self.dataset!r})"


def _reopen(path: str, version: int, settings: str) -> Dataset:
    # The native constructor alone: the settings are the engine's, not arguments.
    return Dataset.__new__(Dataset, path, version=version, _settings=settings)


def open_dataset(
    path: StrPath,
    *,
    version: int | None = None,
    backend: BackendName = "auto",
    verify_checksums: bool = True,
    threads: int = 0,
    queue_depth: int = 64,
    direct: bool = False,
    follow_links_out: bool = False,
    remote: Mapping[str, Any] | None = None,
) -> Dataset:
    """Opens the zring dataset in directory ``path`` (its current manifest, or exactly
    ``version``); ``path`` may be a URL (``s3://bucket/prefix``, ...), read with the
    ``remote`` options (docs/remote.md). ``follow_links_out=True`` opens stores that
    symbolic links lead out of the dataset directory, which are refused otherwise.
    See :class:`Dataset`.

    Raises ``StoreNotFoundError`` (a ``FileNotFoundError``) when ``path`` holds no
    dataset (or not ``version``), ``CorruptStoreError`` for a damaged manifest or
    store, ``StorePermissionError`` (a ``PermissionError``) for a store linked in
    from outside without ``follow_links_out``, ``ValueError`` for an unknown
    ``backend``.

    >>> import os, tempfile, numpy as np, zring
    >>> path = os.path.join(tempfile.mkdtemp(), "labels")
    >>> _ = zring.write_dataset(path, {"label": np.array([3, 1, 4])})
    >>> ds = zring.open_dataset(path)
    >>> ds.version, ds.gather([0, 2])["label"].tolist()
    (1, [3, 4])
    """
    return Dataset(
        path,
        version=version,
        backend=backend,
        verify_checksums=verify_checksums,
        threads=threads,
        queue_depth=queue_depth,
        direct=direct,
        follow_links_out=follow_links_out,
        remote=remote,
    )

"""Type information for ``zring._zring``, the native (Rust, PyO3) half of zring.

Checked against the built extension by ``python -m mypy.stubtest zring`` (see
scripts/typecheck.sh); the docstrings live in the Rust sources and reach ``help()``
through ``__doc__``.
"""

# Deferred annotations: pdoc (scripts/api_docs.py) executes this file.
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, ClassVar, Final, Literal, final, overload

import numpy as np
import numpy.typing as npt
from typing_extensions import Self, disjoint_base

from ._internal.ragged import RaggedBatch
from .decode import Image as _Image
from .types import (
    ArrayInput,
    BackendName,
    CodecName,
    ModeName,
    RecordIndex,
    RecordIndices,
    Shard,
    StrPath,
)

__all__ = [
    "_Store",
    "DenseStore",
    "RaggedStore",
    "StoreIter",
    "DenseWriter",
    "RaggedWriter",
    "Sampler",
    "_EpochPlan",
    "_Loader",
    "_Mixture",
    "Mode",
    "EngineBuffer",
    "_Dataset",
    "_DatasetField",
    "_DatasetBuilder",
    "_PackedLoader",
    "_collect_garbage",
    "open",
    "_unpickle_store",
    "cli_main",
    "train_dict",
    "trim_buffers",
    "parse_size",
    "_share_threads",
    "_buffer_pool_stats",
    "_decode_images",
    "_hold_publish",
    "_PublishHold",
    "_bench_gather",
    "_bench_loader",
    "ENGINE_VERSION",
]

ENGINE_VERSION: Final[str]

@disjoint_base
class _Store:
    """What DenseStore and RaggedStore share."""

    def __len__(self) -> int: ...
    @property
    def dtype(self) -> np.dtype[Any]: ...
    @property
    def path(self) -> str: ...
    @property
    def codec(self) -> Literal["raw", "zstd", "zstd-dict"]: ...
    @property
    def backend(self) -> Literal["pread", "mmap", "uring"]: ...
    @property
    def remote_stats(self) -> dict[str, int] | None: ...
    @property
    def schema(self) -> dict[str, Any]: ...
    @property
    def metadata(self) -> dict[str, str]: ...
    @property
    def closed(self) -> bool: ...
    def verify(self) -> None: ...
    def stats(self) -> dict[str, int]: ...
    def close(self) -> None: ...
    def __enter__(self) -> Self: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
        /,
    ) -> Literal[False]: ...
    def __iter__(self) -> StoreIter: ...
    def __reduce__(self) -> tuple[Any, ...]: ...

@final
class DenseStore(_Store):
    def __new__(
        cls,
        path: StrPath,
        *,
        backend: BackendName = "auto",
        verify_checksums: bool = True,
        threads: int = 0,
        queue_depth: int = 64,
        direct: bool = False,
        remote: Mapping[str, Any] | None = None,
    ) -> Self: ...
    @property
    def item_shape(self) -> tuple[int, ...]: ...
    @property
    def ndim(self) -> int: ...
    @property
    def item_bytes(self) -> int: ...
    def __getitem__(
        self, key: RecordIndex | RecordIndices | tuple[Any, ...], /
    ) -> npt.NDArray[Any]: ...
    def gather(
        self, idx: RecordIndex | RecordIndices, out: npt.NDArray[Any] | None = None
    ) -> npt.NDArray[Any]: ...

@final
class RaggedStore(_Store):
    def __new__(
        cls,
        path: StrPath,
        *,
        backend: BackendName = "auto",
        verify_checksums: bool = True,
        threads: int = 0,
        queue_depth: int = 64,
        direct: bool = False,
        remote: Mapping[str, Any] | None = None,
    ) -> Self: ...
    @property
    def ndim(self) -> int: ...
    def shape(self, i: RecordIndex) -> tuple[int, ...]: ...
    @overload
    def __getitem__(self, key: RecordIndex, /) -> npt.NDArray[Any]: ...
    @overload
    def __getitem__(self, key: RecordIndices, /) -> RaggedBatch: ...
    @overload
    def gather(
        self, idx: RecordIndex | RecordIndices, out: npt.NDArray[Any] | None = None,
        *, decode: None = None, epoch: int = 0,
    ) -> RaggedBatch: ...
    @overload
    def gather(
        self, idx: RecordIndex | RecordIndices, out: None = None,
        *, decode: _Image, epoch: int = 0,
    ) -> npt.NDArray[np.uint8]: ...

@final
class StoreIter:
    def __iter__(self) -> Self: ...
    def __next__(self) -> npt.NDArray[Any]: ...

@final
class DenseWriter:
    def __new__(
        cls,
        path: StrPath,
        dtype: npt.DTypeLike,
        item_shape: int | Sequence[int],
        codec: CodecName = "zstd",
        level: int = 3,
        dict_bytes: bytes | None = None,
        overwrite: bool = False,
        *,
        align: int = 8,
        threads: int = 0,
        metadata: Mapping[str, str] | None = None,
        remote: Mapping[str, Any] | None = None,
    ) -> Self: ...
    def append(self, batch: ArrayInput) -> range: ...
    def close(self) -> int: ...
    def abort(self) -> None: ...
    @property
    def closed(self) -> bool: ...
    @property
    def path(self) -> str: ...
    @property
    def item_shape(self) -> tuple[int, ...]: ...
    @property
    def dtype(self) -> np.dtype[Any]: ...
    def __len__(self) -> int: ...
    def __enter__(self) -> Self: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None = None,
        _exc: BaseException | None = None,
        _tb: TracebackType | None = None,
    ) -> Literal[False]: ...

@final
class RaggedWriter:
    def __new__(
        cls,
        path: StrPath,
        dtype: npt.DTypeLike,
        ndim: int = 1,
        codec: CodecName = "zstd",
        level: int = 3,
        dict_bytes: bytes | None = None,
        overwrite: bool = False,
        *,
        align: int = 8,
        threads: int = 0,
        metadata: Mapping[str, str] | None = None,
        remote: Mapping[str, Any] | None = None,
    ) -> Self: ...
    def append(self, batch: RaggedBatch | Sequence[ArrayInput]) -> range: ...
    def close(self) -> int: ...
    def abort(self) -> None: ...
    @property
    def closed(self) -> bool: ...
    @property
    def path(self) -> str: ...
    @property
    def ndim(self) -> int: ...
    @property
    def dtype(self) -> np.dtype[Any]: ...
    def __len__(self) -> int: ...
    def __enter__(self) -> Self: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None = None,
        _exc: BaseException | None = None,
        _tb: TracebackType | None = None,
    ) -> Literal[False]: ...


@final
class Sampler:
    @final
    class Mode:
        SEQUENTIAL: ClassVar[Sampler.Mode]
        IID: ClassVar[Sampler.Mode]
        CYCLIC: ClassVar[Sampler.Mode]
        # Equal to its own members and to their integer values; not hashable.
        def __eq__(self, other: object, /) -> bool: ...
        def __ne__(self, other: object, /) -> bool: ...
        __hash__: ClassVar[None]  # type: ignore[assignment]
        def __int__(self) -> int: ...

    def __new__(
        cls,
        length: int,
        batch: int,
        mode: Sampler.Mode | ModeName,
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
    ) -> Self: ...
    def next(
        self, out: npt.NDArray[np.uint64] | None = None
    ) -> npt.NDArray[np.uint64]: ...
    def __next__(self) -> npt.NDArray[np.uint64]: ...
    def __iter__(self) -> Self: ...
    def batch(self, step: int) -> npt.NDArray[np.uint64]: ...
    def seek(self, step: int) -> None: ...
    def positions(self, start: int, count: int) -> npt.NDArray[np.uint64]: ...
    def __reduce__(self) -> tuple[Any, ...]: ...
    def __setstate__(self, step: int) -> None: ...
    @property
    def step(self) -> int: ...
    @property
    def length(self) -> int: ...
    @property
    def batch_size(self) -> int: ...
    @property
    def global_batch_size(self) -> int: ...
    @property
    def mode(self) -> Mode: ...
    @property
    def seed(self) -> int: ...
    @property
    def rank(self) -> int: ...
    @property
    def world_size(self) -> int: ...
    @property
    def world(self) -> int: ...

@final
class _EpochPlan:
    def __new__(
        cls,
        length: int,
        batch: int,
        mode: Sampler.Mode | ModeName,
        seed: int = 0,
        epochs: int | None = None,
        drop_last: bool = False,
        rank: int = 0,
        world: int = 1,
        offset: int = 0,
        stride: int = 1,
    ) -> Self: ...
    def indices(self, step: int) -> npt.NDArray[np.uint64]: ...
    def strided(self, offset: int, stride: int) -> _EpochPlan: ...
    def __reduce__(self) -> tuple[Any, ...]: ...
    def __setstate__(self, step: int) -> None: ...
    def seek(self, step: int) -> None: ...
    @property
    def step(self) -> int: ...
    @property
    def steps(self) -> int | None: ...
    @property
    def steps_per_epoch(self) -> int: ...
    @property
    def length(self) -> int: ...
    @property
    def batch_size(self) -> int: ...

@final
class _Mixture:
    def __new__(cls, lens: Sequence[int], weights: Sequence[float], seed: int) -> Self: ...
    def reweighted(self, at: int, weights: Sequence[float]) -> _Mixture: ...
    def positions(
        self, idx: Any, length: int, epoch: int
    ) -> tuple[npt.NDArray[np.uint64], bool]: ...
    def indices(self, positions_: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]: ...
    def picks(
        self, positions_: npt.NDArray[np.uint64]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint64]]: ...
    def consumed(self, at: int) -> list[int]: ...
    @property
    def quotas(self) -> list[int]: ...
    @property
    def start(self) -> int: ...
    @property
    def base(self) -> list[int]: ...

@disjoint_base
class _Loader:
    def __new__(
        cls,
        streams: Mapping[str, _Store | _DatasetField | Sequence[_Store | _DatasetField]],
        sampler: Sampler | _EpochPlan,
        workers: int = 2,
        prefetch: int = 4,
        transform: Callable[[Shard], Any] | None = None,
        ordered: bool = True,
        *,
        pinned: bool = False,
        lookahead_bytes: int | str | None = 536870912,
        decode: Mapping[str, Mapping[str, Any]] | None = None,
        mixture: _Mixture | None = None,
    ) -> Self: ...
    def __iter__(self) -> Self: ...
    def __next__(self) -> list[Any]: ...
    @property
    def step(self) -> int: ...
    def seek(self, step: int) -> None: ...
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...
    @property
    def shards(self) -> int: ...
    @property
    def options(self) -> dict[str, Any]: ...
    @property
    def stream_names(self) -> list[str]: ...
    def stats(self) -> dict[str, int]: ...
    def __enter__(self) -> Self: ...
    def __exit__(
        self,
        _exc_type: type[BaseException] | None = None,
        _exc: BaseException | None = None,
        _tb: TracebackType | None = None,
    ) -> Literal[False]: ...

@final
class EngineBuffer:
    @property
    def nbytes(self) -> int: ...
    @property
    def capacity(self) -> int: ...
    @property
    def address(self) -> int: ...
    @property
    def align(self) -> int: ...
    @property
    def pinned(self) -> bool: ...

@disjoint_base
class _Dataset:
    """An open dataset at one manifest version (zring.Dataset builds on it)."""

    def __new__(
        cls,
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
        _settings: str | None = None,
        _parts: Sequence[_Dataset | tuple[str, _Store]] | None = None,
    ) -> Self: ...
    def __len__(self) -> int: ...
    @property
    def path(self) -> str: ...
    @property
    def version(self) -> int: ...
    @property
    def _settings(self) -> str: ...
    @property
    def fields(self) -> list[str]: ...
    @property
    def shards(self) -> int: ...
    @property
    def shard_starts(self) -> list[int]: ...
    @property
    def schema(self) -> list[dict[str, Any]]: ...
    def dtype(self, name: str) -> np.dtype[Any]: ...
    def store_paths(self) -> list[str]: ...
    def gather(
        self, idx: RecordIndex | RecordIndices, fields: str | Sequence[str] | None = None
    ) -> dict[str, npt.NDArray[Any] | RaggedBatch]: ...
    def _gather_decoded(
        self,
        idx: RecordIndex | RecordIndices,
        fields: str | Sequence[str] | None,
        decode: Mapping[str, Mapping[str, Any]],
        epoch: int = 0,
    ) -> tuple[
        dict[str, npt.NDArray[Any] | RaggedBatch], list[int], list[int], list[tuple[int, int]]
    ]: ...
    def verify(self) -> None: ...
    def field(self, name: str) -> _DatasetField: ...

@final
class _DatasetField:
    def __len__(self) -> int: ...
    @property
    def name(self) -> str: ...

@final
class _PackedLoader:
    def __new__(
        cls,
        sources: Sequence[str | _Store | _DatasetField],
        weights: Sequence[float],
        seq_len: int,
        rows: int,
        strategy: str,
        seed: int,
        pad_id: int,
        prefetch: int,
        window: int | None,
        state: tuple[int, int, list[int], int, int] | None,
        rank: int = 0,
        world: int = 1,
    ) -> _PackedLoader: ...
    def __iter__(self) -> _PackedLoader: ...
    def __next__(self) -> dict[str, Any]: ...
    def _state(self) -> tuple[tuple[int, int, list[int], int, int], list[int]]: ...
    def close(self) -> None: ...

@final
class _DatasetBuilder:
    def __new__(
        cls,
        path: StrPath,
        fields: list[tuple[str, npt.DTypeLike, str, Any, Mapping[str, str] | None]],
        *,
        append: bool = False,
        overwrite: bool = False,
        follow_links_out: bool = False,
    ) -> Self: ...
    @property
    def version(self) -> int: ...
    @property
    def fields(self) -> list[dict[str, Any]]: ...
    @property
    def dtypes(self) -> list[np.dtype[Any]]: ...
    def shard_paths(self, shard: int) -> list[str]: ...
    def add_shard(self, records: int) -> None: ...
    def add_shards(self, records: list[int]) -> None: ...
    def add_shard_files(self, records: int, files: list[str]) -> None: ...
    def publish(self) -> int: ...

Mode = Sampler.Mode


def open(
    path: StrPath,
    *,
    backend: BackendName = "auto",
    verify_checksums: bool = True,
    threads: int = 0,
    queue_depth: int = 64,
    direct: bool = False,
    remote: Mapping[str, Any] | None = None,
) -> DenseStore | RaggedStore: ...
def train_dict(
    source: _Store | npt.NDArray[Any] | Sequence[ArrayInput], size: int = 32768
) -> bytes: ...
def trim_buffers() -> None: ...
def parse_size(value: int | str) -> int: ...
def _share_threads(processes: int) -> bool: ...
def _unpickle_store(
    path: StrPath,
    settings: str,
    identity: tuple[int, int, int, int],
    schema_json: str,
    len: int,
) -> DenseStore | RaggedStore: ...
def cli_main(argv: Sequence[str | bytes]) -> int: ...
def _collect_garbage(path: StrPath, keep: int = 1, dry_run: bool = False) -> dict[str, Any]: ...
def _buffer_pool_stats() -> dict[str, int]: ...
def _decode_images(
    sources: Sequence[_Store | _DatasetField],
    names: Sequence[str],
    idx: RecordIndex | RecordIndices,
    specs: Sequence[Mapping[str, Any]],
    epoch: int = 0,
) -> tuple[list[npt.NDArray[np.uint8]], list[int], list[int], list[tuple[int, int]]]: ...

@final
class _PublishHold:
    def reached(self) -> bool: ...
    def release(self) -> None: ...

def _hold_publish(dir: StrPath) -> _PublishHold: ...
def _bench_gather(
    store: _Store,
    batches: Sequence[RecordIndex | RecordIndices],
    thread_cpu: bool = False,
) -> list[float]: ...
def _bench_loader(
    streams: Mapping[str, Sequence[_Store]],
    sampler: Sampler,
    steps: int,
    workers: int = 2,
    prefetch: int = 4,
    warmup: int = 5,
) -> float: ...

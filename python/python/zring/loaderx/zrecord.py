"""loaderx 2.8's ``zrecord`` module on zring stores.

Write with ``DenseWriter(path, dtype, item_shape, codec=...)`` /
``RaggedWriter(path, dtype, ndim, codec=...)`` (``append``, ``close``, ``with``),
open with ``DenseStore(path)`` / ``RaggedStore(path)``, and read through a placement
view, ``store.bind(Allocator("cpu"))``: ``view[i]``, ``view[0, 5, 2]``,
slices, index arrays, masks and ``view.__getitems__(indices)``.
``Dense.create`` / ``Dense.open`` (and ``Ragged``'s) are the same constructors under
the names of earlier loaderx 2.8 releases. Dense reads are
arrays ``(n, *item_shape)`` (``view[i]`` drops the batch axis); ragged reads are a
:class:`RaggedBatch` (``view[i]`` is a one-record batch).

Differences from loaderx that remain (docs/loaderx.md has the full table): a store is
one zring file (``data_shards`` is validated and remembered, not a file count);
leaving a writer's ``with`` block through an exception discards the store instead of
publishing what was appended; only the ``"cpu"`` allocator exists.
"""

from __future__ import annotations

import operator
import os
from collections import Counter, deque
from collections.abc import Iterable, Iterator, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar, Literal, NoReturn, SupportsIndex, TypeVar

import numpy as np
import numpy.typing as npt

from .. import _zring
from . import dtypes
from ._batch import RaggedBatch
from ._errors import (
    CLOSED_MESSAGE,
    DICT_TRAIN_FAILED,
    OUT_OF_MEMORY,
    ZrecordError,
    translated,
)
from ._index import record_ids

if TYPE_CHECKING:
    from typing_extensions import Self

    from ..types import StrPath

__all__ = [
    "Allocator",
    "DenseWriter",
    "DenseStore",
    "RaggedWriter",
    "RaggedStore",
    "Dense",
    "Ragged",
    "Store",
    "Writer",
    "DenseView",
    "RaggedView",
    "RaggedBatch",
    "ZrecordError",
    "CODECS",
    "MAX_DATA_SHARDS",
    "MAX_RECORD_LEN",
    "train_dict",
    "dtypes",
]

#: Codec names as loaderx spells them, and zring's.
CODECS = {"raw": "raw", "zstd": "zstd", "zstd_dict": "zstd-dict"}
_LOADERX_CODEC = {v: k for k, v in CODECS.items()}
MAX_DATA_SHARDS = 255
MAX_RECORD_LEN = 1 << 31
DICT_CAPACITY = 32 << 10
_SHARDS_KEY = "loaderx.data_shards"
_ZSTD_LEVEL = 3

_T = TypeVar("_T")


def _strict_int(value: Any, name: str) -> int:
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be an int, got a bool")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an int, got {type(value).__name__}") from None


class Allocator:
    """``Allocator(device_type, device_id=0, minimum_size=None, pool_size=None)``:
    where a bound view's batches live.

    zring reads into its own process-wide pool of aligned, reusable CPU buffers (a
    batch's memory returns to the pool when its arrays die), so only ``"cpu"``
    exists and the sizes are validated and kept for information. loaderx's
    ``"amdgpu"`` (ROCm dma-buf) backend has no zring equivalent: move batches to a
    device with ``torch.from_dlpack(...).to(device)``.
    """

    __slots__ = {
        "device_type": "Where batches live: always \"cpu\".",
        "device_id": "The device number: always 0 for the cpu allocator.",
        "minimum_size": "The smallest size class in bytes (informational).",
        "pool_size": "The pool size in bytes loaderx would reserve (informational).",
        "_closed": "Whether close() was called.",
    }

    def __init__(
        self, device_type: str, device_id: int = 0, minimum_size: int | None = None, pool_size: int | None = None
    ) -> None:
        if not isinstance(device_type, str):
            raise TypeError(f"device_type must be a string, got {type(device_type).__name__}")
        if device_type == "amdgpu":
            raise ValueError("the 'amdgpu' allocator is not available in zring; use Allocator('cpu')")
        if device_type != "cpu":
            raise ValueError(f"unknown device_type {device_type!r}; zring has 'cpu'")
        self.device_type = device_type
        self.device_id = _strict_int(device_id, "device_id")
        if self.device_id != 0:
            raise ValueError(f"the cpu allocator has device_id 0, got {self.device_id}")
        self.minimum_size = 1 if minimum_size is None else _strict_int(minimum_size, "minimum_size")
        self.pool_size = (256 << 20) if pool_size is None else _strict_int(pool_size, "pool_size")
        if self.minimum_size < 1:
            raise ValueError(f"minimum_size must be at least 1, got {self.minimum_size}")
        if self.pool_size < 0:
            raise ValueError(f"pool_size must not be negative, got {self.pool_size}")
        self._closed = False

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def close(self) -> None:
        """Retires the allocator (idempotent): views bound to it stop reading
        (``RuntimeError``). Batches already read stay valid: their memory belongs to
        the arrays, not to the allocator."""
        self._closed = True

    def __enter__(self) -> Self:
        if self._closed:
            raise RuntimeError("Allocator is closed")
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Literal[False]:
        self.close()
        return False

    def size_class(self, size: int) -> int:
        """The power of two a request of ``size`` bytes is rounded up to."""
        return 1 << (max(int(size), self.minimum_size) - 1).bit_length()

    def __repr__(self) -> str:
        state = ", closed" if self._closed else ""
        return f"Allocator({self.device_type!r}, {self.device_id}{state})"


class _Container:
    """State shared by stores and writers: the zring object, the closed flag."""

    _family = "Dense"
    _inner: Any = None
    _data_shards = 1
    # A writer created over an empty directory: the directory it replaces when it
    # publishes (and leaves in place if it never does).
    _empty_dir: str | None = None

    def __new__(cls, *args: Any, **kwargs: Any) -> Self:
        # Store and Writer say what a container does, not what it holds: only the
        # four concrete classes (DenseStore, ...) are constructed.
        if cls in (_Container, Store, Writer):
            raise TypeError(f"{cls.__name__} cannot be constructed; use DenseWriter/RaggedWriter or DenseStore/RaggedStore")
        return super().__new__(cls)

    def _adopt(self, inner: Any, data_shards: int) -> None:
        self._inner = inner
        self._data_shards = data_shards

    def _live(self) -> Any:
        if self._inner is None:
            raise RuntimeError(CLOSED_MESSAGE)
        return self._inner

    @property
    def closed(self) -> bool:
        """Whether the container was closed."""
        return self._inner is None

    @property
    def data_shards(self) -> int:
        """The ``data_shards`` given at creation (kept in the store's metadata)."""
        self._live()
        return self._data_shards

    @property
    def dtype(self) -> np.dtype[Any]:
        """The NumPy dtype of the elements."""
        dt: np.dtype[Any] = self._live().dtype
        return dt

    @property
    def path(self) -> str:
        """The store's path."""
        return str(self._live().path)

    def __enter__(self) -> Self:
        self._live()
        return self

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{self._inner.path!r}, {len(self._inner)} records"
        return f"{type(self).__name__}({state})"


class Store(_Container):
    """An opened, immutable store: bind it to a placement before reading."""

    _view_class: ClassVar[type[_View]]

    def bind(self, allocator: Allocator) -> Any:
        """A view that reads this store into ``allocator``'s memory."""
        if not isinstance(allocator, Allocator):
            raise TypeError(f"bind() takes an Allocator, got {type(allocator).__name__}")
        if allocator.closed:
            raise RuntimeError("Allocator is closed")
        self._live()
        return self._view_class(self, allocator)

    @property
    def codec(self) -> str:
        """The codec as loaderx spells it (``\"raw\"``, ``\"zstd\"``, ``\"zstd_dict\"``)."""
        return _LOADERX_CODEC[self._live().codec]

    def __len__(self) -> int:
        return len(self._live())

    def append(self, batch: Any) -> NoReturn:
        """Refused: a store opened for reading takes no records (``RuntimeError``)."""
        raise RuntimeError("append requires a container returned by create(); this one was returned by open()")

    def __getitem__(self, key: Any) -> NoReturn:
        self._live()
        raise TypeError("bind the store to a placement before indexing it: store.bind(Allocator('cpu'))[...]")

    def __iter__(self) -> NoReturn:
        self._live()
        raise TypeError("bind the store to a placement before iterating it: store.bind(Allocator('cpu'))")

    def close(self) -> None:
        """Releases the store (idempotent); views over it stop working."""
        if self._inner is not None:
            inner, self._inner = self._inner, None
            inner.close()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Literal[False]:
        self.close()
        return False


class Writer(_Container):
    """A store being built: ``append`` batches, ``close`` publishes.

    zring publishes atomically: until ``close()`` returns, nothing exists at the
    path. Leaving a ``with`` block through an exception discards the store (loaderx
    publishes what was appended before the exception, a valid but truncated store).
    """

    def __len__(self) -> int:
        """Records appended so far."""
        return len(self._live())

    def append(self, batch: Any) -> None:
        """Appends a batch of records (see ``Dense.create`` / ``Ragged.create``)."""
        inner = self._live()
        with translated(codec_code=OUT_OF_MEMORY):
            inner.append(self._prepare(batch))

    def _prepare(self, batch: Any) -> Any:
        return batch

    def bind(self, allocator: Any) -> NoReturn:
        """Refused: a writer cannot be read until it is published and opened (``RuntimeError``)."""
        raise RuntimeError("bind requires a container returned by open(); this one was returned by create()")

    def __getitem__(self, key: Any) -> NoReturn:
        raise RuntimeError("reading requires a container returned by open(); this one was returned by create()")

    def close(self) -> None:
        """Publishes the store (idempotent)."""
        if self._inner is not None:
            inner, self._inner = self._inner, None
            if self._empty_dir is not None:
                _take_empty_dir(self._empty_dir, inner)
            with translated(codec_code=OUT_OF_MEMORY):
                inner.close()

    def abort(self) -> None:
        """Discards the store (a zring addition: nothing is published)."""
        if self._inner is not None:
            inner, self._inner = self._inner, None
            inner.abort()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Literal[False]:
        if exc_type is None:
            self.close()
        else:
            self.abort()
        return False


def _take_empty_dir(path: str, inner: Any) -> None:
    """Removes the empty directory a writer was created over, just before the
    writer publishes its file there; discards the writer (-12) if something else
    took the path meanwhile."""
    try:
        os.rmdir(path)
    except FileNotFoundError:
        if not os.path.lexists(path):
            return  # gone already (a dangling link is something else's)
        inner.abort()
        raise ZrecordError(-12, f"{path} was replaced while the store was written") from None
    except OSError as e:  # no longer empty, or no longer a directory
        inner.abort()
        raise ZrecordError(-12, f"{path} was replaced while the store was written") from e


def _check_create_args(
    path: StrPath, codec: str, data_shards: SupportsIndex, dict_bytes: bytes | None
) -> tuple[str, str, int, bytes | None, bool]:
    if codec not in CODECS:
        if codec == "zstd-dict":
            codec = "zstd_dict"
        else:
            raise ValueError(f"unknown codec {codec!r}; expected one of {', '.join(CODECS)}")
    shards = _strict_int(data_shards, "data_shards")
    if not 1 <= shards <= MAX_DATA_SHARDS:
        raise ValueError(f"data_shards must be in 1..{MAX_DATA_SHARDS}, got {shards}")
    if codec == "zstd_dict":
        if dict_bytes is None or len(dict_bytes) == 0:
            raise ValueError("codec 'zstd_dict' needs non-empty dict_bytes (see train_dict)")
        dict_bytes = bytes(dict_bytes)
    elif dict_bytes is not None:
        raise ValueError(f"dict_bytes is only valid with codec 'zstd_dict', not {codec!r}")
    path = str(os.fspath(path))
    # loaderx creates a store inside an empty directory; a zring store is one file,
    # which replaces the directory when it is published (the directory stays until
    # then, and stays for good if the store is never published).
    over_empty_dir = os.path.isdir(path) and not os.path.islink(path)
    if over_empty_dir and os.listdir(path):
        raise ZrecordError(-12, f"{path} is a non-empty directory")
    return path, CODECS[codec], shards, dict_bytes, over_empty_dir


def _create(
    zring_writer: Any,
    writer: Writer,
    path: StrPath,
    dtype: npt.DTypeLike,
    geometry: Any,
    codec: str,
    data_shards: SupportsIndex,
    dict_bytes: bytes | None,
) -> None:
    """Opens ``writer``'s zring writer once every argument is checked (before anything
    touches the disk)."""
    name = dtypes.canonical(dtype)
    path, zcodec, shards, dict_bytes, over_empty_dir = _check_create_args(path, codec, data_shards, dict_bytes)
    # loaderx builds a store under directories it creates ('mnist/x' in its README);
    # the store itself still appears only when close() publishes it.
    parent = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(parent, exist_ok=True)
    except OSError as e:
        raise ZrecordError(-2, f"cannot create the directory {parent}: {e}") from e
    with translated(codec_code=OUT_OF_MEMORY):
        # overwrite: the engine would refuse the existing (empty) directory; close()
        # removes it just before publishing.
        inner = zring_writer(
            path, name, geometry, codec=zcodec, level=_ZSTD_LEVEL, dict_bytes=dict_bytes,
            overwrite=over_empty_dir, metadata={_SHARDS_KEY: str(shards)},
        )
    writer._adopt(inner, shards)
    if over_empty_dir:
        writer._empty_dir = path


def _open(path: StrPath, zring_store: Any, store: Store) -> None:
    with translated():
        inner = zring_store(os.fspath(path))
    store._adopt(inner, int(inner.metadata.get(_SHARDS_KEY, "1")))


def _item_shape(item_shape: Iterable[SupportsIndex]) -> tuple[int, ...]:
    shape = tuple(_strict_int(d, "item_shape dimension") for d in item_shape)
    if any(d < 0 for d in shape):
        raise ValueError(f"item_shape dimensions must not be negative, got {shape}")
    return shape


def _ragged_ndim(ndim: SupportsIndex) -> int:
    nd = _strict_int(ndim, "ndim")
    if not 1 <= nd <= 63:
        raise ValueError(f"ndim must be in 1..63, got {nd}")
    return nd


def _inner_of(container: Any) -> Any:
    """The live zring object of a Dense/Ragged container (they mix into _Container)."""
    return container._live()


def _no_direct_construction(cls: type[_T], family: type, args: Any, kwargs: Any) -> _T:
    if cls is family:
        raise TypeError(
            f"use {cls.__name__}Writer(...) or {cls.__name__}Store(...) (or {cls.__name__}.create / .open), "
            f"not {cls.__name__}()"
        )
    obj: _T = super(family, cls).__new__(cls, *args, **kwargs)  # type: ignore[arg-type]
    return obj


class Dense:
    """Fixed-shape records: every record is an array of ``item_shape``."""

    _family = "Dense"

    def __new__(cls, *args: Any, **kwargs: Any) -> Self:
        return _no_direct_construction(cls, Dense, args, kwargs)

    @classmethod
    def create(
        cls,
        path: StrPath,
        dtype: npt.DTypeLike,
        item_shape: Iterable[SupportsIndex],
        *,
        codec: str,
        data_shards: int = 4,
        dict_bytes: bytes | None = None,
    ) -> DenseWriter:
        """``DenseWriter(path, dtype, item_shape, codec=...)`` under its earlier name."""
        return DenseWriter(path, dtype, item_shape, codec=codec, data_shards=data_shards, dict_bytes=dict_bytes)

    @classmethod
    def open(cls, path: StrPath) -> DenseStore:
        """``DenseStore(path)`` under its earlier name."""
        return DenseStore(path)

    @property
    def item_shape(self) -> tuple[int, ...]:
        """The shape of one record."""
        return tuple(_inner_of(self).item_shape)

    @property
    def ndim(self) -> int:
        """Dimensions of one record."""
        return len(self.item_shape)


class Ragged:
    """Variable-shape records of a fixed number of dimensions ``ndim``."""

    _family = "Ragged"

    def __new__(cls, *args: Any, **kwargs: Any) -> Self:
        return _no_direct_construction(cls, Ragged, args, kwargs)

    @classmethod
    def create(
        cls,
        path: StrPath,
        dtype: npt.DTypeLike,
        ndim: SupportsIndex,
        *,
        codec: str,
        data_shards: int = 4,
        dict_bytes: bytes | None = None,
    ) -> RaggedWriter:
        """``RaggedWriter(path, dtype, ndim, codec=...)`` under its earlier name."""
        return RaggedWriter(path, dtype, ndim, codec=codec, data_shards=data_shards, dict_bytes=dict_bytes)

    @classmethod
    def open(cls, path: StrPath) -> RaggedStore:
        """``RaggedStore(path)`` under its earlier name."""
        return RaggedStore(path)

    @property
    def ndim(self) -> int:
        """Dimensions of every record."""
        return int(_inner_of(self).ndim)


class _View:
    """A store bound to an allocator: every read form of loaderx."""

    __slots__ = ("_store", "_allocator", "_classes")

    def __init__(self, store: Store, allocator: Allocator) -> None:
        self._store = store
        self._allocator = allocator
        self._classes: deque[int] = deque(maxlen=64)

    @property
    def store(self) -> Store:
        """The store this view reads."""
        return self._store

    @property
    def allocator(self) -> Allocator:
        """The allocator the view was bound to."""
        return self._allocator

    def _inner(self) -> Any:
        if self._allocator.closed:
            raise RuntimeError("Allocator is closed")
        return self._store._live()

    def __len__(self) -> int:
        return len(self._inner())

    @property
    def dtype(self) -> np.dtype[Any]:
        """The NumPy dtype of the elements."""
        dt: np.dtype[Any] = self._inner().dtype
        return dt

    @property
    def writable(self) -> bool:
        """Always ``False``: views only read."""
        return False

    @property
    def size_class(self) -> int | None:
        """The most frequent size class of the last 64 reads (informational)."""
        if not self._classes:
            return None
        return int(Counter(self._classes).most_common(1)[0][0])

    def _note(self, nbytes: int) -> None:
        self._classes.append(self.allocator.size_class(nbytes))

    def _read(self, inner: Any, ids: npt.NDArray[np.int64], scalar: bool) -> Any:
        raise NotImplementedError

    def __getitem__(self, key: Any) -> Any:
        inner = self._inner()
        ids, scalar = record_ids(key, len(inner))
        return self._read(inner, ids, scalar)

    def __getitems__(self, indices: Any) -> Any:
        """The records at ``indices`` as one batch (the loader's gather)."""
        inner = self._inner()
        ids, _ = record_ids(indices, len(inner))
        return self._read(inner, ids, False)

    def __iter__(self) -> Iterator[Any]:
        for i in range(len(self)):
            yield self[i]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._store!r}, {self.allocator!r})"


class DenseView(_View):
    """A dense store bound to an allocator (``DenseStore.bind``): ``view[i]`` is one
    record of ``item_shape``; a tuple, list, range, slice, integer array or mask
    gives an array ``(n, *item_shape)``; iterating yields the records in order.
    Raises ``IndexError`` for negative or out-of-range indices, ``TypeError`` for
    bools and non-integer arrays, ``ZrecordError`` (code -7) for a record that
    fails its checksum or does not decode, and ``RuntimeError`` once the store is
    closed."""

    __slots__ = ()

    @property
    def item_shape(self) -> tuple[int, ...]:
        """The shape of one record."""
        return tuple(self._inner().item_shape)

    def _read(self, inner: Any, ids: npt.NDArray[np.int64], scalar: bool) -> npt.NDArray[Any]:
        with translated(format_code=-7):
            batch: npt.NDArray[Any] = inner.gather(ids)
        self._note(batch.nbytes)
        # `batch[0, ...]`: a 0-d array for a scalar store, not a NumPy scalar, so
        # that a record hands over by DLPack as loaderx's do (np/torch.from_dlpack).
        return batch[0, ...] if scalar else batch

    def __iter__(self) -> Iterator[npt.NDArray[Any]]:
        # zring iterates in order, reading a few MiB at a time.
        inner = self._inner()
        with translated(format_code=-7):
            yield from inner


class RaggedView(_View):
    """A ragged store bound to an allocator (``RaggedStore.bind``): every read is a
    :class:`RaggedBatch` (``view[i]`` a one-record batch) of the selected records
    in order. Raises as :class:`DenseView` does."""

    __slots__ = ()

    @property
    def ndim(self) -> int:
        """Dimensions of every record."""
        return int(self._inner().ndim)

    def _read(self, inner: Any, ids: npt.NDArray[np.int64], scalar: bool) -> RaggedBatch:
        with translated(format_code=-7):
            batch = RaggedBatch._from_zring(inner.gather(ids))
        self._note(batch.values.nbytes)
        return batch


class DenseStore(Dense, Store):
    """``DenseStore(path)``: opens a published dense store; ``bind`` it to read.

    Raises ``FileNotFoundError`` for a missing store and ``ZrecordError`` (-8) for a
    damaged one or one of the other layout."""

    _view_class = DenseView

    def __init__(self, path: StrPath) -> None:
        _open(path, _zring.DenseStore, self)

    if TYPE_CHECKING:

        def bind(self, allocator: Allocator) -> DenseView: ...


class RaggedStore(Ragged, Store):
    """``RaggedStore(path)``: opens a published ragged store; ``bind`` it to read.
    Raises as :class:`DenseStore` does."""

    _view_class = RaggedView

    def __init__(self, path: StrPath) -> None:
        _open(path, _zring.RaggedStore, self)

    if TYPE_CHECKING:

        def bind(self, allocator: Allocator) -> RaggedView: ...


class DenseWriter(Dense, Writer):
    """``DenseWriter(path, dtype, item_shape, *, codec, data_shards=4, dict_bytes=None)``:
    a new dense store of ``dtype`` records of ``item_shape`` (``()`` for scalars).

    ``codec`` is ``"raw"``, ``"zstd"`` or ``"zstd_dict"`` (which needs ``dict_bytes``,
    see :func:`train_dict`); ``data_shards`` is an int in 1..255. Missing parent
    directories are created; an empty directory at ``path`` is replaced when the
    store is published. ``append(batch)`` takes an array ``(n, *item_shape)`` of the
    store's dtype; ``close()`` (or leaving ``with`` normally) publishes the store,
    leaving ``with`` through an exception discards it. Raises ``ValueError`` /
    ``TypeError`` for bad arguments (nothing is written) and ``ZrecordError`` (-12)
    when ``path`` exists."""

    def __init__(
        self,
        path: StrPath,
        dtype: npt.DTypeLike,
        item_shape: Iterable[SupportsIndex],
        *,
        codec: str,
        data_shards: int = 4,
        dict_bytes: bytes | None = None,
    ) -> None:
        shape = _item_shape(item_shape)
        _create(_zring.DenseWriter, self, path, dtype, shape, codec, data_shards, dict_bytes)


class RaggedWriter(Ragged, Writer):
    """``RaggedWriter(path, dtype, ndim, *, codec, data_shards=4, dict_bytes=None)``:
    a new ragged store of ``dtype`` records with ``ndim`` dimensions (1..63).

    ``append(batch)`` takes a :class:`RaggedBatch` (or a list of arrays); the rest is
    as for :class:`DenseWriter`."""

    def __init__(
        self,
        path: StrPath,
        dtype: npt.DTypeLike,
        ndim: SupportsIndex,
        *,
        codec: str,
        data_shards: int = 4,
        dict_bytes: bytes | None = None,
    ) -> None:
        _create(_zring.RaggedWriter, self, path, dtype, _ragged_ndim(ndim), codec, data_shards, dict_bytes)

    def _prepare(self, batch: Any) -> Any:
        if isinstance(batch, RaggedBatch):
            return batch
        if hasattr(batch, "cu_seqlens"):  # a RaggedBatch-like: checked on the way in
            return RaggedBatch(batch.values, batch.cu_seqlens, batch.shapes)
        return batch  # a list of arrays (a zring addition)


def train_dict(source: Any, *, path: StrPath | None = None) -> bytes:
    """A zstd dictionary (at most 32 KiB) trained on records spread over ``source``:
    a CPU-bound view, an array (one record per row) or a list of arrays. With
    ``path=``, the same bytes are also written to that file."""
    if isinstance(source, Writer):
        raise TypeError("a writer cannot be a training source; close it and open the store")
    if isinstance(source, Store):
        raise TypeError("bind the store first: train_dict(store.bind(Allocator('cpu')))")
    if isinstance(source, _View):
        source = source._inner()
    elif isinstance(source, RaggedBatch):
        source = source.to_tensors()
    with translated(codec_code=DICT_TRAIN_FAILED):
        data = _zring.train_dict(source, size=DICT_CAPACITY)
    if path is not None:
        with open(path, "wb") as f:
            f.write(data)
    return data

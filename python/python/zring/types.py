"""Type aliases of zring's public API, for annotating code that calls it.

They are ordinary runtime objects (importable on every supported Python), used by
the type information of the native module (``_zring.pyi``)::

    import numpy as np
    import numpy.typing as npt
    import zring
    from zring.types import RecordIndices

    def read(store: zring.DenseStore, idx: RecordIndices) -> npt.NDArray[np.float32]: ...
"""

from __future__ import annotations

from os import PathLike
from typing import TYPE_CHECKING, Any, Literal, Protocol, Union

import numpy as np
import numpy.typing as npt

from ._internal.ragged import RaggedBatch

if TYPE_CHECKING:
    from typing_extensions import TypeAlias

__all__ = [
    "StrPath",
    "BackendName",
    "CodecName",
    "RecordIndex",
    "RecordIndices",
    "SupportsBuffer",
    "SupportsDLPack",
    "ArrayInput",
    "Shard",
    "ModeName",
    "RaggedMode",
]

StrPath: TypeAlias = Union[str, PathLike[str]]
"""A store path: a string or an ``os.PathLike`` (``pathlib.Path``)."""

BackendName: TypeAlias = Literal["auto", "pread", "mmap", "uring", "io_uring", "io-uring"]
"""The read backends a store can be opened with (``"auto"`` lets zring choose)."""

CodecName: TypeAlias = Literal["raw", "none", "zstd", "zstd-dict", "zstd_dict", "zstdict"]
"""The codecs a writer accepts (``"zstd-dict"`` needs ``dict_bytes``)."""

RecordIndex: TypeAlias = Union[int, "np.integer[Any]"]
"""One record: an integer, negative counting from the end."""

RecordIndices: TypeAlias = Union[
    slice, range, "list[int]", "npt.NDArray[np.integer[Any]]", "npt.NDArray[np.bool_]"
]
"""Several records: a slice, a range, a list or array of ints (any shape; the result
takes its shape), or a boolean mask with one entry per record."""


class SupportsBuffer(Protocol):
    """An object exporting the buffer protocol (``bytes``, ``memoryview``, ...)."""

    def __buffer__(self, flags: int, /) -> memoryview: ...


class SupportsDLPack(Protocol):
    """A DLPack tensor (``torch.Tensor``, ``jax.Array``, ...); zring takes CPU ones."""

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any: ...


ArrayInput: TypeAlias = Union["npt.NDArray[Any]", SupportsDLPack, SupportsBuffer]
"""A batch given to a writer: a NumPy array, a DLPack CPU tensor or a buffer."""

Shard: TypeAlias = dict[str, Union[npt.NDArray[Any], RaggedBatch]]
"""One shard of a loader step: each stream's batch by stream name."""

ModeName: TypeAlias = Literal["sequential", "iid", "cyclic", 0, 1, 2]
"""A sampling mode by name or number (or give a ``Sampler.Mode``)."""


RaggedMode: TypeAlias = Literal["offsets", "padded", "nested"]
"""How ``zring.torch`` hands over ragged fields: ``zring.torch.Ragged`` (values and
offsets), ``zring.torch.Padded`` (padded to the longest record, with lengths) or a
nested tensor (jagged layout)."""

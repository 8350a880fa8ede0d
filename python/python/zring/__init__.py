"""zring: typed record stores read by random batched gathers at the speed of the hardware.

Write a store from NumPy batches, read records with NumPy indexing (zero-copy arrays
over engine-owned aligned memory, with the GIL released while the engine reads),
draw batch indices with a counter-based sampler, and stream aligned multi-store
batches with the prefetching loader::

    import numpy as np, zring

    with zring.DenseWriter("images.zr", "uint8", (3, 224, 224), codec="zstd") as w:
        w.append(images)                      # (n, 3, 224, 224) uint8
    with zring.DenseWriter("labels.zr", "int64", ()) as w:
        w.append(labels)                      # (n,)

    images, labels = zring.DenseStore("images.zr"), zring.DenseStore("labels.zr")
    batch = images[[7, 2, 7]]                 # (3, 3, 224, 224), engine-owned memory
    sampler = zring.Sampler(len(images), 256, zring.Sampler.Mode.IID, seed=0)
    with zring.Loader({"image": [images], "label": [labels]}, sampler) as loader:
        for step in loader:
            shard = step[0]                   # {"image": ndarray, "label": ndarray}
            ...
"""

from . import decode, types
from ._internal.errors import (
    ClosedError,
    CodecError,
    CorruptStoreError,
    ImageDecodeError,
    InvalidArgumentError,
    SchemaError,
    StoreChangedError,
    StoreExistsError,
    StoreNotFoundError,
    StorePermissionError,
    UnsupportedFormatError,
    VersionConflictError,
    WriterPoisonedError,
    ZringError,
    ZringIndexError,
    ZringOSError,
)
from ._internal.ragged import RaggedBatch
from ._zring import (
    DenseStore,
    DenseWriter,
    EngineBuffer,
    RaggedStore,
    RaggedWriter,
    Sampler,
    open as open,  # re-exported, though not in __all__ (see below)
    train_dict,
    trim_buffers,
)
from ._zring import _Store as Store
from ._internal.loader import Loader
from ._internal.dataset import Dataset, open_dataset
from ._internal.write import FieldSpec, dense, ragged, write_dataset
from .converters import convert, convert_cli
from ._internal.sampler_loader import SamplerLoader
from ._internal.pack import Packed, pack
from ._internal.mixture import Mixture, mix

from ._zring import Mode

__version__ = "0.1.0"

# `open` is left out on purpose: `from zring import *` must not shadow the builtin.
# It is still `zring.open`, public and documented: the API reference and the
# docstring tests take the names below as well as `__all__`.
_PUBLIC_NOT_STARRED = ("open",)

__all__ = [
    "DenseWriter",
    "RaggedWriter",
    "DenseStore",
    "RaggedStore",
    "Store",
    "RaggedBatch",
    "Sampler",
    "Mode",
    "Loader",
    "Dataset",
    "open_dataset",
    "write_dataset",
    "FieldSpec",
    "dense",
    "ragged",
    "convert",
    "convert_cli",
    "SamplerLoader",
    "mix",
    "Mixture",
    "pack",
    "Packed",
    "EngineBuffer",
    "train_dict",
    "trim_buffers",
    "types",
    "decode",
    "ZringError",
    "CorruptStoreError",
    "UnsupportedFormatError",
    "SchemaError",
    "InvalidArgumentError",
    "ZringIndexError",
    "ClosedError",
    "StoreChangedError",
    "WriterPoisonedError",
    "VersionConflictError",
    "CodecError",
    "ImageDecodeError",
    "ZringOSError",
    "StoreNotFoundError",
    "StorePermissionError",
    "StoreExistsError",
]

"""loaderx 2.8 on zring: change the import, keep the program.

``import loaderx`` becomes ``import zring.loaderx as loaderx`` (and
``from loaderx.zrecord import ...`` becomes ``from zring.loaderx.zrecord import ...``);
the rest of a loaderx 2.8 program runs unchanged and draws the same indices::

    from zring.loaderx import Allocator, Loader
    from zring.loaderx.sampler import Sampler
    from zring.loaderx.zrecord import DenseStore, DenseWriter

    with DenseWriter("labels", labels.dtype, labels.shape[1:], codec="zstd") as w:
        w.append(labels)
    with DenseStore("labels") as store, Allocator("cpu") as allocator:
        view = store.bind(allocator)
        sampler = Sampler(len(view), 256, Sampler.Mode.IID, seed=42)
        with Loader({"label": [view]}, sampler, workers=4) as loader:
            for step, (shard,) in zip(range(100), loader):
                ...

``Dense.create(...)`` / ``Dense.open(...)`` (and ``Ragged``'s) remain as other
spellings of ``DenseWriter(...)`` / ``DenseStore(...)``. ``zring.loaderx.converter``,
``.allocator`` and ``.dataloader`` re-export ``convert``, ``Allocator`` and
``Loader`` where loaderx has them.

The stores are zring stores (one checksummed file each, published atomically).
docs/loaderx.md lists what still differs from loaderx and why.
"""

from . import allocator, converter, dataloader, dtypes, sampler, zrecord
from ._batch import RaggedBatch
from ._convert import convert
from ._errors import ERRORS, ZrecordError
from ._loader import Loader
from .sampler import Sampler
from .zrecord import (
    CODECS,
    Allocator,
    Dense,
    DenseStore,
    DenseWriter,
    Ragged,
    RaggedStore,
    RaggedWriter,
    Store,
    Writer,
    train_dict,
)

__all__ = [
    "Allocator",
    "CODECS",
    "Dense",
    "DenseStore",
    "DenseWriter",
    "ERRORS",
    "Loader",
    "Ragged",
    "RaggedBatch",
    "RaggedStore",
    "RaggedWriter",
    "Sampler",
    "Store",
    "Writer",
    "ZrecordError",
    "allocator",
    "convert",
    "converter",
    "dataloader",
    "dtypes",
    "sampler",
    "train_dict",
    "zrecord",
]

"""loaderx 2.8 on zring: change the import, keep the program.

``import loaderx`` becomes ``import zring.loaderx as loaderx`` (and
``from loaderx.zrecord import ...`` becomes ``from zring.loaderx.zrecord import ...``);
the rest of a loaderx 2.8 program runs unchanged and draws the same indices::

    from zring.loaderx import Allocator, Loader
    from zring.loaderx.sampler import Sampler, IID
    from zring.loaderx.zrecord import Dense

    with Dense.create("labels", "int64", (), codec="zstd") as w:
        w.append(labels)
    view = Dense.open("labels").bind(Allocator("cpu"))
    sampler = Sampler(len(view), batch_size=256, mode=IID, seed=42)
    with Loader({"label": [view]}, sampler, workers=4) as loader:
        for step, (shard,) in zip(range(100), loader):
            ...

The stores are zring stores (one checksummed file each, published atomically).
docs/loaderx.md lists what still differs from loaderx and why.
"""

from . import dtypes, sampler, zrecord
from ._batch import RaggedBatch
from ._convert import convert
from ._errors import ERRORS, ZrecordError
from ._loader import Loader
from .sampler import Sampler
from .zrecord import CODECS, Allocator, Dense, Ragged, Store, Writer, train_dict

__all__ = [
    "Allocator",
    "CODECS",
    "Dense",
    "ERRORS",
    "Loader",
    "Ragged",
    "RaggedBatch",
    "Sampler",
    "Store",
    "Writer",
    "ZrecordError",
    "convert",
    "dtypes",
    "sampler",
    "train_dict",
    "zrecord",
]

"""The converters' former module name: every name of :mod:`zring.converters`,
re-exported so that code importing ``zring.datasets`` keeps working."""

from .converters import (
    IMAGE_EXTENSIONS,
    convert,
    convert_cli,
    from_arrow,
    from_hdf5,
    from_hf,
    from_imagefolder,
    from_npy,
    from_npz,
    from_parquet,
    from_webdataset,
)

__all__ = [
    "from_parquet",
    "from_arrow",
    "from_hf",
    "from_npz",
    "from_npy",
    "from_hdf5",
    "from_imagefolder",
    "from_webdataset",
    "convert",
    "convert_cli",
]
# IMAGE_EXTENSIONS is public in zring.converters without being starred; kept here too.
_KEPT = (IMAGE_EXTENSIONS,)

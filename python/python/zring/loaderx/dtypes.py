"""loaderx's dtype catalog: the 20 element types a store may hold.

Each name is an attribute holding the NumPy dtype (``dtypes.float32``,
``dtypes.bfloat16``, ``dtypes.float8_e8m0fnu``, ...). bfloat16 and the float8 types
come from ``ml_dtypes``, imported only when one of them is first used.
:func:`canonical` turns anything ``numpy.dtype()`` accepts into its catalog name.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["CATALOG", "ML_DTYPES", "canonical", "resolve"]

#: Names from ml_dtypes (no NumPy built-in).
ML_DTYPES = (
    "bfloat16",
    "float8_e4m3fn",
    "float8_e4m3fnuz",
    "float8_e5m2",
    "float8_e5m2fnuz",
    "float8_e8m0fnu",
)

#: Every storable dtype name, in loaderx's catalog.
CATALOG = (
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
    *ML_DTYPES,
    "complex64",
    "complex128",
)


def resolve(name: str) -> np.dtype:
    """The NumPy dtype of catalog name ``name``."""
    if name not in CATALOG:
        raise ValueError(f"unsupported dtype {name!r}; the catalog holds {', '.join(CATALOG)}")
    if name in ML_DTYPES:
        try:
            import ml_dtypes
        except ImportError as e:
            raise ImportError(f"dtype {name} needs the ml_dtypes package (pip install ml_dtypes)") from e
        ml: np.dtype[Any] = np.dtype(getattr(ml_dtypes, name))
        return ml
    return np.dtype(name)


def canonical(dtype: npt.DTypeLike) -> str:
    """The catalog name of ``dtype`` (a name, a NumPy dtype or anything
    ``numpy.dtype()`` takes); non-native byte orders and types outside the catalog
    are a ``ValueError``, as in loaderx 2.8."""
    if isinstance(dtype, str) and dtype in CATALOG:
        return dtype
    try:
        dt = np.dtype(dtype)
    except TypeError as e:
        raise TypeError(f"{dtype!r} is not a dtype") from e
    if not dt.isnative:
        raise ValueError(f"dtype {dt} has a non-native byte order; convert it with astype(dtype.newbyteorder('='))")
    if dt.name not in CATALOG:
        raise ValueError(f"unsupported dtype {dt}; the catalog holds {', '.join(CATALOG)}")
    return str(dt.name)


def __getattr__(name: str) -> np.dtype:
    if name in CATALOG:
        dt = resolve(name)
        globals()[name] = dt
        return dt
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(CATALOG))

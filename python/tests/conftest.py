"""Shared helpers: deterministic data of every dtype, small stores, a trained dictionary."""

import numpy as np
import pytest

import zring

try:
    import ml_dtypes  # noqa: F401

    HAVE_ML_DTYPES = True
except ImportError:
    HAVE_ML_DTYPES = False

PLAIN_DTYPES = [
    "bool",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "int8",
    "int16",
    "int32",
    "int64",
    "float16",
    "float32",
    "float64",
    "complex64",
    "complex128",
]
ML_DTYPES = [
    "bfloat16",
    "float8_e4m3fn",
    "float8_e5m2",
    "float8_e4m3fnuz",
    "float8_e5m2fnuz",
    "float8_e8m0fnu",
]
ALL_DTYPES = PLAIN_DTYPES + ML_DTYPES
CODECS = ["raw", "zstd", "zstd-dict"]


def np_dtype(name: str) -> np.dtype:
    if name in ML_DTYPES:
        if not HAVE_ML_DTYPES:
            pytest.skip("ml_dtypes is not installed")
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, name))
    return np.dtype(name)


def sample(name: str, shape, rng: np.random.Generator) -> np.ndarray:
    """Low-entropy (compressible) values of dtype `name`, any bit pattern but bool."""
    dt = np_dtype(name)
    shape = tuple(shape)
    if dt.kind == "b":
        return rng.random(shape) > 0.5
    n = int(np.prod(shape, dtype=np.int64))
    raw = rng.integers(0, 8, size=n * dt.itemsize, dtype=np.uint8)
    return raw.view(dt).reshape(shape)


def same_bytes(a: np.ndarray, b: np.ndarray) -> bool:
    """Equality of dtype, shape and every byte (NaN-safe)."""
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.fixture(scope="session")
def dictionary() -> bytes:
    rng = np.random.default_rng(7)
    records = [rng.integers(0, 8, 1024, dtype=np.uint8) for _ in range(300)]
    return zring.train_dict(records, size=4096)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)


def write_dense(path, data: np.ndarray, codec="raw", **kw):
    with zring.DenseWriter(path, data.dtype, data.shape[1:], codec=codec, **kw) as w:
        w.append(data)
    return zring.DenseStore(path)


def write_ragged(path, records, dtype, ndim=1, codec="raw", **kw):
    with zring.RaggedWriter(path, dtype, ndim, codec=codec, **kw) as w:
        w.append(records)
    return zring.RaggedStore(path)

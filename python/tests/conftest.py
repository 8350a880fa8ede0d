"""Shared helpers: deterministic data of every dtype, small stores, a trained
dictionary; and the rule that CI's main run skips no test for a missing package."""

import importlib
import os

import numpy as np
import pytest

import zring

# The remote cache is on by default, in the user's cache directory: the tests (and
# the processes they start, which inherit this) must not fill it. A test of the cache
# names a directory of its own; test_remote.py checks the default in a child process.
os.environ["ZRING_NO_CACHE"] = "1"

# The optional packages python/requirements-test.txt installs (by module name). Tests
# that need one call pytest.importorskip, so that a developer without, say, torch
# still runs the rest. In CI's main run (scripts/test.sh: CI set, and
# ZRING_TEST_INSTALLED=1, which it exports for that run only) every one of them is
# installed, so a failed import there is an error rather than a skip: otherwise a
# broken install would silently drop the torch, JAX or Ray tests. The smaller
# environments of scripts/test_pythons.sh run with CI set but without
# ZRING_TEST_INSTALLED, and keep skipping what they do not install. Skips that are
# about the machine (no CUDA, no io_uring) are not import failures and stay skips.
REQUIRED_IN_CI = frozenset({
    "torch", "jax", "ml_dtypes", "grain", "torchdata", "pyarrow", "datasets", "ray",
    "moto", "boto3", "h5py", "PIL", "webdataset",
})


def _required_here(modname: str) -> bool:
    return (
        bool(os.environ.get("CI"))
        and os.environ.get("ZRING_TEST_INSTALLED") == "1"
        and modname.split(".")[0] in REQUIRED_IN_CI
    )


class RequiredTestPackageMissing(ImportError):
    """A package CI's main run must have failed to import."""


_importorskip = pytest.importorskip


def _importorskip_unless_required(modname: str, *args, **kwargs):
    if _required_here(modname):
        try:
            importlib.import_module(modname)
        except ImportError as e:
            raise RequiredTestPackageMissing(
                f"{modname} failed to import ({e}); CI's main run installs it "
                "(python/requirements-test.txt), so the tests that need it must run, not skip"
            ) from e
    return _importorskip(modname, *args, **kwargs)


# Replaced for every test module (they call pytest.importorskip at run time).
pytest.importorskip = _importorskip_unless_required


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    # `slow`: the few tests that take most of the suite's time (a Ray cluster each,
    # peak-RSS conversions of growing inputs, the torch guide's examples with worker
    # processes). `scripts/test.sh --quick` leaves them out; the full run and CI run
    # everything.
    config.addinivalue_line("markers", "slow: several seconds or more; left out by scripts/test.sh --quick")
    # Every skip's reason in the summary (as -rs), so that what did not run is seen.
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and not set("saA") & set(reporter.reportchars):
        reporter.reportchars += "s"


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
        ml_dtypes = pytest.importorskip("ml_dtypes")
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

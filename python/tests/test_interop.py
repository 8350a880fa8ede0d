"""ml_dtypes, torch and jax interop (each runs only when the package is installed),
and the clear error when ml_dtypes is missing."""

import sys

import numpy as np
import pytest

import zring
from conftest import write_dense


def test_bfloat16_and_float8_map_to_ml_dtypes(tmp_path):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    for name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        t = getattr(ml_dtypes, name)
        data = np.linspace(-2, 2, 24).astype(t).reshape(6, 4)
        store = write_dense(tmp_path / f"{name}.zr", data, codec="zstd")
        assert store.dtype == np.dtype(t)
        assert store.schema["dtype"] == name
        got = store[[5, 0]]
        assert got.dtype == np.dtype(t)
        assert got.tobytes() == data[[5, 0]].tobytes()


def test_missing_ml_dtypes_is_a_clear_import_error(tmp_path, monkeypatch):
    have = "ml_dtypes" in sys.modules or _importable("ml_dtypes")
    path = tmp_path / "bf16.zr"
    if have:
        import ml_dtypes

        write_dense(path, np.ones((3, 2), ml_dtypes.bfloat16))
    monkeypatch.setitem(sys.modules, "ml_dtypes", None)  # import ml_dtypes now fails
    w = zring.DenseWriter(tmp_path / "w.zr", "bfloat16", (2,))  # naming it needs nothing
    with pytest.raises(ImportError, match="pip install ml_dtypes"):
        w.dtype
    w.abort()
    if have:
        store = zring.DenseStore(path)
        assert len(store) == 3 and store.schema["dtype"] == "bfloat16"
        with pytest.raises(ImportError, match="bfloat16 needs the ml_dtypes package"):
            store[0]


def _importable(name):
    import importlib.util

    return importlib.util.find_spec(name) is not None


def test_torch_from_dlpack_takes_engine_arrays(tmp_path):
    torch = pytest.importorskip("torch")
    data = np.arange(24, dtype=np.float32).reshape(6, 4)
    store = write_dense(tmp_path / "d.zr", data)
    batch = store[[4, 1]]
    t = torch.from_dlpack(batch)
    assert t.data_ptr() == batch.base.address
    assert t.tolist() == data[[4, 1]].tolist()
    with zring.DenseWriter(tmp_path / "t.zr", "float32", (4,)) as w:
        w.append(torch.arange(8, dtype=torch.float32).reshape(2, 4))
    assert zring.DenseStore(tmp_path / "t.zr")[1].tolist() == [4, 5, 6, 7]


def test_jax_dlpack_takes_engine_arrays(tmp_path):
    jax = pytest.importorskip("jax")
    data = np.arange(24, dtype=np.float32).reshape(6, 4)
    store = write_dense(tmp_path / "d.zr", data)
    batch = store[[4, 1]]
    x = jax.dlpack.from_dlpack(batch)
    assert np.asarray(x).tolist() == data[[4, 1]].tolist()

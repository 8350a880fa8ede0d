"""Writers: publish on close, publish nothing on abort or exception, and refuse bad
input with clear exceptions."""

import gc
import os
import shutil

import numpy as np
import pytest

import zring
from conftest import write_dense


def test_exception_inside_with_publishes_nothing(tmp_path):
    path = tmp_path / "a.zr"
    with pytest.raises(RuntimeError, match="boom"):
        with zring.DenseWriter(path, "uint8", (4,)) as w:
            w.append(np.zeros((10, 4), np.uint8))
            raise RuntimeError("boom")
    assert not path.exists()
    assert os.listdir(tmp_path) == []  # no temporary file left behind either
    assert w.closed


def test_abort_and_garbage_collected_writers_publish_nothing(tmp_path):
    w = zring.RaggedWriter(tmp_path / "r.zr", "int32")
    w.append([np.ones(3, np.int32)])
    w.abort()
    w.abort()  # idempotent
    with pytest.raises(zring.ClosedError, match="aborted"):
        w.append([np.ones(3, np.int32)])
    with pytest.raises(zring.ClosedError, match="aborted"):
        w.close()
    w2 = zring.DenseWriter(tmp_path / "g.zr", "int32", ())
    w2.append(np.arange(5, dtype=np.int32))
    del w2
    gc.collect()
    assert os.listdir(tmp_path) == []


def test_close_publishes_and_is_idempotent(tmp_path):
    path = tmp_path / "a.zr"
    w = zring.DenseWriter(path, "float32", (2,))
    assert not path.exists()
    w.append(np.ones((3, 2), np.float32))
    assert w.close() == 3
    assert w.close() == 3
    assert path.exists()
    with pytest.raises(zring.ClosedError, match="closed"):
        w.append(np.ones((1, 2), np.float32))
    assert len(zring.DenseStore(path)) == 3


def test_a_failed_close_publishes_nothing_and_is_remembered(tmp_path):
    sub = tmp_path / "sub"
    sub.mkdir()
    w = zring.DenseWriter(sub / "a.zr", "uint8", (2,))
    w.append(np.ones((4, 2), np.uint8))
    shutil.rmtree(sub)  # the directory the store was to be published in is gone
    with pytest.raises(OSError) as first:
        w.close()
    # A later close raises the first failure again: same class, same errno.
    with pytest.raises(OSError, match="closing failed earlier") as again:
        w.close()
    assert type(again.value) is type(first.value)
    assert again.value.errno == first.value.errno
    assert w.closed and not (sub / "a.zr").exists()


def test_a_repeated_close_raises_the_class_of_the_first_failure(tmp_path):
    path = tmp_path / "a.zr"
    w = zring.DenseWriter(path, "uint8", (2,))
    w.append(np.ones((4, 2), np.uint8))
    path.write_bytes(b"taken meanwhile")  # overwrite was not asked for
    with pytest.raises(zring.StoreExistsError) as first:
        w.close()
    with pytest.raises(zring.StoreExistsError, match="closing failed earlier") as again:
        w.close()
    assert isinstance(again.value, FileExistsError)
    assert again.value.errno == first.value.errno
    assert first.value.strerror in again.value.strerror
    assert path.read_bytes() == b"taken meanwhile"


def test_existing_files_are_kept_unless_overwrite(tmp_path):
    path = tmp_path / "a.zr"
    write_dense(path, np.zeros((2, 2), np.uint8))
    with pytest.raises(FileExistsError) as e:
        zring.DenseWriter(path, "uint8", (2,))
    assert isinstance(e.value, zring.StoreExistsError)
    with zring.DenseWriter(path, "uint8", (2,), overwrite=True) as w:
        w.append(np.ones((5, 2), np.uint8))
    assert len(zring.DenseStore(path)) == 5


def test_dense_append_rejects_bad_batches(tmp_path):
    w = zring.DenseWriter(tmp_path / "a.zr", "float32", (3,))
    with pytest.raises(TypeError, match="dtype float64"):
        w.append(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="C-contiguous"):
        w.append(np.zeros((3, 2), np.float32).T)
    with pytest.raises(ValueError, match=r"expected \(n, 3\)"):
        w.append(np.zeros((2, 4), np.float32))
    with pytest.raises(ValueError, match=r"batch\[None\]"):
        w.append(np.zeros(3, np.float32))
    with pytest.raises(TypeError, match="NumPy array"):
        w.append([[1.0, 2.0, 3.0]])
    assert len(w) == 0
    w.abort()


def test_dense_append_takes_buffers_and_dlpack_tensors(tmp_path):
    path = tmp_path / "a.zr"
    with zring.DenseWriter(path, "uint8", (4,)) as w:
        w.append(memoryview(bytearray(b"abcdefgh")).cast("B", (2, 4)))
        w.append(_DLPackOnly(np.arange(8, dtype=np.uint8).reshape(2, 4)))
    store = zring.DenseStore(path)
    assert store[0].tobytes() == b"abcd"
    assert store[3].tolist() == [4, 5, 6, 7]


class _DLPackOnly:
    """A tensor that only speaks DLPack (like a CPU torch tensor)."""

    def __init__(self, a):
        self._a = a

    def __dlpack__(self, *args, **kwargs):
        return self._a.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


def test_ragged_append_rejects_bad_records(tmp_path):
    w = zring.RaggedWriter(tmp_path / "r.zr", "int32", 1)
    with pytest.raises(TypeError, match="dtype int64"):
        w.append([np.ones(2, np.int64)])
    with pytest.raises(ValueError, match="dimensions"):
        w.append([np.ones((2, 2), np.int32)])
    # Empty records are records (format v1.2).
    assert w.append([np.ones(0, np.int32)]) == range(0, 1)
    with pytest.raises(TypeError, match="RaggedBatch or a list"):
        w.append(np.ones((2, 3), np.int32))
    bad = zring.RaggedBatch._from_parts(np.ones(4, np.int32), np.array([0, 3]), np.array([[3]]))
    with pytest.raises(ValueError, match="cu_seqlens"):
        w.append(bad)
    # Non-contiguous records in a list are copied, not refused.
    w.append([np.arange(10, dtype=np.int32)[::2]])
    assert w.close() == 2
    store = zring.RaggedStore(tmp_path / "r.zr")
    assert store[0].shape == (0,)
    assert store[1].tolist() == [0, 2, 4, 6, 8]


def test_bad_writer_arguments(tmp_path):
    with pytest.raises(ValueError, match="codec"):
        zring.DenseWriter(tmp_path / "a.zr", "uint8", (2,), codec="lz4")
    with pytest.raises(TypeError, match="dtype"):
        zring.DenseWriter(tmp_path / "a.zr", "float128", (2,))
    with pytest.raises(TypeError):
        zring.DenseWriter(tmp_path / "a.zr", np.dtype("U4"), (2,))
    with pytest.raises(zring.InvalidArgumentError, match="dictionary"):
        zring.DenseWriter(tmp_path / "a.zr", "uint8", (2,), codec="zstd-dict")
    with pytest.raises(zring.InvalidArgumentError, match="dictionary"):
        zring.DenseWriter(tmp_path / "a.zr", "uint8", (2,), codec="raw", dict_bytes=b"x" * 100)
    with pytest.raises(zring.SchemaError, match="zero bytes"):
        zring.DenseWriter(tmp_path / "a.zr", "uint8", (0,))
    with pytest.raises(zring.SchemaError, match="ndim"):
        zring.RaggedWriter(tmp_path / "a.zr", "uint8", 0)
    assert os.listdir(tmp_path) == []

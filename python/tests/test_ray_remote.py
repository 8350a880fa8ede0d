"""zring.ray reading straight from object storage: datasets and stores at s3:// URLs
on the local S3-compatible server, with no path the read tasks share."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import zring

ray = pytest.importorskip("ray")
pytest.importorskip("boto3")
pytest.importorskip("moto.server")

from s3_server import BUCKET, S3, s3  # noqa: E402,F401  (s3: the module's server fixture)
from zring.ray import read_zring  # noqa: E402

N = 200


@pytest.fixture(scope="module")
def local_ray(s3: S3):  # noqa: F811
    # Started after the server, so the workers inherit its endpoint and credentials.
    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=200 << 20, log_to_driver=False)
    ctx = ray.data.DataContext.get_current()
    ctx.execution_options.preserve_order = True
    ctx.enable_progress_bars = False
    yield
    ray.shutdown()


def _columns() -> dict[str, np.ndarray]:
    return {"x": np.arange(N * 3, dtype=np.float32).reshape(N, 3), "y": np.arange(N, dtype=np.int64)}


def test_a_dataset_url_and_a_store_url_read_as_what_they_are(
    s3: S3, local_ray: None, tmp_path: Path  # noqa: F811
) -> None:
    cols = _columns()
    zring.write_dataset(tmp_path / "ds", cols, shard_records=64)
    ds_url = s3.put_tree("ray/ds", tmp_path / "ds")
    with zring.DenseWriter(tmp_path / "y.zr", np.int64, ()) as w:
        w.append(cols["y"])
    store_url = s3.put_file("ray/y.zr", tmp_path / "y.zr")

    got = read_zring(ds_url, override_num_blocks=3).take_all()
    assert [r["y"] for r in got] == list(range(N))
    np.testing.assert_array_equal(np.stack([r["x"] for r in got]), cols["x"])

    # A store object is one field named after it; a list reads one after another,
    # and the read settings reach every open (the remote options among them).
    both = read_zring([store_url, ds_url], "y", remote={"max_retries": 2}, verify_checksums=True)
    assert [r["y"] for r in both.take_all()] == list(range(N)) * 2


def test_a_url_that_is_neither_says_so(s3: S3, local_ray: None) -> None:  # noqa: F811
    with pytest.raises(zring.StoreNotFoundError, match="neither a dataset") as e:
        read_zring(f"s3://{BUCKET}/ray/nothing")
    assert "ray/nothing/manifest.json" in str(e.value)


def test_a_bad_read_setting_is_refused_before_any_task_runs(s3: S3, local_ray: None, tmp_path: Path) -> None:  # noqa: F811
    zring.write_dataset(tmp_path / "ds2", _columns(), shard_records=64)
    url = s3.put_tree("ray/ds2", tmp_path / "ds2")
    with pytest.raises(zring.InvalidArgumentError, match="queue_depth"):
        read_zring(url, queue_depth=0)


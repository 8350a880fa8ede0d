"""zring.ray without a shared file system: a Ray cluster of two simulated nodes
(ray.cluster_utils.Cluster) writing and reading datasets and stores at s3:// URLs on
the local S3-compatible server, with no local path the tasks share."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import zring

ray = pytest.importorskip("ray")
pytest.importorskip("boto3")
pytest.importorskip("moto.server")

from s3_server import BUCKET, S3, s3  # noqa: E402,F401  (s3: the module's server fixture)
from ray.cluster_utils import Cluster  # noqa: E402

from zring.ray import ZringDatasink, read_zring  # noqa: E402

pytestmark = pytest.mark.slow  # a Ray cluster (scripts/test.sh --quick leaves these out)

N = 200


@pytest.fixture(scope="module")
def local_ray(s3: S3):  # noqa: F811
    # Two nodes of one CPU each, started after the server, so that their workers
    # inherit its endpoint and credentials.
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "object_store_memory": 100 << 20, "include_dashboard": False},
    )
    cluster.add_node(num_cpus=1, object_store_memory=100 << 20)
    ray.init(address=cluster.address, log_to_driver=False)
    ctx = ray.data.DataContext.get_current()
    ctx.execution_options.preserve_order = True
    ctx.enable_progress_bars = False
    yield
    ray.shutdown()
    cluster.shutdown()


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



def test_a_datasink_at_a_url_publishes_from_tasks_on_both_nodes(s3: S3, local_ray: None) -> None:  # noqa: F811
    assert len([n for n in ray.nodes() if n["Alive"]]) == 2
    items = [{"id": i, "tokens": np.arange(i % 5 + 1, dtype=np.int32) + i} for i in range(N)]
    url = f"s3://{BUCKET}/ray/written"
    # Each task records the node it ran on, so the test knows both nodes wrote.
    def tag_node(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        batch["node"] = np.full(len(batch["id"]), int(ray.get_runtime_context().get_node_id()[:8], 16))
        return batch

    src = ray.data.from_items(items, override_num_blocks=4).map_batches(
        tag_node, batch_format="numpy", scheduling_strategy="SPREAD"
    )
    src.write_datasink(ZringDatasink(url, ["id", "tokens", "node"], codec="zstd"))
    ds = zring.open_dataset(url)
    assert (len(ds), ds.version, ds.fields) == (N, 1, ["id", "tokens", "node"])
    assert ds.gather(slice(None))["id"].tolist() == list(range(N))
    assert ds[7]["tokens"].tolist() == list(range(7, 10))
    assert len(set(ds.gather(slice(None))["node"].tolist())) == 2, "both nodes wrote shards"
    # An append publishes version 2 holding both; reading goes back through the cluster.
    ray.data.from_items(items[:20], override_num_blocks=2).map_batches(tag_node, batch_format="numpy").write_datasink(
        ZringDatasink(url, append=True)
    )
    back = read_zring(url, ["id"], override_num_blocks=2).take_all()
    assert [r["id"] for r in back] == list(range(N)) + list(range(20))
    with pytest.raises(FileExistsError):
        ray.data.from_items(items[:5]).write_datasink(ZringDatasink(url))

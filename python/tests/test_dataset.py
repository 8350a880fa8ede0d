"""Datasets from Python: writing from every kind of source, reading every field of
every shard in one gather, growing by new versions, pickling, the loader, export."""

import os
import pickle
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import zring


def token_rows(n, start=0):
    for i in range(start, start + n):
        yield {
            "tokens": np.arange(i % 13 + 1, dtype=np.int32) + i,
            "label": i,
            "text": f"record {i}",
            "image": np.full((4, 3), i % 256, dtype=np.uint8),
        }


def check_record(rec, i):
    np.testing.assert_array_equal(rec["tokens"], np.arange(i % 13 + 1, dtype=np.int32) + i)
    assert int(rec["label"]) == i
    assert rec["text"] == f"record {i}"
    np.testing.assert_array_equal(rec["image"], np.full((4, 3), i % 256, dtype=np.uint8))


def test_rows_infer_schemas_and_gather_across_shards(tmp_path):
    ds = zring.write_dataset(tmp_path / "ds", token_rows(1000), shard_records=128, workers=2)
    assert len(ds) == 1000 and ds.shards == 8 and ds.version == 1
    schema = ds.field_schemas
    assert schema["tokens"]["layout"] == "ragged" and schema["tokens"]["dtype"] == "int32"
    assert schema["label"]["layout"] == "dense" and schema["label"]["item_shape"] == ()
    assert schema["text"]["metadata"] == {"zring.kind": "str", "encoding": "utf-8"}
    assert schema["image"]["item_shape"] == (4, 3)
    for i in [0, 127, 128, 999]:
        check_record(ds[i], i)
    idx = np.random.default_rng(0).integers(0, 1000, 300)
    out = ds.gather(idx, fields=["label", "tokens", "image"])
    assert list(out) == ["label", "tokens", "image"]
    np.testing.assert_array_equal(out["label"], idx)
    assert out["image"].shape == (300, 4, 3)
    for k, i in enumerate(idx):
        np.testing.assert_array_equal(out["tokens"][k], np.arange(i % 13 + 1, dtype=np.int32) + i)
    assert list(ds.gather([5, 6], fields="label")) == ["label"]
    with pytest.raises(KeyError):
        ds.gather([1], fields=["nope"])
    with pytest.raises(IndexError):
        ds.gather([1000])
    ds.verify()


def test_numpy_columns_and_explicit_fields(tmp_path):
    n = 500
    cols = {"x": np.arange(n * 6, dtype=np.float32).reshape(n, 2, 3), "y": np.arange(n)}
    ds = zring.write_dataset(tmp_path / "ds", cols, shard_records=64, codec="raw")
    np.testing.assert_array_equal(ds.gather(slice(None))["x"], cols["x"])
    np.testing.assert_array_equal(ds[::7]["y"], cols["y"][::7])
    rows = [{"seq": [1, 2, 3][: i % 3 + 1], "name": b"\x00\xff" * (i + 1)} for i in range(50)]
    fields = {"seq": zring.ragged("int16"), "name": "bytes"}
    ds = zring.write_dataset(tmp_path / "ds2", rows, fields, shard_records=7)
    assert ds.field_schemas["seq"]["dtype"] == "int16"
    assert ds[10]["name"] == b"\x00\xff" * 11
    np.testing.assert_array_equal(ds[4]["seq"], [1, 2])


def test_growing_publishes_versions_old_readers_keep_theirs_and_pickle(tmp_path):
    path = tmp_path / "ds"
    v1 = zring.write_dataset(path, token_rows(100), shard_records=40)
    v2 = zring.write_dataset(path, token_rows(50, start=100), shard_records=40, append=True)
    assert (v1.version, len(v1), v1.shards) == (1, 100, 3)
    assert (v2.version, len(v2), v2.shards) == (2, 150, 5)
    check_record(v1[99], 99)
    check_record(v2[149], 149)
    with pytest.raises(IndexError):
        v1[100]
    back = pickle.loads(pickle.dumps(v1))
    assert (back.version, len(back)) == (1, 100)
    assert zring.open_dataset(path).version == 2
    with pytest.raises(zring.StoreExistsError):
        zring.write_dataset(path, token_rows(5))
    v3 = zring.write_dataset(path, token_rows(5), overwrite=True)
    assert (v3.version, len(v3)) == (3, 5)
    check_record(v2[120], 120)


@pytest.mark.parametrize("codec", ["raw", "zstd"])
def test_empty_strings_lists_and_arrays_round_trip(tmp_path, codec):
    """Format v1.2: empty ragged records (empty strings, bytes, token lists, arrays
    with a 0 dim) are written by every source kind and read back by every path."""
    pa = pytest.importorskip("pyarrow")

    n = 50
    rows = [
        {
            "text": "" if i % 3 == 0 else f"t{i}",
            "blob": b"" if i % 4 == 1 else bytes([i]) * 3,
            "ids": [] if i % 5 == 2 else list(range(i % 7 + 1)),
            "grid": np.zeros((0 if i % 2 else 2, 3), np.float32),
        }
        for i in range(n)
    ]
    fields = {"text": "str", "blob": "bytes", "ids": zring.ragged("int64"), "grid": zring.ragged("float32", 2)}
    table = pa.table({
        "text": [r["text"] for r in rows],
        "blob": [r["blob"] for r in rows],
        "ids": pa.array([r["ids"] for r in rows], type=pa.list_(pa.int64())),
    })
    sources = {
        "rows": (rows, fields),
        "columns": ({k: [r[k] for r in rows] for k in rows[0]}, fields),
        "arrow": (table, None),
    }
    for kind, (source, spec) in sources.items():
        ds = zring.write_dataset(tmp_path / kind, source, spec, shard_records=16, codec=codec)
        for backend in ("mmap", "pread"):
            ds = zring.open_dataset(tmp_path / kind, backend=backend)
            for i in (0, 1, 2, 3, 49):
                rec = ds[i]
                assert rec["text"] == rows[i]["text"], (kind, i)
                assert rec["blob"] == rows[i]["blob"], (kind, i)
                np.testing.assert_array_equal(rec["ids"], rows[i]["ids"])
                assert rec["ids"].shape == (len(rows[i]["ids"]),)
                if "grid" in rec:
                    assert rec["grid"].shape == rows[i]["grid"].shape
            batch = ds.gather(np.arange(n)[::-1])
            for k, i in enumerate(range(n - 1, -1, -1)):
                assert batch["ids"][k].tolist() == rows[i]["ids"]
                if "grid" in batch:
                    assert batch["grid"][k].shape == rows[i]["grid"].shape
        back = ds.to_arrow()
        assert back.column("text").to_pylist() == [r["text"] for r in rows]
        assert back.column("ids").to_pylist() == [r["ids"] for r in rows]


def test_loader_and_sampler_take_a_dataset(tmp_path):
    ds = zring.write_dataset(tmp_path / "ds", token_rows(256), shard_records=50)
    sampler = zring.Sampler(len(ds), 32, zring.Mode.IID, seed=3)
    expect = zring.Sampler(len(ds), 32, zring.Mode.IID, seed=3)
    with zring.Loader(ds, sampler, workers=2, prefetch=2) as loader:
        for _ in range(4):
            step = next(loader)[0]
            idx = expect.next()
            np.testing.assert_array_equal(step["label"], idx)
            np.testing.assert_array_equal(step["image"], ds.gather(idx)["image"])
            for k, i in enumerate(idx):
                np.testing.assert_array_equal(step["tokens"][k], np.arange(i % 13 + 1, dtype=np.int32) + i)
    with zring.Loader({"label": ds.field("label")}, zring.Sampler(len(ds), 8, zring.Mode.SEQUENTIAL)) as loader:
        np.testing.assert_array_equal(next(loader)[0]["label"], np.arange(8))


def test_loader_takes_a_dataset_with_a_custom_sampler(tmp_path):
    ds = zring.write_dataset(tmp_path / "ds", token_rows(100), shard_records=30)

    class Fixed:
        def __init__(self):
            self.k = 0

        def next(self):
            self.k += 1
            return np.array([self.k, 99 - self.k, 31], dtype=np.int64)

    with zring.Loader(ds, Fixed(), workers=1, prefetch=1) as loader:
        step = next(loader)[0]
    np.testing.assert_array_equal(step["label"], [1, 98, 31])
    assert step["tokens"][1].shape == (98 % 13 + 1,)


def test_export_to_arrow_parquet_and_hf_round_trips(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    ds = zring.write_dataset(tmp_path / "ds", token_rows(300), shard_records=64)
    table = ds.to_arrow()
    assert table.num_rows == 300
    assert table.column("text")[7].as_py() == "record 7"
    assert table.column("tokens")[12].as_py() == list(range(12, 25))
    assert np.asarray(table.column("image")[3].as_py()).shape == (4, 3)
    part = ds.to_arrow(idx=[5, 250])
    assert part.column("label").to_pylist() == [5, 250]
    ds.to_parquet(tmp_path / "out.parquet")
    back = zring.write_dataset(tmp_path / "again", pq.read_table(tmp_path / "out.parquet"))
    for i in [0, 150, 299]:
        check_record(back[i], i)
    hf = ds.to_hf(idx=slice(0, 10))
    assert len(hf) == 10 and hf[3]["text"] == "record 3"
    assert isinstance(table, pa.Table)


KILL_SCRIPT = textwrap.dedent(
    """
    import sys, numpy as np, zring
    def rows():
        i = 0
        while True:
            if i == 3000:
                print("halfway", flush=True)
            yield {"x": np.full(1000, i, dtype=np.int64)}
            i += 1
    zring.write_dataset(sys.argv[1], rows(), shard_records=500, workers=2, append=sys.argv[2] == "1")
    """
)


@pytest.mark.parametrize("existing", [False, True])
def test_a_killed_conversion_leaves_the_previous_version_and_no_partial_store(tmp_path, existing):
    path = tmp_path / "ds"
    if existing:
        zring.write_dataset(path, {"x": np.zeros((10, 1000), np.int64)})
    proc = subprocess.Popen(
        [sys.executable, "-c", KILL_SCRIPT, str(path), "1" if existing else "0"],
        stdout=subprocess.PIPE,
    )
    try:
        assert proc.stdout.readline().strip() == b"halfway"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    if existing:
        ds = zring.open_dataset(path)
        assert (ds.version, len(ds)) == (1, 10)
    else:
        with pytest.raises(zring.StoreNotFoundError):
            zring.open_dataset(path)
    # Shards the killed writer finished are complete stores no manifest names; any
    # store it was writing is a hidden temporary file, never a visible .zr.
    for name in os.listdir(path / "data"):
        if not name.startswith("."):
            zring.open(str(path / "data" / name)).verify()


def test_cleanup_and_zring_gc_remove_old_versions_but_not_what_readers_hold(tmp_path):
    path = tmp_path / "ds"
    v1 = zring.write_dataset(path, {"x": np.arange(100)}, shard_records=50)
    zring.write_dataset(path, {"x": np.arange(100, 150)}, append=True)
    v3 = zring.write_dataset(path, {"x": np.arange(7)}, overwrite=True)
    v4 = zring.write_dataset(path, {"x": np.arange(7, 10)}, append=True)
    before = sorted(os.listdir(path / "data"))
    assert len(before) == 5
    dry = v4.cleanup(keep=2, dry_run=True)
    assert sorted(os.listdir(path / "data")) == before
    got = v4.cleanup(keep=2)
    assert got == dry
    assert (got["current"], got["kept_versions"]) == (4, [3, 4])
    assert len(got["manifests"]) == 2 and len(got["stores"]) == 3 and got["bytes"] > 0
    assert sorted(os.listdir(path / "manifests")) == ["0000000003.json", "0000000004.json"]
    # The reader of version 1 holds its stores open and still reads them.
    assert v1[99]["x"] == 99 and len(v1.gather(np.arange(100))["x"]) == 100
    with pytest.raises(OSError):
        zring.open_dataset(path, version=1)
    assert zring.open_dataset(path, version=3)[6]["x"] == 6
    with pytest.raises(ValueError):
        v4.cleanup(keep=0)
    # The command: keep 1 drops version 3's manifest (version 4 still names its store).
    from zring._zring import cli_main

    assert cli_main(["zring", "gc", str(path), "--keep", "1"]) == 0
    assert sorted(os.listdir(path / "manifests")) == ["0000000004.json"]
    assert [int(v) for v in zring.open_dataset(path).gather(np.arange(10))["x"]] == list(range(10))
    assert v3[0]["x"] == 0


def test_append_takes_the_datasets_schemas_not_the_new_batchs(tmp_path):
    """Records appended are converted to the dataset's field schemas: Python floats
    (float64 alone) go into a float32 field, plain lists into a dense field."""
    path = tmp_path / "ds"
    zring.write_dataset(path, {"x": np.zeros(3, np.float32), "v": np.zeros((3, 2), np.int16)})
    ds = zring.write_dataset(path, [{"x": 1.5, "v": [7, 8]}, {"x": 2.5, "v": [9, 10]}], append=True)
    assert len(ds) == 5
    assert ds.dtype("x") == np.float32 and ds.dtype("v") == np.int16
    got = ds.gather(np.arange(3, 5))
    assert got["x"].tolist() == [1.5, 2.5]
    assert got["v"].tolist() == [[7, 8], [9, 10]]
    # A schema given for an append must be the dataset's.
    with pytest.raises(ValueError, match="'x'.*not the dataset's"):
        zring.write_dataset(path, {"x": np.ones(2)}, {"x": zring.dense("float64"), "v": zring.dense("int16", (2,))},
                            append=True)
    # Records that cannot take the dataset's schema are refused, and nothing is published.
    with pytest.raises(ValueError):
        zring.write_dataset(path, [{"x": 1.0, "v": [1, 2, 3]}], append=True)
    assert zring.open_dataset(path).version == 2

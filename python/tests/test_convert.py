"""Every converter on small data made here, through the Python functions and the
``python -m zring convert`` command line (and the installed ``zring convert``)."""

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import zring
from zring import converters as zd


def zring_command():
    """The installed ``zring`` console script (next to this Python, or on PATH)."""
    exe = shutil.which("zring", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    if exe is None:
        pytest.fail("the zring command is not installed next to this Python")
    return exe


def run_cli(*args, script=False):
    """``python -m zring convert ARGS``, or with ``script`` the ``zring convert``
    console script (which runs the same converter command line)."""
    command = [zring_command()] if script else [sys.executable, "-m", "zring"]
    return subprocess.run(
        [*command, "convert", *map(str, args), "--no-progress"],
        capture_output=True,
        text=True,
        timeout=300,
    )


def token_table(pa, n):
    tokens = [list(range(i % 17 + 1)) for i in range(n)]
    return pa.table(
        {
            "tokens": pa.array(tokens, type=pa.list_(pa.int32())),
            "label": pa.array(np.arange(n, dtype=np.int64)),
            "text": pa.array([f"t{i}" for i in range(n)]),
            "vec": pa.array([[float(i), 1.0, 2.0] for i in range(n)], type=pa.list_(pa.float32(), 3)),
        }
    )


def check_tokens(ds, n):
    assert len(ds) == n
    for i in [0, n // 2, n - 1]:
        rec = ds[i]
        np.testing.assert_array_equal(rec["tokens"], np.arange(i % 17 + 1, dtype=np.int32))
        assert int(rec["label"]) == i and rec["text"] == f"t{i}"
        np.testing.assert_array_equal(rec["vec"], np.array([i, 1, 2], np.float32))


def test_parquet_files_and_directories(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    t = token_table(pa, 1000)
    pq.write_table(t.slice(0, 600), tmp_path / "a.parquet", row_group_size=100)
    pq.write_table(t.slice(600), tmp_path / "b.parquet", row_group_size=100)
    ds = zd.from_parquet(tmp_path / "a.parquet", tmp_path / "one", shard_records=128)
    check_tokens(ds, 600)
    assert ds.field_schemas["vec"]["item_shape"] == (3,)
    r = run_cli("parquet", tmp_path, tmp_path / "all", "--shard-records", "256", "--workers", "2")
    assert r.returncode == 0, r.stderr
    ds = zring.open_dataset(tmp_path / "all")
    check_tokens(ds, 1000)
    assert ds.shards == 4


def test_converting_parquet_does_not_import_pandas(tmp_path):
    """pyarrow's ``to_numpy`` and ``__array__`` import pandas: seconds of start-up a
    converter has no use for. Lists, sliced lists, fixed-size lists, integers and
    floats are read from Arrow's buffers instead (and stay correct when sliced)."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    pytest.importorskip("pandas")
    t = token_table(pa, 300).drop_columns(["text"])
    t = t.append_column("f16", pa.array(np.arange(300, dtype=np.float16)))
    pq.write_table(t, tmp_path / "t.parquet", row_group_size=70)
    code = (
        "import sys, zring.converters as zd\n"
        f"zd.from_parquet({str(tmp_path / 't.parquet')!r}, {str(tmp_path / 'out')!r}, shard_records=128)\n"
        "print('pandas' in sys.modules)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"
    ds = zring.open_dataset(tmp_path / "out")
    assert len(ds) == 300
    for i in [0, 69, 70, 299]:
        rec = ds[i]
        np.testing.assert_array_equal(rec["tokens"], np.arange(i % 17 + 1, dtype=np.int32))
        assert int(rec["label"]) == i and float(rec["f16"]) == float(np.float16(i))
        np.testing.assert_array_equal(rec["vec"], np.array([i, 1, 2], np.float32))


def test_arrow_ipc_file_and_stream(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.ipc as ipc

    t = token_table(pa, 300)
    with ipc.new_file(str(tmp_path / "t.arrow"), t.schema) as w:
        w.write_table(t, max_chunksize=50)
    with ipc.new_stream(str(tmp_path / "s.arrow"), t.schema) as w:
        w.write_table(t)
    check_tokens(zd.from_arrow(tmp_path / "t.arrow", tmp_path / "f"), 300)
    r = run_cli("arrow", tmp_path / "s.arrow", tmp_path / "s")
    assert r.returncode == 0, r.stderr
    check_tokens(zring.open_dataset(tmp_path / "s"), 300)


def test_hugging_face_dataset_dict_saved_dir_and_loaderx_convert(tmp_path):
    datasets = pytest.importorskip("datasets")
    feats = datasets.Features(
        {
            "tokens": datasets.Sequence(datasets.Value("int32")),
            "label": datasets.ClassLabel(names=["neg", "pos"]),
            "text": datasets.Value("string"),
        }
    )
    data = {
        "tokens": [list(range(i % 5 + 1)) for i in range(200)],
        "label": [i % 2 for i in range(200)],
        "text": [f"s{i}" for i in range(200)],
    }
    d = datasets.Dataset.from_dict(data, features=feats)
    dd = datasets.DatasetDict({"train": d.select(range(150)), "test": d.select(range(150, 200))})
    out = zring.convert(dd, tmp_path / "dd")
    assert set(out) == {"train", "test"} and len(out["test"]) == 50
    rec = out["test"][3]
    np.testing.assert_array_equal(rec["tokens"], np.arange(153 % 5 + 1))
    assert rec["text"] == "s153" and int(rec["label"]) == 1
    with pytest.raises(FileExistsError):
        zring.convert(dd, tmp_path / "dd")
    # A shuffled view (an indices mapping) converts in its own order.
    shuffled = d.shuffle(seed=0)
    ds = zring.convert(shuffled, tmp_path / "sh")
    assert [ds[i]["text"] for i in range(5)] == shuffled[:5]["text"]
    d.save_to_disk(str(tmp_path / "saved"))
    r = run_cli("hf", tmp_path / "saved", tmp_path / "fromdisk")
    assert r.returncode == 0, r.stderr
    back = zring.open_dataset(tmp_path / "fromdisk").to_hf()
    assert back["text"] == data["text"]
    assert [list(x) for x in back["tokens"]] == data["tokens"]


def test_npz_and_npy(tmp_path):
    x = np.arange(600, dtype=np.float64).reshape(200, 3)
    y = np.arange(200, dtype=np.int16)
    np.savez(tmp_path / "d.npz", x=x, y=y)
    ds = zd.from_npz(tmp_path / "d.npz", tmp_path / "z", shard_records=64)
    np.testing.assert_array_equal(ds[:]["x"], x)
    np.testing.assert_array_equal(ds[:]["y"], y)
    (tmp_path / "npy").mkdir()
    np.save(tmp_path / "npy" / "x.npy", x)
    np.save(tmp_path / "npy" / "y.npy", y)
    r = run_cli("npy", tmp_path / "npy" / "x.npy", tmp_path / "npy" / "y.npy", tmp_path / "n", script=True)
    assert r.returncode == 0, r.stderr
    assert "200 records" in r.stdout
    ds = zring.open_dataset(tmp_path / "n")
    assert ds.fields == ["x", "y"]
    np.testing.assert_array_equal(ds[:]["x"], x)
    r = run_cli("npz", tmp_path / "missing.npz", tmp_path / "m", script=True)
    assert r.returncode == 1 and "missing.npz" in r.stderr


def test_npz_members_are_read_in_row_ranges_stored_or_compressed(tmp_path, monkeypatch):
    """Stored and compressed members alike are read a row range at a time, never
    whole (``NpzFile.__getitem__`` would read a member whole); a Fortran-ordered
    array, whose rows are not contiguous, is the exception."""
    x = np.arange(3000, dtype=np.float32).reshape(1000, 3)
    y = np.arange(1000, dtype=np.int64) * 7
    f = np.asfortranarray(np.arange(2000, dtype=np.int16).reshape(1000, 2))
    read_whole = []
    for save in (np.savez, np.savez_compressed):
        src = tmp_path / f"{save.__name__}.npz"
        save(src, x=x, y=y, f=f)
        with np.load(src) as z:
            npz_file = type(z)
        whole = npz_file.__getitem__
        monkeypatch.setattr(npz_file, "__getitem__", lambda z, k: read_whole.append(k) or whole(z, k))
        ds = zd.from_npz(src, tmp_path / f"out-{save.__name__}", shard_records=300, batch_records=128)
        monkeypatch.undo()
        assert ds.shards == 4 and ds.fields == ["x", "y", "f"]
        for name, want in {"x": x, "y": y, "f": f}.items():
            np.testing.assert_array_equal(ds[:][name], want)
    assert read_whole == ["f", "f"]


def test_progress_bar_reaches_stderr(tmp_path, capfd):
    pytest.importorskip("tqdm")
    zring.write_dataset(tmp_path / "a", {"x": np.arange(500)}, shard_records=100, progress=True)
    err = capfd.readouterr().err
    assert "zring" in err and "500/500" in err
    np.save(tmp_path / "y.npy", np.arange(300))
    zd.from_npy(tmp_path / "y.npy", tmp_path / "b", progress=True)
    err = capfd.readouterr().err
    assert "zring" in err and "300/300" in err
    zd.from_npy(tmp_path / "y.npy", tmp_path / "c", progress=False)
    assert "zring" not in capfd.readouterr().err


def test_hdf5_dense_ragged_and_strings(tmp_path):
    h5py = pytest.importorskip("h5py")
    with h5py.File(tmp_path / "d.h5", "w") as f:
        f["images"] = np.arange(100 * 4 * 4, dtype=np.uint8).reshape(100, 4, 4)
        f.create_group("meta")["label"] = np.arange(100)
        seqs = f.create_dataset("seq", (100,), dtype=h5py.vlen_dtype(np.int32))
        for i in range(100):
            seqs[i] = np.arange(i % 6 + 1, dtype=np.int32)
        f.create_dataset("name", data=[f"n{i}" for i in range(100)], dtype=h5py.string_dtype())
    r = run_cli("hdf5", tmp_path / "d.h5", tmp_path / "h", "--shard-records", "30")
    assert r.returncode == 0, r.stderr
    ds = zring.open_dataset(tmp_path / "h")
    assert set(ds.fields) == {"images", "meta.label", "seq", "name"}
    rec = ds[77]
    assert rec["images"].shape == (4, 4) and int(rec["meta.label"]) == 77
    np.testing.assert_array_equal(rec["seq"], np.arange(77 % 6 + 1))
    assert rec["name"] == "n77"


def png_bytes(color, size=(8, 6)):
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, format="PNG")
    return buf.getvalue()


def test_image_folder_keeps_bytes_or_decodes_to_a_fixed_size(tmp_path):
    pytest.importorskip("PIL")
    root = tmp_path / "imgs"
    colors = {"cat": (255, 0, 0), "dog": (0, 0, 255)}
    for cls, color in colors.items():
        (root / cls).mkdir(parents=True)
        for k in range(5):
            (root / cls / f"{k}.png").write_bytes(png_bytes(color, (8 + k, 6)))
    ds = zd.from_imagefolder(root, tmp_path / "enc")
    assert len(ds) == 10
    assert json.loads(ds.field_schemas["label"]["metadata"]["classes"]) == ["cat", "dog"]
    assert ds[7]["image"] == (root / "dog" / "2.png").read_bytes()
    assert int(ds[7]["label"]) == 1
    # The format is recorded for the read-side decode, and `zring info` shows it.
    assert ds.field_schemas["image"]["metadata"]["zring.image"] == "png"
    info = subprocess.run([zring_command(), "info", str(tmp_path / "enc")],
                          capture_output=True, text=True)
    assert info.returncode == 0, info.stderr
    assert "zring.image=png" in info.stdout
    pixels = ds.gather([0, 9], decode={"image": zring.decode.Image(size=(4, 5), crop="full")})["image"]
    assert (pixels[0] == [255, 0, 0]).all() and (pixels[1] == [0, 0, 255]).all()
    r = run_cli("imagefolder", root, tmp_path / "dec", "--decode", "4x5")
    assert r.returncode == 0, r.stderr
    dec = zring.open_dataset(tmp_path / "dec")
    batch = dec.gather([0, 9])
    assert batch["image"].shape == (2, 4, 5, 3)
    assert (batch["image"][0] == [255, 0, 0]).all() and (batch["image"][1] == [0, 0, 255]).all()


def test_webdataset_shards_with_labels_from_the_tar(tmp_path):
    wds = pytest.importorskip("webdataset")
    pytest.importorskip("PIL")
    for shard in range(2):
        with wds.TarWriter(str(tmp_path / f"shard-{shard}.tar")) as w:
            for k in range(6):
                i = shard * 6 + k
                w.write({"__key__": f"s{i:04d}", "png": png_bytes((i * 20, 0, 0)), "cls": str(i % 3), "txt": f"caption {i}"})
    ds = zd.from_webdataset(sorted(tmp_path.glob("*.tar")), tmp_path / "w", shard_records=4)
    assert len(ds) == 12 and set(ds.fields) == {"key", "png", "cls", "txt"}
    rec = ds[8]
    assert rec["key"] == "s0008" and int(rec["cls"]) == 2 and rec["txt"] == "caption 8"
    from PIL import Image

    assert Image.open(io.BytesIO(rec["png"])).getpixel((0, 0)) == (160, 0, 0)
    assert ds.field_schemas["png"]["metadata"]["zring.image"] == "png"
    r = run_cli("webdataset", tmp_path / "shard-0.tar", tmp_path / "wd", "--decode", "3")
    assert r.returncode == 0, r.stderr
    dec = zring.open_dataset(tmp_path / "wd")
    assert dec.gather([5])["png"].shape == (1, 3, 3, 3)
    assert tuple(dec[5]["png"][0, 0]) == (100, 0, 0)


# The child's peak RSS is VmHWM, the high-water mark of its own address space:
# getrusage's ru_maxrss survives exec on Linux, so a child started by a parent that
# holds the test data would report the parent's peak.
RSS_CHILD = """
import sys
import zring.converters as zd
fmt, src, dst = sys.argv[1:4]
conv = {"parquet": zd.from_parquet, "arrow": zd.from_arrow, "hf": zd.from_hf, "webdataset": zd.from_webdataset,
        "npz": zd.from_npz}[fmt]
ds = conv(src, dst, codec="raw", workers=2, shard_bytes=4 << 20, progress=False)
assert len(ds) == int(sys.argv[4]), len(ds)
with open("/proc/self/status") as f:
    print(next(int(line.split()[1]) // 1024 for line in f if line.startswith("VmHWM:")))
"""


def write_rss_input(fmt, path, n):
    """``n`` records of 64..448 int32 tokens (~1 KiB), in format ``fmt`` (for npz,
    256 tokens each: an array has one shape)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    if fmt == "npz":
        np.savez(path, tokens=rng.integers(0, 50_000, (n, 256), dtype=np.int32))
        return str(path)
    lens = rng.integers(64, 449, n)
    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    values = rng.integers(0, 50_000, int(offsets[-1]), dtype=np.int32)
    table = pa.table({"tokens": pa.ListArray.from_arrays(pa.array(offsets), pa.array(values))})
    if fmt == "parquet":
        pq.write_table(table, path, row_group_size=10_000)
    elif fmt == "arrow":
        with pa.ipc.new_file(str(path), table.schema) as w:
            w.write_table(table, max_chunksize=5_000)
    elif fmt == "hf":
        import datasets

        datasets.Dataset(table).save_to_disk(str(path))
    else:
        import tarfile

        with tarfile.open(path, "w") as tar:
            for i in range(n):
                data = values[offsets[i] : offsets[i + 1]].tobytes()
                info = tarfile.TarInfo(f"{i:07d}.bin")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return str(path)


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["parquet", "arrow", "hf", "webdataset", "npz"])
def test_peak_rss_does_not_grow_with_the_input(tmp_path, fmt):
    """Peak RSS (from the OS, of a child process) of converting 1x and 4x the records:
    the 4x input holds ~117 MiB more data, and the conversion's peak may grow by at
    most 45% of that (allocator warm-up, pyarrow's pool, and the opened dataset's
    tables at 36 B per record) plus the machine's run-to-run spread. It used to grow by half the input (Parquet pre-buffering) or all of
    it (every batch kept alive by a reference cycle; every tar member listed; every
    .npz array read whole)."""
    pytest.importorskip("pyarrow")  # every input is built with it
    extra = {"hf": "datasets", "webdataset": "webdataset"}.get(fmt)
    if extra:
        pytest.importorskip(extra)
    sources = {n: write_rss_input(fmt, tmp_path / f"in-{n}.{fmt}", n) for n in (40_000, 160_000)}

    def peak(n, attempt):
        out = subprocess.run(
            [sys.executable, "-c", RSS_CHILD, fmt, sources[n], str(tmp_path / f"out-{n}-{attempt}"), str(n)],
            capture_output=True, text=True, timeout=600,
        )
        assert out.returncode == 0, out.stderr
        return int(out.stdout.split()[-1])

    # A peak is a maximum, so a moment of scheduling (the reader running ahead while
    # the shard writers wait for a core) can raise one run's figure. So each size runs
    # twice, the lower peak of each is compared, and the margin is derived from the
    # data: 45% of the larger input's extra bytes (Parquet's reader, through
    # pyarrow's allocator, grows by a steady 37%: +43 MiB for 117 MiB in both runs of
    # a CI run), plus the spread the machine showed between two runs of one size. A
    # conversion that keeps its input grows by half the extra bytes (Parquet
    # pre-buffering) or all of them (batches kept alive), in every run.
    runs = {n: [peak(n, 0), peak(n, 1)] for n in sources}
    rss = {n: min(r) for n, r in runs.items()}
    # Records average 256 int32 tokens (1 KiB) in every format.
    extra_mib = (160_000 - 40_000) * 1024 / 2**20
    spread = max(max(r) - min(r) for r in runs.values())
    margin = 0.45 * extra_mib + spread
    assert rss[160_000] <= rss[40_000] + margin, (runs, margin)


def test_image_columns_of_tables_record_their_format(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    pytest.importorskip("PIL")
    from PIL import Image

    def jpeg(color):
        out = io.BytesIO()
        Image.new("RGB", (6, 4), color).save(out, format="JPEG")
        return out.getvalue()

    table = pa.table({
        "photo": [jpeg((200, 0, 0)), jpeg((0, 200, 0))],
        "blob": [b"not an image", b"x"],
    })
    pq.write_table(table, tmp_path / "t.parquet")
    ds = zd.from_parquet(tmp_path / "t.parquet", tmp_path / "pq")
    assert ds.field_schemas["photo"]["metadata"]["zring.image"] == "jpeg"
    assert "zring.image" not in ds.field_schemas["blob"]["metadata"]
    px = ds.gather([0, 1], decode={"photo": zring.decode.Image(size=(4, 6), crop="full")})["photo"]
    assert abs(int(px[0, 2, 3, 0]) - 200) < 8 and abs(int(px[1, 2, 3, 1]) - 200) < 8

    datasets = pytest.importorskip("datasets")
    features = datasets.Features({"image": datasets.Image(), "label": datasets.Value("int64")})
    hf = datasets.Dataset.from_dict(
        {"image": [Image.new("RGB", (5, 5), (0, 0, 255))] * 3, "label": [0, 1, 2]}, features=features
    )
    ds = zd.from_hf(hf, tmp_path / "hf")
    assert ds.field_schemas["image"]["metadata"]["zring.image"] == "png"
    px = ds.gather([2], decode={"image": zring.decode.Image(size=(5, 5), crop="full")})["image"]
    assert (px[0] == [0, 0, 255]).all()

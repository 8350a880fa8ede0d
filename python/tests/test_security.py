"""docs/security.md's promises for converter inputs: hostile tar member names,
image-folder class names and Hugging Face split names never make a converter write
outside its destination; and for dataset directories: a store linked in from outside
is opened only when asked for. Gaps are ``xfail(strict=True)``: they fail loudly once
fixed."""

import io
import json
import os
import pickle
import tarfile
from pathlib import Path

import numpy as np
import pytest

import zring
import zring.converters as zd


def _snapshot(root):
    """Every path under ``root`` (symlinks not followed)."""
    out = set()
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            out.add(Path(dirpath, n))
    return out


def _outside(before, after, dst):
    """Paths created since ``before`` that are not under ``dst``."""
    dst = Path(dst)
    return sorted(p for p in after - before if dst not in p.parents and p != dst)


def _tar(path, members):
    """A tar of ``members``: (name, bytes) regular files, or (name, TarInfo type, link)."""
    with tarfile.open(path, "w") as t:
        for m in members:
            info = tarfile.TarInfo(m[0])
            if len(m) == 2:
                info.size = len(m[1])
                t.addfile(info, io.BytesIO(m[1]))
            else:
                info.type, info.linkname = m[1], m[2]
                t.addfile(info)


@pytest.fixture
def work(tmp_path, monkeypatch):
    """A working directory two levels down, so that ``../../x`` lands in tmp_path."""
    cwd = tmp_path / "a" / "b"
    cwd.mkdir(parents=True)
    monkeypatch.chdir(cwd)
    return tmp_path


def test_webdataset_member_names_never_become_paths(work):
    shard = work / "a" / "shard.tar"
    _tar(shard, [
        ("../../evil.txt", b"one"),
        ("../../evil.cls", b"1"),
        ("/abs/evil.txt", b"two"),
        ("/abs/evil.cls", b"2"),
        ("ok/../../../evil.txt", b"three"),
        ("ok/../../../evil.cls", b"3"),
        # Links are skipped, never followed or created.
        ("link.txt", tarfile.SYMTYPE, "/etc/passwd"),
        ("hard.txt", tarfile.LNKTYPE, "/etc/passwd"),
    ])
    before = _snapshot(work)
    dst = work / "a" / "out"
    ds = zd.from_webdataset(str(shard), str(dst))
    assert _outside(before, _snapshot(work), dst) == []
    assert not Path("/abs").exists()
    # The names are data: keys, stored as given.
    assert [ds[i]["key"] for i in range(len(ds))] == ["../../evil", "/abs/evil", "ok/../../../evil"]
    assert [ds[i]["txt"] for i in range(len(ds))] == ["one", "two", "three"]
    assert sorted(ds.fields) == ["cls", "key", "txt"]


@pytest.mark.parametrize("ext", ["t xt", "\u00e9t\u00e9", "..", "a..", ".x", "-"])
def test_webdataset_extensions_that_are_not_field_names_are_refused(work, ext):
    # The extension becomes a field name, and field names become parts of store
    # file names: what is not a plain name is refused, and nothing is written
    # outside the destination.
    shard = work / "a" / "shard.tar"
    _tar(shard, [(f"s0.{ext}", b"x"), ("s0.cls", b"1")])
    before = _snapshot(work)
    dst = work / "a" / "out"
    try:
        ds = zd.from_webdataset(str(shard), str(dst))
    except (zring.ZringError, ValueError) as e:
        assert repr(ext.lower())[1:-1] in str(e) or ext.lower() in str(e), e
    else:
        # Accepted: it is a valid field name (letters, digits, _ - .).
        assert ext.lower() in ds.fields
    assert _outside(before, _snapshot(work), dst) == []


def _png():
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (2, 2), (1, 2, 3)).save(buf, format="PNG")
    return buf.getvalue()


def test_imagefolder_class_names_are_labels_not_paths(work):
    pytest.importorskip("PIL")
    src = work / "a" / "src"
    for cls in ["...", "\u202eevil", "a b", "-rf", "x\\..\\y"]:
        (src / cls).mkdir(parents=True)
        (src / cls / "i.png").write_bytes(_png())
    before = _snapshot(work)
    dst = work / "a" / "out"
    ds = zd.from_imagefolder(str(src), str(dst))
    assert _outside(before, _snapshot(work), dst) == []
    classes = json.loads(ds.field_schemas["label"]["metadata"]["classes"])
    assert classes == sorted(["...", "\u202eevil", "a b", "-rf", "x\\..\\y"])
    assert len(ds) == 5


def test_imagefolder_never_writes_through_a_symlinked_class(work):
    pytest.importorskip("PIL")
    src = work / "a" / "src"
    elsewhere = work / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "i.png").write_bytes(_png())
    (src / "real").mkdir(parents=True)
    (src / "real" / "i.png").write_bytes(_png())
    (src / "linked").symlink_to(elsewhere, target_is_directory=True)
    before = _snapshot(work)
    dst = work / "a" / "out"
    zd.from_imagefolder(str(src), str(dst))
    assert _outside(before, _snapshot(work), dst) == []
    assert sorted(p.name for p in elsewhere.iterdir()) == ["i.png"]


def _hf_dict_on_disk(work, split):
    """A DatasetDict saved to disk whose dataset_dict.json names ``split``, the split's
    data where the loader looks for it (``src/<split>``)."""
    datasets = pytest.importorskip("datasets")
    src = work / "a" / "src"
    d = datasets.DatasetDict({"train": datasets.Dataset.from_dict({"label": [0, 1, 2]})})
    d.save_to_disk(str(src))
    target = Path(os.path.normpath(src / split))
    if target != src / "train":
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(src / "train", target)
    (src / "dataset_dict.json").write_text(json.dumps({"splits": [split]}))
    return src


def test_hf_plain_split_names_stay_inside(work):
    src = _hf_dict_on_disk(work, "train")
    before = _snapshot(work)
    dst = work / "a" / "out"
    out = zd.from_hf(str(src), str(dst))
    assert set(out) == {"train"}
    assert _outside(before, _snapshot(work), dst) == []


def test_hf_split_names_never_leave_the_destination(work):
    src = _hf_dict_on_disk(work, "../escaped")
    before = _snapshot(work)
    dst = work / "a" / "out"
    try:
        zd.from_hf(str(src), str(dst))
    except (zring.ZringError, ValueError):
        pass  # refused: fine
    assert _outside(before, _snapshot(work), dst) == []


def test_npy_and_tables_write_only_the_destination(work):
    src = work / "a" / "x.npy"
    np.save(src, np.arange(12, dtype=np.int32).reshape(4, 3))
    before = _snapshot(work)
    dst = work / "a" / "out"
    ds = zd.from_npy(str(src), str(dst))
    assert len(ds) == 4
    assert _outside(before, _snapshot(work), dst) == []


def test_a_store_linked_in_from_outside_is_refused_unless_asked_for(tmp_path):
    ds_dir = tmp_path / "ds"
    zring.write_dataset(ds_dir, {"x": np.arange(20, dtype=np.int64)}, shard_records=10)
    inside = Path(zring.open_dataset(ds_dir).store_paths()[1])
    outside = tmp_path / "elsewhere.zr"
    inside.rename(outside)
    inside.symlink_to(outside)
    for opener in (zring.Dataset, zring.open_dataset):
        with pytest.raises(zring.StorePermissionError) as e:
            opener(ds_dir)
        assert isinstance(e.value, PermissionError)
    # Asked for: the linked store's records, also through a pickle (which carries the
    # setting) and with the setting given as text, as the CLI gives it.
    ds = zring.open_dataset(ds_dir, follow_links_out=True)
    assert ds.gather([19, 3, 10])["x"].tolist() == [19, 3, 10]
    again = pickle.loads(pickle.dumps(ds))
    assert again.gather([15])["x"].tolist() == [15]
    assert zring.Dataset(ds_dir, follow_links_out="true")[12]["x"] == 12
    ds.verify()


def test_an_append_to_a_dataset_with_stores_linked_in_is_refused_before_writing(tmp_path):
    ds_dir = tmp_path / "ds"
    zring.write_dataset(ds_dir, {"x": np.arange(20, dtype=np.int64)}, shard_records=10)
    inside = Path(zring.open_dataset(ds_dir, follow_links_out=True).store_paths()[1])
    outside = tmp_path / "elsewhere.zr"
    inside.rename(outside)
    inside.symlink_to(outside)
    before = sorted(p.name for p in ds_dir.rglob("*"))
    more = {"x": np.arange(20, 25, dtype=np.int64)}
    with pytest.raises(zring.StorePermissionError):
        zring.write_dataset(ds_dir, more, append=True)
    assert sorted(p.name for p in ds_dir.rglob("*")) == before, "the refused append wrote"
    # Asked for: the append publishes and the result opens with the links followed.
    ds = zring.write_dataset(ds_dir, more, append=True, follow_links_out=True)
    assert ds.gather([24, 15, 0])["x"].tolist() == [24, 15, 0]
    assert zring.open_dataset(ds_dir, follow_links_out=True).version == ds.version == 2

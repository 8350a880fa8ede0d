"""docs/format.md against the engine, both ways: the independent reader in
format_reader.py must parse the checked-in golden stores to their recorded contents,
and every store the current writer produces (each layout, codec and alignment)."""

import json
import pathlib

import numpy as np
import pytest

import zring
from format_reader import FormatError, parse, read_file

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "tests" / "fixtures"


def golden():
    names = sorted(p.stem for p in FIXTURES.glob("*.json"))
    assert len(names) >= 9, f"golden fixtures missing from {FIXTURES}"
    return names


@pytest.mark.parametrize("name", golden())
def test_golden_store_parses_to_its_recorded_contents(name):
    want = json.loads((FIXTURES / f"{name}.json").read_text())
    got = read_file(FIXTURES / want["store"])
    assert (got.major, got.minor) == (1, want.get("format_minor", 0))
    assert got.align == want["align"]
    assert got.writer.startswith("zring")
    for key in ("layout", "dtype", "codec", "metadata"):
        assert got.schema[key] == want[key], key
    if want["layout"] == "dense":
        assert got.schema["item_shape"] == want["item_shape"]
    else:
        assert got.schema["ndim"] == want["ndim"]
    assert len(got.records) == len(want["records"])
    for i, (r, w) in enumerate(zip(got.records, want["records"])):
        assert r.data == bytes.fromhex(w["hex"]), f"record {i}"
        assert list(r.shape) == w["shape"], f"record {i}"
    # A compressing store keeps incompressible records raw.
    compressed = {"raw": 0, "zstd": 1, "zstd-dict": 2}[want["codec"]]
    assert set(got.tags) <= {0, compressed}, got.tags
    if name.startswith(("dense-zstd", "ragged-zstd")):
        assert set(got.tags) == {0, compressed}, f"{name} should hold both tags"


def test_the_engine_reads_the_golden_stores_as_recorded():
    """The Python package (the engine) agrees with the expected contents too."""
    for name in golden():
        want = json.loads((FIXTURES / f"{name}.json").read_text())
        store = zring.open(FIXTURES / want["store"])
        assert len(store) == len(want["records"])
        for i, w in enumerate(want["records"]):
            rec = store[i]
            assert list(rec.shape) == w["shape"]
            assert rec.tobytes() == bytes.fromhex(w["hex"])


def records(rng, n):
    """Half low-entropy (compressible), half noise (kept raw by zstd)."""
    out = []
    for i in range(n):
        hi = 4 if i % 2 else 1 << 16
        out.append(rng.integers(0, hi, size=(1 + i % 9, 24), dtype=np.int64).astype(np.uint16))
    return out


@pytest.mark.parametrize("codec", ["raw", "zstd", "zstd-dict"])
@pytest.mark.parametrize("align", [8, 4096])
@pytest.mark.parametrize("layout", ["dense", "ragged"])
def test_the_current_writer_matches_the_spec(tmp_path, layout, codec, align):
    rng = np.random.default_rng(5)
    recs = records(rng, 300)
    path = tmp_path / "s.zr"
    kw = dict(align=align, metadata={"k": "v"})
    if layout == "dense":
        recs = [np.resize(r, (8, 24)) for r in recs]
    if codec == "zstd-dict":
        kw["dict_bytes"] = zring.train_dict(recs, size=1024)
    if layout == "dense":
        dense = np.stack(recs)
        with zring.DenseWriter(path, "uint16", (8, 24), codec=codec, **kw) as w:
            w.append(dense[:100])
            w.append(dense[100:])
        recs = list(dense)
    else:
        # Empty records (format v1.2), of both kinds of 0 shape.
        recs = [r[:0] if i % 7 == 3 else r[:, :0] if i % 11 == 5 else r for i, r in enumerate(recs)]
        with zring.RaggedWriter(path, "uint16", 2, codec=codec, **kw) as w:
            w.append(recs[:100])
            w.append(recs[100:])
    got = read_file(path)
    assert got.schema["codec"] == codec
    assert got.schema["metadata"] == {"k": "v"}
    assert got.schema["record_count"] == len(recs)
    for i, (r, want) in enumerate(zip(got.records, recs)):
        assert r.data == want.tobytes(), f"record {i}"
        assert r.shape == want.shape, f"record {i}"
    if codec == "raw":
        assert set(got.tags) == {0}
    else:
        assert set(got.tags) == {0, 2 if codec == "zstd-dict" else 1}


def test_a_zero_dim_is_refused_before_v1_2(tmp_path):
    """Empty ragged records came with format v1.2: the same bytes labelled v1.1 are
    refused by a reader of the spec (no v1.1 writer could produce them)."""
    buf = bytearray((FIXTURES / "v1.2-ragged-empty-raw.zr").read_bytes())
    assert any(r.logical_len == 0 for r in parse(bytes(buf)).records)
    from format_reader import xxh3

    for block in (0, len(buf) - 4096):
        buf[block + 10 : block + 12] = (1).to_bytes(2, "little")
    buf[56:64] = xxh3(bytes(buf[:56])).to_bytes(8, "little")
    ft = len(buf) - 4096
    buf[ft + 4088 : ft + 4096] = xxh3(bytes(buf[ft : ft + 4088])).to_bytes(8, "little")
    with pytest.raises(FormatError, match="a dim is 0 in a v1.1 store"):
        parse(bytes(buf))


def test_the_reader_is_not_vacuous(tmp_path):
    """One flipped byte anywhere that matters is caught by the independent reader."""
    buf = bytearray((FIXTURES / "ragged-zstd.zr").read_bytes())
    parse(bytes(buf))
    file_len = len(buf)
    # superblock, a record, the shapes, the table, the schema, the footer
    ft = buf[-4096:]
    sections = [int.from_bytes(ft[32 + 24 * k : 40 + 24 * k], "little") for k in range(5)]
    for at in [0, 4096, sections[2], sections[3] + 3, sections[4] + 1, file_len - 100]:
        bad = bytearray(buf)
        bad[at] ^= 0x01
        with pytest.raises(FormatError):
            parse(bytes(bad))

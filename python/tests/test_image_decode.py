"""Encoded images decoded on the read path: Dataset.gather(decode=...), zring.Loader,
the torch and JAX adapters; pixels against PIL, crops deterministic across worker
counts and on resume, clear errors for fields that are not images, and bad records
raised, skipped or substituted."""

import io

import numpy as np
import pytest

import zring
from zring.decode import Image

PIL = pytest.importorskip("PIL")
from PIL import Image as PILImage  # noqa: E402


def picture(i, w, h, mode="RGB"):
    """A smooth picture with edges that differs per record."""
    x = np.linspace(0, 255, w, dtype=np.float64)[None, :]
    y = np.linspace(0, 255, h, dtype=np.float64)[:, None]
    r = np.broadcast_to(x, (h, w))
    g = np.broadcast_to((y + 17 * i) % 256, (h, w))
    b = (((np.arange(h)[:, None] // 8 + np.arange(w)[None, :] // 8 + i) % 2) * 90).astype(np.float64)
    rgb = np.stack([r, g, b], axis=-1).astype(np.uint8)
    return PILImage.fromarray(rgb, "RGB").convert(mode)


def encode(img, fmt="JPEG", **kw):
    out = io.BytesIO()
    img.save(out, format=fmt, **kw)
    return out.getvalue()


def write(tmp_path, images, name="ds"):
    path = str(tmp_path / name)
    zring.write_dataset(path, {"image": images, "label": np.arange(len(images), dtype=np.int64)})
    return zring.Dataset(path)


def reference_center(data, size):
    """PIL's decode, centre crop of the output's aspect ratio, bilinear resize."""
    img = PILImage.open(io.BytesIO(data)).convert("RGB")
    h, w = size
    sw, sh = img.size
    target = w / h
    if sw / sh > target:
        cw, ch = sh * target, sh
    else:
        cw, ch = sw, sw / target
    left, top = (sw - cw) / 2, (sh - ch) / 2
    return np.asarray(img.resize((w, h), PILImage.BILINEAR, box=(left, top, left + cw, top + ch)))


@pytest.fixture
def images():
    return [encode(picture(i, 64 + 8 * (i % 4), 48 + 4 * (i % 3)), quality=95) for i in range(16)]


def test_center_crop_matches_pil_within_tolerance(tmp_path, images):
    ds = write(tmp_path, images)
    out = ds.gather([3, 0, 7], decode={"image": Image(size=(32, 40))})
    assert isinstance(out, zring.decode.Decoded)
    assert out["image"].shape == (3, 32, 40, 3) and out["image"].dtype == np.uint8
    assert out["label"].tolist() == [3, 0, 7]
    assert out.indices == [3, 0, 7] and out.skipped == [] and out.substituted == []
    for k, i in enumerate([3, 0, 7]):
        want = reference_center(images[i], (32, 40)).astype(np.int16)
        diff = np.abs(out["image"][k].astype(np.int16) - want)
        # Two JPEG decoders (IDCT, upsampling) and two bilinear resizers.
        assert diff.mean() < 3.0, (i, diff.mean())
    chw = ds.gather([3], decode={"image": Image(size=(32, 40), layout="chw")})["image"]
    assert chw.shape == (1, 3, 32, 40)
    np.testing.assert_array_equal(chw[0].transpose(1, 2, 0), out["image"][0])
    # One record: no batch axis.
    one = ds.gather(5, decode={"image": Image(size=(8, 8))})
    assert one["image"].shape == (8, 8, 3) and int(one["label"]) == 5


def test_two_image_fields_get_their_own_pixels_whatever_order_decode_names_them(tmp_path, images):
    path = str(tmp_path / "two")
    zring.write_dataset(path, {"a": images, "b": images[::-1], "label": np.arange(len(images), dtype=np.int64)})
    ds = zring.Dataset(path)
    ids = [0, 5, 9]
    both = ds.gather(ids, decode={"b": Image(size=(8, 12)), "a": Image(size=(16, 20))})
    assert both["a"].shape == (3, 16, 20, 3) and both["b"].shape == (3, 8, 12, 3)
    alone_a = ds.gather(ids, fields=["a"], decode={"a": Image(size=(16, 20))})["a"]
    alone_b = ds.gather(ids, fields=["b"], decode={"b": Image(size=(8, 12))})["b"]
    np.testing.assert_array_equal(both["a"], alone_a)
    np.testing.assert_array_equal(both["b"], alone_b)
    assert both["label"].tolist() == ids


def test_random_crops_are_a_function_of_seed_epoch_and_record(tmp_path, images):
    ds = write(tmp_path, images)
    spec = Image(size=(24, 24), crop="random_resized", flip=True, seed=3)
    a = ds.gather([1, 2, 3], decode={"image": spec}, epoch=0)["image"]
    b = ds.gather([3, 2, 1], decode={"image": spec}, epoch=0)["image"]
    np.testing.assert_array_equal(a, b[::-1])
    c = ds.gather([1, 2, 3], decode={"image": spec}, epoch=1)["image"]
    assert not np.array_equal(a, c)
    d = ds.gather([1, 2, 3], decode={"image": Image(size=(24, 24), crop="random_resized", flip=True, seed=4)})["image"]
    assert not np.array_equal(a, d)


def loader_steps(ds, spec, workers, start, steps):
    plan = zring._zring._EpochPlan(len(ds), 4, "cyclic", 9)
    out = []
    with zring.Loader(ds, plan, workers=workers, prefetch=2, lookahead_bytes=None,
                      decode={"image": spec}) as loader:
        loader.seek(start)
        for _, step in zip(range(steps), loader):
            shard = step[0]
            out.append((shard["label"].tolist(), shard["image"].copy()))
    return out


def test_loader_crops_are_the_same_for_any_workers_and_on_resume(tmp_path, images):
    ds = write(tmp_path, images)
    spec = Image(size=(16, 16), crop="random_resized", flip=True, seed=5)
    one = loader_steps(ds, spec, 1, 0, 10)
    two = loader_steps(ds, spec, 2, 0, 10)
    for (la, pa), (lb, pb) in zip(one, two):
        assert la == lb
        np.testing.assert_array_equal(pa, pb)
    resumed = loader_steps(ds, spec, 2, 6, 4)
    for (la, pa), (lb, pb) in zip(one[6:], resumed):
        assert la == lb
        np.testing.assert_array_equal(pa, pb)
    # Each step's pixels are the gather's of its records in its epoch (4 steps per epoch).
    for step, (labels, pixels) in enumerate(one):
        want = ds.gather(labels, decode={"image": spec}, epoch=step // 4)["image"]
        np.testing.assert_array_equal(pixels, want)
    # The same record in two epochs is cropped differently.
    assert not np.array_equal(
        ds.gather([0], decode={"image": spec}, epoch=0)["image"],
        ds.gather([0], decode={"image": spec}, epoch=1)["image"],
    )


def test_a_field_that_is_not_images_is_refused_naming_it(tmp_path, images):
    ds = write(tmp_path, images)
    with pytest.raises(zring.SchemaError, match="'label'|\"label\""):
        ds.gather([0], decode={"label": Image(size=(8, 8))})
    with pytest.raises(zring.SchemaError, match="label"):
        zring.Loader(ds, zring.Sampler(len(ds), 4, "sequential"), decode={"label": Image(size=(8, 8))})
    with pytest.raises(zring.InvalidArgumentError, match="nope"):
        zring.Loader(ds, zring.Sampler(len(ds), 4, "sequential"), decode={"nope": Image(size=(8, 8))})
    with pytest.raises(TypeError, match="zring.decode.Image"):
        ds.gather([0], decode={"image": (8, 8)})

    class Custom:
        def next(self):
            return np.arange(4)

    with pytest.raises(TypeError, match="decode= needs a zring.Sampler"):
        zring.Loader(ds, Custom(), decode={"image": Image(size=(8, 8))})
    with pytest.raises(ValueError, match="crop"):
        Image(size=(8, 8), crop="middle")
    # Bytes that are not an image: the error names the field, dataset and record.
    bad = write(tmp_path, [b"hello", images[0]], name="notimg")
    with pytest.raises(zring.ImageDecodeError, match=r"field \"image\" of dataset .*notimg.*record 0"):
        bad.gather([1, 0], decode={"image": Image(size=(8, 8))})


def bad_images(images):
    """Good records with bad ones at 2 (a JPEG cut inside its header) and 5 (too
    large)."""
    out = list(images[:8])
    out[2] = out[2][:100]
    out[5] = encode(picture(5, 300, 200))
    return out


def test_bad_records_raise_skip_or_substitute(tmp_path, images):
    ds = write(tmp_path, bad_images(images))
    ids = list(range(8))
    limit = 100 * 100
    with pytest.raises(zring.ImageDecodeError, match="record 2"):
        ds.gather(ids, decode={"image": Image(size=(8, 8), max_pixels=limit)})
    with pytest.raises(zring.ImageDecodeError, match=r"record 5.*over the limit"):
        ds.gather([5], decode={"image": Image(size=(8, 8), max_pixels=limit)})
    out = ds.gather(ids, decode={"image": Image(size=(8, 8), max_pixels=limit, on_error="skip")})
    assert out.skipped == [2, 5]
    assert out["label"].tolist() == [0, 1, 3, 4, 6, 7] == out.indices
    assert out["image"].shape == (6, 8, 8, 3)
    spec = Image(size=(8, 8), max_pixels=limit, on_error="substitute", seed=1)
    a = ds.gather(ids, decode={"image": spec})
    b = ds.gather(ids, decode={"image": spec})
    assert [p[0] for p in a.substituted] == [2, 5]
    assert a.substituted == b.substituted
    np.testing.assert_array_equal(a["image"], b["image"])
    labels = a["label"].tolist()
    for bad, good in a.substituted:
        assert good not in (2, 5)
        assert labels[bad] == good
        np.testing.assert_array_equal(a["image"][bad], ds.gather([good], decode={"image": spec})["image"][0])
    # Through the loader: the batch shrinks, the labels follow, the count is kept.
    sampler = zring.Sampler(8, 8, "sequential")
    skip = Image(size=(8, 8), max_pixels=limit, on_error="skip")
    with zring.Loader(ds, sampler, workers=0, decode={"image": skip}) as loader:
        shard = next(loader)[0]
        assert shard["label"].tolist() == [0, 1, 3, 4, 6, 7]
        assert shard["image"].shape == (6, 8, 8, 3)
        assert loader.stats()["images_skipped"] == 2
    with zring.Loader(ds, sampler, workers=1, decode={"image": Image(size=(8, 8), max_pixels=limit)}) as loader:
        with pytest.raises(zring.ImageDecodeError, match=r"step 0.*\"image\".*record 2"):
            next(loader)


def test_colour_types_decode_to_rgb(tmp_path):
    base = picture(1, 40, 30)
    cmyk = encode(base.convert("CMYK"), quality=95)
    gray = encode(base.convert("L"), quality=95)
    rgba = encode(base.convert("RGBA"), "PNG")
    arr16 = (np.asarray(base.convert("L")).astype(np.uint16) * 257)
    png16 = encode(PILImage.fromarray(arr16), "PNG")
    ds = write(tmp_path, [cmyk, gray, rgba, png16])
    out = ds.gather([0, 1, 2, 3], decode={"image": Image(size=(30, 40), crop="full")})["image"]
    want_rgb = np.asarray(base).astype(np.int16)
    want_gray = np.asarray(base.convert("L")).astype(np.int16)
    # PNG with alpha: exact (alpha dropped); 16-bit grey: exact to 8 bits.
    np.testing.assert_array_equal(out[2], np.asarray(base))
    np.testing.assert_array_equal(out[3][..., 0], want_gray)
    assert (out[3][..., 0] == out[3][..., 2]).all()
    # Grayscale JPEG: grey in every channel, within JPEG's tolerance.
    assert np.abs(out[1][..., 1].astype(np.int16) - want_gray).mean() < 3
    # CMYK JPEG (PIL writes Adobe's inverted CMYK): colours within a loose tolerance.
    assert np.abs(out[0].astype(np.int16) - want_rgb).mean() < 12


def test_torch_and_jax_adapters_pass_decode_through(tmp_path, images):
    torch = pytest.importorskip("torch")
    import zring.torch as zt

    ds = write(tmp_path, images)
    spec = Image(size=(16, 16), crop="random_resized", seed=2)
    mapped = zt.Dataset(ds, decode={"image": spec})
    mapped.set_epoch(3)
    batch = zt.collate(mapped.__getitems__([4, 1]))
    assert tuple(batch["image"].shape) == (2, 16, 16, 3) and batch["image"].dtype == torch.uint8
    want = ds.gather([4, 1], decode={"image": spec}, epoch=3)["image"]
    np.testing.assert_array_equal(batch["image"].numpy(), want)
    it = zt.IterableDataset(ds, 4, seed=1, epochs=2, rank=0, world_size=1, decode={"image": spec})
    got = list(it)
    assert len(got) == 8
    for step, b in enumerate(got):
        labels = b["label"].tolist()
        ref = ds.gather(labels, decode={"image": spec}, epoch=step // 4)["image"]
        np.testing.assert_array_equal(b["image"].numpy(), ref)
        np.testing.assert_array_equal(it.batch(step)["image"].numpy(), ref)

    pytest.importorskip("jax")
    import zring.jax as zj

    src = zj.DataSource(ds, decode={"image": spec})
    src.set_epoch(3)
    np.testing.assert_array_equal(np.asarray(src.read([4, 1])["image"]), want)
    first = next(zj.batches(src, 4, seed=1, epochs=1, rank=0, world_size=1))
    assert first["image"].shape == (4, 16, 16, 3)


def test_a_store_of_encoded_images_decodes_in_its_gather(tmp_path, images):
    path = str(tmp_path / "img.zr")
    with zring.RaggedWriter(path, "uint8", ndim=1) as w:
        w.append([np.frombuffer(b, dtype=np.uint8) for b in images[:6]])
    store = zring.RaggedStore(path)
    spec = Image(size=(12, 16), crop="random_resized", seed=4)
    pixels = store.gather([4, 1], decode=spec, epoch=2)
    assert pixels.shape == (2, 12, 16, 3) and pixels.dtype == np.uint8
    ds = write(tmp_path, images[:6])
    np.testing.assert_array_equal(pixels, ds.gather([4, 1], decode={"image": spec}, epoch=2)["image"])
    # The framework adapters decode a store given as a field too.
    import zring._internal.frameworks as fw

    out, n = fw.read_fields({"image": store}, np.array([4, 1]), {"image": spec}, 2)
    assert n == 2
    np.testing.assert_array_equal(out["image"], pixels)
    with pytest.raises(zring.InvalidArgumentError, match="Dataset.gather"):
        store.gather([0], decode=Image(size=(8, 8), on_error="skip"))


CHILD = """
import hashlib, sys, zring
from zring.decode import Image
ds = zring.Dataset(sys.argv[1])
spec = Image(size=(16, 16), crop="random_resized", flip=True, seed=5)
plan = zring.Sampler(len(ds), 4, "cyclic", seed=9)
h = hashlib.sha256()
with zring.Loader(ds, plan, workers=2, decode={"image": spec}) as loader:
    for _, step in zip(range(8), loader):
        h.update(step[0]["image"].tobytes())
        h.update(step[0]["label"].tobytes())
print(h.hexdigest())
"""


def test_the_engines_thread_count_does_not_change_the_pixels(tmp_path, images):
    import os
    import subprocess
    import sys

    write(tmp_path, images)
    digests = []
    for threads in ("1", "2"):
        env = dict(os.environ, ZRING_THREADS=threads)
        r = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path / "ds")], env=env,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        digests.append(r.stdout.strip())
    assert digests[0] == digests[1]


INTERRUPT_CHILD = """
import io, os, signal, sys, threading, time
import numpy as np
from PIL import Image as PILImage
import zring
from zring.decode import Image

# Python leaves SIGINT ignored when it starts with it ignored (a child of a shell's
# background job, as CI runners may start it): raise KeyboardInterrupt regardless.
signal.signal(signal.SIGINT, signal.default_int_handler)
x = np.linspace(0, 255, 1600, dtype=np.uint8)
rgb = np.stack([np.tile(x, (1200, 1)), np.tile(x[:1200, None], (1, 1600)), np.zeros((1200, 1600), np.uint8)], -1)
buf = io.BytesIO()
PILImage.fromarray(rgb).save(buf, format="JPEG")
n = int(sys.argv[2])
zring.write_dataset(sys.argv[1], {"image": [buf.getvalue()] * n})
ds = zring.Dataset(sys.argv[1])

def interrupt():
    time.sleep(0.5)
    os.kill(os.getpid(), signal.SIGINT)

threading.Thread(target=interrupt, daemon=True).start()
start = time.monotonic()
try:
    ds.gather(np.arange(n), decode={"image": Image(size=(64, 64))})
    print("finished", time.monotonic() - start)
except KeyboardInterrupt:
    print("interrupted", time.monotonic() - start)
"""


def test_ctrl_c_stops_a_long_decode(tmp_path):
    import subprocess
    import sys

    # Enough images that the decode takes seconds; more on a machine that was faster.
    for n in (400, 1600):
        r = subprocess.run([sys.executable, "-c", INTERRUPT_CHILD, str(tmp_path / f"big{n}"), str(n)],
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr
        outcome, seconds = r.stdout.split()
        if outcome == "interrupted":
            # The signal came at 0.5 s; the decode stops between records, not at
            # the end of the batch (a 1,600-image decode takes 2-5 s here).
            assert float(seconds) < 1.5, r.stdout
            return
    pytest.fail(f"the decode was never interrupted: {r.stdout}")

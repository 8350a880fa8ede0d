#!/usr/bin/env python3
"""W13 from Python: zring's read-side image decoding against torchvision's
ImageFolder + PIL, and the bytes on disk of encoded images against stored pixels.

In one run:

1. N ImageNet-like JPEGs (500x375, quality 90: gradients, flat objects, a smoothed
   noise texture and pixel noise, ~100 KiB each), drawn from --seed, are written
   into an ImageFolder tree of --classes classes under --dir (kept and reused when
   it already holds the same images). With --source photos they are cut instead
   from the colour photographs scikit-image ships (scaled at random to cover
   500x375, cropped at random, flipped at random): real pictures' content.
2. The tree is converted three ways with ``zring.converters.from_imagefolder``:
   images kept encoded; and decoded to uint8 [224, 224, 3] pixels (``decode=(224,
   224)``), raw and zstd. The bytes on disk of each are reported, with the source
   tree's (target: encoded <= 1/8 of the raw pixels).
3. One epoch (--epochs N: N epochs in the one process, timed together, as a longer
   training run: zring's loader and torchvision's worker processes persist, so
   neither pays its start, nor zring its first batch buffers, per epoch) of random
   batches of --batch, uint8 CHW tensors of RandomResizedCrop 224 + horizontal flip,
   is timed for each contender in its own child process (the page cache is warmed
   first by reading every file):

   zring        zring.torch.DataLoader(zring.torch.IterableDataset(ds, batch,
                decode={"image": zring.decode.Image(size=(224, 224),
                crop="random_resized", flip=True, layout="chw")})), no DataLoader
                worker processes: the loader's thread gathers and the engine's pool
                decodes on every core.
   torchvision  torchvision.datasets.ImageFolder with RandomResizedCrop(224),
                RandomHorizontalFlip(), PILToTensor() in a torch DataLoader with
                --workers worker processes (default: the core count) and shuffle.

   The contenders alternate over --runs rounds. Reported: images/s of each and the
   ratio zring / torchvision of each round (target >= 3x).
4. With --w13 BINARY (the built ``zring-image`` example ``w13``), the decoder's own
   single-thread speed (libjpeg-turbo alone decoding the regions zring decodes, on
   w13's own images) x the cores, for scale, in the same run.

Needs zring, numpy, Pillow, torch and torchvision in one interpreter.

    python python/bench/bench_images.py --dir <scratch>            # 2,000 images
    python python/bench/bench_images.py --dir <scratch> --check    # tiny, nothing timed
    python python/bench/bench_images.py --dir <scratch> --source photos   # real photographs
"""
from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

SIZE = 224
HEIGHT, WIDTH = 375, 500


# ---------------------------------------------------------------- the images


def photo(seed: int, i: int, quality: int = 90) -> bytes:
    """Image ``i`` of ``seed``: a JPEG of smooth gradients, a few flat objects, a
    smoothed noise texture and pixel noise. The noise is what brings a 500x375
    JPEG at quality 90 to ImageNet's ~100 KiB; gradients alone compress to a few
    KiB and would flatter every decoder."""
    from PIL import Image

    rng = np.random.default_rng([seed, i])
    h, w = HEIGHT, WIDTH
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    a, b, c = rng.uniform(0.3, 1.0, 3)
    ph = rng.uniform(0, 2 * np.pi, 3)
    img = np.stack([
        255 * (0.5 + 0.5 * np.sin(x / w * np.pi * a * 3 + ph[0]) * np.cos(y / h * np.pi * b * 2)),
        255 * y / h * b + 40 * np.sin((x + y) / 37 * c + ph[1]),
        255 * (1 - x / w) * a + 50 * np.cos(x * y / 9000 + ph[2]),
    ], axis=-1)
    for _ in range(int(rng.integers(3, 8))):
        cy, cx = rng.uniform(0, h), rng.uniform(0, w)
        ry, rx = rng.uniform(20, h / 3), rng.uniform(20, w / 3)
        color = rng.uniform(0, 255, 3).astype(np.float32)
        if rng.random() < 0.5:
            mask = ((y - cy) / ry) ** 2 + ((x - cx) / rx) ** 2 < 1
        else:
            mask = (abs(y - cy) < ry) & (abs(x - cx) < rx)
        img[mask] = 0.3 * img[mask] + 0.7 * color
    amp = 22.0
    tex = rng.standard_normal((h // 2 + 1, w // 2 + 1, 3), dtype=np.float32)
    img += amp * tex.repeat(2, 0).repeat(2, 1)[:h, :w]
    img += rng.standard_normal((h, w, 3), dtype=np.float32) * (amp / 3)
    out = io.BytesIO()
    Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(out, format="JPEG", quality=quality)
    return out.getvalue()


# The colour photographs scikit-image ships in its package (no download needed).
SHIPPED = ["astronaut.png", "chelsea.png", "coffee.png", "rocket.jpg", "motorcycle_left.png",
           "motorcycle_right.png", "hubble_deep_field.jpg", "retina.jpg", "ihc.png"]
_shipped: list[Any] = []


def shipped_photos() -> list[Any]:
    """scikit-image's bundled colour photographs as RGB PIL images (loaded once per
    process, from the package's data directory: nothing is fetched)."""
    if not _shipped:
        import importlib.util

        from PIL import Image

        spec = importlib.util.find_spec("skimage")
        if spec is None or not spec.submodule_search_locations:
            raise SystemExit("--source photos needs scikit-image (pip install scikit-image)")
        data = Path(list(spec.submodule_search_locations)[0]) / "data"
        _shipped.extend(Image.open(data / name).convert("RGB") for name in SHIPPED)
    return _shipped


def real_photo(seed: int, i: int, quality: int = 90) -> bytes:
    """Image ``i`` of ``seed`` cut from a real photograph: one of scikit-image's
    shipped photographs, scaled by a random factor to cover 500x375 at least,
    cropped there at a random place, flipped at random, JPEG quality 90."""
    from PIL import Image

    rng = np.random.default_rng([seed, i])
    src = shipped_photos()[i % len(SHIPPED)]
    w, h = src.size
    scale = max(WIDTH / w, HEIGHT / h) * rng.uniform(1.0, 1.6)
    big = src.resize((max(WIDTH, round(w * scale)), max(HEIGHT, round(h * scale))), Image.LANCZOS)
    x = int(rng.integers(0, big.width - WIDTH + 1))
    y = int(rng.integers(0, big.height - HEIGHT + 1))
    img = big.crop((x, y, x + WIDTH, y + HEIGHT))
    if rng.random() < 0.5:
        img = img.transpose(Image.FLIP_LEFT_RIGHT)
    out = io.BytesIO()
    img.save(out, format="JPEG", quality=quality)
    return out.getvalue()


def _write_photo(job: tuple[int, int, str, str]) -> int:
    seed, i, path, source = job
    data = real_photo(seed, i) if source == "photos" else photo(seed, i)
    Path(path).write_bytes(data)
    return len(data)


def make_folder(root: Path, n: int, classes: int, seed: int, source: str = "synthetic") -> None:
    """The ImageFolder tree: image i in class i % classes. A tree whose stamp names
    the same (n, classes, seed, source) is reused: generating 2,000 images takes a
    minute."""
    stamp = root / "stamp.json"
    want = {"n": n, "classes": classes, "seed": seed, "source": source}
    if stamp.exists() and json.loads(stamp.read_text()) == want:
        return
    if root.exists():
        shutil.rmtree(root)
    tree = root / "tree"
    for k in range(classes):
        (tree / f"class{k:02d}").mkdir(parents=True)
    jobs = [(seed, i, str(tree / f"class{i % classes:02d}" / f"{i:06d}.jpg"), source) for i in range(n)]
    with ProcessPoolExecutor(os.cpu_count() or 1) as pool:
        list(pool.map(_write_photo, jobs, chunksize=16))
    stamp.write_text(json.dumps(want))


def disk_bytes(path: Path) -> tuple[int, int]:
    """(apparent bytes, allocated bytes) of the files under ``path``."""
    size = alloc = 0
    for dirpath, _, names in os.walk(path):
        for name in names:
            st = os.stat(os.path.join(dirpath, name))
            size += st.st_size
            alloc += st.st_blocks * 512
    return size, alloc


def warm(path: Path) -> None:
    """Reads every file once, so both contenders start from a warm page cache."""
    for dirpath, _, names in os.walk(path):
        for name in names:
            with open(os.path.join(dirpath, name), "rb") as f:
                while f.read(1 << 20):
                    pass


# ---------------------------------------------------------------- the contenders


def image_spec(crop: str = "random_resized") -> Any:
    import zring

    return zring.decode.Image(size=(SIZE, SIZE), crop=crop, flip=crop == "random_resized",
                              layout="chw")


def zring_loader(path: str, batch: int, seed: int, epochs: int = 1) -> Any:
    """`epochs` epochs as one iterable: one loader, its buffers reused throughout."""
    import zring
    import zring.torch

    ds = zring.Dataset(path)
    it = zring.torch.IterableDataset(ds, batch, seed=seed, epochs=epochs, rank=0, world_size=1,
                                     decode={"image": image_spec()})
    return zring.torch.DataLoader(it, num_workers=0)


def torchvision_loader(path: str, batch: int, workers: int, seed: int, epochs: int = 1) -> Any:
    """`epochs` epochs as one iterable; with several, the worker processes persist
    from epoch to epoch (``persistent_workers``), as a training job keeps them."""
    import itertools

    import torch
    from torchvision import datasets, transforms

    torch.manual_seed(seed)
    tf = transforms.Compose([transforms.RandomResizedCrop(SIZE), transforms.RandomHorizontalFlip(),
                             transforms.PILToTensor()])
    ds = datasets.ImageFolder(path, transform=tf)
    loader = torch.utils.data.DataLoader(ds, batch_size=batch, shuffle=True, num_workers=workers,
                                         persistent_workers=epochs > 1 and workers > 0)
    return itertools.chain.from_iterable(loader for _ in range(epochs))


def child(args: argparse.Namespace) -> None:
    """One timed run (--epochs epochs) of one contender; prints {"images": n, "seconds": s}. The
    imports come first, untimed: a training job pays them once, not per epoch."""
    import torch

    import zring.torch  # noqa: F401
    if args.child == "torchvision":
        import torchvision  # noqa: F401
    start = time.perf_counter()
    n = 0
    if args.child.startswith("zring"):
        for b in zring_loader(args.path, args.batch, args.seed, args.epochs):
            img = b["image"]
            n += img.shape[0]
    else:
        for img, _label in torchvision_loader(args.path, args.batch, args.workers, args.seed,
                                              args.epochs):
            n += img.shape[0]
    seconds = time.perf_counter() - start
    if tuple(img.shape[1:]) != (3, SIZE, SIZE) or img.dtype != torch.uint8:
        raise SystemExit(f"{args.child}: batch {tuple(img.shape)} {img.dtype}, want uint8 CHW")
    print(json.dumps({"images": n, "seconds": seconds}))


def run_child(name: str, path: Path, args: argparse.Namespace) -> float:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", name, "--path", str(path),
           "--batch", str(args.batch), "--workers", str(args.workers), "--seed", str(args.seed),
           "--epochs", str(args.epochs)]
    if name == "zring-1core":
        # The same epoch with every thread on one core: zring's decode path's own
        # single-core speed on these images, which x the cores is its limit.
        cmd = ["taskset", "-c", "0", *cmd]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    return float(r["images"]) / float(r["seconds"])


def decoder_limit(binary: str) -> float | None:
    """libjpeg-turbo alone, one thread, decoding the regions zring decodes of w13's own
    images (the example's limit line), images/s."""
    try:
        out = subprocess.run([binary, "400", "1"], check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"w13 did not run: {e}")
        return None
    for line in out.splitlines():
        if line.startswith("libjpeg-turbo alone, zring's regions"):
            return float(line.split(":")[1].split()[0])
    print(f"w13 printed no limit line:\n{out}")
    return None


# ---------------------------------------------------------------- the check


def check(root: Path, args: argparse.Namespace) -> None:
    """Shapes and dtypes of both contenders' batches; zring's centre crop against
    PIL's decode + centre crop + resize of the same files."""
    import torch
    from PIL import Image

    import zring

    ds = zring.Dataset(str(root / "encoded"))
    total = 0
    for b in zring_loader(str(root / "encoded"), args.batch, args.seed):
        img = b["image"]
        assert isinstance(img, torch.Tensor) and img.dtype == torch.uint8, (type(img), img.dtype)
        assert tuple(img.shape[1:]) == (3, SIZE, SIZE), img.shape
        assert len(b["label"]) == img.shape[0]
        total += img.shape[0]
    assert total == len(ds), (total, len(ds))
    try:
        tv = torchvision_loader(str(root / "tree"), args.batch, 0, args.seed)
        img, _ = next(iter(tv))
        assert img.dtype == torch.uint8 and tuple(img.shape[1:]) == (3, SIZE, SIZE), img.shape
    except ImportError:
        print("torchvision is missing: its batches are not checked")

    # Records are in the tree's sorted order; the converter stores the file bytes.
    files = sorted((root / "tree").rglob("*.jpg"))
    ids = np.arange(len(ds))
    got = ds.gather(ids, decode={"image": image_spec("center")})["image"]
    diffs = []
    for k, f in enumerate(files):
        assert bytes(ds[k]["image"]) == f.read_bytes(), f"record {k} is not {f.name}"
        with Image.open(f) as im:
            im = im.convert("RGB")
            w, h = im.size
            s = min(w, h)
            # zring centres the region exactly (x from 62.5 for 500x375), and so
            # does PIL with a fractional box: a whole-pixel box shifts the
            # sampling grid by half a pixel, which costs ~3.5/255 on noisy images.
            x0, y0 = (w - s) / 2, (h - s) / 2
            box = (x0, y0, x0 + s, y0 + s)
            ref = np.asarray(im.resize((SIZE, SIZE), Image.BILINEAR, box=box)).transpose(2, 0, 1)
        diffs.append(np.abs(got[k].astype(np.int16) - ref.astype(np.int16)).mean())
    mean = float(np.mean(diffs))
    print(f"zring centre crop vs PIL: mean abs diff {mean:.2f} (worst image {max(diffs):.2f}) of 255")
    assert mean < 1.5, f"zring's centre crop differs from PIL's by {mean:.2f} on average"
    print(f"check passed: {len(ds)} records, batches uint8 (B, 3, {SIZE}, {SIZE})")


# ---------------------------------------------------------------- main


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dir", help="scratch directory (default: a temporary one, removed)")
    p.add_argument("--images", type=int, default=2000)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                   help="torchvision's DataLoader worker processes")
    p.add_argument("--runs", type=int, default=2, help="alternating rounds")
    p.add_argument("--epochs", type=int, default=1,
                   help="epochs each contender runs in its one process, timed together (a "
                        "longer run: zring's loader and torchvision's workers persist)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--source", choices=["synthetic", "photos"], default="synthetic",
                   help="the images: synthetic, or cut from scikit-image's shipped photographs")
    p.add_argument("--w13", help="the built zring-image example w13, for the decoder's limit")
    p.add_argument("--check", action="store_true", help="tiny (40 images), checked, nothing timed")
    p.add_argument("--child", choices=["zring", "zring-1core", "torchvision"], help=argparse.SUPPRESS)
    p.add_argument("--path", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args)
        return
    if args.check:
        args.images, args.batch = 40, 16

    scratch = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="bench-images-"))
    try:
        name = f"check-{args.seed}" if args.check else f"w13-{args.images}-{args.seed}"
        run(scratch / (name if args.source == "synthetic" else f"{name}-{args.source}"), args)
    finally:
        if not args.dir:
            shutil.rmtree(scratch, ignore_errors=True)


def run(root: Path, args: argparse.Namespace) -> None:
    import zring
    from zring import converters

    t = time.perf_counter()
    make_folder(root, args.images, args.classes, args.seed, args.source)
    tree = root / "tree"
    src, _ = disk_bytes(tree)
    print(f"{args.images} {args.source} JPEGs {WIDTH}x{HEIGHT}, {args.classes} classes, mean "
          f"{src / args.images / 1024:.0f} KiB ({time.perf_counter() - t:.0f} s to make or find)")

    stores = {"encoded": {}, "pixels-raw": {"decode": (SIZE, SIZE), "codec": "raw"},
              "pixels-zstd": {"decode": (SIZE, SIZE), "codec": "zstd"}}
    if args.check:
        stores = {"encoded": {}}
    sizes = {}
    for name, options in stores.items():
        out = root / name
        if not out.exists():
            converters.from_imagefolder(tree, out, **options)
        sizes[name] = disk_bytes(out)
    ds = zring.Dataset(str(root / "encoded"))
    assert len(ds) == args.images, (len(ds), args.images)

    if args.check:
        check(root, args)
        return

    print(f"\nbytes on disk (apparent / allocated), {args.images} images:")
    print(f"  {'ImageFolder tree (JPEG files)':34s} {src / 2**20:8.1f} MiB")
    for name, (size, alloc) in sizes.items():
        print(f"  {'zring ' + name:34s} {size / 2**20:8.1f} MiB / {alloc / 2**20:8.1f} MiB")
    raw = sizes["pixels-raw"][0]
    full = args.images * HEIGHT * WIDTH * 3
    print(f"  {'(pixels at full size, computed)':34s} {full / 2**20:8.1f} MiB")
    print(f"  encoded / pixels-raw = 1/{raw / sizes['encoded'][0]:.1f}  (target <= 1/8); "
          f"encoded / full-size pixels = 1/{full / sizes['encoded'][0]:.1f}; "
          f"encoded / pixels-zstd = 1/{sizes['pixels-zstd'][0] / sizes['encoded'][0]:.1f}")

    warm(tree)
    warm(root / "encoded")
    limit = decoder_limit(args.w13) if args.w13 else None
    cores = os.cpu_count() or 1
    what = "one epoch" if args.epochs == 1 else f"{args.epochs} epochs in one process"
    print(f"\n{what}, batch {args.batch}, RandomResizedCrop {SIZE} + flip, uint8 CHW; "
          f"zring: 0 DataLoader workers (engine pool on {cores} cores); torchvision: "
          f"{args.workers} workers; load {os.getloadavg()[0]:.2f}")
    rows = []
    pinned = shutil.which("taskset") is not None and cores > 1
    for r in range(args.runs):
        zr = run_child("zring", root / "encoded", args)
        tv = run_child("torchvision", tree, args)
        one = run_child("zring-1core", root / "encoded", args) if pinned else None
        rows.append((zr, tv, one))
        extra = f"  zring on 1 core {one:5.0f} (x {cores} = {zr / (one * cores):.2f}x)" if one else ""
        print(f"  round {r}: zring {zr:5.0f} images/s  torchvision {tv:5.0f} images/s  "
              f"ratio {zr / tv:5.2f}x (target >= 3x){extra}  load {os.getloadavg()[0]:.2f}")
    ratios = sorted(z / t for z, t, _ in rows)
    print(f"zring / torchvision: {ratios[0]:.2f}-{ratios[-1]:.2f}x over {len(rows)} rounds")
    if limit:
        best = max(z for z, _, _ in rows)
        print(f"decoder limit (libjpeg-turbo alone on zring's regions, 1 thread, w13's own images) {limit:.0f} x {cores} = "
              f"{limit * cores:.0f} images/s; zring's best round {best / (limit * cores):.2f}x of it")

if __name__ == "__main__":
    main()

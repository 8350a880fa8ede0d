"""Converters: the formats data lives in -> zring datasets.

Each ``from_<format>(src, dst, **options)`` writes a dataset with
:func:`zring.write_dataset` (parallel shards, bounded memory, atomic publication)
and returns it opened. ``convert_cli(argv)`` (also ``python -m zring convert ...``)
is the command line::

    python -m zring convert parquet|arrow|hf|webdataset|imagefolder|hdf5|npz|npy SRC [SRC...] DST

:func:`convert` takes the arguments of loaderx's Hugging Face ``convert(dataset,
output, *, codec)`` (a ``DatasetDict`` becomes one dataset per split, in
subdirectories).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import tarfile
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping, Sequence, Union, cast

import numpy as np
import numpy.typing as npt

from ._internal.write import write_dataset

if TYPE_CHECKING:
    from ._internal.dataset import Dataset
    from ._internal.write import FieldSpec, FieldSpecLike
    from .types import CodecName

#: A source path, or a list of them.
_Src = Union[str, "os.PathLike[str]", Sequence[Union[str, "os.PathLike[str]"]]]
#: Which fields to write (see :func:`zring.write_dataset`).
_Fields = Union[Iterable[str], Mapping[str, "FieldSpecLike"], None]

__all__ = [
    "from_parquet",
    "from_arrow",
    "from_hf",
    "from_npz",
    "from_npy",
    "from_hdf5",
    "from_imagefolder",
    "from_webdataset",
    "convert",
    "convert_cli",
]

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".webp", ".bmp", ".gif", ".tif", ".tiff")


# ---------------------------------------------------------------- tables


#: The Parquet reader's read buffer: column chunks are read through it in pieces.
PARQUET_BUFFER = 1 << 20


def _parquet_reader(src: _Src, batch_records: int | None) -> Any:
    """A RecordBatchReader over Parquet file(s), streamed in batches with memory that
    does not grow with the file: ``pre_buffer=False`` and a bounded ``buffer_size``
    (with pyarrow's defaults, ``iter_batches`` keeps what it pre-buffered, and a
    conversion's peak RSS grew with the input: 573 MiB for 800,000 token records
    against 255 MiB for 200,000; now 159-194 MiB for both). pyarrow.dataset's scanner
    reads ahead without a bound on a slow consumer. One decoding thread: the
    conversion's workers already use every core."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    paths = [str(p) for p in _expand(src, (".parquet", ".pq"))]
    first = pq.ParquetFile(paths[0], pre_buffer=False, buffer_size=PARQUET_BUFFER)
    rows = batch_records
    if rows is None:
        meta = first.metadata
        per_row = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
        per_row = max(1, per_row // max(meta.num_rows, 1))
        rows = max(1, min(65536, (8 << 20) // per_row))

    def batches() -> Iterator[Any]:
        for path in paths:
            with pq.ParquetFile(path, pre_buffer=False, buffer_size=PARQUET_BUFFER) as f:
                yield from f.iter_batches(batch_size=rows, use_threads=False)

    return pa.RecordBatchReader.from_batches(first.schema_arrow, batches())


def _expand(src: _Src, suffixes: Sequence[str]) -> list[Path]:
    """A file, a directory (its files with ``suffixes``, sorted) or a list of them."""
    if isinstance(src, (list, tuple)):
        return [p for s in src for p in _expand(s, suffixes)]
    p = Path(cast("str | os.PathLike[str]", src))  # not a list: that was expanded above
    if p.is_dir():
        found = sorted(q for q in p.rglob("*") if q.is_file() and q.suffix.lower() in suffixes)
        if not found:
            raise FileNotFoundError(f"{p}: no {'/'.join(suffixes)} files in this directory")
        return found
    if not p.exists():
        raise FileNotFoundError(f"{p}: no such file or directory")
    return [p]


def from_parquet(src: _Src, dst: str | os.PathLike[str], fields: _Fields = None, *,
                 batch_records: int | None = None, **options: Any) -> Dataset:
    """Parquet file(s) or a directory of them, streamed in batches."""
    return write_dataset(dst, _parquet_reader(src, batch_records), fields, **options)


def from_arrow(src: _Src, dst: str | os.PathLike[str], fields: _Fields = None,
               **options: Any) -> Dataset:
    """Arrow IPC files (``.arrow`` / ``.feather``, file or stream format), streamed."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    # Files are read through OSFile, not memory-mapped: a mapping keeps every page
    # read so far resident (and counted in RSS) until the file is closed.
    def batches() -> Iterator[Any]:
        for path in _expand(src, (".arrow", ".feather", ".ipc")):
            with pa.OSFile(str(path)) as f:
                try:
                    reader = ipc.open_file(f)
                except pa.ArrowInvalid:
                    f.seek(0)
                    yield from ipc.open_stream(f)
                    continue
                for i in range(reader.num_record_batches):
                    yield reader.get_batch(i)

    paths = _expand(src, (".arrow", ".feather", ".ipc"))
    with pa.OSFile(str(paths[0])) as f:
        try:
            schema = ipc.open_file(f).schema
        except pa.ArrowInvalid:
            f.seek(0)
            schema = ipc.open_stream(f).schema
    return write_dataset(dst, pa.RecordBatchReader.from_batches(schema, batches()), fields, **options)


def from_hf(src: Any, dst: str | os.PathLike[str], fields: _Fields = None, *,
            split: str | None = None, name: str | None = None,
            **options: Any) -> Dataset | dict[str, Dataset]:
    """A Hugging Face ``datasets.Dataset`` / ``DatasetDict``, a directory written by
    ``save_to_disk``, or a Hub dataset id (``load_dataset(src, name, split=split)``)."""
    import datasets

    if isinstance(src, (str, os.PathLike)):
        if Path(src).exists():
            src = datasets.load_from_disk(str(src))
        else:
            src = datasets.load_dataset(str(src), name, split=split)
    if isinstance(src, datasets.DatasetDict):
        if split is not None:
            src = src[split]
        else:
            return {k: write_dataset(_inside(dst, _split_dir(k)), v, fields, **options) for k, v in src.items()}
    return write_dataset(dst, src, fields, **options)


def _inside(dst: str | os.PathLike[str], name: str) -> str | Path:
    """``name`` inside the destination ``dst``: a directory, or a URL prefix (which
    ``Path`` would mangle: it folds the ``//`` of ``s3://``)."""
    text = os.fspath(dst)
    if "://" in text:
        return f"{text.rstrip('/')}/{name}"
    return Path(dst) / name


def _split_dir(split: str) -> str:
    """A split's name as one directory name inside the destination: a name that is a
    path (``../x``, ``/abs``, ``a/b``) would write outside it, so it is refused."""
    if not split or split in (".", "..") or "/" in split or "\\" in split or "\0" in split:
        raise ValueError(f"split name {split!r} is not a plain directory name; rename the split")
    return split


# ---------------------------------------------------------------- arrays


class _NpzRows:
    """A ``.npy`` member of an ``.npz`` file read in row ranges: ``rows[a:b]`` seeks
    to row ``a`` within the member and reads ``b - a`` rows. write_dataset slices a
    column in order, so a compressed member is decompressed once, front to back (a
    seek backwards restarts it), and memory holds one slice, not the array."""

    def __init__(self, f: IO[bytes], shape: tuple[int, ...], dtype: np.dtype[Any]) -> None:
        self._f = f
        self._start = f.tell()
        self.shape, self.dtype = shape, dtype
        self._row_bytes = dtype.itemsize * int(np.prod(shape[1:], dtype=np.int64))

    @classmethod
    def open(cls, z: Any, key: str) -> _NpzRows | None:
        """Array ``key`` of the open ``NpzFile`` ``z``, or None when its rows cannot be
        read one range at a time (then it is read whole): a Fortran-ordered array of
        more than one dimension (its rows are not contiguous), a 0-d array, an object
        array (which ``np.load`` refuses), or a .npy header version other than 1 or 2."""
        member = f"{key}.npy"
        if member not in z.zip.namelist():
            return None
        f = z.zip.open(member)
        try:
            fmt = np.lib.format
            version = fmt.read_magic(f)
            read_header = {(1, 0): fmt.read_array_header_1_0, (2, 0): fmt.read_array_header_2_0}.get(version)
            if read_header is not None:
                shape, fortran, dtype = read_header(f)
                if shape and not (fortran and len(shape) > 1) and not dtype.hasobject:
                    return cls(f, shape, dtype)
        except BaseException:
            f.close()
            raise
        f.close()
        return None

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, key: slice) -> npt.NDArray[Any]:
        if not isinstance(key, slice):
            raise TypeError(f"npz columns are read by row ranges, not {key!r}")
        a, b, step = key.indices(len(self))
        if step != 1:
            raise TypeError("npz columns are read by contiguous row ranges")
        b = max(a, b)
        self._f.seek(self._start + a * self._row_bytes)
        want = (b - a) * self._row_bytes
        data = self._f.read(want)
        if len(data) != want:
            raise ValueError(f"{self._f.name}: the member ends before its {len(self)} rows")
        return np.frombuffer(data, self.dtype).reshape((b - a, *self.shape[1:]))

    def close(self) -> None:
        self._f.close()


def from_npz(src: str | os.PathLike[str], dst: str | os.PathLike[str], fields: _Fields = None,
             **options: Any) -> Dataset:
    """The arrays of an ``.npz`` file as fields (one record per row), streamed: each
    array is read in row ranges as the shards are written (stored and compressed
    members alike), so memory does not grow with the file. A Fortran-ordered array
    of more than one dimension is read whole (its rows are not contiguous)."""
    cols: dict[str, Any] = {}
    with np.load(str(src), allow_pickle=False) as z:
        try:
            for k in z.files:
                rows = _NpzRows.open(z, k)
                cols[k] = z[k] if rows is None else rows
            return write_dataset(dst, cols, fields, **options)
        finally:
            for c in cols.values():
                if isinstance(c, _NpzRows):
                    c.close()


def from_npy(src: _Src, dst: str | os.PathLike[str], fields: _Fields = None,
             **options: Any) -> Dataset:
    """One or more ``.npy`` files (memory-mapped, streamed) as fields named after
    their file stems."""
    paths = _expand(src, (".npy",))
    cols: dict[str, Any] = {}
    for p in paths:
        name = p.stem
        if name in cols:
            raise ValueError(f"two .npy files are named {name!r}")
        cols[name] = np.load(str(p), mmap_mode="r", allow_pickle=False)
    return write_dataset(dst, cols, fields, **options)


def from_hdf5(src: str | os.PathLike[str], dst: str | os.PathLike[str], fields: _Fields = None,
              *, keys: Sequence[str] | None = None, **options: Any) -> Dataset:
    """The datasets of an HDF5 file (all top-level ones, or ``keys``; nested paths
    become ``a.b`` fields), read in row ranges. Variable-length ones become ragged
    fields; strings become str fields."""
    import h5py

    f = h5py.File(str(src), "r")
    try:
        if keys is None:
            found: list[str] = []
            f.visititems(lambda k, v: found.append(k) if isinstance(v, h5py.Dataset) else None)
            keys = found
        cols = {}
        for k in keys:
            d = f[k]
            if h5py.check_string_dtype(d.dtype) is not None:
                d = d.asstr()
            cols[k.replace("/", ".")] = d
        return write_dataset(dst, cols, fields, **options)
    finally:
        f.close()


# ---------------------------------------------------------------- images


def _parse_size(decode: Any) -> tuple[int, int] | None:
    """``None`` (keep encoded bytes), an int (square) or ``(height, width)``."""
    if decode is None or decode is False:
        return None
    if isinstance(decode, str):
        h, _, w = decode.lower().partition("x")
        return int(h), int(w or h)
    if isinstance(decode, int):
        return decode, decode
    h, w = decode
    return int(h), int(w)


def _decode_image(data: bytes, size: tuple[int, int]) -> npt.NDArray[np.uint8]:
    from PIL import Image

    h, w = size
    with Image.open(io.BytesIO(data)) as im:
        return np.asarray(im.convert("RGB").resize((w, h), Image.BILINEAR), dtype=np.uint8)


#: The image format a file extension names, as the field metadata ``zring.image``
#: records it (``jpeg`` and ``png`` are what ``decode=`` reads).
_IMAGE_KINDS = {"jpg": "jpeg", "jpeg": "jpeg", "png": "png"}


def _image_kind(ext: str) -> str:
    """The image format of a file extension (with or without its dot)."""
    ext = ext.lower().lstrip(".").rsplit(".", 1)[-1]
    return _IMAGE_KINDS.get(ext, ext)


def _image_field(size: tuple[int, int] | None, kinds: Iterable[str] = ()) -> FieldSpec:
    """An image field: encoded bytes whose formats (``kinds``, e.g. ``jpeg``) the
    metadata ``zring.image`` records (``jpeg,png`` when mixed), or decoded pixels."""
    from ._internal.write import FieldSpec

    formats = sorted(set(kinds))
    if size is None:
        meta = {"zring.image": ",".join(formats)} if formats else {}
        return FieldSpec(np.uint8, ragged=True, kind="bytes", metadata=meta)
    return FieldSpec(np.uint8, (size[0], size[1], 3), metadata={"layout": "HWC", "color": "RGB"})


def from_imagefolder(src: str | os.PathLike[str], dst: str | os.PathLike[str], *,
                     decode: Any = None, **options: Any) -> Dataset:
    """``src/<class>/<image>`` -> fields ``image`` (the encoded file's bytes, whose
    formats the field's metadata ``zring.image`` names: ``jpeg``, ``png`` or
    ``jpeg,png``; or with ``decode=(height, width)`` RGB uint8 ``(h, w, 3)`` resized
    with Pillow) and
    ``label`` (int64, the class's position in the sorted class names, which the
    field's metadata lists)."""
    from ._internal.write import FieldSpec

    root = Path(src)
    classes = sorted(p.name for p in root.iterdir() if p.is_dir())
    if not classes:
        raise FileNotFoundError(f"{root}: no class directories")
    size = _parse_size(decode)

    def files() -> Iterator[tuple[int, Path]]:
        for label, cls in enumerate(classes):
            for p in sorted((root / cls).rglob("*")):
                if p.is_file() and p.suffix.lower() in IMAGE_EXTENSIONS:
                    yield label, p

    def rows() -> Iterator[dict[str, Any]]:
        for label, p in files():
            data = p.read_bytes()
            yield {"image": data if size is None else _decode_image(data, size), "label": label}

    # The formats, from a first listing that keeps only the distinct extensions.
    kinds = {_image_kind(p.suffix) for _, p in files()} if size is None else set()
    fields = {
        "image": _image_field(size, kinds),
        "label": FieldSpec(np.int64, metadata={"classes": json.dumps(classes)}),
    }
    return write_dataset(dst, rows(), fields, **options)


def _wds_samples(paths: Iterable[Path]) -> Iterator[dict[str, Any]]:
    """WebDataset samples: consecutive tar members sharing a key, as ``{ext: bytes}``
    plus ``__key__``."""
    for path in paths:
        with tarfile.open(str(path), mode="r|*") as tar:
            sample: dict[str, Any] = {}
            key: str | None = None
            for member in tar:
                if not member.isfile():
                    continue
                base = os.path.basename(member.name)
                dirname = os.path.dirname(member.name)
                stem, dot, ext = base.partition(".")
                if not dot:
                    continue
                k = f"{dirname}/{stem}" if dirname else stem
                if key is not None and k != key:
                    yield dict(sample, __key__=key)
                    sample = {}
                key = k
                # A regular file's member always has a file object.
                sample[ext.lower()] = cast(IO[bytes], tar.extractfile(member)).read()
                # TarFile lists every member it has read (~0.5 KiB each, kept for
                # random access a stream never uses): drop them so memory stays flat.
                tar.members = []  # type: ignore[attr-defined]  # undocumented, set in TarFile.__init__
            if sample:
                yield dict(sample, __key__=key)


def from_webdataset(src: _Src, dst: str | os.PathLike[str], *, decode: Any = None,
                    **options: Any) -> Dataset:
    """WebDataset tar shards -> one field per extension: images (``jpg``, ``png``,
    ...) as encoded bytes (the metadata ``zring.image`` names the format) or, with
    ``decode=(height, width)``, RGB uint8 arrays;
    ``cls`` / ``label`` / ``index`` as int64 labels; ``txt`` / ``json`` as str; other
    extensions as bytes; and ``key`` (the sample's tar key) as str."""
    from ._internal.write import FieldSpec

    paths = _expand(src, (".tar", ".tgz", ".gz"))
    size = _parse_size(decode)
    samples = _wds_samples(paths)
    first = next(samples, None)
    if first is None:
        raise ValueError(f"{src}: no samples in the tar shards")
    exts = [e for e in first if e != "__key__"]
    fields: dict[str, FieldSpecLike] = {"key": "str"}
    kinds: dict[str, str] = {}
    for e in exts:
        if e in {"cls", "label", "index", "cls2"}:
            kinds[e] = "label"
            fields[e] = FieldSpec(np.int64)
        elif ("." + e.split(".")[-1]) in IMAGE_EXTENSIONS:
            kinds[e] = "image"
            fields[e] = _image_field(size, [_image_kind(e)])
        elif e.split(".")[-1] in {"txt", "json", "text"}:
            kinds[e] = "str"
            fields[e] = "str"
        else:
            kinds[e] = "bytes"
            fields[e] = "bytes"

    def rows() -> Iterator[dict[str, Any]]:
        import itertools

        for s in itertools.chain([first], samples):
            if set(s) != set(first):
                raise ValueError(f"sample {s['__key__']!r} has parts {sorted(s)}, the first sample {sorted(first)}")
            row = {"key": s["__key__"]}
            for e, kind in kinds.items():
                v = s[e]
                if kind == "label":
                    v = int(v.decode().strip())
                elif kind == "image" and size is not None:
                    v = _decode_image(v, size)
                elif kind == "str":
                    v = v.decode("utf-8")
                row[e] = v
            yield row

    return write_dataset(dst, rows(), fields, **options)


# ---------------------------------------------------------------- loaderx-compatible entry point


def convert(dataset: Any, output: str | os.PathLike[str], *, codec: CodecName = "zstd", level: int = 3,
            overwrite: bool = False, **options: Any) -> Dataset | dict[str, Dataset]:
    """loaderx-compatible Hugging Face conversion: ``dataset`` (``datasets.Dataset`` or
    ``DatasetDict``) -> a zring dataset at ``output`` (one per split, in
    subdirectories, for a ``DatasetDict``). ``output`` must not exist unless
    ``overwrite``. ``options`` go to :func:`zring.write_dataset`. Returns the opened
    dataset (a dict of them, by split, for a DatasetDict).

    Raises ``FileExistsError`` when ``output`` exists (without ``overwrite``),
    ``ValueError`` for a codec other than ``"raw"`` or ``"zstd"`` and for columns
    that cannot be stored, ``ImportError`` without the ``datasets`` package, and
    what :func:`zring.write_dataset` raises.

    >>> import os, tempfile, datasets, zring
    >>> hf = datasets.Dataset.from_dict({"label": [0, 1, 1], "text": ["a", "bb", "ccc"]})
    >>> ds = zring.convert(hf, os.path.join(tempfile.mkdtemp(), "out"))
    >>> len(ds), ds.fields, ds[1]
    (3, ['label', 'text'], {'label': array(1), 'text': 'bb'})
    """
    # zstd-dict needs a dictionary, which a conversion does not take.
    if codec not in ("raw", "none", "zstd"):
        raise ValueError(f"codec must be 'raw' or 'zstd', got {codec!r}")
    if Path(output).exists() and not overwrite:
        raise FileExistsError(f"{output} already exists")
    return from_hf(dataset, output, codec=codec, level=level, overwrite=overwrite, **options)


# ---------------------------------------------------------------- command line

CONVERTERS: dict[str, Callable[..., Dataset | dict[str, Dataset]]] = {
    "parquet": from_parquet,
    "arrow": from_arrow,
    "hf": from_hf,
    "webdataset": from_webdataset,
    "imagefolder": from_imagefolder,
    "hdf5": from_hdf5,
    "npz": from_npz,
    "npy": from_npy,
}


def convert_cli(argv: Sequence[str] | None = None) -> int:
    """``zring convert FORMAT SRC [SRC...] DST [options]``; returns the exit code."""
    p = argparse.ArgumentParser(prog="zring convert", description="Convert data into a zring dataset.")
    p.add_argument("format", choices=sorted(CONVERTERS))
    p.add_argument("src", nargs="+", help="source file(s) or directory")
    p.add_argument("dst", help="the dataset directory to write")
    p.add_argument("--codec", default="zstd", choices=["raw", "zstd"])
    p.add_argument("--level", type=int, default=3)
    p.add_argument("--shard-records", type=int)
    p.add_argument("--workers", type=int)
    p.add_argument("--fields", help="comma-separated columns to keep")
    p.add_argument("--decode", help="imagefolder/webdataset: decode images to HxW RGB (e.g. 224x224)")
    p.add_argument("--split", help="hf: the split to convert")
    p.add_argument("--overwrite", action="store_true")
    p.add_argument("--append", action="store_true", help="add the data as new shards of DST")
    p.add_argument("--no-progress", action="store_true")
    a = p.parse_args(argv)
    options = dict(
        codec=a.codec,
        level=a.level,
        shard_records=a.shard_records,
        workers=a.workers,
        overwrite=a.overwrite,
        append=a.append,
        progress=False if a.no_progress else None,
    )
    src = a.src if len(a.src) > 1 else a.src[0]
    if a.format in ("imagefolder", "webdataset"):
        options["decode"] = a.decode
    elif a.fields:
        options["fields"] = a.fields.split(",")
    if a.format == "hf":
        options["split"] = a.split
    try:
        out = CONVERTERS[a.format](src, a.dst, **options)
    except (OSError, ValueError, TypeError, KeyError) as e:
        print(f"zring convert: {e}", file=sys.stderr)
        return 1
    for ds in out.values() if isinstance(out, dict) else [out]:
        print(f"{ds.path}: {len(ds)} records, {ds.shards} shards, fields {', '.join(ds.fields)}, version {ds.version}")
    return 0

"""A second, independent reader of the zring container format.

Written from docs/format.md alone (it shares no code with the Rust engine): it parses
a store byte by byte with ``struct``, checks every rule the document states, every
checksum (XXH3-64 seed 0, from the ``xxhash`` package) and decodes every record (zstd
frames through the ``zstandard`` package). A store the engine writes that this reader
rejects, or reads differently, means docs/format.md and the engine disagree.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field

import numpy as np
import xxhash
import zstandard

BLOCK = 4096
ENTRY = 32
SB_MAGIC = b"ZRING\0SB"
FT_MAGIC = b"ZRING\0FT"
MAX_ALIGN = 1 << 20
SECTIONS = ("data", "dictionary", "shapes", "table", "schema")
DTYPES = {
    "bool": 1, "uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8,
    "int8": 1, "int16": 2, "int32": 4, "int64": 8,
    "float16": 2, "bfloat16": 2, "float32": 4, "float64": 8,
    "complex64": 8, "complex128": 16, "float8_e4m3fn": 1, "float8_e5m2": 1,
    # added in v1.1
    "float8_e4m3fnuz": 1, "float8_e5m2fnuz": 1, "float8_e8m0fnu": 1,
}  # fmt: skip


class FormatError(Exception):
    """The bytes break a rule of docs/format.md."""


def xxh3(b: bytes) -> int:
    return xxhash.xxh3_64_intdigest(b, seed=0)


def need(cond: bool, what: str) -> None:
    if not cond:
        raise FormatError(what)


@dataclass
class Record:
    offset: int
    stored_len: int
    logical_len: int
    checksum: int
    tag: int
    shape: tuple[int, ...]
    data: bytes = b""


@dataclass
class ParsedStore:
    major: int
    minor: int
    align: int
    writer: str
    schema: dict
    dictionary: bytes
    records: list[Record] = field(default_factory=list)

    @property
    def tags(self) -> list[int]:
        return [r.tag for r in self.records]


def parse(buf: bytes) -> ParsedStore:
    """Parses and fully checks a store; returns every record decoded."""
    need(len(buf) >= 2 * BLOCK, f"file of {len(buf)} bytes is shorter than two blocks")

    # Superblock.
    sb = buf[:BLOCK]
    need(sb[0:8] == SB_MAGIC, "superblock magic")
    major, minor, flags, align = struct.unpack_from("<HHII", sb, 8)
    need(major == 1, f"superblock major {major}")
    need(xxh3(sb[0:56]) == struct.unpack_from("<Q", sb, 56)[0], "superblock checksum")
    need(flags == 0, "superblock flags")
    need(align > 0 and align & (align - 1) == 0 and align <= MAX_ALIGN, f"align {align}")
    need(sb[20:24] == b"\0" * 4, "superblock reserved 20..24")
    writer = sb[24:56].rstrip(b"\0").decode("utf-8")
    need(sb[64:] == b"\0" * (BLOCK - 64), "superblock reserved 64..4096")

    # Footer.
    ft = buf[-BLOCK:]
    need(ft[0:8] == FT_MAGIC, "footer magic")
    fmaj, fmin, fflags, count, falign, entry_size = struct.unpack_from("<HHIQII", ft, 8)
    need(xxh3(ft[0:4088]) == struct.unpack_from("<Q", ft, 4088)[0], "footer checksum")
    need((fmaj, fmin) == (major, minor), "footer version differs from the superblock's")
    need(fflags == 0, "footer flags")
    need(falign == align, "footer align differs from the superblock's")
    need(entry_size == ENTRY, f"entry size {entry_size}")
    sections = {}
    for k, name in enumerate(SECTIONS):
        sections[name] = struct.unpack_from("<QQQ", ft, 32 + 24 * k)
    (file_len,) = struct.unpack_from("<Q", ft, 152)
    need(file_len == len(buf), f"file_len {file_len} but the file has {len(buf)} bytes")
    need(ft[160:4088] == b"\0" * (4088 - 160), "footer reserved 160..4088")

    # Sections: in order inside [4096, file_len - 4096], no overlap, metadata at
    # multiples of 8 with zero padding between them.
    data_off, data_len, data_sum = sections["data"]
    need(data_off == BLOCK, "data section offset")
    need(data_sum == 0, "data section checksum is not 0")
    end = BLOCK
    for name in SECTIONS:
        off, ln, _ = sections[name]
        need(off >= end, f"{name} section overlaps the one before")
        if name != "data":
            need(off % 8 == 0, f"{name} section offset {off} not a multiple of 8")
            need(buf[end:off] == b"\0" * (off - end), f"padding before {name} not zero")
        end = off + ln
        need(end <= len(buf) - BLOCK, f"{name} section runs into the footer")
    need(buf[end : len(buf) - BLOCK] == b"\0" * (len(buf) - BLOCK - end), "tail padding")
    for name in SECTIONS[1:]:
        off, ln, s = sections[name]
        need(xxh3(buf[off : off + ln]) == s, f"{name} section checksum")
    data_end = data_off + data_len

    # Schema.
    off, ln, _ = sections["schema"]
    schema = json.loads(buf[off : off + ln].decode("utf-8"))
    need(schema["format"] == "zring", "schema format")
    need(schema["dtype"] in DTYPES, f"dtype {schema['dtype']}")
    need(schema["codec"] in ("raw", "zstd", "zstd-dict"), "schema codec")
    need(schema["record_count"] == count, "schema record_count differs from the footer's")
    need(isinstance(schema["metadata"], dict), "schema metadata")
    itemsize = DTYPES[schema["dtype"]]
    if schema["layout"] == "dense":
        item_shape = tuple(schema["item_shape"])
        need(all(isinstance(d, int) and d >= 0 for d in item_shape), "item_shape")
        ndim = 0
    else:
        need(schema["layout"] == "ragged", f"layout {schema['layout']}")
        ndim = schema["ndim"]
        need(1 <= ndim <= 63, f"ndim {ndim}")

    # Dictionary: non-empty if and only if the codec is zstd-dict.
    off, ln, _ = sections["dictionary"]
    dictionary = buf[off : off + ln]
    need((ln > 0) == (schema["codec"] == "zstd-dict"), "dictionary presence vs codec")
    if schema["codec"] == "zstd-dict":
        dict_id = zstandard.ZstdCompressionDict(dictionary).dict_id()
        need(schema["dict_id"] == dict_id, f"dict_id {schema['dict_id']} vs {dict_id}")
    else:
        need(schema["dict_id"] is None, "dict_id of a store without a dictionary")

    # Shapes and table lengths implied by the schema.
    s_off, s_len, _ = sections["shapes"]
    need(s_len == count * ndim * 4, "shapes section length")
    t_off, t_len, _ = sections["table"]
    need(t_len == count * ENTRY, "table section length")

    plain = zstandard.ZstdDecompressor()
    with_dict = (
        zstandard.ZstdDecompressor(dict_data=zstandard.ZstdCompressionDict(dictionary))
        if dictionary
        else None
    )
    out = ParsedStore(major, minor, align, writer, schema, dictionary)
    prev_end = BLOCK
    for i in range(count):
        e = t_off + ENTRY * i
        offset, stored, logical, checksum, tag = struct.unpack_from("<QIIQB", buf, e)
        need(buf[e + 25 : e + 32] == b"\0" * 7, f"record {i}: entry reserved bytes")
        need(offset >= BLOCK and offset + stored <= data_end, f"record {i}: offset")
        need(offset % align == 0, f"record {i}: offset {offset} not a multiple of {align}")
        need(tag in (0, 1, 2), f"record {i}: codec tag {tag}")
        # Padding between records is zero and belongs to no record.
        need(offset >= prev_end, f"record {i} overlaps the one before")
        need(buf[prev_end:offset] == b"\0" * (offset - prev_end), f"padding before {i}")
        prev_end = offset + stored
        if ndim:
            dims = struct.unpack_from(f"<{ndim}I", buf, s_off + 4 * ndim * i)
            # Empty ragged records (a 0 dim) exist from format v1.2 on.
            need(minor >= 2 or all(d >= 1 for d in dims), f"record {i}: a dim is 0 in a v1.{minor} store")
        else:
            dims = item_shape
        need(logical == int(np.prod(dims, dtype=np.uint64)) * itemsize, f"record {i}: len")
        stored_bytes = buf[offset : offset + stored]
        need(xxh3(stored_bytes) == checksum, f"record {i}: checksum")
        if tag == 0:
            need(stored == logical, f"record {i}: raw record with stored != logical")
            data = stored_bytes
        else:
            if tag == 2:
                need(with_dict is not None, f"record {i}: tag 2 without a dictionary")
            d = with_dict if tag == 2 else plain
            params = zstandard.get_frame_parameters(stored_bytes)
            need(params.content_size == logical, f"record {i}: frame content size")
            need(not params.has_checksum, f"record {i}: frame has a checksum")
            data = d.decompress(stored_bytes, max_output_size=logical)
            need(len(data) == logical, f"record {i}: decoded length")
            # A compressing writer keeps a record raw unless its frame is smaller.
            need(stored < logical, f"record {i}: compressed frame not smaller")
        out.records.append(Record(offset, stored, logical, checksum, tag, tuple(dims), data))
    need(prev_end <= data_end, "records run past the data section")
    return out


def read_file(path) -> ParsedStore:
    with open(path, "rb") as f:
        return parse(f.read())

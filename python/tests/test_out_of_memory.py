"""Allocations whose size the caller controls raise MemoryError instead of aborting
the process: index vectors, read buffers and the packing of a ragged append. Each
case runs in a child process whose address space is limited (RLIMIT_AS) to a little
more than it already uses."""

import subprocess
import sys
import textwrap

import pytest

PRELUDE = textwrap.dedent(
    r"""
    import os, resource, sys
    import numpy as np
    import zring

    tmp = sys.argv[1]

    def vm_bytes():
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024

    def limit(extra):
        # Room for `extra` more bytes of address space than is mapped now.
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, (vm_bytes() + extra, hard))

    def unlimit():
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, (hard, hard))

    path = os.path.join(tmp, "s.zr")
    with zring.DenseWriter(path, "int64", (), codec="raw") as w:
        w.append(np.arange(100, dtype=np.int64))
    store = zring.DenseStore(path)
    store[[0, 1]]  # start the worker pool before limiting
    """
)

# A selection of `count` ids of `dtype` with `room` bytes of address space to spare.
IDS = """
    idx = np.zeros({count}, {dtype})
    limit({room})
    try:
        store[idx]
        print("no error")
    except MemoryError as e:
        print("MemoryError", "record ids" in str(e))
"""

CASES = {
    # A float index array is refused before anything is allocated.
    "float_index": """
        limit(64 << 20)
        try:
            store[np.zeros(60_000_000)]
        except MemoryError:
            print("MemoryError")  # numpy could not even make the array: also fine
        except TypeError:
            print("refused")
    """,
    # 60M native int64 ids are read in place; their 480 MB id vector does not fit.
    "int64_index": IDS.format(count=60_000_000, dtype="np.int64", room=128 << 20),
    # Big-endian ids are converted by NumPy first: its MemoryError, or ours.
    "swapped_index": IDS.format(count=60_000_000, dtype="'>i8'", room=128 << 20),
    # Narrow ids are widened by NumPy first (its MemoryError), then copied into
    # the id vector (ours): either way a MemoryError.
    "int32_index": IDS.format(count=20_000_000, dtype="np.int32", room=96 << 20),
    # Few ids, but the read buffer (ids x item bytes) is too large.
    "read_buffer": """
        big = os.path.join(tmp, "big.zr")
        with zring.DenseWriter(big, "uint8", (1 << 20,), codec="raw") as w:
            w.append(np.zeros((2, 1 << 20), np.uint8))
        bs = zring.DenseStore(big)
        bs[[0]]
        limit(256 << 20)
        try:
            bs[np.zeros(1024, np.int64)]  # 1 GiB
            print("no error")
        except MemoryError:
            print("MemoryError")
    """,
    # A ragged append of a list packs one slice at a time, so a batch as large as
    # the remaining room still appends; the limit then stops a larger one cleanly.
    "ragged_append": """
        records = [np.zeros(8 << 20, np.uint8) for _ in range(16)]  # 128 MiB
        w = zring.RaggedWriter(os.path.join(tmp, "r.zr"), "uint8", 1, codec="raw")
        limit(96 << 20)
        w.append(records)
        unlimit()
        w.close()
        r = zring.RaggedStore(os.path.join(tmp, "r.zr"))
        print("appended", len(r), int(r[15].sum()))
    """,
    # A record too large for the memory left (1 GiB of zeros, a few KiB compressed):
    # the error names the record and the store or dataset field, and the records
    # beside it still read.
    "large_record": """
        big = [np.ones(8, np.uint8), np.zeros(1 << 30, np.uint8), np.ones(8, np.uint8)]
        rpath = os.path.join(tmp, "big.zr")
        with zring.RaggedWriter(rpath, "uint8", 1, codec="zstd") as w:
            w.append(big)
        rs = zring.RaggedStore(rpath)
        ds = zring.write_dataset(os.path.join(tmp, "ds"), {"tok": big}, codec="zstd")
        del big
        rs[[0]], ds[[0]]
        limit(256 << 20)
        names = {
            "store one": (lambda: rs[1], f"for record 1 of {rpath}"),
            "store many": (lambda: rs[[0, 1]], f"for 2 records of {rpath} (the largest, record 1, has 1073741824 bytes)"),
            "dataset one": (lambda: ds[1], 'for record 1 of field "tok" of dataset'),
            "dataset many": (lambda: ds[[2, 1]], "(the largest, record 1, has 1073741824 bytes)"),
        }
        named = []
        for case, (read, expected) in names.items():
            try:
                read()
                named.append(case + ": no error")
            except MemoryError as e:
                if expected not in str(e):
                    named.append(case + ": " + str(e))
        rest = (int(rs[2].sum()), int(ds[2]["tok"].sum()))
        print("named" if not named and rest == (8, 8) else (named, rest))
    """,
}

EXPECTED = {
    "float_index": {"refused", "MemoryError"},
    "int64_index": {"MemoryError True"},
    "swapped_index": {"MemoryError True", "MemoryError False"},
    "int32_index": {"MemoryError True", "MemoryError False"},
    "read_buffer": {"MemoryError"},
    "ragged_append": {"appended 16 0"},
    "large_record": {"named"},
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_large_user_sized_allocations_raise_memory_error(tmp_path, case):
    script = PRELUDE + textwrap.dedent(CASES[case]) + "\nprint('alive')\n"
    proc = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"child died ({proc.returncode}): {proc.stderr[-2000:]}"
    lines = proc.stdout.split("\n")
    assert lines[0] in EXPECTED[case], proc.stdout
    assert "alive" in lines

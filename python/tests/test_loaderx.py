"""zring.loaderx: loaderx 2.8 programs with the import changed.

The examples follow loaderx 2.8's documented usage (create -> append -> close, open
-> bind -> index, Sampler + Loader, dictionaries, the Hugging Face converter); the
sampler streams are checked against draws recorded from loaderx 2.8.19 itself, a
scalar implementation written here from the published algorithm description (plain
Python integers, no NumPy) and values derived by hand.
"""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest

import zring
import zring.loaderx as loaderx
from zring.loaderx import Allocator, Loader, RaggedBatch, ZrecordError, dtypes, train_dict
from zring.loaderx.sampler import CYCLIC, IID, SEQUENTIAL, Sampler
from zring.loaderx.zrecord import Dense, Ragged

M64 = (1 << 64) - 1

# -- an independent scalar model of loaderx 2.8's sampler ---------------------------


def fmix(z: int) -> int:
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def mix(seed: int, value: int, rnd: int) -> int:
    return fmix(seed ^ ((value * 0x9E3779B97F4A7C15) & M64) ^ ((rnd * 0xD1B54A32D192ED03) & M64))


def ref_sequential(length, batch, step):
    return [(step * batch + i) % length for i in range(batch)]


def ref_iid(length, batch, seed, step):
    threshold, out = ((1 << 64) - length) % length, []
    for i in range(batch):
        c, r = step * batch + i, 0  # 128 bits: the high half keys the mix
        base = mix(seed, c >> 64, 0)
        while True:
            prod = mix(base, c & M64, r) * length
            if prod & M64 >= threshold:
                out.append(prod >> 64)
                break
            r += 1
    return out


def half_bits(length):
    bits = (length - 1).bit_length()
    return (bits + 1) // 2


def ref_permute(key, length, x):
    if length <= 1:
        return 0
    h = half_bits(length)
    mask = (1 << h) - 1
    while True:
        left, right = x >> h, x & mask
        for r in range(4):
            left, right = right, left ^ (mix(key, right, r) & mask)
        x = (left << h) | right
        if x < length:
            return x


def ref_cyclic(length, batch, seed, step):
    usable = (length // batch) * batch if length >= batch else length
    per_cycle = max(usable // batch, 1)
    cycle, cursor = step // per_cycle, (step % per_cycle) * batch
    count = min(batch, usable - cursor)
    key = mix(seed, cycle, 0)
    return [ref_permute(key, length, cursor + i) for i in range(count)]


REF = {SEQUENTIAL: lambda n, b, s, t: ref_sequential(n, b, t), IID: ref_iid, CYCLIC: ref_cyclic}

# Draws of loaderx 2.8.19's own Sampler (its compiled fills), recorded once as
# ``(mode, length, batch_size, seed, step, indices)``: the oracle that the streams
# are loaderx's and not only this file's reading of the algorithm. They cover
# IID rejection, IID counters past 2^64 (step * batch_size + i >= 2^64), short
# CYCLIC cycles and lengths and steps near 2^64.
LOADERX_2_8_19 = [
    (0, 10, 4, 42, 2, [8, 9, 0, 1]),
    (0, 3, 5, 0, 0, [0, 1, 2, 0, 1]),
    (0, 18446744073709551615, 3, 1, 18446744073709551615, [0, 1, 2]),
    (0, 1000, 7, 9, 9223372036854775813, [691, 692, 693, 694, 695, 696, 697]),
    (1, 10, 4, 42, 0, [5, 0, 5, 4]),
    (1, 10, 4, 42, 4611686018427387904, [6, 8, 0, 7]),
    (1, 10, 3, 42, 6148914691236517205, [7, 6, 8]),
    (1, 16, 4, 0, 0, [0, 14, 6, 0]),
    (1, 1099511627779, 4, 123, 1000003, [806408743520, 402596325174, 501511011558, 151053485835]),
    (1, 9223372036854775809, 4, 7, 5, [3613868457525576341, 2384445835154205198, 6470530483377404422, 4088364962687042628]),
    (1, 18446744073709551615, 3, 18446744073709551615, 18446744073709551615, [6351769136901897591, 4119719058496281633, 5682326987462169746]),
    (1, 1000, 5, 9, 9223372036854775813, [596, 444, 757, 498, 561]),
    (2, 10, 4, 42, 0, [4, 9, 2, 3]),
    (2, 10, 4, 42, 3, [1, 0, 5, 2]),
    (2, 3, 8, 0, 1, [2, 0, 1]),
    (2, 1000, 6, 9, 9223372036854775813, [93, 789, 754, 975, 891, 755]),
    (2, 1099511627779, 4, 123, 18446744073709551615, [462986809090, 665739895725, 592465006717, 330236653111]),
    (2, 18446744073709551615, 3, 5, 12345, [1080067277046917475, 1037723188880435459, 14626040586242682499]),
]

# -- sampler -------------------------------------------------------------------------


def test_mix_is_the_splitmix64_finalizer():
    # splitmix64 seeded with 0 outputs fmix(k * golden) for k = 1, 2, 3: its
    # published first outputs.
    assert [mix(0, k, 0) for k in (1, 2, 3)] == [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F]


def test_iid_hand_derived_values():
    # length 16 is a power of two: no rejection; base = mix(0, 0, 0) = fmix(0) = 0, so
    # element i is high64(mix(0, i, 0) * 16) = the top nibble of splitmix64 output i.
    assert Sampler(16, 4, IID, seed=0).next().tolist() == [0, 0xE, 0x6, 0x0]
    # length 10: 2^64 mod 10 = 6, so x = mix(0, 0, 0) = 0 (low64 = 0 < 6) is rejected
    # and element 0 takes round 1.
    x = mix(0, 0, 1)
    assert Sampler(10, 1, IID, seed=0).next().tolist() == [(x * 10) >> 64]


def test_sequential_wraps_like_loaderx_docs():
    s = Sampler(10, 4, SEQUENTIAL)
    assert [s.next().tolist() for _ in range(3)] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 1]]
    # length < batch wraps inside a batch
    assert Sampler(3, 5, SEQUENTIAL).next().tolist() == [0, 1, 2, 0, 1]


@pytest.mark.parametrize("mode", [SEQUENTIAL, IID, CYCLIC])
def test_streams_match_the_algorithm(mode):
    rng = np.random.default_rng(5)
    cases = [(10, 4, 42), (3, 8, 0), (1, 1, 7), (2**40 + 3, 16, 123), (2**64 - 1, 5, 2**64 - 1), (1000, 1000, 9)]
    cases += [(int(rng.integers(1, 10_000)), int(rng.integers(1, 300)), int(rng.integers(0, 2**63))) for _ in range(20)]
    for length, batch, seed in cases:
        s = Sampler(length, batch_size=batch, mode=mode, seed=seed)
        for step in (0, 1, 2, 7, 1_000_003, 2**63 + 5, 2**64 - 1):
            s.seek(step)
            assert s.next().tolist() == REF[mode](length, batch, seed, step), (length, batch, seed, step)


@pytest.mark.parametrize("mode,length,batch,seed,step,expected", LOADERX_2_8_19)
def test_streams_match_recorded_loaderx_draws(mode, length, batch, seed, step, expected):
    s = Sampler(length, batch_size=batch, mode=mode, seed=seed)
    s.seek(step)
    assert s.next().tolist() == expected
    assert REF[mode](length, batch, seed, step) == expected


def test_feistel_half_width():
    assert half_bits(10) == 2 and half_bits(2**62) == 31 and half_bits(2**62 + 1) == 32 and half_bits(2**64 - 1) == 32


@pytest.mark.parametrize("length", [1, 2, 3, 7, 10, 16, 17, 1000])
def test_cyclic_is_a_permutation_per_cycle(length):
    for seed in (0, 1, 99):
        s = Sampler(length, length, CYCLIC, seed=seed)
        a, b = s.next().copy(), s.next().copy()
        assert sorted(a.tolist()) == list(range(length)) == sorted(b.tolist())


def test_cyclic_drops_the_remainder_and_rotates_it():
    s = Sampler(10, 4, CYCLIC, seed=3)
    seen = set()
    for cycle in range(50):
        got = [s.next().copy() for _ in range(2)]  # floor(10 / 4) = 2 full batches
        assert all(len(g) == 4 for g in got)
        flat = np.concatenate(got).tolist()
        assert len(set(flat)) == 8  # no repeat within a cycle; 10 mod 4 = 2 dropped
        seen |= set(flat)
    assert seen == set(range(10))  # dropped records rotate
    # exact cover when the batch divides the length
    s = Sampler(12, 4, CYCLIC, seed=1)
    for _ in range(2):
        assert sorted(np.concatenate([s.next().copy() for _ in range(3)]).tolist()) == list(range(12))


def test_cyclic_short_cycles():
    s = Sampler(3, 8, CYCLIC)
    out = s.next()
    assert out.shape == (3,) and sorted(out.tolist()) == [0, 1, 2]
    # the last step of a huge store: cycle and cursor arithmetic at the u64 edge
    s = Sampler(2**64 - 1, 3, CYCLIC, seed=2**64 - 1)
    s.seek(2**64 - 1)
    assert s.next().tolist() == ref_cyclic(2**64 - 1, 3, 2**64 - 1, 2**64 - 1)


def test_next_reuses_one_buffer_and_seek_replays():
    s = Sampler(100, 8, IID, seed=4)
    first = s.next()
    kept = first.copy()
    second = s.next()
    assert second is first and first.dtype == np.uint64  # one borrowed buffer
    assert not np.array_equal(second, kept)
    for mode in (SEQUENTIAL, IID, CYCLIC):
        a = Sampler(37, 5, mode, seed=11)
        replay = [a.next().copy() for _ in range(8)][7]
        b = Sampler(37, 5, mode, seed=11)
        b.seek(7)
        assert np.array_equal(b.next(), replay)
        assert b.step == 8


def test_sampler_argument_validation():
    for bad in [(0, 1, IID), (1, 0, IID), (-1, 1, IID), (5, 1, 3)]:
        with pytest.raises(ValueError):
            Sampler(*bad)
    with pytest.raises(ValueError):
        Sampler(5, 1, IID, seed=-1)
    with pytest.raises(TypeError):
        Sampler(5.0, 1, IID)
    s = Sampler(5, 1, IID)
    for bad in (-1, 2**64):
        with pytest.raises(ValueError):
            s.seek(bad)
    s.seek(2**64 - 1)
    s.next()
    with pytest.raises(OverflowError):
        s.next()


def test_zring_sampler_differs_but_loaderx_sampler_is_what_resumes():
    # The reason zring.loaderx carries its own sampler: same seed, other stream.
    ours = Sampler(1000, 16, IID, seed=42).next().tolist()
    native = zring.Sampler(1000, 16, zring.Mode.IID, seed=42).next().tolist()
    assert ours == ref_iid(1000, 16, 42, 0)
    assert ours != native


# -- stores, views, indexing ---------------------------------------------------------


@pytest.fixture
def cpu():
    return Allocator("cpu")


def make_dense(tmp_path, data, name="dense", codec="raw", **kw):
    with Dense.create(tmp_path / name, data.dtype, data.shape[1:], codec=codec, **kw) as w:
        w.append(data)
    return Dense.open(tmp_path / name)


def records(rng, n=12, dtype=np.int16):
    return [rng.integers(-100, 100, size=(int(rng.integers(1, 4)), int(rng.integers(1, 5)))).astype(dtype) for _ in range(n)]


def make_ragged(tmp_path, recs, name="ragged", codec="raw", **kw):
    with Ragged.create(tmp_path / name, recs[0].dtype, recs[0].ndim, codec=codec, **kw) as w:
        w.append(RaggedBatch.from_records(recs))
    return Ragged.open(tmp_path / name)


def test_documented_dense_round_trip(tmp_path, cpu):
    # Write in several batches, publish on close, open, bind, read.
    images = np.arange(20 * 2 * 3, dtype=np.uint8).reshape(20, 2, 3)
    with Dense.create(tmp_path / "images", "uint8", (2, 3), codec="zstd") as w:
        w.append(images[:7])
        w.append(images[7:])
        assert len(w) == 20
    store = Dense.open(tmp_path / "images")
    assert (len(store), store.dtype, store.item_shape, store.codec, store.data_shards) == (
        20, np.dtype("uint8"), (2, 3), "zstd", 4,
    )
    view = store.bind(cpu)
    assert np.array_equal(view[3], images[3])  # int unwraps the batch axis
    assert np.array_equal(view[0, 5, 2], images[[0, 5, 2]])  # a tuple selects records
    assert np.array_equal(view[[0, 5, 2]], images[[0, 5, 2]])
    assert np.array_equal(view[2:9:3], images[2:9:3])
    assert np.array_equal(view[np.array([[1, 2], [3, 4]])], images[[1, 2, 3, 4]])  # flattened
    assert np.array_equal(view[np.arange(20) % 2 == 0], images[::2])  # mask
    assert np.array_equal(view.__getitems__(np.array([4, 4], np.uint64)), images[[4, 4]])
    assert np.array_equal(np.stack(list(view)), images)
    assert view[[]].shape == (0, 2, 3)
    assert view.size_class is not None


def test_scalar_label_store(tmp_path, cpu):
    labels = np.arange(10, dtype=np.int64)
    view = make_dense(tmp_path, labels).bind(cpu)
    assert view[4] == 4 and view[4].shape == ()
    assert np.array_equal(view[(1, 2)], [1, 2])


def test_scalar_record_is_a_0d_array_that_hands_over_by_dlpack(tmp_path, cpu):
    labels = np.arange(10, dtype=np.int64)
    view = make_dense(tmp_path, labels).bind(cpu)
    rec = view[4]
    assert type(rec) is np.ndarray and rec.shape == () and rec.dtype == np.int64
    assert np.from_dlpack(rec) == 4 and np.from_dlpack(rec).shape == ()
    torch = pytest.importorskip("torch")
    t = torch.from_dlpack(rec)
    assert t.shape == () and t.dtype == torch.int64 and int(t) == 4
    assert type(view[np.int64(7)]) is np.ndarray and view[np.int64(7)] == 7


def test_refused_indices(tmp_path, cpu):
    view = make_dense(tmp_path, np.zeros((5, 2), np.float32)).bind(cpu)
    for key in (-1, [0, -1], np.array([-2]), 5, [5]):
        with pytest.raises(IndexError):
            view[key]
    with pytest.raises(IndexError):
        view[-3:]
    for key in (True, np.bool_(False), [0.5], np.array([1.0])):
        with pytest.raises(TypeError):
            view[key]
    with pytest.raises(IndexError):
        view[np.array([True, False])]  # a mask must cover every record


def test_ragged_reads(tmp_path, cpu, rng):
    recs = records(rng)
    store = make_ragged(tmp_path, recs, codec="zstd")
    assert store.ndim == 2 and store.dtype == np.int16
    view = store.bind(cpu)
    one = view[3]
    assert isinstance(one, RaggedBatch) and len(one) == 1  # one-record batch
    assert np.array_equal(one.to_tensors()[0], recs[3])
    batch = view[1, 4, 4]
    assert batch.cu_seqlens.dtype == np.int32 and batch.shapes.dtype == np.uint32
    assert batch.shapes.shape == (3, 2) and batch.cu_seqlens[0] == 0
    for got, want in zip(batch.to_tensors(), [recs[1], recs[4], recs[4]]):
        assert np.array_equal(got, want)
    deep = view[np.array([[0, 1], [2, 3]])]  # index arrays are flattened
    assert len(deep) == 4 and np.array_equal(deep.to_tensors()[2], recs[2])
    empty = view[[]]
    assert empty.cu_seqlens.tolist() == [0] and len(empty) == 0
    # the fields are DLPack tensors (zero-copy into any framework)
    for field in (batch.values, batch.cu_seqlens, batch.shapes):
        assert hasattr(field, "__dlpack__") and np.array_equal(np.from_dlpack(field), field)
    assert [len(b) for b in view] == [1] * len(recs)


def test_ragged_batch_validation():
    good = RaggedBatch(np.arange(5, dtype=np.float32), [0, 2, 5], [[2], [3]])
    assert good.cu_seqlens.dtype == np.int32 and good.shapes.dtype == np.uint32
    with pytest.raises(ValueError, match="strictly increasing"):
        RaggedBatch(np.arange(2), [0, 2, 2], [[2], [0]])
    with pytest.raises(ValueError, match="span all values"):
        RaggedBatch(np.arange(5), [0, 2, 4], [[2], [2]])
    with pytest.raises(ValueError, match="do not match"):
        RaggedBatch(np.arange(5), [0, 2, 5], [[2], [4]])


def test_store_must_be_bound_and_capabilities_are_split(tmp_path, cpu):
    store = make_dense(tmp_path, np.zeros((3, 2), np.int32))
    with pytest.raises(TypeError, match="bind"):
        store[0]
    with pytest.raises(RuntimeError):
        store.append(np.zeros((1, 2), np.int32))
    w = Dense.create(tmp_path / "w", "int32", (2,), codec="raw")
    with pytest.raises(RuntimeError):
        w[0]
    with pytest.raises(RuntimeError):
        w.bind(cpu)
    w.close()
    w.close()  # idempotent
    with pytest.raises(TypeError):
        Dense()
    with pytest.raises(TypeError):
        Ragged()


def test_closed_stores_raise_runtime_error(tmp_path, cpu):
    store = make_dense(tmp_path, np.zeros((3, 2), np.int32))
    view = store.bind(cpu)
    store.close()
    store.close()
    for use in (lambda: len(store), lambda: view[0], lambda: store.bind(cpu), lambda: store.dtype):
        with pytest.raises(RuntimeError, match="closed"):
            use()
    w = Dense.create(tmp_path / "w", "int32", (2,), codec="raw")
    w.close()
    with pytest.raises(RuntimeError, match="closed"):
        w.append(np.zeros((1, 2), np.int32))


def test_writer_options(tmp_path, rng):
    data = rng.integers(0, 4, (50, 16)).astype(np.uint8)
    store = make_dense(tmp_path, data, codec="raw", data_shards=3)
    assert store.data_shards == 3 and store.codec == "raw"
    for bad in (0, 256, -1):
        with pytest.raises(ValueError):
            Dense.create(tmp_path / "x", "uint8", (16,), codec="raw", data_shards=bad)
    for bad in (True, 1.5, "2"):
        with pytest.raises(TypeError):
            Dense.create(tmp_path / "x", "uint8", (16,), codec="raw", data_shards=bad)
    assert not (tmp_path / "x").exists()  # invalid arguments leave nothing behind
    with pytest.raises(TypeError):
        Dense.create(tmp_path / "x", "uint8", (16,))  # codec is required
    with pytest.raises(TypeError):
        Dense.create(tmp_path / "x", "uint8", (16,), "raw")  # and keyword-only
    with pytest.raises(ValueError):
        Dense.create(tmp_path / "x", "uint8", (16,), codec="lz4")
    with pytest.raises(ValueError):
        Dense.create(tmp_path / "x", "uint8", (16,), codec="zstd_dict")  # needs a dictionary
    with pytest.raises(ValueError):
        Dense.create(tmp_path / "x", "uint8", (16,), codec="raw", dict_bytes=b"abc")
    # a store cannot be created over another one
    with pytest.raises(ZrecordError) as e:
        Dense.create(tmp_path / "dense", "uint8", (16,), codec="raw")
    assert e.value.code == -12 and isinstance(e.value, RuntimeError)
    # but an empty directory is fine
    os.mkdir(tmp_path / "empty")
    make_dense(tmp_path, data, name="empty")


def test_zstd_dict_and_train_dict(tmp_path, cpu, rng):
    data = np.tile(rng.integers(0, 4, (1, 256)).astype(np.uint8), (400, 1))
    data[:, :8] = rng.integers(0, 255, (400, 8))
    source = make_dense(tmp_path, data, name="source").bind(cpu)
    dictionary = train_dict(source, path=tmp_path / "dict.zd")
    assert 0 < len(dictionary) <= 32 << 10
    assert (tmp_path / "dict.zd").read_bytes() == dictionary
    with pytest.raises(TypeError):
        train_dict(source, 1024)  # no positional configuration
    store = make_dense(tmp_path, data, name="dz", codec="zstd_dict", dict_bytes=dictionary)
    assert store.codec == "zstd_dict"
    assert np.array_equal(store.bind(cpu)[[3, 399]], data[[3, 399]])


def test_failed_build_is_discarded_not_published(tmp_path):
    # loaderx publishes the rows appended before the exception; zring keeps nothing.
    with pytest.raises(KeyError):
        with Dense.create(tmp_path / "partial", "int32", (2,), codec="raw") as w:
            w.append(np.zeros((4, 2), np.int32))
            raise KeyError("boom")
    assert not (tmp_path / "partial").exists()
    with pytest.raises(FileNotFoundError):
        Dense.open(tmp_path / "partial")


def test_corrupt_store_is_a_zrecord_error(tmp_path):
    make_dense(tmp_path, np.zeros((3, 2), np.int32)).close()
    path = tmp_path / "dense"
    raw = bytearray(path.read_bytes())
    raw[-8] ^= 0xFF  # the footer checksum
    path.write_bytes(bytes(raw))
    with pytest.raises(ZrecordError) as e:
        Dense.open(path)
    assert e.value.code == -8 and "invalid or unsupported zrecord store format" in str(e.value)


def test_damaged_record_is_code_7(tmp_path, cpu):
    data = np.tile(np.arange(256, dtype=np.uint8), (8, 1))
    make_dense(tmp_path, data, name="z", codec="zstd").close()
    path = tmp_path / "z"
    raw = bytearray(path.read_bytes())
    raw[4096 + 4] ^= 0xFF  # inside record 0's payload, which starts at the first 4 KiB block
    path.write_bytes(bytes(raw))
    view = Dense.open(path).bind(cpu)  # the metadata is intact: opening succeeds
    assert np.array_equal(view[[7]], data[[7]])
    with pytest.raises(ZrecordError) as e:
        view[[0]]
    assert e.value.code == -7 and str(e.value).startswith("stored record failed to decode")


def test_failed_dictionary_training_is_code_9():
    with pytest.raises(ZrecordError) as e:
        train_dict([np.array([1], np.uint8), np.array([2], np.uint8)])
    assert e.value.code == -9 and isinstance(e.value, RuntimeError)


def test_io_failure_is_code_2(tmp_path):
    # A directory where a store should be cannot be read as one: an I/O failure
    # (loaderx's -2), not a missing store.
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "inside").write_bytes(b"")
    with pytest.raises(ZrecordError) as e:
        Dense.open(tmp_path / "dir")
    assert e.value.code == -2


def test_an_empty_directory_is_replaced_only_when_the_store_is_published(tmp_path, cpu):
    empty = tmp_path / "empty"
    empty.mkdir()
    w = Dense.create(empty, "int32", (), codec="raw")
    w.append(np.arange(3, dtype=np.int32))
    assert empty.is_dir()  # still the user's directory while the store is written
    w.abort()
    assert empty.is_dir() and not os.listdir(empty)  # an abandoned store leaves it as it was
    with pytest.raises(KeyError):
        with Dense.create(empty, "int32", (), codec="raw") as w:
            raise KeyError("boom")
    assert empty.is_dir()
    with Dense.create(empty, "int32", (), codec="raw") as w:
        w.append(np.arange(3, dtype=np.int32))
    assert empty.is_file()
    assert Dense.open(empty).bind(cpu)[[0, 2]].tolist() == [0, 2]
    # a directory that is no longer empty at publish time is not removed
    other = tmp_path / "other"
    other.mkdir()
    w = Dense.create(other, "int32", (), codec="raw")
    (other / "late").write_bytes(b"x")
    with pytest.raises(ZrecordError) as e:
        w.close()
    assert e.value.code == -12 and (other / "late").read_bytes() == b"x"


def test_dtypes_namespace_and_float8(tmp_path, cpu):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    assert len(dtypes.CATALOG) == 20
    for name in ("float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu", "bfloat16", "float8_e4m3fn"):
        dt = getattr(dtypes, name)
        assert dt == np.dtype(getattr(ml_dtypes, name))
        data = np.arange(24, dtype=np.uint8).reshape(6, 4).view(dt)
        store = make_dense(tmp_path, data, name=name, codec="zstd")
        assert store.dtype == dt
        assert store.bind(cpu)[[5, 0]].tobytes() == data[[5, 0]].tobytes()
    assert dtypes.float32 == np.dtype(np.float32)
    assert dtypes.canonical("<f4") == "float32"
    with pytest.raises(ValueError):
        dtypes.canonical(">f4")
    with pytest.raises(ValueError):
        Dense.create(tmp_path / "u", "U8", (1,), codec="raw")


def test_main_zring_api_has_the_new_float8_dtypes(tmp_path):
    pytest.importorskip("ml_dtypes")
    for name in ("float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu"):
        with zring.DenseWriter(tmp_path / f"{name}.zr", name, (3,), codec="raw") as w:
            w.append(np.arange(6, dtype=np.uint8).reshape(2, 3).view(dtypes.resolve(name)))
        store = zring.DenseStore(tmp_path / f"{name}.zr")
        assert store.dtype.name == name and store.schema["dtype"] == name
        assert store[1].view(np.uint8).tolist() == [3, 4, 5]


def test_allocator(cpu):
    assert cpu.size_class(100) == 128 and cpu.size_class(0) == 1
    assert Allocator("cpu", pool_size=1 << 20).pool_size == 1 << 20
    with pytest.raises(ValueError):
        Allocator("amdgpu")
    with pytest.raises(ValueError):
        Allocator("tpu")


# -- loader --------------------------------------------------------------------------


def test_documented_loader(tmp_path, cpu, rng):
    n = 64
    images = rng.integers(0, 255, (n, 3, 4)).astype(np.uint8)
    labels = np.arange(n, dtype=np.int64)
    recs = [np.full(int(k % 5) + 1, k, np.int32) for k in range(n)]
    img = make_dense(tmp_path, images, name="img", codec="zstd").bind(cpu)
    lbl = make_dense(tmp_path, labels, name="lbl").bind(cpu)
    tok = make_ragged(tmp_path, recs, name="tok").bind(cpu)
    sampler = Sampler(n, batch_size=8, mode=IID, seed=42)
    expected = Sampler(n, batch_size=8, mode=IID, seed=42)
    with Loader({"image": [img], "label": [lbl], "tokens": [tok]}, sampler) as loader:
        assert len(loader._threads) == 4  # loaderx's default: workers=4
        for step, (shard,) in zip(range(20), loader):
            idx = expected.next()
            assert np.array_equal(shard["label"], idx)  # the same indices, in order
            assert np.array_equal(shard["image"], images[idx])
            assert [t[0] for t in shard["tokens"].to_tensors()] == idx.tolist()
        with pytest.raises(TypeError):
            len(loader)
    with pytest.raises(StopIteration):
        next(loader)


def test_loader_shards_and_transform(tmp_path, cpu):
    labels = np.arange(40, dtype=np.int64)
    store = make_dense(tmp_path, labels)
    views = [store.bind(cpu), store.bind(cpu)]
    calls = []

    def collate(shards):
        # loaderx 2.8.19: the transform is the collate step, given the complete
        # shard list once per step; its result is delivered unchanged.
        calls.append(len(shards))
        return {"y": np.stack([s["y"] * 10 for s in shards])}

    with Loader({"y": views}, Sampler(40, 8, SEQUENTIAL), workers=0, transform=collate) as loader:
        first = next(loader)
        assert first["y"].tolist() == [[0, 10, 20, 30], [40, 50, 60, 70]]
        assert calls == [2]
    with Loader({"y": views}, Sampler(40, 7, SEQUENTIAL)) as loader:
        with pytest.raises(ValueError, match="equal"):
            next(loader)  # 7 indices cannot be split over 2 placements


class WeightedSampler:
    """A custom sampler: any object with next() works."""

    def __init__(self, weights, batch, seed=0):
        self.p = np.asarray(weights, float) / np.sum(weights)
        self.batch = batch
        self.rng = np.random.default_rng(seed)
        self.buf = np.empty(batch, np.int64)

    def next(self):
        self.buf[:] = self.rng.choice(len(self.p), self.batch, p=self.p)
        return self.buf  # reused, like loaderx's


def test_loader_takes_custom_samplers(tmp_path, cpu):
    labels = np.arange(10, dtype=np.int64)
    view = make_dense(tmp_path, labels).bind(cpu)
    weights = np.zeros(10)
    weights[[2, 7]] = 1
    expect = WeightedSampler(weights, 16, seed=3)
    with Loader({"y": [view]}, WeightedSampler(weights, 16, seed=3), workers=3, prefetch=2) as loader:
        for _, (shard,) in zip(range(30), loader):
            assert np.array_equal(shard["y"], expect.next())  # in draw order, buffers copied


def test_loader_errors_and_validation(tmp_path, cpu):
    store = make_dense(tmp_path, np.arange(10, dtype=np.int64))
    view = store.bind(cpu)
    s = Sampler(10, 2, IID)
    for kw in ({"workers": -1}, {"prefetch": 0}):
        with pytest.raises(ValueError):
            Loader({"y": [view]}, s, **kw)
    for kw in ({"workers": True}, {"prefetch": 1.5}):
        with pytest.raises(TypeError):
            Loader({"y": [view]}, s, **kw)
    with pytest.raises(TypeError):
        Loader({"y": [view]}, s, 4)  # options are keyword-only
    for streams in ({}, {"y": []}, {"y": [store]}, {"y": [object()]}):
        with pytest.raises(ValueError):
            Loader(streams, s)
    other = make_dense(tmp_path, np.arange(11, dtype=np.int64), name="other").bind(cpu)
    with pytest.raises(ValueError):
        Loader({"y": [view], "z": [other]}, s)

    calls = []

    def transform(d):
        calls.append(1)
        if len(calls) == 3:
            raise KeyError("bad record")
        return d

    with Loader({"y": [view]}, Sampler(10, 2, SEQUENTIAL), workers=1, transform=transform) as loader:
        next(loader), next(loader)
        with pytest.raises(KeyError, match="bad record"):
            next(loader)
        with pytest.raises(StopIteration):
            next(loader)


def test_loader_close_wakes_a_full_prefetch(tmp_path, cpu):
    view = make_dense(tmp_path, np.arange(10, dtype=np.int64)).bind(cpu)
    loader = Loader({"y": [view]}, Sampler(10, 2, IID), workers=4, prefetch=1)
    next(loader)
    closer = threading.Thread(target=loader.close)
    closer.start()
    closer.join(timeout=60)
    assert not closer.is_alive()
    assert all(not t.is_alive() for t in loader._threads)


def test_zring_loader_takes_any_sampler(tmp_path):
    with zring.DenseWriter(tmp_path / "y.zr", "int64", (), codec="raw") as w:
        w.append(np.arange(30, dtype=np.int64))
    store = zring.DenseStore(tmp_path / "y.zr")
    s = Sampler(30, 6, CYCLIC, seed=5)
    want = Sampler(30, 6, CYCLIC, seed=5)
    with zring.Loader({"y": [store]}, s, workers=2) as loader:
        assert isinstance(loader, zring.SamplerLoader)
        for _, (shard,) in zip(range(12), loader):
            assert np.array_equal(shard["y"], want.next())
        loader.seek(3)  # the sampler has seek(): exact resume
        want.seek(3)
        assert np.array_equal(next(loader)[0]["y"], want.next())
        assert loader.step == 4
    with pytest.raises(TypeError):
        zring.Loader({"y": [store]}, object())
    # a zring.Sampler still gets the Rust loader
    with zring.Loader({"y": [store]}, zring.Sampler(30, 6, "iid")) as native:
        assert isinstance(native, zring.Loader)


# -- converter -----------------------------------------------------------------------


def test_convert_from_hugging_face(tmp_path, cpu):
    datasets = pytest.importorskip("datasets")
    import pyarrow as pa
    from datasets import features as F

    ds = datasets.Dataset.from_dict(
        {
            "label": [0, 2, 1],
            "x": [0.1, 2.5, 1e300],
            "tok": [[1, 2], [3], [4, 5, 6]],
            "img": [np.full((2, 3), k, np.float32).tolist() for k in range(3)],
            "boxes": [np.arange(2 * k + 2, dtype=np.int16).reshape(-1, 2).tolist() for k in range(3)],
        },
        features=F.Features(
            {
                "label": F.ClassLabel(names=["a", "b", "c"]),
                "x": F.Value("float64"),
                "tok": F.Sequence(F.Value("int32")),
                "img": F.Array2D((2, 3), "float32"),
                "boxes": F.Array2D((None, 2), "int16"),
            }
        ),
    )
    out = tmp_path / "converted"
    loaderx.convert(ds, out, codec="zstd")
    assert sorted(os.listdir(out)) == ["boxes", "img", "label", "tok", "x"]
    assert Dense.open(out / "label").bind(cpu)[[0, 1, 2]].tolist() == [0, 2, 1]
    assert Dense.open(out / "x").bind(cpu)[[0, 1, 2]].tolist() == [0.1, 2.5, 1e300]  # float64 exact
    img = Dense.open(out / "img")
    assert img.item_shape == (2, 3) and img.bind(cpu)[2].tolist() == [[2.0] * 3] * 2
    tok = Ragged.open(out / "tok").bind(cpu)[[0, 1, 2]]
    assert tok.values.dtype == np.int32 and [t.tolist() for t in tok.to_tensors()] == [[1, 2], [3], [4, 5, 6]]
    boxes = Ragged.open(out / "boxes").bind(cpu)[[0, 2]]
    assert boxes.shapes.tolist() == [[1, 2], [3, 2]]
    assert np.array_equal(boxes.to_tensors()[1], np.arange(6, dtype=np.int16).reshape(3, 2))

    big = datasets.Dataset(pa.table({"big": pa.array([2**63, 2**64 - 1], pa.uint64())}))
    loaderx.convert(big, tmp_path / "big", codec="raw")
    assert Dense.open(tmp_path / "big" / "big").bind(cpu)[[0, 1]].tolist() == [2**63, 2**64 - 1]

    with pytest.raises(FileExistsError):
        loaderx.convert(ds, out, codec="zstd")
    with pytest.raises(TypeError):
        loaderx.convert(ds, tmp_path / "y", "zstd")  # codec is keyword-only
    with pytest.raises(TypeError):
        loaderx.convert(datasets.DatasetDict({"train": ds}), tmp_path / "y", codec="raw")
    with pytest.raises(TypeError):
        loaderx.convert(ds.to_iterable_dataset(), tmp_path / "y", codec="raw")  # as in loaderx 2.8
    assert not (tmp_path / "y").exists()

    # a binary column is refused and leaves no output, not even a temporary directory
    bad = datasets.Dataset.from_dict({"ok": [1, 2], "blob": [b"a", b"b"]})
    before = set(os.listdir(tmp_path))
    with pytest.raises(ValueError, match="blob"):
        loaderx.convert(bad, tmp_path / "bad", codec="raw")
    assert set(os.listdir(tmp_path)) == before
    # so are nulls, found while streaming
    nulls = datasets.Dataset.from_dict({"v": [1, None, 3]}, features=F.Features({"v": F.Value("int64")}))
    with pytest.raises(ValueError, match="null"):
        loaderx.convert(nulls, tmp_path / "nulls", codec="raw")
    assert set(os.listdir(tmp_path)) == before


class FailingSampler:
    def __init__(self):
        self.calls = 0

    def next(self):
        self.calls += 1
        if self.calls == 3:
            raise LookupError("sampler ran dry")
        return np.array([self.calls, self.calls], np.int64)


@pytest.mark.parametrize("workers, ordered", [(0, True), (2, True), (2, False)])
def test_sampler_errors_reach_the_consumer_at_their_step(tmp_path, workers, ordered):
    with zring.DenseWriter(tmp_path / "y.zr", "int64", (), codec="raw") as w:
        w.append(np.arange(10, dtype=np.int64))
    store = zring.DenseStore(tmp_path / "y.zr")
    with zring.Loader({"y": [store]}, FailingSampler(), workers=workers, ordered=ordered) as loader:
        got = sorted(next(loader)[0]["y"].tolist() for _ in range(2))
        assert got == [[1, 1], [2, 2]]
        with pytest.raises(LookupError, match="ran dry"):
            next(loader)
        with pytest.raises(StopIteration):
            next(loader)

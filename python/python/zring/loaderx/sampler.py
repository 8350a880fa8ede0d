"""loaderx 2.8's sampler: the same index streams, bit for bit.

A loaderx training run resumes on zring at the same step only if the sampler draws the
same indices, so this module reproduces loaderx 2.8's three counter-based streams
exactly (batch ``t`` is a pure function of ``(length, batch_size, seed, t)``):

- ``SEQUENTIAL`` (0): index ``i`` of step ``t`` is ``(t * batch_size + i) mod length``,
  computed exactly (no 64-bit wrap).
- ``IID`` (1): uniform with replacement. Element ``i`` of step ``t`` takes the
  128-bit counter ``c = t * batch_size + i``, ``base = mix(seed, high64(c), 0)``, and
  tries ``x = mix(base, low64(c), r)`` for ``r = 0, 1, ...`` until ``low64(x * length)``
  is at least ``(2^64 - length) mod length`` (Lemire's unbiased rejection); the index
  is ``high64(x * length)``.
- ``CYCLIC`` (2): without replacement, a fresh permutation per cycle. Each cycle
  yields ``floor(length / batch_size)`` full batches (the last ``length mod batch_size``
  positions of that cycle's permutation are dropped; they rotate because the
  permutation changes every cycle); when ``length < batch_size`` each step is one whole
  cycle of ``length`` indices. Element ``i`` is ``permute(mix(seed, cycle, 0), length,
  cursor + i)``: a 4-round balanced Feistel network over ``2^(2h)`` values
  (``h = ceil(bitlen(length - 1) / 2)``) with cycle-walking.

``mix(seed, value, round)`` is the splitmix64 finalizer of
``seed ^ value * 0x9E3779B97F4A7C15 ^ round * 0xD1B54A32D192ED03`` (wrapping u64).

The arithmetic runs vectorized in NumPy uint64 (which wraps mod 2^64, as the
algorithm wants). ``next()`` returns a view of one reusable buffer, as loaderx does:
copy it to keep it past the next draw.
"""

from __future__ import annotations

import enum
import operator
from collections.abc import Callable
from typing import Any, SupportsIndex

import numpy as np
import numpy.typing as npt

__all__ = ["Sampler", "Mode", "SEQUENTIAL", "IID", "CYCLIC", "fill_sequential", "fill_iid", "fill_cyclic"]

_U64_MAX = (1 << 64) - 1
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_ROUND = np.uint64(0xD1B54A32D192ED03)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_MASK32 = np.uint64(0xFFFFFFFF)


class Mode(enum.IntEnum):
    """loaderx's sampling modes (their integer values are loaderx's)."""

    SEQUENTIAL = 0
    IID = 1
    CYCLIC = 2


SEQUENTIAL, IID, CYCLIC = Mode.SEQUENTIAL, Mode.IID, Mode.CYCLIC


def _fmix(z: np.ndarray) -> np.ndarray:
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    out: np.ndarray = z ^ (z >> np.uint64(31))
    return out


def _mix(seed: int, value: np.ndarray, rnd: int) -> np.ndarray:
    """``fmix(seed ^ value * GOLDEN ^ round * ROUND)`` over an array of values."""
    salt = np.uint64(seed ^ ((rnd * int(_ROUND)) & _U64_MAX))
    return _fmix((value * _GOLDEN) ^ salt)


def _mix_scalar(seed: int, value: int, rnd: int) -> int:
    """``mix`` of one value (NumPy scalar arithmetic would warn on the wrap)."""
    return int(_mix(seed, np.array([value], dtype=np.uint64), rnd)[0])


def _mul_hi_lo(x: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The high and low 64 bits of the 128-bit products ``x * n``."""
    x_lo, x_hi = x & _MASK32, x >> np.uint64(32)
    n_lo, n_hi = np.uint64(n & 0xFFFFFFFF), np.uint64(n >> 32)
    ll = x_lo * n_lo
    lh = x_lo * n_hi
    hl = x_hi * n_lo
    hh = x_hi * n_hi
    mid = (ll >> np.uint64(32)) + (lh & _MASK32) + (hl & _MASK32)  # < 3 * 2^32: no wrap
    hi = hh + (lh >> np.uint64(32)) + (hl >> np.uint64(32)) + (mid >> np.uint64(32))
    lo = x * np.uint64(n)
    return hi, lo


def _check_u64(name: str, value: SupportsIndex, low: int) -> int:
    v = operator.index(value)
    if not low <= v <= _U64_MAX:
        raise ValueError(f"{name} must be in {low}..2**64-1, got {v}")
    return v


def fill_sequential(length: int, batch_size: int, seed: int, step: int, out: np.ndarray) -> None:
    """Writes step ``step`` of the SEQUENTIAL stream into ``out[:batch_size]``."""
    del seed  # the sequential stream does not depend on it
    base = np.uint64((step * batch_size) % length)  # exact, Python ints
    n = np.uint64(length)
    a = np.arange(batch_size, dtype=np.uint64) % n
    s = a + base  # may wrap past 2^64 when length is close to it
    wrapped = (s < a) | (s >= n)
    np.copyto(out[:batch_size], np.where(wrapped, s - n, s))


def fill_iid(length: int, batch_size: int, seed: int, step: int, out: np.ndarray) -> None:
    """Writes step ``step`` of the IID stream into ``out[:batch_size]``."""
    # The counter t * batch_size + i is 128 bits wide: its high half keys the
    # mixing (mix(seed, high, 0)), its low half is the mixed value. One step's
    # counters span at most two high halves.
    first = step * batch_size  # exact, Python ints
    low0 = np.uint64(first & _U64_MAX)
    counters = np.arange(batch_size, dtype=np.uint64) + low0  # the low halves (wrap mod 2^64)
    carried = counters < low0  # past a 2^64 boundary: the next high half
    threshold = np.uint64(((1 << 64) - length) % length)
    dst = out[:batch_size]
    for high, group in ((first >> 64, ~carried), ((first >> 64) + 1, carried)):
        base = _mix_scalar(seed, high, 0)
        todo = np.flatnonzero(group)
        rnd = 0
        while todo.size:
            x = _mix(base, counters[todo], rnd)
            hi, lo = _mul_hi_lo(x, length)
            ok = lo >= threshold
            dst[todo[ok]] = hi[ok]
            todo = todo[~ok]
            rnd += 1


def _half_bits(length: int) -> int:
    """h: the Feistel halves' width, 2h being the smallest even width covering length."""
    return ((length - 1).bit_length() + 1) // 2


def _permute(key: int, length: int, x: np.ndarray) -> np.ndarray:
    """The cycle-walking Feistel permutation of ``[0, length)`` applied to ``x``."""
    if length <= 1:
        return np.zeros_like(x)
    h = _half_bits(length)
    hb = np.uint64(h)
    mask = np.uint64((1 << h) - 1)
    n = np.uint64(length)
    x = x.copy()
    todo = np.arange(x.size)
    while todo.size:
        v = x[todo]
        left, right = v >> hb, v & mask
        for r in range(4):
            f = _mix(key, right, r) & mask
            left, right = right, left ^ f
        v = (left << hb) | right
        x[todo] = v
        todo = todo[v >= n]
    return x


def _cyclic_geometry(length: int, batch_size: int, step: int) -> tuple[int, int, int, int]:
    """``(cycle, cursor, count, usable)`` of a CYCLIC step."""
    usable = (length // batch_size) * batch_size if length >= batch_size else length
    steps_per_cycle = max(usable // batch_size, 1)
    cycle, pos = divmod(step, steps_per_cycle)
    cursor = pos * batch_size
    return cycle, cursor, min(batch_size, usable - cursor), usable


def fill_cyclic(length: int, batch_size: int, seed: int, step: int, out: np.ndarray) -> int:
    """Writes step ``step`` of the CYCLIC stream into ``out`` and returns how many
    indices it holds (``batch_size``, or ``length`` when ``length < batch_size``)."""
    cycle, cursor, count, _ = _cyclic_geometry(length, batch_size, step)
    positions = np.arange(count, dtype=np.uint64) + np.uint64(cursor)
    out[:count] = _permute(_mix_scalar(seed, cycle, 0), length, positions)
    return count


#: Up to this length a CYCLIC Sampler computes the used part of each cycle's
#: permutation once, when the cycle starts (at most 32 MiB, built 64 Ki positions at
#: a time): the per-batch cost of the NumPy Feistel walk is mostly per-call
#: overhead, which a few large vectorized passes per cycle amortize.
_WHOLE_CYCLE_MAX = 1 << 22
_CHUNK = 1 << 16


class _CycleCache:
    """The used part of one cycle's permutation, for small stores."""

    __slots__ = ("cycle", "perm")

    def __init__(self) -> None:
        self.cycle: int | None = None
        self.perm: np.ndarray = np.empty(0, dtype=np.uint64)

    def fill(self, length: int, batch_size: int, seed: int, step: int, out: np.ndarray) -> int:
        cycle, cursor, count, usable = _cyclic_geometry(length, batch_size, step)
        if cycle != self.cycle:
            key = _mix_scalar(seed, cycle, 0)
            perm = np.empty(usable, dtype=np.uint64)
            for start in range(0, usable, _CHUNK):  # bounded temporaries
                end = min(start + _CHUNK, usable)
                perm[start:end] = _permute(key, length, np.arange(start, end, dtype=np.uint64))
            self.perm, self.cycle = perm, cycle
        out[:count] = self.perm[cursor : cursor + count]
        return count


_Fill = Callable[[int, int, int, int, np.ndarray], Any]
_Mode = Mode
_FILL: dict[Mode, _Fill] = {Mode.SEQUENTIAL: fill_sequential, Mode.IID: fill_iid, Mode.CYCLIC: fill_cyclic}


class Sampler:
    """``Sampler(length, batch_size, mode, seed=42)``: loaderx 2.8's endless sampler.

    ``next()`` (and iteration) returns a uint64 view of one reusable buffer (the same object every
    call, valid until the next draw) holding ``batch_size`` indices, or
    ``min(length, batch_size)`` in CYCLIC mode, and advances ``step``;
    ``seek(step)`` moves to any step in O(1). Arguments go through
    ``operator.index`` (floats are a ``TypeError``); ``length``, ``batch_size`` are in
    ``1..2**64-1``, ``seed`` and ``step`` in ``0..2**64-1``, ``mode`` one of
    ``SEQUENTIAL``, ``IID``, ``CYCLIC`` (0, 1, 2).
    """

    __slots__ = ("_length", "_batch_size", "_mode", "_seed", "_step", "_buffer", "_view", "_fill")

    SEQUENTIAL = Mode.SEQUENTIAL
    IID = Mode.IID
    CYCLIC = Mode.CYCLIC
    Mode = Mode

    def __init__(self, length: SupportsIndex, batch_size: SupportsIndex, mode: SupportsIndex, seed: SupportsIndex = 42) -> None:
        self._length = _check_u64("length", length, 1)
        self._batch_size = _check_u64("batch_size", batch_size, 1)
        self._seed = _check_u64("seed", seed, 0)
        m = operator.index(mode)
        if m not in (0, 1, 2):
            raise ValueError(f"mode must be SEQUENTIAL (0), IID (1) or CYCLIC (2), got {m}")
        self._mode = Mode(m)
        self._step = 0
        size = self._batch_size
        if self._mode is Mode.CYCLIC:
            size = min(self._length, self._batch_size)
        self._buffer = np.empty(size, dtype=np.uint64)
        self._view = self._buffer[:]
        self._fill: _Fill = _FILL[self._mode]
        if self._mode is Mode.CYCLIC and self._length <= _WHOLE_CYCLE_MAX:
            self._fill = _CycleCache().fill

    @property
    def length(self) -> int:
        """The number of records indices are drawn from."""
        return self._length

    @property
    def batch_size(self) -> int:
        """Indices per step (fewer in CYCLIC mode when ``length < batch_size``)."""
        return self._batch_size

    @property
    def mode(self) -> _Mode:
        """The sampling mode."""
        return self._mode

    @property
    def seed(self) -> int:
        """The seed of the index stream."""
        return self._seed

    @property
    def step(self) -> int:
        """The step the next ``next()`` draws."""
        return self._step

    def seek(self, step: SupportsIndex) -> None:
        """Repositions to 0-based ``step`` (``0..2**64-1``)."""
        self._step = _check_u64("step", step, 0)

    def next(self) -> npt.NDArray[np.uint64]:
        """The indices of the current step (a view of the reused buffer); advances."""
        if self._step > _U64_MAX:
            raise OverflowError("the sampler is past step 2**64-1")
        self._fill(self._length, self._batch_size, self._seed, self._step, self._buffer)
        self._step += 1
        return self._view

    def __iter__(self) -> Sampler:
        """The sampler itself: iterating draws ``next()`` forever (the sampler is endless)."""
        return self

    def __next__(self) -> npt.NDArray[np.uint64]:
        return self.next()

    def __repr__(self) -> str:
        return (
            f"Sampler(length={self._length}, batch_size={self._batch_size}, "
            f"mode={self._mode.name}, seed={self._seed}, step={self._step})"
        )

"""``zring.pack``: token sequences packed into fixed ``[rows, seq_len]`` batches."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any, Literal, Optional, Union

from .errors import InvalidArgumentError
from .._zring import _PackedLoader

PathLike = Union[str, "os.PathLike[str]"]


class Packed:
    """An endless iterator of packed batches; see :func:`pack`.

    Each batch is a dict of NumPy arrays: ``tokens`` and ``position_ids``
    ``[rows, seq_len]``, ``cu_seqlens`` (int32, the boundaries of every segment of
    the flattened batch, padding included) and ``max_seqlen``; and, per segment that
    is not padding, ``positions`` (its stream position), ``starts`` (its first token
    in that sequence) and ``rows``.
    """

    def __init__(self, args: dict[str, Any], state: Optional[dict[str, Any]] = None) -> None:
        self._args = args
        self._inner: Optional[_PackedLoader] = None
        self._start(state)

    def _start(self, state: Optional[dict[str, Any]]) -> None:
        resume = None
        if state is not None:
            resume = (
                int(state["next"]),
                int(state["offset"]),
                [int(p) for p in state["pending"]],
                int(state["truncated"]),
                int(state["batches"]),
            )
        inner = _PackedLoader(**self._args, state=resume)
        if state is not None and list(state["identity"]) != inner._state()[1]:
            inner.close()
            raise InvalidArgumentError(
                "the state belongs to a different packing "
                "(its sources, weights, seq_len, rows, strategy or seed differ)"
            )
        if self._inner is not None:
            self._inner.close()
        self._inner = inner

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return self

    def __next__(self) -> dict[str, Any]:
        if self._inner is None:
            raise StopIteration
        return self._inner.__next__()

    def state_dict(self) -> dict[str, Any]:
        """Where packing stands after the last batch delivered: positions, not tokens."""
        if self._inner is None:
            raise InvalidArgumentError("the packer is closed")
        (next_, offset, pending, truncated, batches), identity = self._inner._state()
        return {
            "next": next_,
            "offset": offset,
            "pending": pending,
            "truncated": truncated,
            "batches": batches,
            "identity": identity,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continues exactly from ``state`` (taken by :meth:`state_dict` of the same packing)."""
        self._start(state)

    @property
    def truncated(self) -> int:
        """How many sequences first fit truncated to ``seq_len`` so far."""
        return int(self.state_dict()["truncated"])

    def close(self) -> None:
        """Stops the thread that makes batches ahead."""
        if self._inner is not None:
            self._inner.close()
            self._inner = None

    def __enter__(self) -> Packed:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def pack(
    source: Union[PathLike, Sequence[PathLike]],
    seq_len: int,
    *,
    rows: int,
    strategy: Literal["concat", "first_fit"] = "concat",
    weights: Optional[Sequence[float]] = None,
    seed: int = 0,
    pad_id: int = 0,
    prefetch: int = 2,
    window: Optional[int] = None,
    state: Optional[dict[str, Any]] = None,
) -> Packed:
    """Packs the token sequences of ragged stores into ``[rows, seq_len]`` batches.

    ``source`` is one ragged, one-dimensional token store (int32, uint32, uint16 or
    int64) or a list of them, mixed in proportion to ``weights`` (equal by default;
    each store runs through its own permutations, a new one per pass). ``concat``
    splits sequences at row ends; ``first_fit`` never splits, truncates sequences
    longer than ``seq_len`` and pads. Batches are made ahead on a Rust thread,
    without the GIL; ``state_dict()`` / ``state=`` resume exactly, mid-row included.
    """
    paths = [os.fspath(source)] if isinstance(source, (str, os.PathLike)) else [
        os.fspath(s) for s in source
    ]
    if weights is None:
        weights = [1.0] * len(paths)
    args: dict[str, Any] = dict(
        paths=paths,
        weights=[float(w) for w in weights],
        seq_len=seq_len,
        rows=rows,
        strategy=strategy,
        seed=seed,
        pad_id=pad_id,
        prefetch=prefetch,
        window=window,
    )
    return Packed(args, state)

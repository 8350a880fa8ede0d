"""``zring.pack``: token sequences packed into fixed ``[rows, seq_len]`` batches."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any, Literal, Optional, Union

from .dataset import Dataset
from .errors import InvalidArgumentError
from .mixture import Mixture
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

    def __init__(self, args: dict[str, Any], state: Optional[dict[str, Any]] = None,
                 mixture: Optional[Mixture] = None, carry: Sequence[str] = ()) -> None:
        self._args = args
        self._inner: Optional[_PackedLoader] = None
        # The fields carried per segment, read from the stream positions the packer
        # reports (the packer's stream is this mixture's).
        self._mixture, self._carry = mixture, list(carry)
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
        batch = self._inner.__next__()
        if self._mixture is not None and self._carry:
            positions = batch["positions"]
            ids = self._mixture._native.indices(positions)
            batch["carry"] = self._mixture.joined.gather(ids, fields=self._carry)
        return batch

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


def _field_name(ds: Any, field: Optional[str]) -> str:
    if field is not None:
        if field not in ds.fields:
            raise KeyError(f"no field {field!r} to pack (fields: {ds.fields})")
        return field
    if len(ds.fields) == 1:
        return str(ds.fields[0])
    raise InvalidArgumentError(f"name the token field to pack with field= (fields: {ds.fields})")


def pack(
    source: Union[PathLike, Dataset, Mixture, Sequence[Union[PathLike, Dataset]]],
    seq_len: int,
    *,
    rows: int,
    field: Optional[str] = None,
    strategy: Literal["concat", "first_fit"] = "concat",
    weights: Optional[Sequence[float]] = None,
    seed: int = 0,
    pad_id: int = 0,
    carry: Optional[Sequence[str]] = None,
    prefetch: int = 2,
    window: Optional[int] = None,
    state: Optional[dict[str, Any]] = None,
    rank: int = 0,
    world_size: int = 1,
) -> Packed:
    """Packs token sequences into ``[rows, seq_len]`` batches.

    ``source`` is one ragged, one-dimensional token store (int32, uint32, uint16 or
    int64), a :class:`zring.Dataset` (its ragged token ``field``; a dataset directory's
    path works too), or a list of either, mixed in proportion to ``weights`` (equal by
    default; each source runs through its own permutations, a new one per pass).
    A :class:`zring.Mixture` packs its own stream: the same sources, weights and seed,
    so the packed sequences are the mixture's records in order. ``concat`` splits
    sequences at row ends; ``first_fit`` never splits, truncates sequences longer
    than ``seq_len`` and pads. Batches are made ahead on a Rust thread, without the
    GIL; ``state_dict()`` / ``state=`` resume exactly, mid-row included.

    ``carry=["label", ...]`` (datasets only) adds ``batch["carry"][name]``: those
    fields of each segment's sequence (one value per entry of ``positions``).

    ``rank`` / ``world_size``: this process's share of a global batch of
    ``rows * world_size`` rows (its ``rows`` rows). Every rank plans the whole global
    batch from the sequences' lengths and reads only its rows' tokens, so the state
    is the same on every rank and resumes with another world size as long as the
    global rows stay the same (``rows * world_size``).
    """
    if world_size < 1 or not 0 <= rank < world_size:
        raise InvalidArgumentError(f"rank {rank} is not in a world of {world_size}")
    if isinstance(source, Mixture):
        if weights is not None or seed not in (0, source.seed):
            raise InvalidArgumentError("a mixture packs with its own weights and seed")
        if source._history:
            raise InvalidArgumentError("a reweighted mixture cannot be packed; pack the mixture it continues")
        mixture: Mixture | None = source
        name = _field_name(source, field)
        natives: list[Any] = [
            part.field(name) if isinstance(part, Dataset) else part[1] for part in source._parts
        ]
        weights, seed = source.weights, source.seed
    else:
        items = [source] if isinstance(source, (str, os.PathLike, Dataset)) else list(source)
        parts: list[Any] = [Dataset(os.fspath(s)) if isinstance(s, (str, os.PathLike)) and os.path.isdir(s)
                            else s for s in items]
        datasets = [p for p in parts if isinstance(p, Dataset)]
        if datasets and len(datasets) != len(parts):
            raise InvalidArgumentError("pack datasets or stores, not both")
        if datasets:
            name = _field_name(datasets[0], field)
            natives = [ds.field(name) for ds in datasets]
            mixture = Mixture(datasets, weights, seed=seed) if carry else None
        else:
            if field is not None or carry:
                raise InvalidArgumentError("field= and carry= name fields of datasets; stores hold one")
            natives = [os.fspath(p) for p in parts]
            mixture = None
        if weights is None:
            weights = [1.0] * len(natives)
    carried = list(carry or [])
    if carried and mixture is None:
        raise InvalidArgumentError("carry= needs datasets")
    for c in carried:
        if mixture is not None and c not in mixture.fields:
            raise KeyError(f"no field {c!r} to carry (fields: {mixture.fields})")
    args: dict[str, Any] = dict(
        sources=natives,
        weights=[float(w) for w in weights],
        seq_len=seq_len,
        rows=rows * world_size,
        strategy=strategy,
        seed=seed,
        pad_id=pad_id,
        prefetch=prefetch,
        window=window,
        rank=rank,
        world=world_size,
    )
    return Packed(args, state, mixture if carried else None, carried)

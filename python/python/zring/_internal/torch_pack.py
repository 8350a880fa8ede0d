"""``zring.torch.PackedIterableDataset``: :func:`zring.pack` as a torch iterable
dataset (imports torch; ``zring.torch`` re-exports it)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, Optional

import numpy as np
import torch
import torch.utils.data as _tud

from .pack import pack


def _tensors(batch: dict[str, Any], to_tensor: Callable[[Any], torch.Tensor]) -> dict[str, Any]:
    """The batch's arrays (and the carried fields' arrays) as tensors over the same
    memory, by ``zring.torch.to_tensor`` (which takes every dtype zring stores)."""
    out: dict[str, Any] = {}
    for k, v in batch.items():
        if isinstance(v, np.ndarray):
            out[k] = to_tensor(v)
        elif isinstance(v, Mapping):
            out[k] = _tensors(dict(v), to_tensor)
        else:
            out[k] = v
    return out


class PackedIterableDataset(_tud.IterableDataset):  # type: ignore[misc]
    """Packed batches of :func:`zring.pack` as tensors, endless, resumable.

    ``PackedIterableDataset(source, seq_len, *, rows, rank=None, world_size=None,
    **pack_options)``: ``rows`` rows of ``seq_len`` tokens per batch on this rank,
    of a global batch of ``rows * world_size`` rows (``rank`` / ``world_size``
    default to :func:`zring.torch.distributed_rank_and_world`). Each batch is
    ``{"tokens", "position_ids", "cu_seqlens", "positions", "starts", "rows":
    tensor, "max_seqlen": int}`` (and ``"carry"``, see :func:`zring.pack`).

    Use it with ``DataLoader(ds, batch_size=None)`` and no worker processes: the
    batches are made ahead on a Rust thread already, without the GIL, and one
    packing is one stream (worker processes would each pack it again).
    ``state_dict()`` / ``load_state_dict()`` (what torchdata's
    ``StatefulDataLoader`` calls) resume exactly after the last batch delivered,
    on any number of ranks with the same global rows.
    """

    def __init__(self, source: Any, seq_len: int, *, rows: int, rank: Optional[int] = None,
                 world_size: Optional[int] = None, **options: Any) -> None:
        if rank is None or world_size is None:
            from ..torch import distributed_rank_and_world

            r, w = distributed_rank_and_world()
            rank = r if rank is None else rank
            world_size = w if world_size is None else world_size
        self.source, self.seq_len, self.rows = source, int(seq_len), int(rows)
        self.rank, self.world_size = int(rank), int(world_size)
        self.options = options
        self._state: Optional[dict[str, Any]] = options.pop("state", None)
        # Checks the arguments now (a bad source or seq_len fails here, not in a
        # DataLoader's first step).
        pack(self.source, self.seq_len, rows=self.rows, rank=self.rank,
             world_size=self.world_size, state=self._state, **self.options).close()

    def __iter__(self) -> Iterator[dict[str, Any]]:
        info = _tud.get_worker_info()
        if info is not None and info.num_workers > 1:
            raise RuntimeError(
                "zring.torch.PackedIterableDataset packs one stream on a Rust thread; "
                "use DataLoader(..., num_workers=0)"
            )
        # zring.torch imports this module: its converter is taken when iterating.
        from ..torch import to_tensor

        with pack(self.source, self.seq_len, rows=self.rows, rank=self.rank,
                  world_size=self.world_size, state=self._state, **self.options) as packed:
            for batch in packed:
                # Taken before the yield: a state_dict() after this batch resumes
                # with the next one.
                self._state = packed.state_dict()
                yield _tensors(batch, to_tensor)

    def state_dict(self) -> dict[str, Any]:
        """Where packing stands after the last batch delivered (positions, not tokens)."""
        return {"pack": self._state}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continues from ``state`` (of the same packing; another is refused when
        iteration starts)."""
        self._state = None if state.get("pack") is None else dict(state["pack"])

#!/usr/bin/env python3
"""Draws the README's headline picture, docs/img/headline.svg: zring against the tool a
user would otherwise use, per workload, each ratio measured in one run on one machine.

The figures are copied from docs/benchmarks.md (the current figure of each workload,
with the command that reproduces it and the notes behind it); update them here when
that page changes, then run

    pip install matplotlib   # in any virtual environment; not a test dependency
    python scripts/headline_plot.py
"""

from __future__ import annotations

import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# (workload, peer, zring / peer in the same run), from docs/benchmarks.md.
FIGURES = [
    ("W1 images, random batches", "NumPy memmap take", 6.05),
    ("W2 2 KiB tokens, random batches", "NumPy memmap take", 1.98),
    ("W3 ragged tokens, random batches", "NumPy values + offsets", 1.63),
    ("W4 cold 4 KiB reads, io_uring", "fio, same queue depth", 1.00),
    ("W10 remote W1, first epoch", "MosaicML Streaming", 1.57),
    ("W10 remote W3, first epoch", "MosaicML Streaming", 11.7),
    ("W11 Parquet conversion, zstd-3", "MosaicML MDSWriter", 2.8),
    ("W12 PyTorch DataLoader, W1", "torch Dataset over NumPy memmap", 15.3),
]


def main() -> None:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = os.path.join(root, "docs", "img", "headline.svg")
    fig, ax = plt.subplots(figsize=(8, 4.2))
    labels = [f"{w}\nvs {peer}" for w, peer, _ in FIGURES][::-1]
    values = [r for _, _, r in FIGURES][::-1]
    bars = ax.barh(labels, values, color="#2a6f97")
    ax.set_xscale("log")
    ax.axvline(1.0, color="#444", linewidth=1)
    for bar, v in zip(bars, values):
        ax.text(v * 1.05, bar.get_y() + bar.get_height() / 2, f"{v:g}x", va="center", fontsize=8)
    ax.set_xlim(0.5, 40)
    ax.set_xlabel("zring / the peer, measured in the same run (log scale; above 1: zring is faster)")
    ax.tick_params(axis="y", labelsize=8)
    ax.set_title("zring against the tool you would use instead", fontsize=10)
    fig.tight_layout()
    fig.savefig(out, metadata={"Date": None})
    print(f"wrote {out}")


if __name__ == "__main__":
    main()

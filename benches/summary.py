#!/usr/bin/env python3
"""Summarises zring's benchmark run: throughputs and the same-run ratios of the
targets (docs/workloads.md), read from criterion's JSON (`<criterion>/<group>/<bench>/new/`), the bench
logs' `ZRING_META` lines and the NumPy baseline's JSON. Prints Markdown.

Throughput uses criterion's median per-iteration time (robust on a shared machine).

Usage: summary.py --criterion DIR [--npy npy-before.json ...] [--log gather.log ...]
"""

import argparse
import glob
import json
import os
import re

GIB = 1 << 30
MIB = 1 << 20
RECORD_BYTES = {"w1": 3 * 224 * 224, "w2": 2048}
BATCH = 256


def load_criterion(root):
    """{full_id: {"ns": median ns per iteration, "bytes"|"elements": per iteration}}"""
    out = {}
    for bj in glob.glob(os.path.join(root, "**", "new", "benchmark.json"), recursive=True):
        d = os.path.dirname(bj)
        with open(bj) as f:
            meta = json.load(f)
        with open(os.path.join(d, "estimates.json")) as f:
            est = json.load(f)
        entry = {"ns": est["median"]["point_estimate"], "mad_ns": est["median_abs_dev"]["point_estimate"]}
        thr = meta.get("throughput") or {}
        if "Bytes" in thr:
            entry["bytes"] = thr["Bytes"]
        if "Elements" in thr:
            entry["elements"] = thr["Elements"]
        out[meta["full_id"]] = entry
    return out


def load_meta(logs):
    """Store facts (`ZRING_META`) and other processes' cores per bench (`ZRING_LOAD`)."""
    meta, load = {}, {}
    for path in logs:
        with open(path) as f:
            for line in f:
                if line.startswith("ZRING_META "):
                    m = json.loads(line[len("ZRING_META "):])
                    meta[m["store"]] = m
                elif line.startswith("ZRING_LOAD "):
                    m = json.loads(line[len("ZRING_LOAD "):])
                    load[m["bench"]] = m["other_cores"]
    return meta, load


class Run:
    def __init__(self, crit, meta, load, npy):
        self.c, self.meta, self.load, self.npy = crit, meta, load, npy

    def others(self, ids):
        """Most cores other processes used during any of the benches `ids`."""
        seen = [self.load[i] for i in ids if i in self.load]
        return max(seen) if seen else None

    def has(self, bid):
        return bid in self.c

    def bps(self, bid):
        """Logical bytes per second (W3: from the store's mean record size)."""
        e = self.c[bid]
        if "bytes" in e:
            return e["bytes"] / (e["ns"] * 1e-9)
        per_rec = self.w3_record_bytes()
        return e["elements"] * per_rec / (e["ns"] * 1e-9)

    def rps(self, bid):
        """Records per second."""
        e = self.c[bid]
        if "elements" in e:
            return e["elements"] / (e["ns"] * 1e-9)
        w = re.search(r"_(w\d)", bid.split("/")[0])
        return self.bps(bid) / RECORD_BYTES[w.group(1)] if w and w.group(1) in RECORD_BYTES else float("nan")

    def noise(self, bid):
        e = self.c[bid]
        return e["mad_ns"] / e["ns"]

    def w3_record_bytes(self):
        m = self.meta.get("w3-raw")
        return m["logical_bytes"] / m["records"] if m else float("nan")

    def best(self, ids, key):
        ids = [i for i in ids if self.has(i)]
        return max(ids, key=key) if ids else None


def gib(x):
    return f"{x / GIB:.2f} GiB/s"


def mib(x):
    return f"{x / MIB:.0f} MiB/s"


def mrec(x):
    return f"{x / 1e6:.2f} M rec/s"


def verdict(ratio, floor):
    if ratio != ratio:  # nan
        return "n/a"
    return "met" if ratio >= floor else f"MISSED by {(1 - ratio / floor) * 100:.0f}%"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--criterion", required=True)
    ap.add_argument("--npy", nargs="*", default=[], help="NumPy runs; the best of each figure is used")
    ap.add_argument("--log", nargs="*", default=[])
    a = ap.parse_args()
    npy = {}
    for path in a.npy:
        if not os.path.exists(path):
            continue
        with open(path) as f:
            run = json.load(f)
        for k, v in run.items():
            if isinstance(v, dict) and (k not in npy or v["records_s"] > npy[k]["records_s"]):
                npy[k] = v
    meta, load = load_meta(a.log)
    r = Run(load_criterion(a.criterion), meta, load, npy)
    backends = sorted({k.split("/")[1].rsplit("_t", 1)[0] for k in r.c if k.startswith("gather_")})

    print("## Throughput (median of samples; +- = median abs. deviation; others = cores")
    print("## that other processes kept busy during the bench, of 2)\n")
    print("| benchmark | GiB/s | M records/s | +- | others |")
    print("|---|---:|---:|---:|---:|")
    for bid in sorted(r.c):
        recs = "-" if bid.startswith(("write_", "baseline_write_")) else f"{r.rps(bid) / 1e6:.3f}"
        o = r.others([bid])
        print(f"| `{bid}` | {r.bps(bid) / GIB:.3f} | {recs} | {r.noise(bid) * 100:.0f}% | "
              f"{'-' if o is None else f'{o:.2f}'} |")
    if npy:
        for k in ("w1", "w2", "w3_concat", "w3_take"):
            if k in npy:
                print(f"| `numpy/{k}` | {npy[k]['mib_s'] / 1024:.3f} | {npy[k]['records_s'] / 1e6:.3f} | - | - |")

    rows = []

    def add(what, value, base, ratio, floor):
        ids = re.findall(r"`([a-z0-9_]+/[a-z0-9_]+)`", what)
        if not ids:  # "W1 zstd gather mmap: t2 / t1" names its benches in prose
            m = re.match(r"(W\d) zstd gather (\w+): t2 / t1", what)
            if m:
                g = {"W1": "gather_w1_zstd", "W2": "gather_w2_zstd", "W3": "gather_w3_zstd_dict"}[m.group(1)]
                ids = [f"{g}/{m.group(2)}_t1", f"{g}/{m.group(2)}_t2"]
            m = re.match(r"W7 (W\d) zstd-3 write: t2 / t1", what)
            if m:
                ids = [f"write_{m.group(1).lower()}/zstd_t1", f"write_{m.group(1).lower()}/zstd_t2"]
        o = r.others(ids)
        v = verdict(ratio, floor)
        if o is not None and o >= 0.25 and not v.startswith(("met", "n/a")):
            v += " (machine shared)"
        rows.append((what, value, base, f"{ratio:.2f}x" if ratio == ratio else "n/a", f">= {floor}x", v,
                     "-" if o is None else f"{o:.2f}"))

    # 1. W1 raw gather vs 2-thread memcpy.
    m2 = "baseline_w1/memcpy_t2"
    for t in (2, 1):
        best = r.best([f"gather_w1_raw/{b}_t{t}" for b in backends], r.bps)
        if best and r.has(m2):
            add(f"W1 raw gather `{best}` / `{m2}`", gib(r.bps(best)), gib(r.bps(m2)), r.bps(best) / r.bps(m2), 0.85)
    # 2. W2 raw gather records/s: absolute and vs NumPy.
    best = r.best([f"gather_w2_raw/{b}_t{t}" for b in backends for t in (1, 2)], r.rps)
    if best:
        add(f"W2 raw gather `{best}` / 4 M rec/s", mrec(r.rps(best)), "4.00 M rec/s", r.rps(best) / 4e6, 1.0)
        if "w2" in npy:
            n = npy["w2"]["records_s"]
            add(f"W2 raw gather `{best}` / NumPy memmap take", mrec(r.rps(best)), mrec(n), r.rps(best) / n, 1.0)
            add("  (docs/workloads.md floor)", "", "", r.rps(best) / n, 1.2)
    best1 = r.best([f"gather_w1_raw/{b}_t{t}" for b in backends for t in (1, 2)], r.bps)
    if best1 and "w1" in npy:
        n = npy["w1"]["mib_s"] * MIB
        add(f"W1 raw gather `{best1}` / NumPy memmap take", gib(r.bps(best1)), gib(n), r.bps(best1) / n, 1.0)
    best3 = r.best([f"gather_w3_raw/{b}_t{t}" for b in backends for t in (1, 2)], r.rps)
    if best3 and npy:
        n = max(npy.get("w3_concat", {}).get("records_s", 0), npy.get("w3_take", {}).get("records_s", 0))
        add(f"W3 raw gather `{best3}` / best NumPy values+offsets", mrec(r.rps(best3)), mrec(n), r.rps(best3) / n, 1.2)
    # Engine overhead over the plain loops on the same file, one thread.
    for w in ("w1", "w2"):
        pairs = ((f"gather_{w}_raw/mmap_t1", f"baseline_{w}/mmap_copy_t1"),
                 (f"gather_{w}_raw/pread_t1", f"baseline_{w}/pread_loop_t1"))
        for g, base in pairs:
            if r.has(g) and r.has(base):
                add(f"{w.upper()} `{g}` / `{base}`", gib(r.bps(g)), gib(r.bps(base)), r.bps(g) / r.bps(base), 0.9)
    # 3. zstd gathers: 2 threads vs 1, and vs cores x single-thread decode.
    for w, grp, base in (("W1", "gather_w1_zstd", "baseline_w1/zstd_decode_t1"),
                         ("W2", "gather_w2_zstd", "baseline_w2/zstd_decode_t1"),
                         ("W3", "gather_w3_zstd_dict", "baseline_w3/zstd_dict_decode_t1")):
        for b in backends:
            t1, t2 = f"{grp}/{b}_t1", f"{grp}/{b}_t2"
            if r.has(t1) and r.has(t2):
                add(f"{w} zstd gather {b}: t2 / t1", mib(r.bps(t2)), mib(r.bps(t1)), r.bps(t2) / r.bps(t1), 1.7)
            if r.has(t2) and r.has(base):
                add(f"{w} zstd gather `{t2}` / (2 x `{base}`)", mib(r.bps(t2)), mib(2 * r.bps(base)), r.bps(t2) / (2 * r.bps(base)), 0.9)
            if r.has(t1) and r.has(base):
                add(f"{w} zstd gather `{t1}` / `{base}`", mib(r.bps(t1)), mib(r.bps(base)), r.bps(t1) / r.bps(base), 0.9)
    # 4. W7 writes.
    for w in ("w1", "w2"):
        raw, z1, z2 = f"write_{w}/raw", f"write_{w}/zstd_t1", f"write_{w}/zstd_t2"
        base_w, base_c = f"baseline_write_{w}/write_fsync_t1", f"baseline_write_{w}/zstd_compress_t1"
        if r.has(raw):
            add(f"W7 {w.upper()} raw write `{raw}` (incl. fsync) / 1.5 GiB/s", gib(r.bps(raw)), "1.50 GiB/s", r.bps(raw) / (1.5 * GIB), 1.0)
            if r.has(base_w):
                add(f"W7 {w.upper()} raw write `{raw}` / `{base_w}`", gib(r.bps(raw)), gib(r.bps(base_w)), r.bps(raw) / r.bps(base_w), 0.9)
        if r.has(z1) and r.has(z2):
            add(f"W7 {w.upper()} zstd-3 write: t2 / t1", mib(r.bps(z2)), mib(r.bps(z1)), r.bps(z2) / r.bps(z1), 1.7)
        if r.has(z2) and r.has(base_c):
            add(f"W7 {w.upper()} zstd-3 write `{z2}` / (2 x `{base_c}`)", mib(r.bps(z2)), mib(2 * r.bps(base_c)), r.bps(z2) / (2 * r.bps(base_c)), 0.9)

    print("\n## Ratios against same-run baselines\n")
    print("| figure | value | baseline | ratio | target | verdict | others |")
    print("|---|---:|---:|---:|---:|---|---:|")
    for row in rows:
        print("| " + " | ".join(row) + " |")

    if r.meta:
        print("\n## Stores\n")
        print("| store | records | logical MiB | stored MiB | ratio | raw-kept records | build s |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for k, m in sorted(r.meta.items()):
            ratio = m["logical_bytes"] / max(m["stored_bytes"], 1)
            print(f"| {k} | {m['records']} | {m['logical_bytes'] / MIB:.1f} | {m['stored_bytes'] / MIB:.1f} | "
                  f"{ratio:.2f} | {m.get('raw_records', '-')} | {m.get('build_s', '-')} |")


if __name__ == "__main__":
    main()

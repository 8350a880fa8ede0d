#!/usr/bin/env bash
# W4: O_DIRECT random record gathers vs fio on the same file, interleaved rounds.
# Usage: scripts/w4_vs_fio.sh [record_bytes] [queue_depth] [batch] [rounds]
# Needs fio (apt-get install fio) and a release build (cargo build --release -p zring-cli).
# FIO_IOMEM=shmhuge gives fio huge-page buffers like zring's (needs
# `echo 64 > /proc/sys/vm/nr_hugepages`): with 128 KiB reads on a virtio disk, fio's
# 4 KiB-page buffers cost it half its throughput (one segment per page).
# Prints each round and the median ratio zring/fio for io_uring (same queue depth,
# one thread) and for the pread fallback vs fio psync.
set -euo pipefail
cd "$(dirname "$0")/.."
bytes=${1:-4096}; qd=${2:-32}; batch=${3:-1024}; rounds=${4:-5}
dir=${W4_DIR:-/work}; store="$dir/w4-$bytes.zr"
zring=target/release/zring
count=$(( (1 << 30) / bytes ))
if [ ! -f "$store" ]; then
  python3 - "$store" "$bytes" "$count" <<'PY'
import sys, numpy as np
path, width, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
np.save(path + ".npy", (np.arange(n * width, dtype=np.uint64) * 2654435761 % 251).astype(np.uint8).reshape(n, width))
PY
  "$zring" pack "$store" --npy "$store.npy" --codec raw --align 4096 >/dev/null
  rm -f "$store.npy"
fi
zr() { "$zring" bench --store "$store" --direct --backend "$1" --qd "$qd" --threads 1 --batch "$batch" --duration 3 --json \
  | python3 -c 'import json,sys; print(json.load(sys.stdin)["result"]["records_per_s"])'; }
fio_iops() { fio --name=w4 --filename="$store" --readonly --ioengine="$1" --direct=1 --rw=randread --bs="$bytes" \
  --iodepth="$2" --iomem="${FIO_IOMEM:-malloc}" --runtime=3 --time_based --output-format=json | python3 -c 'import json,sys; print(json.load(sys.stdin)["jobs"][0]["read"]["iops"])'; }
u=(); p=()
for r in $(seq "$rounds"); do
  a=$(zr uring); b=$(fio_iops io_uring "$qd"); c=$(zr pread); d=$(fio_iops psync 1)
  u+=("$(python3 -c "print($a/$b)")"); p+=("$(python3 -c "print($c/$d)")")
  printf 'round %d: zring uring %.0f vs fio io_uring %.0f IOPS | zring pread %.0f vs fio psync %.0f IOPS\n' "$r" "$a" "$b" "$c" "$d"
done
python3 -c "
import statistics as s
u=[${u[*]/%/,}]; p=[${p[*]/%/,}]
print(f'median ratio: uring/fio-io_uring = {s.median(u):.2f}x, pread/fio-psync = {s.median(p):.2f}x  ({len(u)} rounds, {$bytes} B records, QD $qd, batch $batch)')
"

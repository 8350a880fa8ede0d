#!/usr/bin/env bash
# W9 in alternating rounds: the cold loader and fio on the same raw store, each run
# after dropping the page cache, in a fresh random order every round, so that a
# disk whose speed drifts (virtual disks do, by 2x between runs) drifts under all
# of them alike. One line per run, then each configuration's median and its ratio
# to the best fio queue depth's median (docs/benchmarks/cold-and-fio.md, "W9 in rounds").
#
#   benches/w9_rounds.sh STORE RECORD_BYTES ROUNDS CONFIG...
#
# CONFIG: fioQD (fio, io_uring, O_DIRECT, one job at queue depth QD), LA (the
# loader with its default look-ahead), WN (the loader with N fixed workers and N
# ready steps). Needs root (drop_caches), fio, and `zring` on PATH (or ZRING).
# Example: benches/w9_rounds.sh w9-16384.zr 16384 8 fio32 fio64 fio128 LA W4 W9
set -euo pipefail
[ $# -ge 4 ] || { sed -n 8,14p "$0"; exit 2; }
STORE=$1; BS=$2; ROUNDS=$3; shift 3
ZRING=${ZRING:-zring}
LOADER=(--store "$STORE" --mode loader --cold --threads 1 --qd 32 --batch 256 --duration 3)

records_per_s() { awk '/records\/s/ { gsub(",", "", $2); print int($2) }'; }

run() {
    case $1 in
    fio*) fio --name=w9 --filename="$STORE" --readonly --rw=randread --norandommap --bs="$BS" \
              --offset=4096 --size=1073741824 --ioengine=io_uring --iodepth="${1#fio}" \
              --numjobs=1 --direct=1 --runtime=3 --time_based --minimal | cut -d';' -f8 ;;
    LA) "$ZRING" bench "${LOADER[@]}" 2>&1 | records_per_s ;;
    W*) "$ZRING" bench "${LOADER[@]}" --lookahead 0 --workers "${1#W}" --prefetch "${1#W}" 2>&1 \
            | records_per_s ;;
    esac
}

for config in "$@"; do
    [[ $config =~ ^(fio[0-9]+|LA|W[0-9]+)$ ]] || { echo "unknown configuration $config" >&2; exit 2; }
done

LOG=$(mktemp)
trap 'rm -f "$LOG"' EXIT
for round in $(seq "$ROUNDS"); do
    for config in $(printf '%s\n' "$@" | shuf); do
        sync; echo 3 > /proc/sys/vm/drop_caches
        # An assignment fails with its command, so a failed run stops the script
        # instead of leaving a line without a figure.
        value=$(run "$config")
        [ -n "$value" ] || { echo "$config printed no figure" >&2; exit 1; }
        echo "$round $config $value" | tee -a "$LOG"
    done
done

echo
echo "config  median records/s  / best fio median"
awk '{ v[$2] = v[$2] " " $3 }
     END { for (c in v) print c, v[c] }' "$LOG" | while read -r config values; do
    echo "$config $(printf '%s\n' $values | sort -n | awk '{ a[NR] = $1 }
        END { print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }')"
done | sort | awk '{ m[$1] = $2; if ($1 ~ /^fio/ && $2 > best) best = $2 }
     END { for (c in m) printf "%-7s %10.0f  %.2fx\n", c, m[c], best ? m[c] / best : 0 }' | sort

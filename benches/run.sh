#!/usr/bin/env bash
# Runs zring's benchmarks and their same-run baselines, then prints the ratios the
# targets are stated in (docs/benchmarks.md explains every figure).
#
#   benches/run.sh              # everything: NumPy baseline, gather, write, summary
#   benches/run.sh gather_w2    # only criterion benches matching a filter (+ summary)
#
# Environment: CARGO_TARGET_DIR (default ./target), JOBS (cargo -j, default 2),
# ZRING_BENCH_OUT (logs and .npy data, default $CARGO_TARGET_DIR/zring-bench),
# ZRING_BENCH_{W1,W2,W3}_RECORDS, ZRING_BENCH_W7_{W1,W2}_RECORDS (sizes),
# ZRING_BENCH_BACKENDS (default pread,mmap), ZRING_BENCH_DIR (scratch stores),
# NPY_SECONDS (default 2).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
JOBS="${JOBS:-2}"
OUT="${ZRING_BENCH_OUT:-$CARGO_TARGET_DIR/zring-bench}"
CRIT="$CARGO_TARGET_DIR/criterion"
FILTER="${1:-}"
mkdir -p "$OUT"

machine() {
    echo "## Machine"
    echo
    echo "- cores: $(nproc); CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
    echo "- kernel: $(uname -r); memory: $(free -g | awk '/^Mem:/ {print $2}') GiB"
    echo "- scratch file system: $(df -T "${ZRING_BENCH_DIR:-${TMPDIR:-/tmp}}" | awk 'NR == 2 {print $2 " on " $1}')"
    echo "- load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo
}
machine | tee "$OUT/machine.md"

cargo build --release -j"$JOBS" -p zring-benches --benches --bins

# Only this run's figures: drop our groups' previous results.
rm -rf "$CRIT"/gather_* "$CRIT"/baseline_* "$CRIT"/write_*
rm -f "$OUT"/gather.log "$OUT"/write.log "$OUT"/npy-*.json

if [ -z "$FILTER" ]; then
    sizes="${ZRING_BENCH_W1_RECORDS:-}-${ZRING_BENCH_W2_RECORDS:-}-${ZRING_BENCH_W3_RECORDS:-}"
    if [ "$(cat "$OUT/npy/sizes" 2>/dev/null)" != "$sizes" ]; then
        "$CARGO_TARGET_DIR/release/zring-bench-npy" "$OUT/npy"
        echo "$sizes" > "$OUT/npy/sizes"
    fi
fi
# NumPy runs before and after the Rust benches; the summary divides by the better of
# the two, so machine noise can only make zring's ratios look worse, not better.
numpy_baseline() {
    if [ -n "$FILTER" ]; then return; fi
    if python3 -c 'import numpy' 2>/dev/null; then
        python3 benches/npy_baseline.py "$OUT/npy" --seconds "${NPY_SECONDS:-2}" --json "$OUT/npy-$1.json"
    else
        echo "numpy is not installed (pip install numpy): skipping the NumPy baseline" >&2
    fi
}
numpy_baseline before

for bench in gather write; do
    cargo bench -j"$JOBS" -p zring-benches --bench "$bench" -- ${FILTER:+"$FILTER"} 2>&1 | tee "$OUT/$bench.log"
done
numpy_baseline after

echo "- load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/machine.md"
python3 benches/summary.py --criterion "$CRIT" --npy "$OUT"/npy-*.json --log "$OUT"/gather.log "$OUT"/write.log \
    | tee "$OUT/summary.md"
echo
echo "summary: $OUT/summary.md; logs: $OUT/{gather,write}.log; criterion JSON: $CRIT"

#!/usr/bin/env bash
# Runs every test of zring: lint, the Rust workspace, and the Python package built
# as a wheel, installed into a virtual environment this script creates, and tested
# there (never in the Python you run it with).
#
# What it installs, and why:
# - Debian packages, with apt-get (as root, else through sudo), only when missing:
#   libhwloc-dev, libudev-dev and pkg-config for the platform crate's optional hwloc
#   feature; fio, which `zring bench --compare fio` runs and its tests check; python3-venv where `python3 -m venv` is missing (Debian splits it out);
#   cmake and nasm, which build libjpeg-turbo (zring-image's JPEG decoder) from
#   its source with its SIMD code.
# - A virtual environment outside the source tree, $ZRING_TEST_VENV (default
#   ~/.cache/zring/test-venv), holding maturin and python/requirements-test.txt
#   (pytest, numpy, ml_dtypes, torch, jax[cpu], grain, torchdata, Hugging Face
#   datasets, pyarrow, h5py, Pillow, webdataset, Ray Data, ...), installed with uv (itself
#   from PyPI). It is kept between runs and rebuilt when that file changes or
#   ZRING_FRESH_VENV=1. PyPI's Linux torch is the CUDA build (~4 GB with its nvidia-*
#   wheels: measured 1.5 min with uv on a fresh machine, 8.7 min with pip); it runs
#   on CPU.
# - A second virtual environment, $ZRING_BUILD_VENV (default ~/.cache/zring/build-venv),
#   with maturin, ziglang and auditwheel, in which scripts/build_wheel.sh builds the
#   manylinux2014 wheel that the tests then install.
#
# `bash scripts/test.sh --quick` runs the everyday subset: fmt, clippy, the Rust
# workspace's tests, and the Python tests against a wheel built for this machine
# (plain maturin, no zig or auditwheel), in the same virtual environment. It skips
# the slow extras and lists them, with why, at the end; CI runs the full script.
#
# To add a Python test dependency, add a line to python/requirements-test.txt. To add
# a step, add a `step "name"` line followed by its commands; every step is timed. A
# slow step that --quick may skip starts with `if full_step "name" "why"; then`.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

QUICK=0
for arg in "$@"; do
  case "$arg" in
    --quick) QUICK=1 ;;
    *)
      echo "usage: bash scripts/test.sh [--quick]" >&2
      exit 2
      ;;
  esac
done

# Free disk, printed at the start and the end: a build that runs out of space fails
# deep inside a compiler, far from the cause.
disk_free() { df -h "$ROOT" | tail -n 1 | awk '{print "    disk free: " $4 " of " $2}'; }

STEP_NAME=""
STEP_START=$SECONDS
RUN_START=$SECONDS
TIMINGS=()
SKIPPED=()
step() {
  finish_step
  STEP_NAME="$*"
  STEP_START=$SECONDS
  printf '\n==> %s\n' "$STEP_NAME"
}
finish_step() {
  if [ -n "$STEP_NAME" ]; then
    local took=$((SECONDS - STEP_START))
    printf '    (%s: %d s)\n' "$STEP_NAME" "$took"
    TIMINGS+=("$(printf '%5d s  %s' "$took" "$STEP_NAME")")
  fi
}
# A step of the full run only: with --quick it is recorded as skipped, with the
# reason, and returns 1; otherwise it starts the step.
full_step() {
  if [ "$QUICK" = 1 ]; then
    finish_step
    STEP_NAME=""
    SKIPPED+=("$1"$'\n'"      skipped: $2")
    return 1
  fi
  step "$1"
}
print_timings() {
  finish_step
  STEP_NAME=""
  disk_free
  printf '\n==> time per step\n'
  printf '%s\n' "${TIMINGS[@]}"
  printf '%5d s  total\n' "$((SECONDS - RUN_START))"
  if [ "${#SKIPPED[@]}" -gt 0 ]; then
    printf '\n==> skipped by --quick (bash scripts/test.sh runs them)\n'
    printf '  - %s\n' "${SKIPPED[@]}"
  fi
}
# A run that stops early also stops the background preparation (prepare_venvs).
stop_prepare() {
  local pid
  for pid in ${PREPARE_PID:-} ${MATRIX_PID:-}; do kill "$pid" 2>/dev/null || true; done
  if [ -n "${SDIST_PID:-}" ]; then kill -- "-$SDIST_PID" 2>/dev/null || true; fi
}
trap 'stop_prepare; print_timings' EXIT

apt_install() {
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && apt-get install -y -qq "$@" >/dev/null
  else
    sudo apt-get update -qq && sudo apt-get install -y -qq "$@" >/dev/null
  fi
}

# On Linux, io_uring and O_DIRECT must work: a test that finds either unavailable
# fails instead of skipping, so their coverage cannot vanish unnoticed (a container
# whose seccomp profile blocks io_uring, a tmpfs TMPDIR). Set ZRING_REQUIRE_URING=0
# to run the suite where they cannot work; the skipped tests then say why.
if [ "$(uname -s)" = Linux ]; then
  export ZRING_REQUIRE_URING="${ZRING_REQUIRE_URING:-1}"
fi

# In CI every build starts from nothing and is never rebuilt incrementally, so the
# incremental caches (several GB for the test binaries) would only take disk.
if [ -n "${CI:-}" ]; then
  export CARGO_INCREMENTAL=0
fi
# Free disk at the start (and the end, with the timings).
disk_free

# The Python virtual environments (the test one, ~4 GB of wheels, and the wheel
# build tools') are downloads and unpacking, not compiling: they are made in the
# background while the Rust steps below keep the cores busy, and the first Python
# step waits for them. Kept between runs; rebuilt when requirements-test.txt changes
# or ZRING_FRESH_VENV=1.
VENV=${ZRING_TEST_VENV:-$HOME/.cache/zring/test-venv}
BUILD_VENV=${ZRING_BUILD_VENV:-$HOME/.cache/zring/build-venv}
export ZRING_BUILD_VENV=$BUILD_VENV
prepare_venvs() {
  local stamp
  stamp="$(python3 --version 2>&1) $(sha256sum python/requirements-test.txt | cut -d' ' -f1)"
  if [ "${ZRING_FRESH_VENV:-0}" = 1 ] || [ "$(cat "$VENV/.zring-stamp" 2>/dev/null)" != "$stamp" ]; then
    rm -rf "$VENV"
    python3 -m venv "$VENV"
    # uv (from PyPI) installs the ~4 GB of torch wheels in ~1.5 min where pip took ~9.
    "$VENV/bin/python" -m pip install --quiet --upgrade pip uv
    "$VENV/bin/uv" pip install --quiet --python "$VENV/bin/python" "maturin>=1.5,<2" -r python/requirements-test.txt
    echo "$stamp" >"$VENV/.zring-stamp"
  fi
  if [ "$QUICK" = 0 ]; then
    bash scripts/build_wheel.sh --tools
  fi
  echo "    virtual environments ready: $VENV${BUILD_VENV:+, $BUILD_VENV}"
}
# Debian splits venv out of python3; installed first, in the foreground, so that no
# two apt-get runs ever overlap. With it, what every build of zring-image needs:
# cmake, and nasm for libjpeg-turbo's x86 SIMD code.
missing=()
python3 -c 'import ensurepip, venv' 2>/dev/null || missing+=(python3-venv)
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
if [ "$(uname -m)" = x86_64 ] && ! command -v nasm >/dev/null 2>&1; then
  missing+=(nasm)
fi
if [ "${#missing[@]}" -gt 0 ]; then
  apt_install "${missing[@]}"
fi
PREPARE_LOG=$(mktemp)
prepare_venvs >"$PREPARE_LOG" 2>&1 &
PREPARE_PID=$!

step "cargo fmt --check"
cargo fmt --all -- --check
(cd python && cargo fmt --all -- --check)

step "cargo clippy (all targets, warnings are errors)"
cargo clippy --workspace --all-targets -- -D warnings
(cd python && cargo clippy --all-targets -- -D warnings)

if full_step "cargo package (every published crate packs: metadata, files, versions of path dependencies)" \
  "packaging checks only the manifests and what each .crate holds, and reads the crates.io index"; then
# --no-verify: this checks the manifests and what goes into each .crate (seconds);
# verifying would build every crate once more from its extracted package, in a
# target directory of its own, for nothing the builds and tests here do not cover.
# Left out, as publish = false: zring-benches (this repository's benchmarks) and
# zring-testkit (helpers of zring's own tests). --allow-dirty lets it run on a
# checkout with local edits.
cargo package --workspace --no-verify --allow-dirty --exclude zring-benches --exclude zring-testkit
fi

step "fio (zring bench --compare fio runs it; cli/tests/bench_cli.rs checks that comparison)"
if ! command -v fio >/dev/null 2>&1; then
  apt_install fio
fi

step "cargo test (workspace)"
cargo test --workspace

if full_step "benches once in check mode (tiny data, every output checked, nothing timed)" \
  "builds and runs every bench target (minutes)"; then
  cargo test --workspace --benches
fi

if full_step "fuzz targets: each replays its corpus, then 5,000 seeded mutations (stable build, no sanitizer)" \
  "a separate build of the fuzz crate and its corpus replay"; then
  # The coverage-guided runs need nightly and cargo-fuzz (docs/fuzzing.md); this keeps
  # every target compiling against the current engine and its assertions holding on
  # the corpus and on a fixed, seeded sample of mutations of it. The corpus is copied:
  # a run may add inputs to its corpus directory. One run per target does both:
  # libFuzzer executes every corpus input first (its INITED pass, which stops on a
  # failing one) and counts them in -runs, so the corpus is replayed once.
  # The workspace's target directory, so the dependencies built above are reused.
  CARGO_TARGET_DIR="$PWD/target" cargo build --locked --manifest-path fuzz/Cargo.toml --bins
  FUZZ_TMP=$(mktemp -d)
  for target in fuzz/fuzz_targets/*.rs; do
    name=$(basename "$target" .rs)
    cp -r fuzz/corpus/"$name" "$FUZZ_TMP/$name"
    inputs=$(find "$FUZZ_TMP/$name" -type f | wc -l)
    target/debug/"$name" -runs=$((inputs + 5000)) -seed=1 "$FUZZ_TMP/$name" 2>&1 | grep -E '^#[0-9]+[[:space:]]+INITED|^Done'
  done
  rm -rf "$FUZZ_TMP"
fi

if full_step "engine with serde_json's preserve_order on (manifests and schemas unchanged by it)" \
  "a second build of the engine with another serde_json feature set"; then
  # Its own workspace, so the feature does not unify into the main build (the shared
  # target directory keeps artifacts of different features apart and reuses the rest).
  CARGO_TARGET_DIR="$PWD/target" cargo test --locked --manifest-path engine/tests/preserve_order/Cargo.toml
fi

if full_step "platform with the optional hwloc feature (apt: libhwloc-dev libudev-dev pkg-config)" \
  "an optional feature, a second build of the platform crate and Debian packages"; then
  if ! pkg-config --exists hwloc 2>/dev/null; then
    apt_install libhwloc-dev libudev-dev pkg-config
  fi
  cargo clippy -p zring-platform --all-targets --features hwloc -- -D warnings
  cargo test -p zring-platform --features hwloc
fi

if full_step "loom: model checks of the pool (claiming, completion), the async oneshot and buffer-pool recycling" \
  "a release build under --cfg loom in a target directory of its own, and long model checks"; then
  # A separate target dir, so the --cfg loom build does not invalidate the normal one.
  RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
    cargo test -p zring-platform --release --lib loom
fi

step "python: virtual environment with the test dependencies (python/requirements-test.txt)"
# Made in the background since the start (see prepare_venvs); this waits for it.
if ! wait "$PREPARE_PID"; then
  cat "$PREPARE_LOG" >&2
  echo "making the Python virtual environments failed (log above)" >&2
  exit 1
fi
PREPARE_PID=
cat "$PREPARE_LOG"
MAIN_PYTHON=$("$VENV/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
if [ "$QUICK" = 0 ]; then
  # The other interpreters' environments (downloads) are made meanwhile, too.
  MATRIX_LOG=$(mktemp)
  ZRING_MAIN_PYTHON=$MAIN_PYTHON bash scripts/test_pythons.sh --prepare >"$MATRIX_LOG" 2>&1 &
  MATRIX_PID=$!
fi
"$VENV/bin/python" -m pip list 2>/dev/null | grep -iE '^(maturin|numpy|ml.dtypes|torch|jax|jaxlib|pytest) '

rm -rf python/target/wheels
if full_step "python: build the manylinux2014 abi3 wheel and the sdist (scripts/build_wheel.sh: maturin with zig, checked by auditwheel)" \
  "the zig link and auditwheel check of the wheel people install (a wheel for this machine is built instead)"; then
  # The wheel that is tested is the one people install: linked by zig against glibc
  # 2.17, its tag checked by auditwheel.
  bash scripts/build_wheel.sh python/target/wheels
  WHEEL=$(ls python/target/wheels/zring-*-abi3-*manylinux*.whl)
  SDIST=$(ls python/target/wheels/zring-*.tar.gz)
  echo "$WHEEL"
  echo "$SDIST"
else
  step "python: build a wheel for this machine (maturin build --release, the test venv's maturin)"
  (cd python && "$VENV/bin/maturin" build --release --interpreter "$VENV/bin/python" --out "$ROOT/python/target/wheels")
  WHEEL=$(ls python/target/wheels/zring-*.whl)
  echo "$WHEEL"
fi

if full_step "python: the wheel installs and works where no Rust toolchain is (scripts/test_wheel_install.sh)" \
  "installs the manylinux wheel into a fresh virtual environment"; then
  bash scripts/test_wheel_install.sh "$WHEEL"
fi

if full_step "python: the sdist installs with pip, which compiles it (scripts/test_sdist_install.sh), started" \
  "pip compiles the extension again from the sdist (minutes)"; then
  # The longest compile of the run (~9 min cold on 2 cores), and no step below needs
  # it: it runs in the background at the lowest priority (nice 19: the kernel gives
  # it what the Python steps leave idle, ~1.5% of a core when they want the core),
  # in a session of its own so that an early exit can stop all of it. Its result is
  # checked at the end of the run.
  SDIST_LOG=$(mktemp)
  setsid nice -n 19 bash scripts/test_sdist_install.sh "$SDIST" >"$SDIST_LOG" 2>&1 &
  SDIST_PID=$!
  echo "    compiling in the background; checked at the end of the run"
fi

step "python: install the wheel into the virtual environment"
"$VENV/bin/python" -m pip install --quiet --force-reinstall --no-deps "$WHEEL"

step "pytest (against the installed wheel, from outside the source tree)"
WORK=$(mktemp -d)
(
  cd "$WORK"
  export PATH="$VENV/bin:$PATH" ZRING_TEST_INSTALLED=1 ZRING_SOURCE_ROOT="$ROOT"
  # -rs: every skipped test is listed with its reason. --quick leaves out the tests
  # marked slow (python/tests/conftest.py says which and why).
  if [ "$QUICK" = 1 ]; then
    python -m pytest -q -rs -p no:cacheprovider -m "not slow" "$ROOT/python/tests"
  else
    python -m pytest -q -rs -p no:cacheprovider "$ROOT/python/tests"
  fi
)
if [ "$QUICK" = 1 ]; then
  SKIPPED+=("pytest's tests marked slow (Ray clusters, peak-RSS conversions, the torch guide's examples)"$'\n'"      skipped: about 3 of the suite's 6.5 min; each runs in seconds alone (pytest -m slow)")
fi
rm -rf "$WORK"

if full_step "python benches once in check mode (tiny data, every output checked, nothing timed)" \
  "the benches' check modes, which write and read their own data sets"; then
  # The benches behind docs/benchmarks.md's Python figures: each checks its outputs
  # against the source records and stops before timing, so a bench that no longer runs
  # or no longer verifies turns CI red. bench_remote uses moto's server (installed
  # with the test requirements), not s3s-fs.
  BENCH_TMP=$(mktemp -d)
  (
    export PATH="$VENV/bin:$PATH"
    python python/bench/bench_gather.py --check --dir "$BENCH_TMP/gather"
    python python/bench/bench_small.py --check --dir "$BENCH_TMP/small"
    python python/bench/bench_upload.py --check --dir "$BENCH_TMP/upload"
    python python/bench/bench_torch.py --check --dir "$BENCH_TMP/torch"
    python python/bench/profile_torch_batch.py --check --dir "$BENCH_TMP"
    python python/bench/bench_datasets.py --check --workdir "$BENCH_TMP"
    python python/bench/bench_remote.py --check --server moto --dir "$BENCH_TMP/remote"
    python python/bench/bench_jax.py --check --dir "$BENCH_TMP/jax"
    python python/bench/bench_lm.py --check --dir "$BENCH_TMP/lm"
  )
  rm -rf "$BENCH_TMP"
fi

# --- Python types, docs and supported interpreters ---------------------------------
# Self-contained: each script takes the python to use and tests the installed zring.
# They use the test venv ($VENV, whose requirements-test.txt has mypy and pdoc)
# and the wheel ($WHEEL) built above.
PY=${VENV:+$VENV/bin/python}
PY=${PY:-python3}
if full_step "python: stubtest and mypy --strict (package, docs examples, typed public API)" \
  "type checks of the package and the docs' examples"; then
  bash scripts/typecheck.sh "$PY"
fi

if full_step "python: the API reference builds (pdoc)" "the API reference build"; then
  bash scripts/api_docs.sh "$(mktemp -d)" "$PY"
fi

if full_step "python: one abi3 wheel on CPython 3.10-3.13 with NumPy 2.x and 1.26" \
  "a virtual environment per interpreter and NumPy; --quick tests one interpreter"; then
  if ! wait "$MATRIX_PID"; then
    cat "$MATRIX_LOG" >&2
    echo "making the interpreters' environments failed (log above)" >&2
    exit 1
  fi
  MATRIX_PID=
  ZRING_MAIN_PYTHON=$MAIN_PYTHON bash scripts/test_pythons.sh ${WHEEL:+"$WHEEL"}
fi
# --- end of Python types, docs and supported interpreters --------------------------

if [ -n "${SDIST_PID:-}" ]; then
  step "python: the sdist installs with pip, which compiles it (scripts/test_sdist_install.sh), finished"
  if ! wait "$SDIST_PID"; then
    SDIST_PID=
    cat "$SDIST_LOG" >&2
    echo "installing the sdist failed (log above)" >&2
    exit 1
  fi
  SDIST_PID=
  cat "$SDIST_LOG"
fi

#!/usr/bin/env bash
# Installs ONE abi3 wheel of zring on every CPython the package claims (3.10-3.13,
# python/pyproject.toml) and runs the Python tests there, with NumPy 2.x everywhere
# and NumPy 1.26 on the oldest interpreter (its C API does not vary by interpreter).
#
# Usage: scripts/test_pythons.sh [WHEEL]   (default: build it once with maturin)
#        scripts/test_pythons.sh --prepare  (only make the environments: downloads,
#                                           which scripts/test.sh starts early)
#
# Interpreters come from pyenv (~/.pyenv/versions/3.X.*) or PATH (python3.X). A
# missing one is skipped with a loud warning on a developer machine and is an error
# on CI (CI set): CI must prove every claimed version.
#
# What runs where: the main interpreter of scripts/test.sh runs the suite with every
# optional package (torch, jax, datasets). Each combination here runs the same
# python/tests with numpy, ml_dtypes, pytest, typing_extensions and the format
# reader's zstandard and xxhash only; the few
# tests that need the heavy optional packages skip themselves (pytest -rs lists
# them). No smaller subset: the suite takes 20-40 s per combination, so the cost is
# building the environments (target/pyenvs/, reused between runs), and the whole
# suite is what exercises the extension against each interpreter and NumPy ABI
# (every dtype incl. ml_dtypes, every index form, zero-copy buffers, writers,
# sampler, loader, the docs' examples and doctests). Only the scheduling-dependent
# tests are left to the main interpreter (see below).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VERSIONS=(3.10 3.11 3.12 3.13)
# NumPy 1.26's C API is the same under every interpreter, so its oldest is enough.
NUMPY1_VERSIONS=(3.10)
# scripts/test.sh names its own interpreter here: its run already covered that
# version with NumPy 2 and every optional package, so it is not run again.
MAIN=${ZRING_MAIN_PYTHON:-}

PREPARE=0
wheel=${1:-}
if [ "$wheel" = --prepare ]; then
  PREPARE=1
elif [ -z "$wheel" ]; then
  python3 -m pip install --quiet "maturin>=1.5,<2"
  rm -rf target/wheels-abi3
  (cd python && python3 -m maturin build --release --out ../target/wheels-abi3)
  wheel=$(ls target/wheels-abi3/zring-*-abi3-*.whl)
fi
if [ "$PREPARE" = 0 ]; then
  wheel=$(cd "$(dirname "$wheel")" && pwd)/$(basename "$wheel")
  echo "wheel: $wheel"
fi

find_python() {
  local v=$1 p
  for p in "$HOME"/.pyenv/versions/"$v".*/bin/python"$v"; do
    [ -x "$p" ] && { echo "$p"; return; }
  done
  command -v "python$v" || true
}

run_combo() {
  local v=$1 numpy=$2 py env
  py=$(find_python "$v")
  if [ -z "$py" ]; then
    if [ -n "${CI:-}" ]; then
      echo "ERROR: CPython $v not found; CI must test every version the package claims" >&2
      exit 1
    fi
    printf '\n!!!!!!!!!! SKIPPED: CPython %s is not installed here (pyenv install %s) !!!!!!!!!!\n\n' "$v" "$v" >&2
    skipped+=("$v/numpy$numpy")
    return
  fi
  env=$ROOT/target/pyenvs/$v-numpy$numpy
  echo "==> CPython $v ($py), numpy $numpy"
  [ -x "$env/bin/python" ] || "$py" -m venv "$env"
  local spec="numpy>=2,<3"
  [ "$numpy" = 1 ] && spec="numpy==1.26.*"
  "$env/bin/python" -m pip install --quiet --upgrade pip >/dev/null
  "$env/bin/python" -m pip install --quiet "$spec" "ml_dtypes>=0.5" pytest typing_extensions zstandard xxhash
  [ "$PREPARE" = 1 ] && return
  "$env/bin/python" -m pip install --quiet --force-reinstall --no-deps "$wheel"
  "$env/bin/python" -c 'import sys, numpy, zring; print("   python", sys.version.split()[0], "numpy", numpy.__version__, "zring", zring.__version__)'
  # From outside the checkout, so that `import zring` is the installed wheel.
  # Left to the main interpreter, because they depend on how a loaded 2-core machine
  # schedules threads and more runs would multiply their failures (each seen
  # failing here while passing alone): test_threads.py (a bystander thread counted
  # during a GIL-holding sum, and did not during a GIL-releasing seek) and the
  # loader test that counts the process's OS threads right after close(), and
  # test_interrupt.py (it also counts threads, after a Ctrl-C). The Ray
  # tests need Ray itself (a local cluster; hundreds of MB), installed by test.sh only.
  (cd "$env" && "$env/bin/python" -m pytest -q -rs -p no:cacheprovider "$ROOT/python/tests" \
    --ignore "$ROOT/python/tests/test_threads.py" --ignore "$ROOT/python/tests/test_interrupt.py" \
    --ignore "$ROOT/python/tests/test_ray.py" --ignore "$ROOT/python/tests/test_docs_ray.py" \
    -k "not test_close_joins_blocked_workers_promptly")
}

skipped=()
for v in "${VERSIONS[@]}"; do
  if [ "$v" = "$MAIN" ]; then
    echo "==> CPython $v, numpy 2: covered by the main run of scripts/test.sh"
    continue
  fi
  run_combo "$v" 2
done
for v in "${NUMPY1_VERSIONS[@]}"; do run_combo "$v" 1; done
if [ ${#skipped[@]} -gt 0 ]; then
  printf '\n!!!!!!!!!! NOT TESTED (interpreter missing): %s !!!!!!!!!!\n' "${skipped[*]}" >&2
fi

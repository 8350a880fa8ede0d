#!/usr/bin/env bash
# Type checks of the installed zring package, run by scripts/test.sh:
#   1. mypy.stubtest: the type information (_zring.pyi and the annotated modules)
#      matches the built extension; python/stubtest-allowlist.txt lists, with a
#      reason each, the only reports that are accepted.
#   2. mypy --strict over the package sources, the docs' Python examples
#      (python/tests/doc_examples.py extracts them) and the typed public-API test
#      python/tests/typing/public_api.py.
# Usage: scripts/typecheck.sh [PYTHON]   (a python with zring, mypy installed)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=$(command -v "${1:-python3}" || echo "$1")
case $PY in /*) ;; *) PY=$PWD/$PY ;; esac
ROOT=$PWD
CONFIG=$ROOT/python/pyproject.toml
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "-- stubtest (against the installed wheel)"
# zring.ray, zring.torch and zring.jax import optional packages (Ray Data, PyTorch,
# JAX): where one is missing its module cannot be imported, so it is left out of
# the comparison (scripts/test.sh's venv has all three, so CI checks them).
: >"$tmp/missing-optional.txt"
for pair in ray.data:zring.ray torch:zring.torch jax:zring.jax; do
  if ! "$PY" -c "import ${pair%%:*}" 2>/dev/null; then
    echo "   (${pair#*:} not checked: ${pair%%:*} is not installed)"
    echo "${pair#*:}" >>"$tmp/missing-optional.txt"
  fi
done
# Run outside the checkout so that `zring` is the installed package.
(cd "$tmp" && "$PY" -m mypy.stubtest zring --mypy-config-file "$CONFIG" \
  --allowlist "$ROOT/python/stubtest-allowlist.txt" --allowlist "$tmp/missing-optional.txt")

echo "-- mypy --strict: package sources"
"$PY" -m mypy --config-file "$CONFIG" python/python/zring

echo "-- mypy --strict: docs examples and the typed public-API test"
"$PY" python/tests/doc_examples.py "$tmp/examples"
cp python/tests/typing/public_api.py "$tmp/examples/"
(cd "$tmp" && "$PY" -m mypy --config-file "$CONFIG" examples)

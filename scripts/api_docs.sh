#!/usr/bin/env bash
# Builds the Python API reference (HTML) from the installed zring package: the
# docstrings of the Rust and Python code, with the types of python/zring/_zring.pyi.
# Usage: scripts/api_docs.sh [OUTDIR] [PYTHON]   (default docs/api, python3; needs pdoc)
# The output is generated, not committed (docs/api is git-ignored).
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mkdir -p "${1:-docs/api}" && cd "${1:-docs/api}" && pwd)
py=$(command -v "${2:-python3}" || echo "$2")
case $py in /*) ;; *) py=$PWD/$py ;; esac
# From outside the checkout, so that `zring` is the installed package.
root=$PWD
(cd "$out" && "$py" "$root/scripts/api_docs.py" "$out")
test -s "$out/zring.html"
echo "API reference: $out/index.html"

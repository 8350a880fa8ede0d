#!/usr/bin/env bash
# Installs a built wheel into a fresh virtual environment where no Rust toolchain is
# reachable (PATH holds only the venv and the system directories, and cargo/rustc
# are checked to be absent), then writes a store, gathers from it, packs it and runs
# the `zring` command: what a user who `pip install`s the wheel gets.
#
#   bash scripts/test_wheel_install.sh dist/zring-*.whl
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WHEEL=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
python3 -m venv "$WORK/venv"
# The venv's own interpreter and the system's tools, nothing from ~/.cargo.
export PATH="$WORK/venv/bin:/usr/bin:/bin"
unset CARGO_HOME RUSTUP_HOME
if command -v cargo >/dev/null 2>&1 || command -v rustc >/dev/null 2>&1; then
  echo "a Rust toolchain is on PATH ($(command -v cargo rustc)); this test needs none" >&2
  exit 1
fi
python -m pip install --quiet --upgrade pip
python -m pip install --quiet "$WHEEL"
cd "$WORK"
python "$ROOT/scripts/installed_smoke.py" "installed and working without a Rust toolchain"
zring --help >/dev/null
echo "the zring command runs"

#!/usr/bin/env bash
# Runs every test of zring: lint, the Rust workspace, and the Python package.
# Installs what it needs (the Python build tools and numpy) on a fresh machine.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy (all targets, warnings are errors)"
cargo clippy --workspace --all-targets -- -D warnings
(cd python && cargo clippy --all-targets -- -D warnings)

step "cargo test (workspace)"
cargo test --workspace

step "platform with the optional hwloc feature (needs libhwloc-dev)"
if ! pkg-config --exists hwloc 2>/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && apt-get install -y -qq libhwloc-dev libudev-dev pkg-config >/dev/null
  else
    sudo apt-get update -qq && sudo apt-get install -y -qq libhwloc-dev libudev-dev pkg-config >/dev/null
  fi
fi
cargo clippy -p zring-platform --all-targets --features hwloc -- -D warnings
cargo test -p zring-platform --features hwloc

step "python: install the zring package and its test tools"
python3 -m pip install --quiet --upgrade "maturin>=1.5,<2" pytest numpy
python3 -m pip install --quiet --force-reinstall --no-deps ./python
python3 -m pip install --quiet ./python

step "pytest"
python3 -m pytest -q python/tests

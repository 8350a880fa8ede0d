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

step "python: install the zring package and its test tools"
python3 -m pip install --quiet --upgrade "maturin>=1.5,<2" pytest numpy
python3 -m pip install --quiet --force-reinstall --no-deps ./python
python3 -m pip install --quiet ./python

step "pytest"
python3 -m pytest -q python/tests

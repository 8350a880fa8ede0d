#!/usr/bin/env bash
# Installs the source distribution (scripts/build_wheel.sh writes it next to the
# wheel) into a fresh virtual environment, as a user on a platform without a wheel
# gets it: pip builds it in an isolated build environment with maturin from PyPI,
# and cargo (the Rust toolchain on PATH) compiles the extension. Then it writes a
# store, gathers from it, packs it and runs the `zring` command, as
# scripts/test_wheel_install.sh does for the wheel.
#
# First it checks that the sdist holds every crate the extension depends on by path
# (maturin copies them in; cargo metadata names them, transitive ones included).
#
#   bash scripts/test_sdist_install.sh dist/zring-*.tar.gz
#
# The build's target directory is $CARGO_TARGET_DIR (default: python/target), so
# a machine that has built the extension before reuses its compiled dependencies
# (zring's own crates compile again: their sources sit at a new path).
#
# It compiles in cargo's dev profile (MATURIN_PEP517_ARGS, read by maturin's PEP 517
# backend; ZRING_SDIST_PROFILE=release for what pip does by default): whether the
# sdist builds and works does not depend on the optimisation level, and the release
# build took ~9 minutes of both cores where the dev build takes a quarter of that,
# which scripts/test.sh's Python steps, running beside it, would otherwise wait for.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SDIST=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/python/target}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# --- the sdist holds every path crate, each with its manifest and sources ---------
tar tzf "$SDIST" >"$WORK/sdist.txt"
TOP=$(head -n 1 "$WORK/sdist.txt" | cut -d/ -f1)
cargo metadata --format-version 1 --manifest-path "$ROOT/python/Cargo.toml" >"$WORK/metadata.json"
python3 - "$ROOT" "$TOP" "$WORK/metadata.json" "$WORK/sdist.txt" <<'PY'
import json, os, sys

root, top, metadata, listing = sys.argv[1:]
files = set(open(listing).read().split("\n"))
missing, crates = [], []
for package in json.load(open(metadata))["packages"]:
    if package["source"] is not None:  # from crates.io, not a path
        continue
    crate = os.path.relpath(os.path.dirname(package["manifest_path"]), root)
    crates.append(package["name"])
    wanted = [os.path.join(crate, "Cargo.toml")]
    for dirpath, _, names in os.walk(os.path.join(root, crate, "src")):
        wanted += [os.path.relpath(os.path.join(dirpath, n), root) for n in names if n.endswith(".rs")]
    missing += [w for w in wanted if f"{top}/{w}" not in files]
if missing:
    sys.exit(f"the sdist lacks {len(missing)} file(s) of its path crates: " + ", ".join(missing[:20]))
print(f"the sdist holds all {len(crates)} path crates: {', '.join(sorted(crates))}")
PY

# --- pip builds and installs it in a fresh virtual environment ---------------------
python3 -m venv "$WORK/venv"
"$WORK/venv/bin/python" -m pip install --quiet --upgrade pip
PROFILE=${ZRING_SDIST_PROFILE:-dev}
echo "pip install $(basename "$SDIST") (compiles the extension, profile $PROFILE; target directory $CARGO_TARGET_DIR)"
MATURIN_PEP517_ARGS="--profile $PROFILE" "$WORK/venv/bin/python" -m pip install --quiet "$SDIST"

cd "$WORK"
export PATH="$WORK/venv/bin:$PATH"
python "$ROOT/scripts/installed_smoke.py" "built from the sdist and working"
zring --help >/dev/null
echo "the zring command runs"

#!/usr/bin/env bash
# Builds the wheel people install: one abi3 wheel (CPython >= 3.10) tagged
# manylinux2014 (glibc 2.17), linked by zig so that it runs on distributions older
# than the build machine, then checked by auditwheel so the tag is honest (the check
# fails when the wheel needs a newer glibc symbol or an unvendored library). Next to
# it, the sdist (maturin sdist), which pip compiles where no wheel fits.
#
#   bash scripts/build_wheel.sh [OUT_DIR]      # default: dist/
#   bash scripts/build_wheel.sh --tools        # only make the build tools' environment
#
# The build tools (maturin, ziglang, auditwheel) go into a virtual environment of
# their own, $ZRING_BUILD_VENV (default ~/.cache/zring/build-venv), never into the
# Python that runs this script. Then scripts/test_wheel_install.sh tests the wheel in
# a fresh environment without cargo, and scripts/test_sdist_install.sh the sdist.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-dist}
VENV=${ZRING_BUILD_VENV:-$HOME/.cache/zring/build-venv}
if [ ! -x "$VENV/bin/maturin" ] || [ ! -x "$VENV/bin/auditwheel" ] || [ ! -x "$VENV/bin/python-zig" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --upgrade pip
  "$VENV/bin/python" -m pip install --quiet "maturin>=1.5,<2" ziglang auditwheel
fi
[ "$OUT" = --tools ] && exit 0
mkdir -p "$OUT"
rm -f "$OUT"/zring-*.whl "$OUT"/zring-*.tar.gz
OUT_ABS=$(cd "$OUT" && pwd)
(cd python && PATH="$VENV/bin:$PATH" maturin build --release --zig \
  --compatibility manylinux2014 --out "$OUT_ABS")
WHEEL=$(ls "$OUT"/zring-*-abi3-*manylinux*.whl)
# auditwheel show prints the most compatible tag the wheel's symbols allow; the
# wheel must carry it.
"$VENV/bin/auditwheel" show "$WHEEL" | tee "$OUT/auditwheel.txt"
grep -q 'platform tag to "manylinux_2_17_x86_64"\|"manylinux_2_17_x86_64"' "$OUT/auditwheel.txt" || {
  echo "auditwheel does not allow manylinux_2_17 for $WHEEL" >&2
  exit 1
}
# The sdist: python/ and the crates it depends on by path (maturin copies them in).
(cd python && PATH="$VENV/bin:$PATH" maturin sdist --out "$OUT_ABS")
ls "$OUT"/zring-*.tar.gz
echo "$WHEEL"

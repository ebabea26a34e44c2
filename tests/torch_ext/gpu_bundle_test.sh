#!/usr/bin/env bash
# The GPU bundle made from this build (scripts/gpu_bundle.sh --no-build): within its size
# limit, its programs and op library load with torch's libraries, its Python package builds
# with build_python.sh (as on a GPU machine whose Python is not the wheel's) and plans, and
# gpu_check.sh exits 0; without a CUDA device it says so and writes no results.
#   usage: gpu_bundle_test.sh REPO OUT PYTHON
set -euo pipefail
repo=$1 out=$2 python=$3
rm -rf "$out"
mkdir -p "$out"
bash "$repo/scripts/gpu_bundle.sh" --no-build "$out/bundle"
# build_python.sh needs a Python with nanobind: setup_python.sh's; pipeplan.torch, torch's.
PYTHON=$(bash "$repo/scripts/setup_python.sh") "$out/bundle/build_python.sh" "$out/python-build"
planned=$(PYTHONPATH="$out/bundle/python" "$python" -c \
  'import pipeplan, pipeplan.torch; print(pipeplan.plan("zbv", ranks=2, microbatches=4).strategy)')
[[ "$planned" == "zbv" ]] ||
  { echo "FAIL: the bundle's Python package planned '$planned', not zbv"; exit 1; }
log=$(PYTHON="$python" "$out/bundle/gpu_check.sh" "$out/results.md")
echo "$log"
if "$python" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  exit 0  # a GPU machine: gpu_check.sh ran the GPU checks and passed
fi
grep -qx "no CUDA device: GPU checks not run" <<<"$log" ||
  { echo "FAIL: gpu_check.sh did not say that no CUDA device is present"; exit 1; }
[[ ! -e "$out/results.md" ]] || { echo "FAIL: results written without a GPU"; exit 1; }

#!/usr/bin/env bash
# Sets up, builds with warnings as errors and runs every test with ctest, then the Python
# package's tests against its wheel in a fresh venv (scripts/test_python.sh).
#   --bench     also run the benchmarks afterwards (scripts/bench.sh)
# $PIPEPLAN_BUILD_DIR picks the build directory (default: one per checkout in ~/.cache/pipeplan);
# $PIPEPLAN_TEST_TIMEOUT caps the whole ctest run in seconds (default 1800).
# LibTorch is installed (scripts/setup_torch.sh) and the torch extension built and tested,
# unless PIPEPLAN_TORCH=OFF.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=$(bash "$repo/scripts/build_dir.sh")
export PIPEPLAN_BUILD_DIR=$build_dir
timeout_s=${PIPEPLAN_TEST_TIMEOUT:-1800}

run_bench=0
for arg in "$@"; do
  case "$arg" in
    --bench) run_bench=1 ;;
    -h|--help)
      sed -n '2,6p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    *)
      echo "test: unknown argument '$arg' (expected --bench)" >&2
      exit 2
      ;;
  esac
done

bash "$repo/scripts/setup.sh"
bash "$repo/scripts/setup_docs.sh" >/dev/null
bash "$repo/scripts/setup_solver.sh" >/dev/null
bash "$repo/scripts/setup_python.sh" >/dev/null
if [[ "${PIPEPLAN_TORCH:-AUTO}" != "OFF" ]]; then
  bash "$repo/scripts/setup_torch.sh" >/dev/null
fi
# Line tables only (-g1): a failing test still names file and line, and the build is about a
# third shorter than with full debug information (-g).
bash "$repo/scripts/build.sh" -DPIPEPLAN_WERROR=ON -DPIPEPLAN_BUILD_TESTS=ON \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG"

# The wheel's build first: the GPU bundle's test packs its -fPIC archives (scripts/gpu_bundle.sh).
wheelhouse=$(mktemp -d)
bash "$repo/scripts/build_wheel.sh" "$wheelhouse" >/dev/null
rm -rf "$wheelhouse"

echo "test: ctest --test-dir $build_dir --output-on-failure -j2 (timeout ${timeout_s}s)"
if ! timeout "$timeout_s" ctest --test-dir "$build_dir" --output-on-failure -j2 --timeout 600; then
  echo "test: FAILED" >&2
  exit 1
fi
# The Python package as a user installs it: its wheel in a fresh venv.
if ! bash "$repo/scripts/test_python.sh"; then
  echo "test: FAILED (the Python package)" >&2
  exit 1
fi
echo "test: all tests passed"

if [[ $run_bench -eq 1 ]]; then
  bash "$repo/scripts/bench.sh"
fi

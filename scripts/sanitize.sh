#!/usr/bin/env bash
# Builds the whole test suite with AddressSanitizer + UndefinedBehaviorSanitizer in its own
# build directory (next to the normal one, suffix -asan) and runs it: any memory error, leak
# or undefined behaviour fails the run.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir="$(bash "$repo/scripts/build_dir.sh")-asan"
timeout_s=${PIPEPLAN_TEST_TIMEOUT:-1800}

bash "$repo/scripts/setup.sh"
# LibTorch is not built with the sanitizers, so the extension is left out here. -O1 and line
# tables only (-g1): ASan's reports keep file and line, and the build takes half the time of
# -O2 -g (variable tracking under instrumentation is most of it). The fuzz corpus replays are
# left out: scripts/fuzz.sh runs every seed under ASan + UBSan before it fuzzes.
PIPEPLAN_TORCH=OFF PIPEPLAN_BUILD_DIR=$build_dir bash "$repo/scripts/build.sh" -DPIPEPLAN_SANITIZE=ON \
  -DPIPEPLAN_BUILD_BENCH=OFF -DPIPEPLAN_WERROR=ON -DPIPEPLAN_PYTHON_PACKAGE=OFF \
  -DPIPEPLAN_FUZZ_REPLAY=OFF "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"
echo "sanitize: ctest --test-dir $build_dir (ASan + UBSan)"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# Timing tests are left out: a sanitizer's slowdown says nothing about the runtime. So are the
# tests that run OR-Tools (OptimalTest.*, about 5 minutes of it here): their time is the
# unsanitized Python solver's, and the C++ around it (instance, result, expansion) runs here
# in the stand-in tests (OptimalAnswers.*, OptimalNothingFits.*) and in the solver_result
# fuzz target; scripts/test.sh runs them all. The behaviour corpus (label corpus) runs the
# same planner code as the unit tests, several hundred times over, and the install test (label
# install) copies files: scripts/test.sh runs them.
if ! timeout "$timeout_s" ctest --test-dir "$build_dir" --output-on-failure -j2 -LE 'timing|corpus|install' \
  -E '^OptimalTest\.' --timeout 900; then
  echo "sanitize: FAILED" >&2
  exit 1
fi
echo "sanitize: all tests passed under ASan + UBSan"

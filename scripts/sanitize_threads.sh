#!/usr/bin/env bash
# Builds the runtime's tests with ThreadSanitizer in their own build directory (suffix -tsan)
# and runs them: any data race in the runtime (rank threads, transport, watchdog) fails the
# run. Timing tests are left out: a sanitizer's slowdown says nothing about the runtime.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir="$(bash "$repo/scripts/build_dir.sh")-tsan"
jobs=${PIPEPLAN_JOBS:-$(nproc)}

bash "$repo/scripts/setup.sh"
if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
  cmake -S "$repo" -B "$build_dir" -G Ninja -DPIPEPLAN_SANITIZE_THREAD=ON -DPIPEPLAN_TORCH=OFF -DPIPEPLAN_PYTHON_PACKAGE=OFF \
    -DPIPEPLAN_BUILD_BENCH=OFF -DPIPEPLAN_WERROR=ON \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" >/dev/null
fi
cmake --build "$build_dir" -j "$jobs" --target runtime_tests
echo "sanitize-threads: runtime tests under ThreadSanitizer"
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
if ! timeout 1200 ctest --test-dir "$build_dir" --output-on-failure -j2 -L runtime -LE timing \
  --timeout 600; then
  echo "sanitize-threads: FAILED" >&2
  exit 1
fi
echo "sanitize-threads: all runtime tests passed under ThreadSanitizer"

#!/usr/bin/env bash
# Builds and runs the Google Benchmark suites; each figure is printed next to its budget.
# Arguments go to the benchmark binary (e.g. --benchmark_filter=Budget).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${PIPEPLAN_BUILD_DIR:-$HOME/.cache/pipeplan/build}
export PIPEPLAN_BUILD_DIR=$build_dir

if [[ ! -f "$build_dir/build.ninja" ]]; then
  bash "$repo/scripts/setup.sh"
fi
bash "$repo/scripts/build.sh"
bench=$build_dir/bench/plan_pipeline_bench
if [[ ! -x "$bench" ]]; then
  echo "bench: $bench was not built (configured with -DPIPEPLAN_BUILD_BENCH=OFF?)" >&2
  exit 1
fi
echo "bench: $bench $*"
"$bench" "$@"

#!/usr/bin/env bash
# Builds and runs every Google Benchmark suite in bench/; each figure is printed next to its
# budget. Arguments go to every benchmark binary (e.g. --benchmark_filter=Budget).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=$(bash "$repo/scripts/build_dir.sh")
export PIPEPLAN_BUILD_DIR=$build_dir

if [[ ! -f "$build_dir/build.ninja" ]]; then
  bash "$repo/scripts/setup.sh"
fi
bash "$repo/scripts/build.sh"
# Every suite built from bench/ (one executable per *_bench.cc), in name order.
mapfile -t benches < <(find "$repo/bench" -maxdepth 1 -name '*_bench.cc' -printf '%f\n' | sort)
if [[ ${#benches[@]} -eq 0 ]]; then
  echo "bench: no *_bench.cc in $repo/bench" >&2
  exit 1
fi
for source in "${benches[@]}"; do
  bench=$build_dir/bench/${source%.cc}
  if [[ ! -x "$bench" && "$source" != torch_* ]]; then
    echo "bench: $bench was not built (configured with -DPIPEPLAN_BUILD_BENCH=OFF?)" >&2
    exit 1
  fi
done
for source in "${benches[@]}"; do
  bench=$build_dir/bench/${source%.cc}
  if [[ ! -x "$bench" ]]; then
    echo "bench: skipping ${source%.cc}: the LibTorch extension is not built"
    continue
  fi
  echo "bench: $bench $*"
  "$bench" "$@"
done

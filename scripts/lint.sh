#!/usr/bin/env bash
# Style and static checks: clang-format (dry run, fails on any difference) over every C++
# file in the tree, then clang-tidy over the planner, runtime and CLI sources (and the torch
# extension's and the Python module's, when the build has them) using the build's
# compile_commands.json. Needs a
# configured build (scripts/build.sh) for clang-tidy.
#   --format-only   skip clang-tidy
#   --fix           apply clang-format in place instead of checking
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=$(bash "$repo/scripts/build_dir.sh")
jobs=${PIPEPLAN_JOBS:-$(nproc)}
clang_format=${CLANG_FORMAT:-clang-format}
clang_tidy=${CLANG_TIDY:-clang-tidy}

tidy=1
fix=0
for arg in "$@"; do
  case "$arg" in
    --format-only) tidy=0 ;;
    --fix) fix=1 ;;
    *) echo "lint: unknown argument '$arg'" >&2; exit 2 ;;
  esac
done

cd "$repo"
mapfile -t sources < <(find planner app cli python runtime torch_ext tests bench examples fuzz \
  -type f \( -name '*.cc' -o -name '*.h' -o -name '*.cpp' -o -name '*.hpp' \) 2>/dev/null | sort)

if [[ $fix -eq 1 ]]; then
  echo "lint: clang-format -i on ${#sources[@]} files"
  "$clang_format" -i "${sources[@]}"
  exit 0
fi

status=0
echo "lint: clang-format --dry-run -Werror on ${#sources[@]} files"
if ! "$clang_format" --dry-run -Werror "${sources[@]}"; then
  echo "lint: clang-format found differences (run scripts/lint.sh --fix)" >&2
  status=1
fi

if [[ $tidy -eq 1 ]]; then
  if [[ ! -f "$build_dir/compile_commands.json" ]]; then
    echo "lint: configuring $build_dir for compile_commands.json"
    bash "$repo/scripts/build.sh"
  else
    # Generated protobuf headers must exist for clang-tidy to parse planner sources.
    cmake --build "$build_dir" --target pipeplan_proto -j "$jobs" >/dev/null
  fi
  tidy_dirs=(planner app/src runtime/src cli)
  # The Python package's module when this build has it (nanobind found).
  if grep -q '/python/src/' "$build_dir/compile_commands.json"; then
    tidy_dirs+=(python/src)
  fi
  # The torch extension when this build has it (its units parse LibTorch: ~45 s each).
  if grep -q '/torch_ext/src/' "$build_dir/compile_commands.json"; then
    tidy_dirs+=(torch_ext/src torch_ext/tools)
  fi
  mapfile -t tidy_sources < <(find "${tidy_dirs[@]}" -type f -name '*.cc' | sort)
  echo "lint: clang-tidy on ${#tidy_sources[@]} files ($jobs jobs)"
  if ! printf '%s\n' "${tidy_sources[@]}" |
      xargs -P "$jobs" -n 1 "$clang_tidy" -p "$build_dir" --quiet --warnings-as-errors='*' \
        2> >(grep -v -E '^[0-9]+ warnings? generated\.$|^Suppressed [0-9]+ warnings|^Use -header-filter' >&2); then
    echo "lint: clang-tidy reported problems" >&2
    status=1
  fi
fi

if [[ $status -eq 0 ]]; then echo "lint: clean"; fi
exit $status

#!/usr/bin/env bash
# Configures (once) and builds pipeplan with CMake + Ninja in a reusable build directory.
#   BUILD dir: scripts/build_dir.sh ($PIPEPLAN_BUILD_DIR, or one per checkout in ~/.cache/pipeplan)
#   jobs:      $PIPEPLAN_JOBS, default $(nproc)
#   LibTorch:  found in the venv scripts/setup_torch.sh made (the extension builds when it is
#              there); PIPEPLAN_TORCH=OFF leaves it out
#   byexample: found in the venv scripts/setup_docs.sh made (for the documentation test)
#   ortools:   found in the venv scripts/setup_solver.sh made (for --strategy optimal)
#   nanobind:  found in the venv scripts/setup_python.sh made (the Python package's module)
# Extra arguments go to the CMake configure step (e.g. -DPIPEPLAN_WERROR=ON); without them
# an existing build directory is reused as it is.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=$(bash "$repo/scripts/build_dir.sh")
jobs=${PIPEPLAN_JOBS:-$(nproc)}

if [[ -f "$build_dir/CMakeCache.txt" ]]; then
  cached_source=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build_dir/CMakeCache.txt")
  if [[ "$cached_source" != "$repo" ]]; then
    echo "build: $build_dir was configured for $cached_source, not $repo" >&2
    echo "build: set PIPEPLAN_BUILD_DIR to another directory or remove it" >&2
    exit 1
  fi
fi

# Whether every -DNAME=VALUE argument already holds in the cache (then configuring again
# would change nothing).
cache_has_args() {
  local arg name value cached
  for arg in "$@"; do
    [[ "$arg" =~ ^-D([A-Za-z0-9_]+)(:[A-Z]+)?=(.*)$ ]] || return 1
    name=${BASH_REMATCH[1]}
    value=${BASH_REMATCH[3]}
    cached=$(sed -n "s/^${name}:[A-Z]*=//p" "$build_dir/CMakeCache.txt" | head -n 1)
    [[ "$cached" == "$value" ]] || return 1
  done
}

torch_args=()
if [[ "${PIPEPLAN_TORCH:-AUTO}" == "OFF" ]]; then
  torch_args=(-DPIPEPLAN_TORCH=OFF)
else
  torch_version=${PIPEPLAN_TORCH_VERSION:-2.11.0}
  torch_venv=${PIPEPLAN_TORCH_VENV:-$HOME/.cache/pipeplan/venv-torch-$torch_version}
  if [[ -x "$torch_venv/bin/python" ]]; then
    torch_prefix=$("$torch_venv/bin/python" -c \
      "import torch.utils; print(torch.utils.cmake_prefix_path)" 2>/dev/null || true)
    [[ -n "$torch_prefix" ]] && torch_args=(-DCMAKE_PREFIX_PATH="$torch_prefix")
  fi
fi
# The documentation test needs byexample (scripts/setup_docs.sh); without it that test is not
# registered.
docs_args=()
docs_venv=${PIPEPLAN_DOCS_VENV:-$HOME/.cache/pipeplan/venv-docs-byexample-11.0.0}
if [[ -x "$docs_venv/bin/byexample" ]]; then
  docs_args=(-DPIPEPLAN_BYEXAMPLE="$docs_venv/bin/byexample")
fi
# The optimal strategies run CP-SAT from the venv scripts/setup_solver.sh made; without it they
# explain how to install it.
solver_args=()
solver_venv=${PIPEPLAN_SOLVER_VENV:-$HOME/.cache/pipeplan/venv-solver-ortools-9.15.6755}
if [[ -x "$solver_venv/bin/python" ]]; then
  solver_args=(-DPIPEPLAN_SOLVER_PYTHON="$solver_venv/bin/python")
fi
# The Python package's module builds with the Python of scripts/setup_python.sh (nanobind).
python_args=()
if python_venv_python=$(bash "$repo/scripts/setup_python.sh" --find 2>/dev/null); then
  python_args=(-DPython_EXECUTABLE="$python_venv_python")
fi
set -- "${torch_args[@]}" "${docs_args[@]}" "${solver_args[@]}" "${python_args[@]}" "$@"

if [[ ! -f "$build_dir/build.ninja" ]] || ! cache_has_args "$@"; then
  echo "build: configuring $build_dir (Ninja, RelWithDebInfo${*:+, $*})"
  cmake -S "$repo" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
else
  echo "build: reusing $build_dir"
fi

echo "build: building with $jobs jobs"
cmake --build "$build_dir" -j "$jobs"
echo "build: done ($build_dir/cli/pipeplan)"

#!/usr/bin/env bash
# An installed pipeplan runs the solver script its install put in share/pipeplan, not the
# source tree's it was built from (app::SolverScriptPlaces): what a package relies on.
# usage: installed_solver_script_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
source_dir=$2
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" --component gpu_bundle >/dev/null
installed=$prefix/share/pipeplan/pipeplan_solver.py
cmp "$installed" "$source_dir/python/pipeplan_solver.py"
# A stand-in run by /bin/sh: answers "unknown" (the heuristic stands) and says which file ran.
printf '%s\n' 'echo "status unknown" > "$2"' 'echo "stand-in solver $0" >&2' >"$installed"
out=$(cd "$prefix" && env -u PIPEPLAN_SOLVER_SCRIPT PIPEPLAN_SOLVER_PYTHON=/bin/sh \
  "$prefix/bin/pipeplan" plan --strategy optimal --ranks 2 --microbatches 2 -o plan.pb 2>&1) || {
  echo "installed pipeplan failed:" >&2
  echo "$out" >&2
  exit 1
}
if ! grep -q "stand-in solver $prefix/bin/../share/pipeplan/pipeplan_solver.py" <<<"$out"; then
  echo "the installed script did not run; pipeplan said:" >&2
  echo "$out" >&2
  exit 1
fi
echo "installed pipeplan ran $installed"

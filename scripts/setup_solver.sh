#!/usr/bin/env bash
# Installs OR-Tools (PyPI `ortools`, pinned), whose CP-SAT solver makes the optimal strategies
# (pipeplan plan --strategy optimal), into a virtual environment outside the repository, reused
# when present: $PIPEPLAN_SOLVER_VENV, default ~/.cache/pipeplan/venv-solver-ortools-<version>.
# Prints that environment's Python as its last line (scripts/build.sh builds it into pipeplan).
set -euo pipefail

version=9.15.6755
venv=${PIPEPLAN_SOLVER_VENV:-$HOME/.cache/pipeplan/venv-solver-ortools-$version}
python=${PYTHON:-python3}

if ! "$venv/bin/python" -c "import ortools.sat.python.cp_model" >/dev/null 2>&1; then
  echo "setup_solver: installing ortools==$version into $venv" >&2
  "$python" -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "ortools==$version" >&2
fi
echo "$venv/bin/python"

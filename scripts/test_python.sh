#!/usr/bin/env bash
# The Python package as a user gets it: builds the wheel (scripts/build_wheel.sh), installs it
# with pytest into a fresh venv, checks that the module's shared libraries are the wheel's own
# (none from this system's apt packages but what manylinux allows), and runs tests/python there
# (pipeplan.torch's tests with the torch of scripts/setup_torch.sh).
# scripts/test.sh runs it after the C++ tests.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

wheel=$(bash "$repo/scripts/build_wheel.sh" "$scratch/wheelhouse" | tail -n 1)
echo "test_python: installing $(basename "$wheel") into a fresh venv"
python3 -m venv "$scratch/venv"
"$scratch/venv/bin/pip" install --quiet --disable-pip-version-check "$wheel" "pytest==9.2.0"

module=$("$scratch/venv/bin/python" -c "import pipeplan._core as m; print(m.__file__)")
if [[ "$module" != "$scratch/venv/"* ]]; then
  echo "test_python: pipeplan was imported from $module, not the fresh venv" >&2
  exit 1
fi
# Every library the module loads comes from the wheel, or is one the manylinux policy lets a
# wheel take from the system (the C and C++ runtimes, zlib).
foreign=$(ldd "$module" | awk '/=>/ {print $1, $3}' |
          grep -vE "^(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt|libz|ld-linux[^ ]*)\.so" |
          grep -v " $scratch/venv/" || true)
if [[ -n "$foreign" ]]; then
  echo "test_python: the installed module loads libraries from outside the wheel:" >&2
  echo "$foreign" >&2
  exit 1
fi

# Where a Python keeps its packages.
site_of() { "$1" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])"; }

# pipeplan.torch's tests need torch: the venv sees the one scripts/setup_torch.sh installed
# (a .pth line; the venv's own packages come first), rather than a second few-GB copy.
torch_venv=${PIPEPLAN_TORCH_VENV:-$HOME/.cache/pipeplan/venv-torch-${PIPEPLAN_TORCH_VERSION:-2.11.0}}
if [[ "${PIPEPLAN_TORCH:-AUTO}" != "OFF" && -x "$torch_venv/bin/python" ]]; then
  site_of "$torch_venv/bin/python" > "$(site_of "$scratch/venv/bin/python")/setup-torch.pth"
else
  echo "test_python: no torch (scripts/setup_torch.sh): pipeplan.torch's tests are skipped"
fi

# As `pip install "pipeplan[solver]"` would: ortools importable in the venv (the one
# scripts/setup_solver.sh installed), so the solver-made strategies run in this Python.
solver_venv=${PIPEPLAN_SOLVER_VENV:-$HOME/.cache/pipeplan/venv-solver-ortools-9.15.6755}
if [[ -x "$solver_venv/bin/python" ]]; then
  site_of "$solver_venv/bin/python" > "$(site_of "$scratch/venv/bin/python")/setup-solver.pth"
fi

cd "$scratch"
"$scratch/venv/bin/pipeplan" --version
"$scratch/venv/bin/pipeplan" --help > /dev/null
"$scratch/venv/bin/python" -m pytest -q -p no:cacheprovider "$repo/tests/python"
echo "test_python: passed"

#!/usr/bin/env bash
# Installs LibTorch for the torch extension: the `torch` wheel from PyPI (pinned to the
# version the GPU machines run) into a virtual environment outside the repository, reused
# when present: $PIPEPLAN_TORCH_VENV, default ~/.cache/pipeplan/venv-torch-<version>.
# Also downloads torchtitan's wheel (not installed) into $PIPEPLAN_WHEELS_DIR, default
# ~/.cache/pipeplan/wheels, for a test of the torchtitan recipe in docs/torch-interop.md.
# Prints the CMake prefix path (torch.utils.cmake_prefix_path) as its last line.
# PIPEPLAN_TORCH=OFF skips it (and the extension) entirely.
set -euo pipefail

version=${PIPEPLAN_TORCH_VERSION:-2.11.0}
venv=${PIPEPLAN_TORCH_VENV:-$HOME/.cache/pipeplan/venv-torch-$version}
python=${PYTHON:-python3}

if ! "$venv/bin/python" -c "import torch" >/dev/null 2>&1; then
  echo "setup_torch: installing torch==$version into $venv (a few GB, once)" >&2
  "$python" -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "torch==$version" numpy >&2
fi
# torchtitan's wheel, not installed (it needs CUDA and many packages): the torch interop test
# torchtitan_placement reads torchtitan's stage placement from it.
wheels=${PIPEPLAN_WHEELS_DIR:-$HOME/.cache/pipeplan/wheels}
if [[ ! -f "$wheels/torchtitan-0.3.0-py3-none-any.whl" ]]; then
  echo "setup_torch: downloading torchtitan==0.3.0's wheel into $wheels" >&2
  "$venv/bin/pip" download --quiet --disable-pip-version-check --no-deps \
    "torchtitan==0.3.0" -d "$wheels" >&2
fi
"$venv/bin/python" -c "import torch.utils; print(torch.utils.cmake_prefix_path)" 2>/dev/null

#!/usr/bin/env bash
# Installs the Debian packages pipeplan needs to build and test, only those that are missing.
# Idempotent: a second run checks and exits without touching apt.
set -euo pipefail

# clang-format and clang-tidy are for scripts/lint.sh, which CI runs. clang and libclang-rt-dev
# (libFuzzer and the sanitizer runtimes, only a recommendation of clang's) are for
# scripts/fuzz.sh. libgloo-dev: the headers c10d's ProcessGroupGloo.hpp includes, which the
# torch wheel does not ship. libsimdjson-dev and zlib1g-dev: reading torch.profiler traces.
# libexpat1-dev: the output_rendering fuzz target checks that the SVG it renders is XML.
packages=(cmake ninja-build g++ protobuf-compiler libprotobuf-dev libgtest-dev libgmock-dev
          libbenchmark-dev libsimdjson-dev zlib1g-dev libexpat1-dev clang-format clang-tidy clang libclang-rt-dev python3-venv libgloo-dev)

missing=()
for pkg in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q '^install ok installed$'; then
    missing+=("$pkg")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "setup: all build dependencies are installed"
  exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "setup: missing packages: ${missing[*]}" >&2
  echo "setup: apt-get not found; install them with your package manager" >&2
  exit 1
fi

sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "setup: missing packages: ${missing[*]}; run as root or install sudo" >&2
    exit 1
  fi
  sudo_cmd=(sudo)
fi

echo "setup: installing ${missing[*]}"
"${sudo_cmd[@]}" apt-get update
DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y --no-install-recommends \
  "${missing[@]}"
echo "setup: done"

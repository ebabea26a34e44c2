#!/usr/bin/env bash
# Prints the build directory the scripts use: $PIPEPLAN_BUILD_DIR, or one per checkout under
# ~/.cache/pipeplan (a CMake build directory belongs to one source path, and CI clones the
# repository to a new path each run).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [[ -n "${PIPEPLAN_BUILD_DIR:-}" ]]; then
  echo "$PIPEPLAN_BUILD_DIR"
else
  echo "$HOME/.cache/pipeplan/build-$(printf '%s' "$repo" | sha1sum | cut -c1-12)"
fi

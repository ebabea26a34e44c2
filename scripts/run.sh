#!/usr/bin/env bash
# Sets up, builds and runs the demo: every strategy on the Zero Bubble paper's 1.5B-model
# setting (P=8, M=24), printed as a table, plus an HTML report in ./pipeplan-report/.
# Arguments are passed to 'pipeplan demo' (e.g. --output-dir DIR).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=$(bash "$repo/scripts/build_dir.sh")
export PIPEPLAN_BUILD_DIR=$build_dir

bash "$repo/scripts/setup.sh"
bash "$repo/scripts/build.sh"
echo "run: $build_dir/cli/pipeplan demo${*:+ $*}"
exec "$build_dir/cli/pipeplan" demo "$@"

#!/usr/bin/env bash
# Writes one tests/data/release-* directory with an earlier pipeplan, so that
# tests/cli/release_files_test.cc can check what today's pipeplan makes of its files.
#   bash make_release_files.sh OLD_PIPEPLAN DIR EXT
# EXT is the extension of the plan, timelines and profile: .json or .pb. With .json a binary
# plan.pb is written too (the test checks that binary files from before file kinds are refused).
# The directories and the builds that wrote them (pipeplan 0.1.0):
#   release-0.1.0-b081c0f  .json  commit b081c0f (2026-11-24), before files recorded their kind
#   release-0.1.0-32d0735  .pb    commit 32d0735 (2026-11-25), file format version 1, before
#                                 memory in bytes
# To remake one:
#   git worktree add /tmp/old COMMIT && cmake -S /tmp/old -B /tmp/old-build -G Ninja \
#     -DPIPEPLAN_BUILD_TESTS=OFF -DPIPEPLAN_BUILD_BENCH=OFF && cmake --build /tmp/old-build \
#     --target pipeplan && bash make_release_files.sh /tmp/old-build/cli/pipeplan DIR EXT
# (each DIR holds the request.textproto the files are made from).
set -euo pipefail
old="$1"
ext="$3"
cd "$(dirname "$0")/$2"
"$old" --version
"$old" plan --request request.textproto -o "plan$ext"
if [[ "$ext" == .json ]]; then "$old" plan --request request.textproto -o plan.pb; fi
"$old" export "plan$ext" --format torch-csv -o plan.csv
"$old" simulate "plan$ext" --json --timeline "simulated$ext" > simulate.json
"$old" run "plan$ext" --steps 3 --warmup 1 --time-scale 0.0005 --timeline "measured$ext" \
  > /dev/null 2>&1
"$old" profile "measured$ext" -o "profile$ext" > /dev/null
"$old" calibrate "profile$ext" -o costs.txtpb > /dev/null
"$old" simulate "plan$ext" --costs costs.txtpb --json > simulate_calibrated.json

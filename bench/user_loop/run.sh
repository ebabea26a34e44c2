#!/usr/bin/env bash
# The documented loop of docs/torch-interop.md on a model the repository's tests do not use
# (mixer_job.py, or $JOB: transformer_job.py), as a new user runs it, then every candidate
# timed: auto's pick (its CSV in torch's runtime) against each of torch's own schedule classes, ROUNDS rounds (default 5),
# round-robin against drift. Prints each config's median over the rounds. Needs the torch venv
# (scripts/setup_torch.sh) and a built pipeplan. Wants a quiet machine: on the shared 2-core VM
# single runs vary by +-20%. ROUNDS=0 runs the loop and the memory check only
# (torch_interop.user_loop in CI).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
pp=${PIPEPLAN:-$(bash "$repo/scripts/build_dir.sh")/cli/pipeplan}
py=${PIPEPLAN_PYTHON:-$(ls -d "$HOME"/.cache/pipeplan/venv-torch-*/bin/python | tail -1)}
rounds=${ROUNDS:-5}
job_file=$here/${JOB:-mixer_job.py}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
job() {  # job ARGS...: the model's job over 2 Gloo processes
  "$py" -m torch.distributed.run --nproc-per-node 2 --master-addr 127.0.0.1 \
    --master-port $((20000 + RANDOM % 20000)) "$job_file" "$@" 2>&1
}
# 1. The schedule run today (torch's Schedule1F1B) and one short zero-bubble run, profiled.
job --schedule Schedule1F1B --profile fb --steps 5 >/dev/null
"$pp" import --format torch-trace fb/rank0.json.gz fb/rank1.json.gz -o fb.pb --plan-output fb-ran.pb \
  --profile-output fb.json >/dev/null 2>&1
"$pp" plan --strategy zb-h1 --runtime torch --ranks 2 --microbatches 8 -o zb.pb >/dev/null
"$pp" export zb.pb --format torch-csv -o zb.csv
job --csv zb.csv --profile zb --steps 5 >/dev/null
"$pp" import --format torch-trace zb/rank0.json.gz zb/rank1.json.gz --plan zb.pb -o zb-measured.pb \
  --profile-output zb.json >/dev/null 2>&1
# 2. Both calibrated together; auto for torch's runtime.
"$pp" calibrate fb.json zb.json -o costs.json
"$pp" plan --strategy auto --runtime torch --ranks 2 --microbatches 8 --costs costs.json -o plan.pb
"$pp" export plan.pb --format torch-csv -o plan.csv
echo "simulated step of the pick: $("$pp" simulate plan.pb --json | sed 's/.*"makespan":\([0-9.]*\).*/\1/') us"
# The pick's predicted peak bytes per rank against a profiled run of it (what diff measures:
# the process's live tensors, counted by pipeplan_profiler.py where the CPU trace did not).
job --csv plan.csv --profile pick --steps 5 >/dev/null
"$pp" import --format torch-trace pick/rank0.json.gz pick/rank1.json.gz --plan plan.pb \
  -o pick-measured.pb >/dev/null 2>&1
"$pp" simulate plan.pb --timeline pick-simulated.pb >/dev/null
"$pp" diff pick-simulated.pb pick-measured.pb | sed -n '/peak memory simulated/,/^$/p'
[[ "$rounds" -gt 0 ]] || exit 0
# 3. Timed: the pick against torch's classes.
configs=("pick|--csv plan.csv" "Schedule1F1B|--schedule Schedule1F1B"
         "ScheduleGPipe|--schedule ScheduleGPipe"
         "ScheduleInterleaved1F1B|--schedule ScheduleInterleaved1F1B --stages 4"
         "ScheduleLoopedBFS|--schedule ScheduleLoopedBFS --stages 4"
         "ScheduleInterleavedZeroBubble|--schedule ScheduleInterleavedZeroBubble --stages 4"
         "ScheduleZBVZeroBubble|--schedule ScheduleZBVZeroBubble --stages 4 --placement v"
         "ScheduleDualPipeV|--schedule ScheduleDualPipeV --stages 4 --placement v")
for ((round = 1; round <= rounds; round++)); do
  for config in "${configs[@]}"; do
    # shellcheck disable=SC2086  # the config's flags are words
    ms=$(job ${config#*|} --steps 10 | grep -o "median step [0-9.]*" | awk '{print $3}')
    echo "${config%%|*} $ms" >>times.txt
  done
done
python3 - <<'PY'
import collections, statistics
runs = collections.defaultdict(list)
for line in open("times.txt"):
    name, ms = line.split()
    runs[name].append(float(ms))
for name, ms in runs.items():
    print(f"{name:30s} median {statistics.median(ms):7.1f} ms  runs {ms}")
PY

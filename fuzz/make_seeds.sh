#!/usr/bin/env bash
# Regenerates the committed seed corpora (fuzz/corpus/<target>/) from files the pipeplan
# command writes: small plans of several strategies in every format, their torch CSV exports,
# simulated and measured timelines, profiles and calibrated cost files. Requests are the
# request part of written plans; command lines are the README's examples, one word per line.
# Needs a built pipeplan (scripts/build.sh) and protoc. Small sizes keep every seed fast.
# Inputs named regression-* (each one a fixed crash, see docs/reliability.md) are kept.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
pipeplan=${PIPEPLAN:-$(bash "$repo/scripts/build_dir.sh")/cli/pipeplan}
corpus=$repo/fuzz/corpus
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

find "$corpus" -type f ! -name 'regression-*' -delete 2>/dev/null || true
mkdir -p "$corpus"/{plan_file,validate_simulate,request_file,cli_flags,cost_file,torch_csv,timeline_file,profile_file}

# Plans: one per strategy family, each in the three formats.
plan() {  # name, then the plan flags
  local name=$1
  shift
  for ext in pb txtpb json; do
    "$pipeplan" plan "$@" -o "$name.$ext" >/dev/null
    cp "$name.$ext" "$corpus/plan_file/"
    cp "$name.$ext" "$corpus/validate_simulate/"
  done
}
plan 1f1b --strategy 1f1b --ranks 2 --microbatches 4
plan interleaved --strategy interleaved-1f1b --ranks 2 --stages-per-rank 2 --microbatches 4 --comm 0.1
plan zbv-pv --strategy zbv --ranks 2 --microbatches 4 --post-validation
plan dualpipe --strategy dualpipe --ranks 2 --microbatches 4 --overlap 2.5
plan zb --strategy zb --ranks 3 --microbatches 3 --forward 2 --backward-input 2 --backward-weight 1

# Requests: the request of a written plan, in each format.
python3 - <<'PY'
import json
request = json.load(open("zbv-pv.json"))["request"]
json.dump(request, open("zbv-pv-request.json", "w"), indent=1)
text = open("interleaved.txtpb").read()
start = text.index("request {") + len("request {")
depth, end = 1, start
while depth:
    depth += {"{": 1, "}": -1}.get(text[end], 0)
    end += 1
open("interleaved-request.txtpb", "w").write(text[start:end - 1])
PY
protoc --proto_path="$repo/proto" --encode=pipeplan.v1.PlanRequest "$repo/proto/pipeplan.proto" \
  <interleaved-request.txtpb >interleaved-request.pb
cp zbv-pv-request.json interleaved-request.txtpb interleaved-request.pb "$corpus/request_file/"

# Torch CSV, as 'export' writes it (the comms format is a seed too: import must reject it well).
for name in 1f1b interleaved zbv-pv dualpipe zb; do
  "$pipeplan" export "$name.pb" --format torch-csv -o "$corpus/torch_csv/$name.csv" 2>/dev/null
done
"$pipeplan" export interleaved.pb --format torch-csv-comms -o "$corpus/torch_csv/interleaved-comms.csv"

# Timelines (simulated and measured), profiles and calibrated costs, each in every format.
"$pipeplan" run interleaved.pb --time-scale 0.0001 --steps 2 --warmup 0 --timeline measured.pb >/dev/null 2>&1
for ext in pb txtpb json; do
  "$pipeplan" simulate zbv-pv.pb --timeline "$corpus/timeline_file/simulated.$ext" >/dev/null
  "$pipeplan" profile measured.pb -o "profile.$ext" --quiet
  cp "profile.$ext" "$corpus/profile_file/"
  "$pipeplan" calibrate "profile.$ext" -o "$corpus/cost_file/costs.$ext" >/dev/null
done
cp measured.pb "$corpus/timeline_file/measured.pb"
"$pipeplan" calibrate profile.pb --uniform -o "$corpus/cost_file/costs-uniform.txtpb" >/dev/null

# Command lines: the README's 'plan' and 'compare' examples, one word per line.
count=0
words() {
  count=$((count + 1))
  printf '%s\n' "$@" >"$corpus/cli_flags/args-$count.txt"
}
words --strategy 1f1b --ranks 4 --microbatches 8 --forward 1 --backward 2 -o plan.pb
words --strategy zbv --ranks 4 --microbatches 8 --post-validation -o zbv.pb
words --strategy auto --ranks 8 --microbatches 24 --memory-limit 8 -o best.pb
words --strategy interleaved-1f1b --ranks 4 --stages-per-rank 2 --microbatches 8 \
  --microbatch-group-size 4 --comm=0.1
words --ranks 8 --microbatches 24 --forward 18522 --backward-input 18086 \
  --backward-weight 9337 --comm 601 --overlap 30000
words --request request.textproto -o plan.pb

echo "make_seeds: $(find "$corpus" -type f | wc -l) seeds in $corpus"

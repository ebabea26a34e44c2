#!/usr/bin/env bash
# Regenerates the committed seed corpora (fuzz/corpus/<target>/) from files the pipeplan
# command writes: small plans of several strategies in every format, their torch CSV exports,
# simulated and measured timelines, profiles and calibrated cost files, torch.profiler traces,
# the CP-SAT solver's results, and cost files cut for other pipelines. Requests are the
# request part of written plans; command lines are the README's examples, one word per line.
# Needs a built pipeplan (scripts/build.sh), protoc and python3; the solver's results need a
# Python with OR-Tools (PIPEPLAN_SOLVER_PYTHON, else scripts/setup_solver.sh's), and without
# one fuzz/corpus/solver_result/ is kept as committed. Small sizes keep every seed fast.
# Inputs named regression-* (each one a fixed crash, see docs/reliability.md) are kept.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
pipeplan=${PIPEPLAN:-$(bash "$repo/scripts/build_dir.sh")/cli/pipeplan}
corpus=$repo/fuzz/corpus
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

solver_python=${PIPEPLAN_SOLVER_PYTHON:-}
if [[ -z "$solver_python" ]]; then
  for candidate in "$HOME"/.cache/pipeplan/venv-solver-ortools-*/bin/python; do
    if [[ -x "$candidate" ]]; then solver_python=$candidate; fi
  done
fi
keep=()
if [[ -z "$solver_python" || ! -x "$solver_python" ]]; then
  echo "make_seeds: no Python with OR-Tools: fuzz/corpus/solver_result is kept as committed" >&2
  solver_python=
  keep=(! -path "$corpus/solver_result/*")
fi
find "$corpus" -type f ! -name 'regression-*' "${keep[@]}" -delete 2>/dev/null || true
mkdir -p "$corpus"/{plan_file,validate_simulate,request_file,cli_flags,cost_file,torch_csv,timeline_file,profile_file}
mkdir -p "$corpus"/{torch_trace,solver_result,stage_recut,output_rendering}

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
# Export refuses a dual-placement plan (dualpipe): torch's grammar cannot express it.
for name in 1f1b interleaved zbv-pv zb; do
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

# torch.profiler traces (torch_trace): each rank's trace of a 1f1b job (P = 2 and P = 1,
# M = 2), laid out as import_trace_test.cc's TraceWriter writes them on a CPU run: ProfilerStep
# and PP: ranges, an operator in each compute action, allocator events; two ranks' traces are
# one input joined by a 0x00 byte. Then the first ProfilerStep of the GPU trace in
# examples/traces (interleaved ZB, one rank, V = 4), its microbatches 0 and 1 only, with a few
# of its operators, launches, kernels and allocator events; and a gzip'd input.
"$pipeplan" plan --strategy 1f1b --ranks 2 --microbatches 2 -o trace-p2.json >/dev/null
"$pipeplan" simulate trace-p2.json --timeline trace-p2-timeline.json >/dev/null
"$pipeplan" plan --strategy 1f1b --ranks 1 --microbatches 2 -o trace-p1.json >/dev/null
"$pipeplan" simulate trace-p1.json --timeline trace-p1-timeline.json >/dev/null
python3 - "$corpus/torch_trace" <<'PY'
import json, sys
out = sys.argv[1]
# Torch's action tokens for pipeplan's kinds ("0F1", "1RECV_F0").
CODES = {"FORWARD": "F", "BACKWARD": "B", "BACKWARD_INPUT": "I", "BACKWARD_WEIGHT": "W",
         "SEND_F": "SEND_F", "RECV_F": "RECV_F", "SEND_B": "SEND_B", "RECV_B": "RECV_B"}
SCALE = 100.0  # microseconds per unit of the plan's time


def event(ph, cat, name, ts, **fields):
    e = {"ph": ph, "cat": cat, "name": name, "pid": 7, "tid": 7, "ts": round(ts, 3)}
    e.update(fields)
    return json.dumps(e)


def trace(name, rank, steps, info, memory):
    """Rank `rank`'s trace of the job that ran plan `name`, `steps` steps of it."""
    plan, timeline = json.load(open(name + ".json")), json.load(open(name + "-timeline.json"))
    program, timings = plan["programs"][rank]["actions"], timeline["ranks"][rank]["actions"]
    period = SCALE * timeline["ranks"][rank]["last_end"] + 500.0
    origin = 4793894462883.125 + 0.375 * rank
    events = []
    for s in range(steps):
        base = origin + s * period
        events.append(event("X", "user_annotation", f"ProfilerStep#{s + 1}", base - 50,
                            dur=period - 100))
        allocated = 1 << 20
        for action, t in zip(program, timings):
            token = f'{action["stage"]}{CODES[action["kind"]]}{action["microbatch"]}'
            start = base + SCALE * t["start"]
            transfer = action["kind"] in ("SEND_F", "RECV_F", "SEND_B", "RECV_B")
            dur = 1.0 if action["kind"].startswith("RECV") else SCALE * (t["end"] - t["start"])
            events.append(event("X", "user_annotation", "PP:" + token, start, dur=dur))
            if transfer:
                continue
            events.append(event("X", "cpu_op", "aten::mm", start + 0.5, dur=dur - 1))
            if memory and s == 0:  # the first step's allocations only, to keep it small
                change = 4096 if action["kind"] == "FORWARD" else -4096
                allocated += change
                events.append(event("i", "cpu_instant_event", "[memory]", start + dur / 2, s="t",
                                    args={"Total Allocated": allocated, "Bytes": change,
                                          "Device Type": 0}))
    head = {"schemaVersion": 1}
    if info:
        head["distributedInfo"] = {"backend": "gloo", "rank": rank,
                                   "world_size": len(plan["programs"])}
    return json.dumps(head)[:-1] + ', "traceEvents": [\n' + ",\n".join(events) + "\n]}\n"


# Rank 1's trace first: their distributedInfo puts them in rank order.
with open(f"{out}/cpu-1f1b-p2.json", "w") as f:
    f.write(trace("trace-p2", 1, 2, True, True) + "\0" + trace("trace-p2", 0, 2, True, True))
with open(f"{out}/cpu-1f1b-p1.json", "w") as f:
    f.write(trace("trace-p1", 0, 2, False, False))
PY
gzip -9 -n -c "$corpus/torch_trace/cpu-1f1b-p2.json" >"$corpus/torch_trace/cpu-1f1b-p2.json.gz"
# A layer trace (import --format torch-layer-trace): two ranks' marked layers, two
# microbatches, as pipeplan_profiler's mark_layers writes them on a CPU run, with allocator
# events and the layers' bytes.
python3 - "$corpus/torch_trace/cpu-layers-p2.json" <<'PY'
import json, sys
RANKS = [["embed", "blocks.0"], ["blocks.1", "head"]]


def layer_trace(rank):
    events, t, allocated = [], 1000.0 + rank, 1 << 20
    for m in range(2):
        for name in RANKS[rank]:
            events.append({"ph": "X", "cat": "user_annotation", "pid": 1, "tid": 1,
                           "name": f"pipeplan.layer.forward:{name}", "ts": t, "dur": 40.0 + m})
            allocated += 8192
            events.append({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]",
                           "pid": 1, "tid": 1, "ts": t + 20, "args": {
                               "Total Allocated": allocated, "Bytes": 8192, "Device Type": 0}})
            t += 50
        for name in reversed(RANKS[rank]):
            events.append({"ph": "X", "cat": "user_annotation", "pid": 1, "tid": 1,
                           "name": f"pipeplan.layer.backward:{name}", "ts": t, "dur": 70.0})
            t += 80
    head = {"distributedInfo": {"backend": "gloo", "rank": rank, "world_size": 2},
            "pipeplan_layers": {name: {"parameter_bytes": 16640, "output_bytes": 8192}
                                for name in RANKS[rank]},
            "traceEvents": events}
    return json.dumps(head)


with open(sys.argv[1], "w") as f:
    f.write(layer_trace(1) + "\0" + layer_trace(0))
PY
python3 - "$repo/examples/traces/h200_interleaved_zb_rank0.json.gz" \
  "$corpus/torch_trace/h200-step1.json" <<'PY'
import gzip, json, re, sys
source = json.load(gzip.open(sys.argv[1]))
events = source["traceEvents"]
step = next(e for e in events
            if e.get("cat") == "user_annotation" and e.get("name") == "ProfilerStep#1")
lo, hi = step["ts"], step["ts"] + step["dur"]
token = re.compile(r"PP:(\d+)([A-Z_]+)(\d*)$")
ARGS = ("External id", "correlation", "Total Allocated", "Bytes", "Device Type")


def in_step(e):
    return "ts" in e and lo <= e["ts"] <= hi


def first(condition):
    return next(e for e in events if condition(e))


kept, ranges, bookkeeping = [step], [], 0
for e in events:
    m = token.match(str(e.get("name", "")))
    if not m or e.get("cat") != "user_annotation" or not in_step(e):
        continue
    if not m.group(3):  # UNSHARD, RESHARD, REDUCE_GRAD: two of them
        bookkeeping += 1
        if bookkeeping <= 2:
            kept.append(e)
    elif int(m.group(3)) < 2:
        kept.append(e)
        ranges.append(e)
# The first three actions' first operator, first launch, its kernel and their device range.
for r in ranges[:3]:
    end = r["ts"] + r["dur"]
    during = lambda e: "ts" in e and r["ts"] <= e["ts"] <= end
    launch = first(lambda e: e.get("cat") == "cuda_runtime" and during(e) and
                   "correlation" in e.get("args", {}))
    kept += [
        first(lambda e: e.get("cat") == "cpu_op" and e.get("tid") == r["tid"] and during(e)),
        launch,
        first(lambda e: e.get("cat") in ("kernel", "gpu_memset") and
              e["args"].get("correlation") == launch["args"]["correlation"]),
        first(lambda e: e.get("cat") == "gpu_user_annotation" and
              e["args"].get("External id") == r["args"]["External id"]),
    ]
kept += [e for e in events if e.get("name") == "[memory]" and in_step(e)][:4]
order = {id(e): i for i, e in enumerate(events)}
kept = sorted({id(e): e for e in kept}.values(), key=lambda e: order[id(e)])


def slim(e):
    return {**e, "args": {k: v for k, v in e["args"].items() if k in ARGS}} if "args" in e else e


head = {"schemaVersion": 1, "baseTimeNanoseconds": source["baseTimeNanoseconds"],
        "distributedInfo": {k: source["distributedInfo"][k]
                            for k in ("backend", "rank", "world_size")}}
with open(sys.argv[2], "w") as f:
    f.write(json.dumps(head)[:-1] + ', "traceEvents": [\n' +
            ",\n".join(json.dumps(slim(e)) for e in kept) + "\n]}\n")
PY

# The CP-SAT solver's results (solver_result): 3 bytes that choose the request (see
# solver_result_fuzzer.cc), then each result the solver wrote for that request, joined by
# 0x00 bytes. pipeplan runs the solver through a wrapper that keeps a copy of each result.
# Hand-written: a solver that found nothing in its time.
cat >capture_solver.py <<'PY'
import os, runpy, shutil, sys
script, keep = os.environ["REAL_SOLVER_SCRIPT"], os.environ["SOLVER_RESULTS"]
sys.argv = [script] + sys.argv[1:]
try:
    runpy.run_path(script, run_name="__main__")
finally:
    if os.path.exists(sys.argv[2]):
        shutil.copy(sys.argv[2], os.path.join(keep, f"{len(os.listdir(keep)) + 1}.txt"))
PY
solver_seed() {  # name, the header's bytes (printf escapes), then the plan flags
  local name=$1 header=$2 result separator=
  shift 2
  rm -rf results && mkdir results
  # The plan may fail after its solves (nothing fits a limit of 0.5): only no result is an error.
  SOLVER_RESULTS=$work/results REAL_SOLVER_SCRIPT=$repo/python/pipeplan_solver.py \
    PIPEPLAN_SOLVER_SCRIPT=$work/capture_solver.py PIPEPLAN_SOLVER_PYTHON=$solver_python \
    "$pipeplan" plan "$@" --time-limit 5 -o solved.pb >/dev/null 2>&1 || true
  if [[ -z "$(ls results)" ]]; then
    echo "make_seeds: the solver wrote no result for $name (pipeplan plan $*)" >&2
    exit 1
  fi
  {
    printf "$header"
    for result in $(ls -v results); do
      printf "$separator"
      cat "results/$result"
      separator='\0'
    done
  } >"$corpus/solver_result/$name"
}
if [[ -n "$solver_python" ]]; then
  solver_seed optimal-p2-m4 '\x00\x0a\x00' --strategy optimal --ranks 2 --microbatches 4
  solver_seed optimal-v2-p2-m4 '\x01\x0a\x00' --strategy optimal --ranks 2 --microbatches 4 \
    --stages-per-rank 2
  solver_seed optimal-v-p2-m4 '\x02\x0a\x00' --strategy optimal-v --ranks 2 --microbatches 4 \
    --stages-per-rank 2
  solver_seed optimal-fb-p2-m2 '\x03\x04\x00' --strategy optimal-fb --ranks 2 --microbatches 2
  solver_seed periodic-p2-m6 '\x04\x10\x00' --strategy optimal --ranks 2 --microbatches 6 \
    --periodic
  solver_seed warm-start-p1-m4 '\x00\x09\x00' --strategy optimal --ranks 1 --microbatches 4
  solver_seed limit-p3-m3 '\x08\x08\x03' --strategy optimal --ranks 3 --microbatches 3 \
    --memory-limit 2
  solver_seed nothing-fits-p2-m4 '\x08\x0a\x00' --strategy optimal --ranks 2 --microbatches 4 \
    --memory-limit 0.5
fi
printf '\x00\x0a\x00status unknown\nwall_s 60.000\nstopped_by_clock 1\n' \
  >"$corpus/solver_result/unknown-p2-m4"

# Cost files cut for another pipeline (stage_recut): a cost file, then the byte that chooses
# the topology (see stage_recut_fuzzer.cc): the calibrated ones above, and hand-written ones
# with per-stage memory in bytes, static_by_rank of 3 ranks, and a dual placement's two chains.
cat >per-stage-bytes.txtpb <<'PB'
stages { forward: 2 backward: 4 backward_input: 2 backward_weight: 2 }
stages { forward: 3 backward: 6 backward_input: 3 backward_weight: 3 }
stages { forward: 3 backward: 6 backward_input: 3.5 backward_weight: 2.5 overlap: 8 }
stages { forward: 4 backward: 8 backward_input: 4 backward_weight: 4 }
boundaries { latency: 0.1 bandwidth: 1e10 activation_bytes: 1048576 }
boundaries { latency: 0.2 }
boundaries { latency: 0.1 receive_overhead: 0.05 }
time_unit: "us"
memory {
  unit: "bytes"
  stages { activation: 8388608 freed_by_input: 1048576 forward_transient: 2097152
           backward_transient: 4194304 input_transient: 4194304 retained: 524288
           static_bytes: 67108864 received_input: 1048576 received_gradient: 1048576 }
  stages { activation: 8388608 backward_transient: 4194304 static_bytes: 33554432 }
  stages { activation: 6291456 weight_transient: 1048576 static_bytes: 33554432
           received_input: 1048576 }
  stages { activation: 4194304 static_bytes: 100663296 }
  static_by_rank: [100000000, 120000000, 110000000]
  first_stage_static: 1048576
  last_stage_static: 2097152
  first_stage_data_per_microbatch: 4096
  last_stage_data_per_microbatch: 1024
}
PB
cat >dual-chains.txtpb <<'PB'
chains: 2
stages { forward: 1 backward: 2 backward_input: 1 backward_weight: 1 }
stages { forward: 2 backward: 4 backward_input: 2 backward_weight: 2 }
stages { forward: 1.5 backward: 3 backward_input: 1.5 backward_weight: 1.5 }
stages { forward: 2.5 backward: 5 backward_input: 2.5 backward_weight: 2.5 }
boundaries { latency: 0.5 }
boundaries { latency: 0 }
boundaries { latency: 0.25 }
memory {
  unit: "bytes"
  chains: 2
  stages { activation: 1000 static_bytes: 5000 }
  stages { activation: 2000 static_bytes: 3000 retained: 100 }
  stages { activation: 1500 static_bytes: 5000 }
  stages { activation: 2500 static_bytes: 3000 retained: 100 }
  limit: 100000
}
PB
# A binary file says what it is (text may leave it out).
{ cat dual-chains.txtpb; echo 'format_version: 1 kind: COST_MODEL'; } |
  protoc --proto_path="$repo/proto" --encode=pipeplan.v1.CostModel "$repo/proto/pipeplan.proto" \
    >dual-chains.pb
recut() {  # the cost file, the selector byte (a printf escape), the seed's name
  { cat "$1"; printf "$2"; } >"$corpus/stage_recut/$3"
}
recut "$corpus/cost_file/costs.txtpb" '\x0b' costs-p4-v2-loop.txtpb
recut "$corpus/cost_file/costs.pb" '\x4b' costs-p4-dual.pb
recut "$corpus/cost_file/costs.json" '\x07' costs-p8.json
recut "$corpus/cost_file/costs-uniform.txtpb" '\x01' costs-uniform-p2.txtpb
recut per-stage-bytes.txtpb '\x01' per-stage-bytes-p2.txtpb
recut per-stage-bytes.txtpb '\x4a' per-stage-bytes-p3-dual.txtpb
recut dual-chains.txtpb '\x29' dual-chains-p2-vshape.txtpb
recut dual-chains.pb '\x49' dual-chains-p2-dual.pb
recut dual-chains.txtpb '\x1a' dual-chains-p3-v4.txtpb

# What the commands render (output_rendering): the plan files above, one with huge costs, one
# with a memory model in bytes; and 8-byte inputs, each a double for the number formatting.
cp {1f1b,interleaved,zbv-pv,dualpipe,zb}.{pb,txtpb,json} "$corpus/output_rendering/"
"$pipeplan" plan --strategy 1f1b --ranks 2 --microbatches 2 --forward 1e70 \
  -o "$corpus/output_rendering/huge-costs.txtpb" >/dev/null
"$pipeplan" plan --strategy zbv --ranks 2 --microbatches 4 --costs per-stage-bytes.txtpb \
  -o "$corpus/output_rendering/memory-in-bytes.pb" >/dev/null
python3 - "$corpus/output_rendering" <<'PY'
import struct, sys
for name, value in [("number-fixed-limit", 999999999999999.9), ("number-huge", 1.5e300),
                    ("number-nan", float("nan")), ("number-minus-inf", float("-inf")),
                    ("number-denormal", 5e-324), ("number-kib", 1023.999),
                    ("number-minus-zero", -0.0)]:
    open(f"{sys.argv[1]}/{name}", "wb").write(struct.pack("<d", value))
PY


echo "make_seeds: $(find "$corpus" -type f | wc -l) seeds in $corpus"

#!/usr/bin/env bash
# Prints, as a markdown table, each catalogue strategy's makespan and its gap to the solver's
# optimum of the same placement and V (`pipeplan compare --optimal`) on a few settings: unit
# costs at several P and M, the Zero Bubble paper's 1.5B costs, and tight memory limits (at
# M = 256 the solver's rows are periodic steady states, not proven optima).
#   --time-limit SEC   the solver's budget per optimal row (default 30, deterministic seconds)
# Builds nothing: run scripts/build.sh first. docs/planning.md quotes its output.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
pipeplan=$(bash "$repo/scripts/build_dir.sh")/cli/pipeplan
time_limit=30
while (( $# > 0 )); do
  case "$1" in
    --time-limit) time_limit=${2:?--time-limit needs a number}; shift 2 ;;
    -h|--help) sed -n '2,6p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "optimal_gaps: unknown argument '$1' (expected --time-limit SEC)" >&2; exit 2 ;;
  esac
done
[[ -x "$pipeplan" ]] || { echo "optimal_gaps: $pipeplan not built (scripts/build.sh)" >&2; exit 1; }

# name|flags of `pipeplan compare`
settings=(
  "unit P=4 M=8|--ranks 4 --microbatches 8"
  "unit P=4 M=16|--ranks 4 --microbatches 16"
  "unit P=8 M=16|--ranks 8 --microbatches 16"
  "unit P=4 M=8, limit 2|--ranks 4 --microbatches 8 --memory-limit 2"
  "1.5B P=8 M=24|--ranks 8 --microbatches 24 --forward 18522 --backward-input 18086 --backward-weight 9337 --comm 601"
  "unit P=8 M=256, limit 4|--ranks 8 --microbatches 256 --memory-limit 4"
)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
header="| strategy | V |"
rule="|---|---|"
for i in "${!settings[@]}"; do
  IFS='|' read -r name flags <<<"${settings[$i]}"
  echo "optimal_gaps: $name (solver budget ${time_limit} s per optimal row)" >&2
  # shellcheck disable=SC2086  # flags are words
  "$pipeplan" compare $flags --optimal --time-limit "$time_limit" >"$work/$i.txt" 2>"$work/$i.err" ||
    { echo "optimal_gaps: compare failed on $name:" >&2; cat "$work/$i.err" >&2; exit 1; }
  header+=" $name |"
  rule+="---|"
done

echo "$header"
echo "$rule"
# Rows in catalogue order, from the first table; a strategy that failed shows '-'.
# A row: [*] strategy V makespan ... gap-to-optimal (the last field); a failed one has words.
python3 - "$work" "${#settings[@]}" <<'PY'
import re, sys
work, n = sys.argv[1], int(sys.argv[2])
tables = []
for i in range(n):
    rows = {}
    order = []
    for line in open(f"{work}/{i}.txt"):
        m = re.match(r"^[* ] {2}(\S+)\s+(\d+)\s+(\S+)(.*)$", line)
        if not m:
            continue
        name, v, makespan, rest = m.groups()
        key = (name, v)
        order.append(key)
        try:
            float(makespan)
            fields = rest.split()
            gap = fields[-1]
            if gap == "-":  # no solver for its placement (dual)
                rows[key] = makespan
            elif gap == "optimal":
                rows[key] = f"{makespan}, optimal"
            elif gap == "periodic":  # a steady state repeated: no bound
                rows[key] = f"{makespan}, periodic"
            elif gap.startswith("<=") or (len(fields) >= 2 and fields[-2] == "<="):
                # a solver row not proven optimal: its gap to the proven bound
                rows[key] = f"{makespan}, <= {gap.removeprefix('<=')} above the bound"
            else:
                rows[key] = f"{makespan} (+{gap})"
        except ValueError:
            rows[key] = "-"
    tables.append((order, rows))
seen = []
for order, _ in tables:
    for key in order:
        if key not in seen:
            seen.append(key)
for key in seen:
    cells = [rows.get(key, "-") for _, rows in tables]
    print(f"| {key[0]} | {key[1]} | " + " | ".join(cells) + " |")
PY

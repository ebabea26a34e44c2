#!/usr/bin/env python3
"""The planner's behaviour pinned before a refactor of its way in (issue 51): every strategy
at a few shapes, with and without latency and receive overhead, under limits, with
post-validation and group sizes, from cost files, auto for each runtime, compare tables, demo,
simulate --costs and one small optimal-v, each run through the pipeplan command.

Per case it keeps the exit code, stderr (errors and notes), the plan's digest (its text form
without the tool version: equal digests are equal plans, action for action) and
`simulate --json`, or a command's stdout (compare, demo). This is a characterisation corpus:
it says nothing about whether the plans are right (the strategy and simulator tests do); it
says that they did not change. An intended change is re-recorded with --record and listed,
with its reason, in the commit.

    behaviour_corpus.py PIPEPLAN [--record]   # check against (or rewrite) behaviour.jsonl
"""
import argparse
import concurrent.futures
import hashlib
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
CORPUS = os.path.join(HERE, "behaviour.jsonl")
# Paths as the corpus keeps them: the same in every clone.
H200 = "{repo}/examples/h200_zbv_costs.json"
CALIBRATED = "{repo}/examples/calibrated_costs.textproto"

CATALOGUE = [
    "gpipe", "1f1b", "interleaved-1f1b", "looped-bfs", "zb-h1", "zb-h2", "zb", "zb-1p", "zb-2p",
    "interleaved-zb", "zbv-handcrafted", "zbv", "v-half", "v-min", "dualpipe", "dualpipe-v",
    "1f1b-overlap", "interleaved-1f1b-overlap",
]
PV_FAMILY = ["zb", "zb-1p", "zb-2p", "zb-h1", "zb-h2", "interleaved-zb", "zbv",
             "zbv-handcrafted", "v-half", "v-min"]
SHAPES = [(4, 8), (4, 12), (8, 16), (2, 3)]
COSTS = {
    "unit": [],
    "latency": ["--forward", "1", "--backward-input", "1.2", "--backward-weight", "0.8",
                "--comm", "0.1"],
    "overhead": ["--forward", "2", "--backward", "5", "--comm", "0.3", "--receive-overhead",
                 "0.05", "--overlap", "5.5"],
}


def shape(p, m):
    return ["--ranks", str(p), "--microbatches", str(m)]


def cases():
    """(name, kind, args): kind 'plan' plans and simulates, 'stdout' keeps the output."""
    out = []
    for strategy in CATALOGUE:
        for p, m in SHAPES:
            for cost, flags in COSTS.items():
                out.append((f"{strategy}/P{p}M{m}/{cost}", "plan",
                            ["plan", "--strategy", strategy] + shape(p, m) + flags))
        out.append((f"{strategy}/P4M8/h200", "plan",
                    ["plan", "--strategy", strategy, "--costs", H200] + shape(4, 8)))
        out.append((f"{strategy}/P8M16/h200", "plan",
                    ["plan", "--strategy", strategy, "--costs", H200] + shape(8, 16)))
        out.append((f"{strategy}/P8M24/calibrated", "plan",
                    ["plan", "--strategy", strategy, "--costs", CALIBRATED] + shape(8, 24)))
    for strategy in ["interleaved-1f1b", "looped-bfs", "interleaved-zb",
                     "interleaved-1f1b-overlap"]:
        for v in (3, 4):
            out.append((f"{strategy}/P4M12V{v}/latency", "plan",
                        ["plan", "--strategy", strategy, "--stages-per-rank", str(v)] +
                        shape(4, 12) + COSTS["latency"]))
    for g in (4, 8, 5):
        out.append((f"interleaved-1f1b/P4M8G{g}", "plan",
                    ["plan", "--strategy", "interleaved-1f1b", "--microbatch-group-size", str(g)]
                    + shape(4, 8) + COSTS["latency"]))
    for strategy, limits in [("zb", ["3", "4.5", "6"]), ("zbv", ["2", "3", "5"]),
                             ("zb-1p", ["3", "4"]), ("1f1b", ["3", "4"]), ("v-half", ["2"])]:
        for limit in limits:
            out.append((f"{strategy}/P4M8/limit{limit}", "plan",
                        ["plan", "--strategy", strategy, "--memory-limit", limit] + shape(4, 8) +
                        COSTS["latency"]))
    for limit in ["1GiB", "400MiB"]:
        for strategy in ["zb", "zbv", "auto"]:
            out.append((f"{strategy}/P4M8/h200/limit{limit}", "plan",
                        ["plan", "--strategy", strategy, "--costs", H200, "--memory-limit", limit]
                        + shape(4, 8)))
    for strategy in PV_FAMILY + ["1f1b"]:
        for cost in ("unit", "latency"):
            out.append((f"{strategy}/P4M8/{cost}/pv", "plan",
                        ["plan", "--strategy", strategy, "--post-validation"] + shape(4, 8) +
                        COSTS[cost]))
    for runtime in ["any", "torch", "torchtitan", "megatron", "pipeplan-torch"]:
        flags = [] if runtime == "any" else ["--runtime", runtime]
        for cost in ("unit", "latency"):
            out.append((f"auto/P4M8/{cost}/{runtime}", "plan",
                        ["plan", "--strategy", "auto"] + flags + shape(4, 8) + COSTS[cost]))
        out.append((f"auto/P8M16/h200/{runtime}", "plan",
                    ["plan", "--strategy", "auto", "--costs", H200] + flags + shape(8, 16)))
    for limit in ["3", "5"]:
        out.append((f"auto/P4M8/latency/limit{limit}", "plan",
                    ["plan", "--strategy", "auto", "--memory-limit", limit] + shape(4, 8) +
                    COSTS["latency"]))
    out.append(("auto/P4M8V2/latency", "plan",
                ["plan", "--strategy", "auto", "--stages-per-rank", "2"] + shape(4, 8) +
                COSTS["latency"]))
    out.append(("auto/P4M8/latency/pv", "plan",
                ["plan", "--strategy", "auto", "--post-validation"] + shape(4, 8) +
                COSTS["latency"]))
    compares = [
        ("compare/P4M8/unit", shape(4, 8)),
        ("compare/P8M16/latency", shape(8, 16) + COSTS["latency"]),
        ("compare/P4M12/overhead/V3", shape(4, 12) + COSTS["overhead"] +
         ["--stages-per-rank", "3"]),
        ("compare/P4M8/pv", shape(4, 8) + ["--post-validation"]),
        ("compare/P4M8/limit3/auto", shape(4, 8) + ["--memory-limit", "3", "--auto"]),
        ("compare/P8M16/h200", shape(8, 16) + ["--costs", H200]),
        ("compare/P4M8/h200/auto", shape(4, 8) + ["--costs", H200, "--auto"]),
        ("compare/P4M8/torch/auto", shape(4, 8) + COSTS["latency"] +
         ["--runtime", "torch", "--auto"]),
    ]
    for name, flags in compares:
        out.append((name, "stdout", ["compare"] + flags))
    out.append(("demo", "stdout", ["demo", "--output-dir", "{tmp}/demo"]))
    out.append(("simulate-costs/1f1b/P8M24/calibrated", "simulate-costs",
                ["plan", "--strategy", "1f1b"] + shape(8, 24)))
    out.append(("simulate-costs/zbv/P4M8/h200", "simulate-costs",
                ["plan", "--strategy", "zbv"] + shape(4, 8) + COSTS["latency"]))
    out.append(("optimal-v/P2M3", "plan",
                ["plan", "--strategy", "optimal-v", "--time-limit", "20"] + shape(2, 3) +
                COSTS["latency"]))
    return out


def run(binary, args, tmp):
    args = [a.replace("{tmp}", tmp).replace("{repo}", REPO) for a in args]
    done = subprocess.run([binary] + args, capture_output=True, text=True, cwd=tmp)
    def kept(text):
        return text.replace(tmp, "{tmp}").replace(REPO, "{repo}")
    return done.returncode, kept(done.stdout), kept(done.stderr)


def plan_digest(path):
    """The plan's text form without the tool version, digested."""
    with open(path, encoding="utf-8") as f:
        lines = [line for line in f if not line.lstrip().startswith("tool_version:")]
    return hashlib.sha256("".join(lines).encode()).hexdigest()


def record_case(binary, case):
    name, kind, args = case
    with tempfile.TemporaryDirectory() as tmp:
        entry = {"case": name, "args": args}
        if kind == "stdout":
            entry["exit"], entry["stdout"], entry["stderr"] = run(binary, args, tmp)
            return entry
        plan = os.path.join(tmp, "plan.textproto")
        entry["exit"], _, entry["stderr"] = run(binary, args + ["-o", plan], tmp)
        if entry["exit"] != 0:
            return entry
        entry["plan"] = plan_digest(plan)
        simulate = ["simulate", plan, "--json"]
        if kind == "simulate-costs":
            simulate += ["--costs", CALIBRATED if "calibrated" in name else H200]
        code, out, err = run(binary, simulate, tmp)
        entry["simulate"] = json.loads(out) if code == 0 else {"exit": code, "stderr": err}
        return entry


def solver_missing(entry):
    return entry["case"].startswith("optimal") and "OR-Tools" in entry.get("stderr", "")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pipeplan", help="the built pipeplan command")
    parser.add_argument("--record", action="store_true", help="rewrite behaviour.jsonl")
    args = parser.parse_args()
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        entries = list(pool.map(lambda c: record_case(args.pipeplan, c), cases()))
    if args.record:
        missing = [e["case"] for e in entries if solver_missing(e)]
        if missing:
            sys.exit(f"cannot record without the solver (scripts/setup_solver.sh): {missing}")
        with open(CORPUS, "w", encoding="utf-8") as f:
            for entry in entries:
                f.write(json.dumps(entry, sort_keys=True) + "\n")
        print(f"recorded {len(entries)} cases to {CORPUS}")
        return 0
    with open(CORPUS, encoding="utf-8") as f:
        expected = {e["case"]: e for e in map(json.loads, f)}
    failures, skipped = [], []
    for entry in entries:
        want = expected.get(entry["case"])
        if want is None:
            failures.append(f"{entry['case']}: not in the corpus (record it)")
        elif solver_missing(entry):
            skipped.append(entry["case"])
        elif want != entry:
            keys = sorted(k for k in set(want) | set(entry) if want.get(k) != entry.get(k))
            failures.append(f"{entry['case']}: {', '.join(keys)} changed; "
                            f"pipeplan {' '.join(entry['args'])}")
    for name in sorted(set(expected) - {e["case"] for e in entries}):
        failures.append(f"{name}: in the corpus but no longer run")
    for name in skipped:
        print(f"skipped {name}: no OR-Tools solver (scripts/setup_solver.sh)")
    for failure in failures:
        print(failure)
    print(f"{len(entries) - len(failures) - len(skipped)} of {len(entries)} cases unchanged")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

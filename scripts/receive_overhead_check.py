#!/usr/bin/env python3
"""Checks the receive-overhead proposal of docs/torch.md on a measured timeline.

Reads a JSON timeline written by `pipeplan-torch run --timeline FILE.json` (the median step,
with its plan) and prints:
  - the lateness of every receive: its end minus the later of its own post and its send's
    post (how long a receive takes beyond waiting for its data);
  - the step re-simulated from that step's own compute durations (median per stage and
    kind), the clean-transfer latency (median lateness of receives under 0.5 ms), and a
    receive overhead o added to every receive's post, for o = 0, the median and the mean
    lateness, against the measured step.
The simulation is the planner's blocking-receive model in a few lines: a rank runs its program
in order, a SEND is posted and does not block, a RECV completes at max(post + o, send post +
latency), a compute action takes its median duration. Standard library only.

Usage: scripts/receive_overhead_check.py TIMELINE.json
"""
import json
import statistics
import sys

CLEAN_LATENESS_US = 500.0


def matching_send(recv):
    if recv["kind"] == "RECV_F":
        return ("SEND_F", recv["stage"] - 1, recv["microbatch"])
    if recv["kind"] == "RECV_B":
        return ("SEND_B", recv["stage"] + 1, recv["microbatch"])
    raise ValueError(f"{recv['kind']}: only RECV_F and RECV_B are modelled")


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            timeline = json.load(f)
        programs = [p["actions"] for p in timeline["plan"]["programs"]]
        times = [r["actions"] for r in timeline["ranks"]]
        makespan = timeline["metrics"]["makespan"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SystemExit(f"{path}: not a JSON timeline from 'pipeplan-torch run --timeline' ({e})")
    for rank, (actions, timed) in enumerate(zip(programs, times)):
        if len(actions) != len(timed):
            raise SystemExit(f"{path}: rank {rank} has {len(actions)} actions but "
                             f"{len(timed)} timings")
    return programs, times, makespan


def measure(programs, times):
    send_post = {}
    for actions, timed in zip(programs, times):
        for action, t in zip(actions, timed):
            if action["kind"].startswith("SEND"):
                send_post[(action["kind"], action["stage"], action["microbatch"])] = t["start"]
    lateness, durations = [], {}
    for actions, timed in zip(programs, times):
        for action, t in zip(actions, timed):
            kind = action["kind"]
            if kind.startswith("RECV"):
                lateness.append(t["end"] - max(t["start"], send_post[matching_send(action)]))
            elif not kind.startswith("SEND"):
                durations.setdefault((kind, action["stage"]), []).append(t["end"] - t["start"])
    medians = {key: statistics.median(values) for key, values in durations.items()}
    return sorted(lateness), medians


def simulate(programs, medians, latency, overhead):
    pos = [0] * len(programs)
    now = [0.0] * len(programs)
    sent = {}
    while any(p < len(actions) for p, actions in zip(pos, programs)):
        progressed = False
        for rank, actions in enumerate(programs):
            while pos[rank] < len(actions):
                action = actions[pos[rank]]
                kind = action["kind"]
                if kind.startswith("SEND"):
                    sent[(kind, action["stage"], action["microbatch"])] = now[rank]
                elif kind.startswith("RECV"):
                    send = matching_send(action)
                    if send not in sent:
                        break
                    now[rank] = max(now[rank] + overhead, sent[send] + latency)
                else:
                    now[rank] += medians[(kind, action["stage"])]
                pos[rank] += 1
                progressed = True
        if not progressed:
            raise SystemExit("the plan's receives wait on each other (deadlock)")
    return max(now)


def main(argv):
    if len(argv) != 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) == 2 else 2
    programs, times, measured = load(argv[1])
    lateness, medians = measure(programs, times)
    if not lateness:
        raise SystemExit(f"{argv[1]}: no receives to look at")
    clean = [x for x in lateness if x < CLEAN_LATENESS_US]
    latency = statistics.median(clean) if clean else 0.0
    print(f"{len(lateness)} receives, lateness in us: median {statistics.median(lateness):.0f}, "
          f"mean {statistics.mean(lateness):.0f}, max {lateness[-1]:.0f}")
    print(f"measured step {measured:.0f} us; latency {latency:.0f} us")
    for name, overhead in (("0", 0.0), ("median", statistics.median(lateness)),
                           ("mean", statistics.mean(lateness))):
        simulated = simulate(programs, medians, latency, overhead)
        print(f"o = {name:>6} ({overhead:5.0f} us): simulated {simulated:.0f} us, measured "
              f"{100 * (measured - simulated) / simulated:+.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

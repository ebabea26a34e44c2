#!/usr/bin/env python3
"""CP-SAT solver behind `pipeplan plan --strategy optimal` (OR-Tools, PyPI `ortools`).

pipeplan turns a plan request into a scheduling instance (built by planner/src/solver_instance.cc,
written as JSON by app/src/cp_sat_solver.cc) and reads back when every op starts; what the ops
mean stays on the C++ side.
The instance holds integers only (time and memory scaled by pipeplan):

  ops          [{"name", "rank", "duration", "setup"}]: one compute op each; `setup` is idle
               time the rank needs right before the op (a receive's overhead)
  precedences  [[before, after, delay]]: start(after) >= end(before) + delay
  holds        [[rank, from_op, to_op, amount]]: `amount` of the rank's memory is held from
               start(from_op) until end(to_op) (to_op -1: until the step ends)
  capacity     per rank, the memory the holds may use at any time, or null (no limit)
  static       per rank, memory besides the holds (for "minimize": "memory")
  hint         a start per op from the best heuristic plan, or null (periodic: one
               microbatch of its steady state, relative to its first forward)
  hint_period  periodic only: the heuristic's spacing of microbatches, or 0
  minimize     "makespan", or "memory": the smallest per-rank limit (static included) with
               which any order fits, whatever its makespan
  time_limit_s (CP-SAT deterministic seconds), workers (1: the answer of several depends on
  their count), horizon, time_scale and memory_scale (integer units per unit of the request's time
  and memory, for progress lines)
  exact        false when pipeplan had to round figures to make them integers (measured
               costs): then no bound is a proof, and a memory-limited search runs without
               the LP relaxation (see make_solver)
  period_microbatches  absent or 0: the instance is the whole step. N > 0: the ops are ONE
               microbatch's, and the answer is a steady state that starts microbatch m's op i
               at start_i + m * period for m = 0 .. N-1 (see "Periodic" below)

Model: one interval per op, no overlap per rank (the op's setup included), precedences as
linear constraints, memory as one cumulative per rank over the hold intervals. Progress goes
to stderr every `progress_s` seconds when stderr is a terminal (PIPEPLAN_SOLVER_PROGRESS=off
silences it); the result, on the output file, is text:

  status optimal|feasible|infeasible|unknown
  objective N
  bound N
  wall_s X
  stopped_by_clock 1     (only when the clock cap, not the deterministic budget, ended it)
  period T               (periodic only: the period; objective and bound are the step's
                          for steady states: (N - 1) T + one microbatch's span; no bound
                          when the search ran on a coarser grid)
  period_proven 1        (periodic only: no smaller period of one microbatch exists)
  starts s0 s1 ...

Periodic (a steady state for large M): with one integer period T, op i of microbatch m
starts at x_i + m T, x_i = q_i T + p_i with its phase p_i in [0, T). No overlap per rank holds
on the circle of length T: each op's occupied interval (setup included) is placed at its
phase and again T and 2T later, and one no-overlap over all copies forbids every overlap of
two ops a whole number of periods apart. Memory: a hold of length L = k T + rho is held by
k microbatches at every phase and by one more on the arc [p, p + rho); the arcs (placed at
their phase and T later) go into a cumulative whose capacity is the rank's minus the k parts;
what is held until the step ends is counted for all N microbatches (conservative). The
objective is the step, (N - 1) T + one microbatch's span. T lies between the busiest rank's
work for one microbatch (no period is shorter) and one microbatch's serial span (one
microbatch at a time: always a steady state when one microbatch fits). The search bisects
over fixed periods (fast to search), first trying the heuristic's spacing with its hint,
then lets T range below the best period found, warm-started from it. Times go on a grid of
about PERIOD_STEPS steps per busiest-rank work, rounded up. Any finite subset of a steady
state is a valid schedule, so the N microbatches' expansion is one.

usage: pipeplan_solver.py INSTANCE.json RESULT.txt
"""

import json
import os
import sys
import threading
import time

try:
    from ortools.sat.python import cp_model
except ImportError as import_error:  # pipeplan names the install step for exit codes 3 and 4
    if (isinstance(import_error, ModuleNotFoundError)
            and (import_error.name or "").split(".")[0] == "ortools"):
        print("pipeplan_solver: the Python package ortools is not installed "
              "(bash scripts/setup_solver.sh installs it)", file=sys.stderr)
        sys.exit(3)
    print(f"pipeplan_solver: ortools is installed but does not import: {import_error!r}",
          file=sys.stderr)
    sys.exit(4)

# The wall-clock moment past which no solve may run (set by main from the time limit).
DEADLINE = float("inf")


def wall_cap(limit):
    """The whole run's wall-clock cap, for a machine ten times slower than usual. pipeplan
    kills the script two minutes past it (cp_sat_solver.cc's SolverWallCap and grace)."""
    return 10 * limit + 300


def exit_with_parent():
    """pipeplan waits for this process: once pipeplan is gone (killed before it could kill
    this one), so is the reason to solve, and no result file may appear later."""
    parent = os.getppid()
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(1)


class Progress:
    """Best makespan and proven bound as CP-SAT finds them, printed every few seconds."""

    def __init__(self, scale, unit_name, every_s):
        self.scale = scale
        self.unit_name = unit_name
        self.every_s = every_s
        self.best = None
        self.bound = None
        self.start = time.monotonic()
        self.done = threading.Event()

    def line(self):
        elapsed = time.monotonic() - self.start
        if self.best is None:
            return f"solver: {elapsed:.0f} s, no schedule yet"
        text = f"solver: {elapsed:.0f} s, best {self.unit_name} {self.best / self.scale:g}"
        if self.bound is not None:
            gap = (self.best - self.bound) / self.bound * 100 if self.bound > 0 else 0.0
            text += f", proven bound {self.bound / self.scale:g}, gap {gap:.2f}%"
        return text

    def run(self):
        while not self.done.wait(self.every_s):
            print(self.line(), file=sys.stderr, flush=True)


class OnSolution(cp_model.CpSolverSolutionCallback):
    def __init__(self, progress):
        super().__init__()
        self.progress = progress

    def on_solution_callback(self):
        self.progress.best = self.ObjectiveValue()
        self.progress.bound = self.BestObjectiveBound()


STATUS = {
    cp_model.OPTIMAL: "optimal",
    cp_model.FEASIBLE: "feasible",
    cp_model.INFEASIBLE: "infeasible",
}


def add_precedences(model, instance, starts, ends, horizon):
    """The precedences, and the makespan: the latest end of an op no other op waits for."""
    has_successor = [False] * len(starts)
    for before, after, delay in instance["precedences"]:
        model.add(starts[after] >= ends[before] + int(delay))
        has_successor[before] = True
    makespan = model.new_int_var(0, horizon, "makespan")
    for i, end in enumerate(ends):
        if not has_successor[i]:
            model.add(makespan >= end)
    return makespan


def build(instance):
    model = cp_model.CpModel()
    ops = instance["ops"]
    horizon = int(instance["horizon"])
    ranks = int(instance["ranks"])
    starts, ends = [], []
    by_rank = [[] for _ in range(ranks)]
    for i, op in enumerate(ops):
        duration, setup = int(op["duration"]), int(op["setup"])
        start = model.new_int_var(setup, horizon - duration, f"s{i}")
        end = start + duration
        occupied = model.new_fixed_size_interval_var(start - setup, setup + duration, f"o{i}")
        starts.append(start)
        ends.append(end)
        by_rank[int(op["rank"])].append(occupied)
    for occupied in by_rank:
        model.add_no_overlap(occupied)
    makespan = add_precedences(model, instance, starts, ends, horizon)

    holds = [[] for _ in range(ranks)]
    for rank, first, last, amount in instance["holds"]:
        begin = starts[first]
        finish = horizon if last < 0 else ends[last]
        size = model.new_int_var(0, horizon, "")
        model.add(size == finish - begin)
        holds[rank].append((model.new_interval_var(begin, size, finish, ""), int(amount)))

    minimize = instance.get("minimize", "makespan")
    if minimize == "memory":
        static = [int(x) for x in instance["static"]]
        top = sum(amount for rank_holds in holds for _, amount in rank_holds) + max(static)
        limit = model.new_int_var(max(static), max(top, max(static)), "limit")
        for rank, rank_holds in enumerate(holds):
            if rank_holds:
                model.add_cumulative([h for h, _ in rank_holds], [a for _, a in rank_holds],
                                     limit - static[rank])
        model.minimize(limit)
    else:
        capacity = instance.get("capacity")
        if capacity is not None:
            for rank, rank_holds in enumerate(holds):
                if int(capacity[rank]) < 0:
                    model.add_bool_or([])  # nothing fits: static memory alone is over
                elif rank_holds:
                    model.add_cumulative([h for h, _ in rank_holds],
                                         [a for _, a in rank_holds], int(capacity[rank]))
        model.minimize(makespan)

    hint = instance.get("hint")
    if hint is not None:
        for start, value in zip(starts, hint):
            model.add_hint(start, int(value))
    return model, starts, minimize


def make_solver(instance, limit):
    """A solver stopped by `limit` deterministic seconds; also returns its clock cap."""
    solver = cp_model.CpSolver()
    # Same instance, same answer (pipeplan's plans are deterministic): one worker, stopped by
    # CP-SAT's deterministic time, a count of work done, not by the clock. (Several workers
    # with interleave_search are deterministic too, but OR-Tools 9.15 corrupted its heap in
    # about one run of three with them on one instance here, and one worker proved more.)
    solver.parameters.max_deterministic_time = limit
    # A clock cap only for a machine so loaded that the work takes ten times longer than
    # usual; stopped by it, the answer is no longer deterministic, and the result says so.
    # Several solves (the periodic search's probes) share the run's cap.
    clock_cap = max(1.0, min(wall_cap(limit), DEADLINE - time.monotonic()))
    solver.parameters.max_time_in_seconds = clock_cap
    solver.parameters.num_workers = int(instance.get("workers", 1))
    solver.parameters.random_seed = 0
    if memory_bound(instance) and not instance.get("exact", True):
        # With measured costs (rounded, so no bound proves anything) the LP relaxation of the
        # memory cumulatives is what a deterministic second undercounts: the wall time is many
        # times the budget for the same order (docs/benchmarks.md, "Optimal schedules"). With
        # exact figures the LP stays: it proves small limited requests sooner.
        solver.parameters.linearization_level = 0
    return solver, clock_cap


def memory_bound(instance):
    """Whether memory constrains the instance: a capacity, or memory as the objective."""
    return instance.get("capacity") is not None or instance.get("minimize") == "memory"


def watched():
    """Progress is for a person watching: a log or a test's pipe gets only the verdict."""
    return sys.stderr.isatty() and os.environ.get("PIPEPLAN_SOLVER_PROGRESS") != "off"


def solve(instance):
    if int(instance.get("period_microbatches", 0)) > 0:
        return solve_periodic(instance)
    model, starts, minimize = build(instance)
    limit = float(instance["time_limit_s"])
    solver, clock_cap = make_solver(instance, limit)
    scale = instance.get("time_scale" if minimize == "makespan" else "memory_scale", 1)
    progress = Progress(float(scale), "makespan" if minimize == "makespan" else "limit",
                        float(instance.get("progress_s", 5)))

    # The verdict does not depend on how fast the machine happened to be: the callbacks that
    # feed the progress lines are only registered for a terminal: with them, OR-Tools 9.15's Python layer corrupted the heap in
    # about one run of three on one instance here (munmap_chunk(): invalid pointer, SIGSEGV).
    printer = threading.Thread(target=progress.run, daemon=True)
    callback = None
    if watched():

        def on_bound(bound):
            progress.bound = bound

        solver.best_bound_callback = on_bound
        callback = OnSolution(progress)
        printer.start()
    began = time.monotonic()
    code = solver.solve(model, callback)
    progress.done.set()
    if printer.is_alive():
        printer.join()
    wall = time.monotonic() - began
    status = STATUS.get(code, "unknown")
    lines = [f"status {status}"]
    if status in ("optimal", "feasible"):
        lines.append(f"objective {round(solver.objective_value)}")
        lines.append(f"bound {round(solver.best_objective_bound)}")
    lines.append(f"wall_s {wall:.3f}")
    if status != "optimal" and solver.wall_time >= 0.99 * clock_cap:
        lines.append("stopped_by_clock 1")
    if status in ("optimal", "feasible"):
        lines.append("starts " + " ".join(str(solver.value(s)) for s in starts))
    return "\n".join(lines) + "\n"


def serial_starts(instance):
    """One microbatch with one op at a time over all ranks, in instance order (producers
    first): a schedule any period at least as long as it admits."""
    ops = instance["ops"]
    waits = [[] for _ in ops]
    for before, after, delay in instance["precedences"]:
        waits[after].append((int(before), int(delay)))
    starts, free = [], 0
    for i, op in enumerate(ops):
        start = free + int(op["setup"])
        for before, delay in waits[i]:
            start = max(start, starts[before] + int(ops[before]["duration"]) + delay)
        starts.append(start)
        free = start + int(op["duration"])
    return starts, free


def build_periodic(instance, low, high):
    """A steady state (see "Periodic" above) whose period T lies in [low, high], minimising
    the step: (N - 1) T plus one microbatch's span."""
    model = cp_model.CpModel()
    ops = instance["ops"]
    ranks = int(instance["ranks"])
    microbatches = int(instance["period_microbatches"])
    period = model.new_int_var(low, high, "period")
    # One microbatch's ops may each wait up to a period for a free slot.
    horizon = int(instance["horizon"]) + len(ops) * high
    laps = horizon // low + 1

    def split(value, name):
        """value == laps * period + rest with 0 <= rest < period; returns (laps, rest)."""
        whole = model.new_int_var(0, laps, f"q{name}")
        product = model.new_int_var(0, laps * high, "")
        model.add_multiplication_equality(product, [whole, period])
        rest = model.new_int_var(0, high - 1, f"p{name}")
        model.add(rest <= period - 1)
        model.add(value == product + rest)
        return whole, rest

    def shifted(expression, copies, name):
        """Variables equal to expression + k * period for k < copies (interval ends must be
        affine)."""
        out = []
        for k in range(copies):
            var = model.new_int_var(-high, (copies + 1) * high, f"{name}{k}")
            model.add(var == expression + k * period)
            out.append(var)
        return out

    starts, ends, phases = [], [], []
    occupied = [[] for _ in range(ranks)]
    for i, op in enumerate(ops):
        duration, setup = int(op["duration"]), int(op["setup"])
        start = model.new_int_var(setup, horizon, f"x{i}")
        _, phase = split(start, i)
        for begin in shifted(phase - setup, 3, f"o{i}_"):
            occupied[int(op["rank"])].append(
                model.new_fixed_size_interval_var(begin, setup + duration, ""))
        starts.append(start)
        ends.append(start + duration)
        phases.append(phase)
    for intervals in occupied:
        model.add_no_overlap(intervals)
    span = add_precedences(model, instance, starts, ends, horizon)

    capacity = instance.get("capacity")
    if capacity is not None:
        room = [int(c) for c in capacity]
        arcs = [[] for _ in range(ranks)]
        whole = [[] for _ in range(ranks)]
        for h, (rank, first, last, amount) in enumerate(instance["holds"]):
            if last < 0:  # held until the step ends: every microbatch's, at the end
                room[rank] -= amount * microbatches
                continue
            laps_held, rest = split(ends[last] - starts[first], f"h{h}")
            begins = shifted(phases[first], 2, f"a{h}_")
            finishes = shifted(phases[first] + rest, 2, f"e{h}_")
            for begin, finish in zip(begins, finishes):
                arcs[rank].append((model.new_interval_var(begin, rest, finish, ""), amount))
            whole[rank].append((laps_held, amount))
        for rank in range(ranks):
            if room[rank] < 0:
                model.add_bool_or([])  # nothing fits
            elif arcs[rank]:
                left = model.new_int_var(0, room[rank], "")
                model.add(left == room[rank] - sum(a * k for k, a in whole[rank]))
                model.add_cumulative([h for h, _ in arcs[rank]], [a for _, a in arcs[rank]],
                                     left)
    model.minimize((microbatches - 1) * period + span)
    return model, period, starts


def work_per_rank(instance):
    """The smallest possible period: the busiest rank's work for one microbatch."""
    work = [0] * int(instance["ranks"])
    for op in instance["ops"]:
        work[int(op["rank"])] += int(op["duration"]) + int(op["setup"])
    return max(max(work), 1)


def coarsen(instance, unit):
    """The instance in units of `unit` scaled time, every duration, setup and delay rounded
    up: a schedule of it, times `unit`, is one of the original."""
    if unit <= 1:
        return instance
    up = lambda value: -(-int(value) // unit)
    out = dict(instance)
    out["ops"] = [dict(op, duration=up(op["duration"]), setup=up(op["setup"]))
                  for op in instance["ops"]]
    out["precedences"] = [[b, a, up(d)] for b, a, d in instance["precedences"]]
    out["horizon"] = up(instance["horizon"]) + len(out["ops"]) + len(out["precedences"])
    if instance.get("hint") is not None:
        out["hint"] = [int(x) // unit for x in instance["hint"]]
    out["hint_period"] = up(instance.get("hint_period", 0))
    return out


# The periodic search works on a grid of about this many steps per busiest rank's work:
# finer grids leave CP-SAT with domains too wide to search in its budget, and the rounding
# costs at most one step per op (the final plan is re-timed exactly by pipeplan).
PERIOD_STEPS = 500


def solve_periodic(instance):
    unit = max(1, work_per_rank(instance) // PERIOD_STEPS)
    text = solve_periodic_in(coarsen(instance, unit))
    if unit <= 1:
        return text
    lines = []
    for line in text.splitlines():
        key, *values = line.split()
        if key in ("objective", "period", "starts"):
            line = " ".join([key] + [str(int(v) * unit) for v in values])
        # The grid's figures are rounded up: its bounds are not the request's.
        if key not in ("bound", "period_proven"):
            lines.append(line)
    return "\n".join(lines) + "\n"


def solve_periodic_in(instance):
    """The steady state with the shortest step. First a bisection over fixed periods between
    the busiest rank's work and one microbatch's serial span (fixed periods search fast), then
    the period free below the best one found, warm-started from it."""
    began = time.monotonic()
    total = float(instance["time_limit_s"])
    low = work_per_rank(instance)
    serial, span = serial_starts(instance)
    high = max(span, low)
    probes = 2 + max(1, (high - low).bit_length())
    budget = 0.4 * total / probes
    best_period, best = high, serial
    clocked = False

    def probe(period, hint):
        nonlocal clocked
        model, _, starts = build_periodic(instance, period, period)
        for start, value in zip(starts, hint or []):
            model.add_hint(start, value)
        solver, clock_cap = make_solver(instance, budget)
        status = STATUS.get(solver.solve(model), "unknown")
        clocked |= status != "optimal" and solver.wall_time >= 0.99 * clock_cap
        if watched():
            print(f"solver: period {period}: {status}", file=sys.stderr, flush=True)
        if status not in ("optimal", "feasible"):
            return None
        return [solver.value(x) for x in starts]

    found = probe(low, None)
    if found is not None:
        best_period, best = low, found
    else:
        below = low  # no steady state was found with this period
        # The best heuristic's steady state, when pipeplan gave one, is often a good start.
        heuristic = int(instance.get("hint_period", 0))
        if below < heuristic < best_period and instance.get("hint") is not None:
            found = probe(heuristic, instance["hint"])
            if found is not None:
                best_period, best = heuristic, found
        while best_period - below > 1:
            middle = (below + best_period) // 2
            found = probe(middle, best)
            if found is None:
                below = middle
            else:
                best_period, best = middle, found

    model, period, starts = build_periodic(instance, low, best_period)
    model.add_hint(period, best_period)
    for start, value in zip(starts, best):
        model.add_hint(start, value)
    solver, clock_cap = make_solver(instance, 0.6 * total)
    status = STATUS.get(solver.solve(model), "unknown")
    clocked |= status != "optimal" and solver.wall_time >= 0.99 * clock_cap
    if status in ("optimal", "feasible"):
        best_period, best = solver.value(period), [solver.value(x) for x in starts]
        objective = round(solver.objective_value)
        bound = round(solver.best_objective_bound)
    elif status == "infeasible":
        # Not even one microbatch at a time fits (the serial schedule is in the model).
        return f"status infeasible\nwall_s {time.monotonic() - began:.3f}\n"
    else:  # the warm start stands
        status = "feasible"
        last = max(x + int(op["duration"]) for x, op in zip(best, instance["ops"]))
        objective = (int(instance["period_microbatches"]) - 1) * best_period + last
        bound = low * int(instance["period_microbatches"])
    lines = [f"status {status}", f"objective {objective}", f"bound {bound}",
             f"period {best_period}"]
    if best_period == low:
        lines.append("period_proven 1")
    lines.append(f"wall_s {time.monotonic() - began:.3f}")
    if clocked:
        lines.append("stopped_by_clock 1")
    lines.append("starts " + " ".join(str(x) for x in best))
    return "\n".join(lines) + "\n"


def main(argv):
    if len(argv) != 3:
        print("usage: pipeplan_solver.py INSTANCE.json RESULT.txt", file=sys.stderr)
        return 2
    global DEADLINE
    threading.Thread(target=exit_with_parent, daemon=True).start()
    try:
        with open(argv[1], encoding="utf-8") as f:
            instance = json.load(f)
        DEADLINE = time.monotonic() + wall_cap(float(instance["time_limit_s"]))
        result = solve(instance)
    except (OSError, ValueError, KeyError, TypeError, IndexError) as error:
        print(f"pipeplan_solver: {argv[1]}: {error}", file=sys.stderr)
        return 1
    with open(argv[2], "w", encoding="utf-8") as f:
        f.write(result)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

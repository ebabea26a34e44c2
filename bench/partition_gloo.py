"""The partition's split and schedule against the even split with torch's own schedule classes,
measured: a decoder of my own (an embedding and an LM head of a --vocab-word vocabulary, blocks
of two widths, a norm; --model alternating: eight blocks, narrow and wide in turn; dense-first:
four narrow blocks, then eight wide ones, as models whose first layers are dense and the rest
mixtures of experts; tied-moe: torchtitan's shape, eight blocks of widths 256-1024, three of
them mixtures of four experts (top-1), the head's matrix the embedding's, which
pipeplan.torch.schedule keeps equal on the ranks holding it; torch's classes, run bare, leave
the two copies apart) trained by --ranks Gloo processes (default 2) on this machine's CPU, one
thread each: give each its own core. The layer costs are measured first: each layer
alone (pipeplan.torch.measure_layers, one process; --figures alone), or in the job itself
(--figures job: torch's Schedule1F1B on the even split with the layers marked,
pipeplan_profiler's profile_steps(layers=...), the traces read by
pipeplan.import_layer_traces; its backwards are whole, so I = W = B/2 is assumed), or both
(--figures job+split: the job's F and B, each B split into I and W in the proportions measured
alone); the split and schedule chosen by
pipeplan.partition(runtime="torch"); then every configuration runs --runs times for --steps
steps. Per run the step time is the median over the steps after the
first two of the slowest rank's schedule.step; printed per configuration: the median over the
runs, its spread, each rank's peak resident memory (ru_maxrss, the process's whole) and the
step the figures predict (the simulator's, torch's classes on the even split as the catalogue
strategies that order as they do); before any run, the gap the figures predict. Unless
--memory free, the partition is bound to hold no rank above what torch's class with the
shortest simulated step holds on the even split (both simulated; the layers' bytes measured
alone). --check-memory then profiles one job of the partition's split and schedule, each
rank holding only its own stages' layers, and prints each rank's measured peak tensor bytes
(its allocations in the trace) beside the simulated peak. --runs 0 stops there.

    python bench/partition_gloo.py [--ranks 2] [--model alternating|dense-first|tied-moe]
                                   [--runs 5] [--steps 12] [--microbatches 8] [--vocab 8000]
                                   [--figures alone|job|job+split] [--only pipeplan,...]
                                   [--memory torch|free] [--check-memory]
"""

import argparse
import datetime
import json
import os
import resource
import socket
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing
from torch.distributed.pipelining import schedules as torch_schedules

import pipeplan
import pipeplan.torch
from pipeplan._two_copies import GlooSafeStage
from pipeplan.torch import profile_steps

RANKS = 2  # default of --ranks
VOCAB = 8000  # default of --vocab
HIDDEN = 256
SEQ = 128
ROWS = 2  # per microbatch
# Each model's blocks: (width, experts), experts 0 for a dense block.
MODELS = {"alternating": ((512, 0), (2048, 0)) * 4,
          "dense-first": ((512, 0),) * 4 + ((2048, 0),) * 8,
          # torchtitan's shape: three of eight blocks mixtures of four experts, the LM head tied
          # to the embedding (TIED).
          "tied-moe": ((256, 0), (512, 0), (1024, 4), (512, 0), (1024, 4), (256, 0), (1024, 4),
                       (512, 0))}
TIED = {"tied-moe"}


class Block(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.up = torch.nn.Linear(HIDDEN, width)
        self.down = torch.nn.Linear(width, HIDDEN)

    def forward(self, x):
        return x + self.down(torch.tanh(self.up(x)))


class Mixture(torch.nn.Module):
    """Experts of `width`, each token sent to the one its router weighs most (top-1)."""

    def __init__(self, width, experts):
        super().__init__()
        self.router = torch.nn.Linear(HIDDEN, experts)
        self.experts = torch.nn.ModuleList(
            torch.nn.Sequential(torch.nn.Linear(HIDDEN, width), torch.nn.Tanh(),
                                torch.nn.Linear(width, HIDDEN)) for _ in range(experts))

    def forward(self, x):
        flat = x.reshape(-1, HIDDEN)
        gate, choice = torch.softmax(self.router(flat), dim=-1).max(dim=-1)
        out = torch.zeros_like(flat)
        for index, expert in enumerate(self.experts):
            rows = (choice == index).nonzero(as_tuple=True)[0]
            out = out.index_add(0, rows, expert(flat[rows]) * gate[rows, None])
        return x + out.view_as(x)


class Decoder(torch.nn.Module):
    def __init__(self, model, vocab):
        super().__init__()
        torch.manual_seed(0)
        self.tok_embeddings = torch.nn.Embedding(vocab, HIDDEN)
        self.layers = torch.nn.ModuleList(Mixture(width, experts) if experts else Block(width)
                                          for width, experts in MODELS[model])
        self.norm = torch.nn.LayerNorm(HIDDEN)
        self.output = torch.nn.Linear(HIDDEN, vocab)
        if model in TIED:
            self.output.weight = self.tok_embeddings.weight

    def forward(self, tokens):
        x = self.tok_embeddings(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.output(self.norm(x))


def loss_fn(logits, target):
    return torch.nn.functional.cross_entropy(logits.flatten(0, 1), target.flatten())


def even_stages(model, count):
    """torchtitan's default: the earlier stages take the extra layers."""
    names = (["tok_embeddings"] + [f"layers.{i}" for i in range(len(MODELS[model]))]
             + ["norm", "output"])
    out, start = [], 0
    for k in range(count):
        size = len(names) // count + (1 if k < len(names) % count else 0)
        out.append(names[start:start + size])
        start += size
    return out


class Stage(torch.nn.Module):
    def __init__(self, model, names):
        super().__init__()
        self.layers = torch.nn.ModuleList(model.get_submodule(n) for n in names)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


# torch's classes as the catalogue's strategies that order as they do, and their V.
TORCH_CLASSES = {
    "ScheduleGPipe": ("gpipe", 1),
    "Schedule1F1B": ("1f1b", 1),
    "ScheduleInterleaved1F1B": ("interleaved-1f1b", 2),
    "ScheduleInterleavedZeroBubble": ("interleaved-zb", 2),
    "ScheduleZBVZeroBubble": ("zbv-handcrafted", 2),
}
DURATIONS = ("forward", "backward", "backward_input", "backward_weight")
BYTES = ("activation", "freed_by_input", "parameter_bytes", "allocated_by_input")
# One layer runs at a time: a stage's is its largest layer's.
TRANSIENTS = ("forward_transient", "backward_transient", "input_transient", "weight_transient")


def simulated_even(layers, shape, name, ranks, microbatches):
    """torch's class `name` on the even split, simulated (a pipeplan.Split: its makespan and
    each rank's peak_memory): each even stage made one layer of the summed figures, so that
    the only split is the even one; a stage's message is its last layer's."""
    strategy, v = TORCH_CLASSES[name]
    by_name = {layer["name"]: layer for layer in layers["layers"]}
    stages = []
    for names in even_stages(shape, ranks * v):
        stage = {"name": "+".join(names)}
        for key in DURATIONS + BYTES:
            if all(key in by_name[n] for n in names):
                stage[key] = sum(by_name[n][key] for n in names)
        for key in TRANSIENTS:
            if all(key in by_name[n] for n in names):
                stage[key] = max(by_name[n][key] for n in names)
        if "output_bytes" in by_name[names[-1]]:
            stage["output_bytes"] = by_name[names[-1]]["output_bytes"]
        stages.append(stage)
    # A shared parameter (the tied head) between the stages holding its layers; one stage
    # holding two of them holds it once.
    stage_of = {name: stage["name"] for stage in stages for name in stage["name"].split("+")}
    shared = []
    for entry in layers.get("shared_parameters", []):
        holding = sorted({stage_of[name] for name in entry["layers"]})
        for stage in stages:
            if stage["name"] in holding:
                held = sum(stage_of[name] == stage["name"] for name in entry["layers"])
                stage["parameter_bytes"] -= (held - 1) * entry["bytes"]
        if len(holding) > 1:
            shared.append(dict(entry, layers=holding))
    return pipeplan.partition(dict(layers, layers=stages, shared_parameters=shared), ranks=ranks,
                              microbatches=microbatches, strategy=strategy,
                              stages_per_rank=v, runtime="torch")


def torch_schedule(name, model, shape, microbatches, rank, ranks):
    """torch's own class on the even split: one stage per rank, or two (V = 2: loop placement;
    ZBV's V shape); `shape` names the model in MODELS. Returns the schedule, the indices of
    the rank's stages and their count."""
    cls = getattr(torch_schedules, name)
    multi = issubclass(cls, torch_schedules.PipelineScheduleMulti)
    if not multi:
        names = even_stages(shape, ranks)
        stage = GlooSafeStage(Stage(model, names[rank]), rank, ranks, torch.device("cpu"),
                              gloo=True)
        return cls(stage, microbatches, loss_fn=loss_fn), [rank], ranks
    names = even_stages(shape, 2 * ranks)
    indices = ([rank, 2 * ranks - 1 - rank] if name == "ScheduleZBVZeroBubble"
               else [rank, rank + ranks])
    # Gloo cannot send to its own rank: the V shape's turn needs the same work-around as
    # pipeplan.torch.schedule's (torch's warm-up ops addressed to the rank itself dropped).
    stages = [GlooSafeStage(Stage(model, names[i]), i, 2 * ranks, torch.device("cpu"), gloo=True)
              for i in indices]
    return cls(stages, microbatches, loss_fn=loss_fn), indices, 2 * ranks


def partition_stages(model, config, rank, free_other_layers=False):
    """The split main printed (the same figures and limit: partition is deterministic), this
    rank's stages of it and the schedule running them."""
    split = pipeplan.partition(config["layers"], ranks=config["ranks"],
                               microbatches=config["microbatches"], runtime="torch",
                               memory_limit=config["limit"])
    built = pipeplan.torch.split_model(model, split, rank, free_other_layers=free_other_layers)
    return split, built, pipeplan.torch.schedule(split.plan, built, loss_fn=loss_fn)


def run(rank, config, result_path):
    torch.set_num_threads(1)
    ranks = config["ranks"]
    dist.init_process_group("gloo", rank=rank, world_size=ranks,
                            timeout=datetime.timedelta(seconds=300))
    try:
        model = Decoder(config["model"], config["vocab"])
        microbatches = config["microbatches"]
        ran = config["kind"]
        if config["kind"] == "pipeplan":
            split, built, schedule = partition_stages(model, config, rank)
            first = 0 in built
            last = len(split.stages) - 1 in built
            ran = f"{split.plan.strategy} V={split.plan.stages_per_rank} {split.stages}"
        else:
            schedule, held, count = torch_schedule(config["kind"], model, config["model"],
                                                   microbatches, rank, ranks)
            first, last = 0 in held, count - 1 in held
        optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
        generator = torch.Generator().manual_seed(1)
        tokens = torch.randint(0, config["vocab"], (microbatches * ROWS, SEQ),
                               generator=generator)
        times = []
        for _ in range(config["steps"]):
            optimizer.zero_grad()
            dist.barrier()
            start = time.perf_counter()
            losses = []
            schedule.step(*((tokens,) if first else ()),
                          **({"target": tokens, "losses": losses} if last else {}))
            elapsed = torch.tensor(time.perf_counter() - start)
            dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
            times.append(elapsed.item())
            optimizer.step()
        peak = torch.tensor(float(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024)
        peaks = [torch.zeros(()) for _ in range(ranks)]
        dist.all_gather(peaks, peak)
        if rank == 0:
            with open(result_path, "w") as out:
                json.dump({"step": statistics.median(times[2:]),
                           "peaks": [p.item() for p in peaks], "ran": ran}, out)
    finally:
        dist.destroy_process_group()


def profile_layers(rank, shape, ranks, microbatches, directory, vocab):
    """Torch's Schedule1F1B on the even split, each rank's layers marked: 1 warm-up step and 3
    profiled ones, a trace per rank under `directory`."""
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=ranks,
                            timeout=datetime.timedelta(seconds=300))
    try:
        model = Decoder(shape, vocab)
        schedule, _, _ = torch_schedule("Schedule1F1B", model, shape, microbatches, rank, ranks)
        layers = {name: model.get_submodule(name) for name in even_stages(shape, ranks)[rank]}
        tokens = torch.randint(0, vocab, (microbatches * ROWS, SEQ),
                               generator=torch.Generator().manual_seed(1))
        with profile_steps(directory, warmup=1, active=3, quiet=True, schedule=schedule,
                           layers=layers) as next_step:
            for _ in range(4):
                schedule.step(*((tokens,) if rank == 0 else ()),
                              **({"target": tokens, "losses": []} if rank == ranks - 1 else {}))
                model.zero_grad(set_to_none=True)
                next_step()
                dist.barrier()
    finally:
        dist.destroy_process_group()


def profile_memory(rank, config, directory):
    """The partition's split and schedule, each rank holding its own stages' layers alone
    (split_model's free_other_layers), 1 warm-up step and 2 profiled ones: a trace per rank
    under `directory`, whose allocations give each rank's measured peak."""
    torch.set_num_threads(1)
    ranks = config["ranks"]
    dist.init_process_group("gloo", rank=rank, world_size=ranks,
                            timeout=datetime.timedelta(seconds=300))
    try:
        model = Decoder(config["model"], config["vocab"])
        microbatches = config["microbatches"]
        split, built, schedule = partition_stages(model, config, rank, free_other_layers=True)
        first, last = 0 in built, len(split.stages) - 1 in built
        optimizer = torch.optim.SGD([p for p in model.parameters() if not p.is_meta], lr=1e-3)
        tokens = torch.randint(0, config["vocab"], (microbatches * ROWS, SEQ),
                               generator=torch.Generator().manual_seed(1))
        with profile_steps(directory, warmup=1, active=2, quiet=True,
                           schedule=schedule) as next_step:
            for _ in range(3):
                schedule.step(*((tokens,) if first else ()),
                              **({"target": tokens, "losses": []} if last else {}))
                optimizer.step()
                optimizer.zero_grad()
                next_step()
                dist.barrier()
    finally:
        dist.destroy_process_group()


def check_memory(config, split):
    """Each rank's measured peak (the profiled job's tensors) beside the simulated one."""
    with tempfile.TemporaryDirectory() as scratch:
        spawn(config["ranks"], profile_memory, config, scratch)
        measured = pipeplan.import_torch_traces(
            [os.path.join(scratch, f"rank{r}.json.gz") for r in range(config["ranks"])],
            plan=split.plan)
    for rank, (ours, theirs) in enumerate(zip(split.peak_memory, measured.peak_memory)):
        print(f"memory, rank {rank}: simulated {ours / 2**20:.1f} MiB, measured "
              f"{theirs / 2**20:.1f} MiB ({100 * (ours / theirs - 1):+.1f}%)")


def spawn(ranks, function, *args):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo")
    torch.multiprocessing.spawn(function, args=args, nprocs=ranks)


def layers_in_the_job(shape, vocab, ranks, microbatches):
    with tempfile.TemporaryDirectory() as scratch:
        spawn(ranks, profile_layers, shape, ranks, microbatches, scratch, vocab)
        return pipeplan.import_layer_traces(
            [os.path.join(scratch, f"rank{r}.json.gz") for r in range(ranks)])


def split_as(job, alone):
    """The job's layer figures with each B split into I and W in the proportions measured
    alone (I / B and W / B kept, so a split backward may cost more than a whole one)."""
    by_name = {layer["name"]: layer for layer in alone["layers"]}
    scale = {"ms": 1.0, "us": 1000.0}[job["time_unit"]] / {"ms": 1.0, "us": 1000.0}[
        alone["time_unit"]]
    out = dict(job, layers=[], shared_parameters=alone.get("shared_parameters", []))
    for layer in job["layers"]:
        measured = by_name[layer["name"]]
        ratio = layer["backward"] / (measured["backward"] * scale)
        out["layers"].append(dict(
            layer, backward_input=measured["backward_input"] * scale * ratio,
            backward_weight=measured["backward_weight"] * scale * ratio,
            # Bytes do not depend on where they were measured: taken from the layers alone.
            **{k: measured[k] for k in BYTES + TRANSIENTS + ("output_bytes",) if k in measured}))
    return out


def measure(config):
    with tempfile.TemporaryDirectory() as scratch:
        path = os.path.join(scratch, "result.json")
        spawn(config["ranks"], run, config, path)
        with open(path) as result:
            return json.load(result)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=RANKS,
                        help="Gloo processes, one thread each (give each a core of its own)")
    parser.add_argument("--model", choices=sorted(MODELS), default="alternating",
                        help="the blocks' widths: narrow and wide in turn, narrow ones first, or "
                             "torchtitan's shape with mixtures and a tied head")
    parser.add_argument("--vocab", type=int, default=VOCAB,
                        help="the embedding's and the LM head's vocabulary")
    parser.add_argument("--runs", type=int, default=5, help="runs per configuration (0: "
                        "the prediction alone)")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--microbatches", type=int, default=8)
    parser.add_argument("--figures", choices=["alone", "job", "job+split"], default="alone",
                        help="layer figures measured alone (measure_layers), in the job "
                             "(Schedule1F1B's traces: I = W = B/2 assumed), or in the job with "
                             "each B split into I and W as measured alone")
    parser.add_argument("--only", help="comma-separated configurations to run (default: all)")
    parser.add_argument("--memory", choices=["torch", "free"], default="torch",
                        help="torch (default): the partition holds no rank above what torch's "
                             "class of the shortest simulated step holds on the even split, by "
                             "simulation (its peak_memory as a limit per rank); free: no limit")
    parser.add_argument("--layers-out", help="also write the layer figures to this JSON file "
                                             "(for pipeplan partition --layers)")
    parser.add_argument("--check-memory", action="store_true",
                        help="before the runs, profile one job of the partition's split and "
                             "schedule (each rank holding its own layers alone) and print each "
                             "rank's measured peak tensor bytes beside the simulated")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.figures != "alone":
        layers = layers_in_the_job(args.model, args.vocab, args.ranks, args.microbatches)
    if args.figures != "job":
        tokens = torch.randint(0, args.vocab, (ROWS, SEQ))
        alone = pipeplan.torch.measure_layers(Decoder(args.model, args.vocab), tokens, loss_fn,
                                              target=tokens, repeats=7)
        layers = alone if args.figures == "alone" else split_as(layers, alone)
    unit = layers["time_unit"]
    if args.layers_out:
        with open(args.layers_out, "w") as out:
            json.dump(layers, out)
    print(f"layer costs ({unit}, {args.figures}): " + ", ".join(
        f"{l['name']} F {l['forward']:.2f} B {l['backward']:.2f}" for l in layers["layers"]))
    configs = ["pipeplan"] + ["ScheduleGPipe", "Schedule1F1B", "ScheduleInterleaved1F1B",
                              "ScheduleInterleavedZeroBubble", "ScheduleZBVZeroBubble"]
    if args.only:
        configs = [c for c in configs if c in args.only.split(",")]
    # What the figures predict, before anything runs: torch's classes on the even split...
    even = {kind: simulated_even(layers, args.model, kind, args.ranks, args.microbatches)
            for kind in configs if kind != "pipeplan"}
    best_predicted = min(even, key=lambda k: even[k].makespan, default=None)
    limit = None
    if args.memory == "torch" and best_predicted is not None:
        if all("activation" in l for l in layers["layers"]):
            limit = even[best_predicted].peak_memory
            print(f"memory: no rank above {best_predicted} on the even split, simulated "
                  + ", ".join(f"{p / 2**20:.1f} MiB" for p in limit)
                  + " (--memory-limit " + ",".join(f"{p:.0f}" for p in limit) + ")")
        else:
            print("memory: the layer figures give no bytes; the partition is not bound")
    # ... and the partition's split and schedule.
    split = pipeplan.partition(layers, ranks=args.ranks, microbatches=args.microbatches,
                               runtime="torch", memory_limit=limit)
    print(f"partition: {split.plan.strategy} V={split.plan.stages_per_rank}, stages "
          f"{split.stages}, simulated step {split.makespan:.1f} {unit}, peak "
          + ", ".join(f"{p / 2**20:.1f} MiB" for p in split.peak_memory)
          + f" (even split, best strategy: {split.even_strategy} {split.even_makespan:.1f} {unit})")
    simulated = {kind: split.makespan if kind == "pipeplan" else even[kind].makespan
                 for kind in configs}
    if "pipeplan" in configs and best_predicted is not None:
        print(f"predicted: the partition {100 * (1 - split.makespan / simulated[best_predicted]):.1f}% "
              f"shorter than the even split with {best_predicted} (simulated "
              f"{simulated[best_predicted]:.1f} {unit})")
    if args.check_memory:
        check_memory({"model": args.model, "vocab": args.vocab, "ranks": args.ranks,
                      "microbatches": args.microbatches, "layers": layers, "limit": limit},
                     split)
    if args.runs == 0:
        return 0
    results = {}
    for kind in configs:
        runs = [measure({"kind": kind, "model": args.model, "layers": layers, "limit": limit,
                         "microbatches": args.microbatches, "steps": args.steps,
                         "ranks": args.ranks, "vocab": args.vocab}) for _ in range(args.runs)]
        # The figures printed are of what ran: the runs plan as main did, limit included.
        printed = f"{split.plan.strategy} V={split.plan.stages_per_rank} {split.stages}"
        if kind == "pipeplan" and any(r["ran"] != printed for r in runs):
            raise SystemExit(f"the runs ran {runs[0]['ran']}, not the partition printed: {printed}")
        steps = [r["step"] * 1000 for r in runs]
        peaks = [max(r["peaks"][k] for r in runs) for k in range(args.ranks)]
        results[kind] = (statistics.median(steps), min(steps), max(steps), peaks)
        print(f"{kind:32s} step median {results[kind][0]:7.1f} ms (runs {min(steps):.1f}-"
              f"{max(steps):.1f}; simulated {simulated[kind]:.1f} {unit}), peak RSS per rank "
              + ", ".join(f"{p / 2**20:.0f} MiB" for p in peaks), flush=True)
    if "pipeplan" not in results or len(results) < 2:
        return 0
    best_torch = min((k for k in configs if k != "pipeplan"), key=lambda k: results[k][0])
    ours, theirs = results["pipeplan"][0], results[best_torch][0]
    print(f"partition's split + {split.plan.strategy}: {ours:.1f} ms; the even split with "
          f"torch's best class ({best_torch}): {theirs:.1f} ms; {100 * (1 - ours / theirs):.1f}% "
          "shorter")
    higher = [r for r in range(args.ranks) if results["pipeplan"][3][r] > results[best_torch][3][r]]
    print("peak RSS: " + ("no rank above" if not higher else
                          "above on rank(s) " + ", ".join(map(str, higher)))
          + f" {best_torch}'s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

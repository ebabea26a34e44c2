"""Our compute orders against torch's: for every torch schedule class with a pipeplan
counterpart, over P in {2, 4, 8}, V in {2, 4} where the class takes V > 1, and M in
{P, 2P, 4P, 8}, `pipeplan plan` + `export --format torch-csv` must give per rank exactly the
compute actions of the class's `pipeline_order`, idle None slots removed.

torch computes `pipeline_order` in the constructor, from the stages' count, group size and
rank only, so stand-in stages (interop_support.FakeStage) are enough: no process group.

Known torch bug: Schedule1F1B's `pipeline_order` (a visualisation aid; its real execution,
_step_microbatches, is right) starts the last rank at F1 and ends it at F(M), so its
microbatch 0 never runs forward and a nonexistent microbatch M does. There the last rank is
checked against the 1F1B rule of docs/strategies.md instead, and torch's row must be
exactly that known deviation (or right, once torch fixes it).
"""

import sys
import unittest

import interop_support as support

RANKS = (2, 4, 8)


def microbatch_counts(ranks):
    return sorted({ranks, 2 * ranks, 4 * ranks, 8})


def interleaved_1f1b_flags(ranks, microbatches):
    # torch's Interleaved1F1B groups M / max(1, M // P) microbatches (strategies.md).
    return ("--microbatch-group-size", microbatches // max(1, microbatches // ranks))


# (torch class name, pipeplan strategy, the V to try, extra plan flags from (P, M)).
COUNTERPARTS = [
    ("ScheduleGPipe", "gpipe", (1,), None),
    ("Schedule1F1B", "1f1b", (1,), None),
    ("ScheduleInterleaved1F1B", "interleaved-1f1b", (2, 4), interleaved_1f1b_flags),
    ("ScheduleLoopedBFS", "looped-bfs", (2, 4), None),
    ("ScheduleInterleavedZeroBubble", "interleaved-zb", (2, 4), None),
    ("ScheduleZBVZeroBubble", "zbv-handcrafted", (2,), None),
    ("ScheduleDualPipeV", "dualpipe-v", (2,), None),
]


def torch_accepts(class_name, ranks, stages_per_rank, microbatches):
    """Whether torch's constructor takes this request (its own checks, stated here so that
    a refusal we did not expect fails the test)."""
    if class_name == "Schedule1F1B":
        return microbatches >= ranks
    if class_name == "ScheduleDualPipeV":
        return microbatches >= ranks * stages_per_rank
    return True


def one_f_one_b_rule(ranks, microbatches, rank):
    """1F1B on rank r (docs/strategies.md): w = min(P-1-r, M) forwards, then F(w+i),
    B(i) for i < M-w, then the remaining backwards."""
    warmup = min(ranks - 1 - rank, microbatches)
    order = [f"{rank}F{mb}" for mb in range(warmup)]
    for i in range(microbatches - warmup):
        order += [f"{rank}F{warmup + i}", f"{rank}B{i}"]
    order += [f"{rank}B{mb}" for mb in range(microbatches - warmup, microbatches)]
    return order


def torch_1f1b_last_rank_bug(ranks, microbatches):
    """What torch 2.11's Schedule1F1B.pipeline_order gives the last rank: the rule with every
    forward's microbatch one too high."""
    rank = ranks - 1
    order = []
    for mb in range(microbatches):
        order += [f"{rank}F{mb + 1}", f"{rank}B{mb}"]
    return order


def our_order(strategy, ranks, stages_per_rank, microbatches, extra):
    csv_text, _ = support.plan_and_export("torch-csv", strategy, ranks, stages_per_rank,
                                          microbatches, *extra)
    return support.csv_rows(csv_text)


class TorchOrderTest(unittest.TestCase):

    def test_orders_equal_torch_pipeline_order(self):
        from torch.distributed.pipelining import schedules
        compared = 0
        for class_name, strategy, stage_counts, flags in COUNTERPARTS:
            schedule_class = getattr(schedules, class_name)
            for ranks in RANKS:
                for stages_per_rank in stage_counts:
                    for microbatches in microbatch_counts(ranks):
                        if not torch_accepts(class_name, ranks, stages_per_rank, microbatches):
                            continue
                        label = f"{class_name} P={ranks} V={stages_per_rank} M={microbatches}"
                        with self.subTest(label):
                            schedule = support.build_torch_schedule(
                                schedule_class, ranks, stages_per_rank, microbatches)
                            theirs = support.compute_order(schedule.pipeline_order, ranks)
                            extra = flags(ranks, microbatches) if flags else ()
                            ours = our_order(strategy, ranks, stages_per_rank, microbatches,
                                             extra)
                            self.assertEqual(len(ours), ranks)
                            self.check_ranks(class_name, ranks, microbatches, ours, theirs)
                            compared += 1
        print(f"compared {compared} (class, P, V, M) cases with torch", flush=True)
        self.assertGreater(compared, 0)

    def check_ranks(self, class_name, ranks, microbatches, ours, theirs):
        for rank in range(ranks):
            if class_name == "Schedule1F1B":
                self.assertEqual(ours[rank], one_f_one_b_rule(ranks, microbatches, rank),
                                 f"rank {rank}: pipeplan's 1f1b against the rule")
                if rank == ranks - 1:
                    self.assertIn(theirs[rank], (ours[rank],
                                                 torch_1f1b_last_rank_bug(ranks, microbatches)),
                                  f"rank {rank}: torch's row is neither right nor the known bug")
                    continue
            self.assertEqual(ours[rank], theirs[rank], f"rank {rank}")


if __name__ == "__main__":
    sys.exit(support.run_tests(__name__))

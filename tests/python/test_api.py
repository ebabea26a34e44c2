"""The Python package's API: plans, simulation, comparison, files, profile and calibrate, the
console script, and the errors bad arguments raise.

Runs against whichever `pipeplan` it imports: the wheel installed into a fresh venv
(scripts/test_python.sh, as CI runs it) or the build tree (ctest python.api, PYTHONPATH set).
The command line it compares with is the installed console script, else `python -m pipeplan`.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import pipeplan


def cli_command():
    script = Path(sys.executable).parent / "pipeplan"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "pipeplan"]


def run_cli(*words, cwd, check=True, text=True):
    # text=False keeps the bytes (torch's CSV ends its rows with \r\n).
    result = subprocess.run(
        cli_command() + [str(w) for w in words], cwd=cwd, capture_output=True, text=text
    )
    if check and result.returncode != 0:
        raise AssertionError(f"pipeplan {' '.join(map(str, words))}: {result.stderr}")
    return result


# --- plan ---------------------------------------------------------------------------------


def test_1f1b_makespan_is_the_closed_form():
    plan = pipeplan.plan("1f1b", ranks=4, microbatches=8, forward=1, backward=2)
    assert (plan.strategy, plan.ranks, plan.stages_per_rank, plan.microbatches) == (
        "1f1b", 4, 1, 8)
    timeline = pipeplan.simulate(plan)
    # (M + P - 1)(F + B) = 11 * 3
    assert timeline.makespan == 33.0
    # Every rank computes M (F + B) = 24; 1F1B's rank r holds P - r microbatches at its peak.
    assert timeline.busy == [24.0] * 4
    assert timeline.peak_memory == [4.0, 3.0, 2.0, 1.0]
    assert timeline.bubble == pytest.approx([1 - 24 / 33] * 4)
    assert not timeline.measured


def test_actions_are_torch_tokens_of_the_rank():
    plan = pipeplan.plan("1f1b", ranks=2, microbatches=2)
    # Rank 0: warm-up F0 F1 (each sent on), then B0, B1 as their gradients come back, then
    # torch's gradient reduction after the stage's last backward.
    assert plan.actions(0) == ["0F0", "0SEND_F0", "0F1", "0SEND_F1", "0RECV_B0", "0B0",
                               "0RECV_B1", "0B1", "0REDUCE_GRAD"]
    assert plan.actions(1, comms=False) == ["1F0", "1B0", "1F1", "1B1"]
    assert plan.action_table(comms=False) == [plan.actions(0, comms=False),
                                              ["1F0", "1B0", "1F1", "1B1"]]


def test_stage_indices_follow_the_placement():
    zbv = pipeplan.plan("zbv", ranks=4, microbatches=8)
    assert zbv.placement == "v"
    # V shape: rank r holds stage r going down and stage 2P - 1 - r coming back.
    assert [zbv.stage_indices(r) for r in range(4)] == [[0, 7], [1, 6], [2, 5], [3, 4]]
    interleaved = pipeplan.plan("interleaved-1f1b", ranks=4, microbatches=8, stages_per_rank=2)
    assert interleaved.placement == "loop"
    assert [interleaved.stage_indices(r) for r in range(4)] == [[0, 4], [1, 5], [2, 6], [3, 7]]


def test_plan_is_byte_for_byte_the_command_lines(tmp_path):
    args = dict(ranks=4, microbatches=12, stages_per_rank=2, forward=1.5, backward_input=1.2,
                backward_weight=0.9, comm=0.1)
    pipeplan.plan("interleaved-zb", **args).save(tmp_path / "python.pb")
    run_cli("plan", "--strategy", "interleaved-zb", "--ranks", 4, "--microbatches", 12,
            "--stages-per-rank", 2, "--forward", 1.5, "--backward-input", 1.2,
            "--backward-weight", 0.9, "--comm", 0.1, "-o", "cli.pb", cwd=tmp_path)
    assert (tmp_path / "python.pb").read_bytes() == (tmp_path / "cli.pb").read_bytes()


def test_the_same_request_gives_identical_plans(tmp_path):
    for name in ("a.pb", "b.pb"):
        pipeplan.plan("zbv", ranks=4, microbatches=16, forward=1, backward=2).save(tmp_path / name)
    assert (tmp_path / "a.pb").read_bytes() == (tmp_path / "b.pb").read_bytes()


def test_to_torch_csv_is_the_export(tmp_path):
    plan = pipeplan.plan("interleaved-1f1b", ranks=2, microbatches=4, stages_per_rank=2)
    plan.save(tmp_path / "plan.pb")
    for comms, fmt in ((True, "torch-csv-comms"), (False, "torch-csv")):
        exported = run_cli("export", "plan.pb", "--format", fmt, cwd=tmp_path, text=False).stdout
        assert plan.to_torch_csv(comms=comms).encode() == exported
    rows = plan.to_torch_csv().split("\r\n")
    assert rows[0].split(",") == plan.actions(0)


def test_auto_fits_the_memory_limit_and_says_how_it_chose():
    unlimited = pipeplan.plan("auto", ranks=4, microbatches=8, forward=1, backward=2)
    assert unlimited.notes and unlimited.notes[0].startswith("auto chose")
    limited = pipeplan.plan("auto", ranks=4, microbatches=8, forward=1, backward=2,
                            memory_limit=2)
    assert max(pipeplan.simulate(limited).peak_memory) <= 2
    with pytest.raises(pipeplan.Error, match="above the memory limit 1"):
        pipeplan.plan("1f1b", ranks=4, microbatches=8, memory_limit=1)


def test_runtime_torch_plans_only_what_torch_runs():
    with pytest.raises(pipeplan.Error, match="dualpipe"):
        pipeplan.plan("dualpipe", ranks=4, microbatches=8, runtime="torch")
    plan = pipeplan.plan("auto", ranks=4, microbatches=8, runtime="torch")
    assert plan.strategy != "dualpipe"


# --- simulate, compare --------------------------------------------------------------------


def test_simulate_matches_the_command_line(tmp_path):
    plan = pipeplan.plan("zbv", ranks=4, microbatches=8, forward=1, backward=2, comm=0.25)
    plan.save(tmp_path / "plan.pb")
    metrics = json.loads(run_cli("simulate", "plan.pb", "--json", cwd=tmp_path).stdout)
    timeline = pipeplan.simulate(plan)
    assert timeline.makespan == metrics["makespan"]
    assert timeline.metrics["zb_bubble_rate"] == metrics["zb_bubble_rate"]


def test_simulate_under_other_costs_scales_the_step(tmp_path):
    plan = pipeplan.plan("1f1b", ranks=4, microbatches=8, forward=1, backward=2)
    doubled = pipeplan.plan("1f1b", ranks=4, microbatches=8, forward=2, backward=4)
    # A cost file from the doubled plan's simulation: profile, calibrate (1 unit = 1 ms).
    costs = pipeplan.calibrate(pipeplan.profile([pipeplan.simulate(doubled)], time_scale=1e-3),
                               unit="ms")
    costs.save(tmp_path / "costs.json")
    assert pipeplan.simulate(plan, costs).makespan == pytest.approx(66.0)
    assert pipeplan.simulate(plan, tmp_path / "costs.json").makespan == pytest.approx(66.0)
    assert pipeplan.simulate(plan).makespan == 33.0  # the plan itself is unchanged


def test_simulate_on_torchs_runtime_matches_the_command_line(tmp_path):
    plan = pipeplan.plan("interleaved-1f1b", ranks=4, stages_per_rank=2, microbatches=8,
                         forward=1, backward=2, comm=0.1)
    plan.save(tmp_path / "plan.pb")
    metrics = json.loads(run_cli("simulate", "plan.pb", "--runtime", "torch", "--json",
                                 cwd=tmp_path).stdout)
    ours = pipeplan.simulate(plan, runtime="torch")
    torchs = pipeplan.simulate(plan, runtime="torch", export="torch-csv")
    assert ours.makespan == metrics["makespan_torch_csv_comms"]
    assert torchs.makespan == metrics["makespan_torch_csv"]
    assert pipeplan.simulate(plan).makespan == metrics["makespan_pipeplan_runtime"]
    # The lists torch lowers itself receive early: another plan than the one exported.
    assert torchs.plan.actions(1) != plan.actions(1)
    with pytest.raises(pipeplan.Error, match="^runtime: unknown runtime 'tourch'"):
        pipeplan.simulate(plan, runtime="tourch")
    with pytest.raises(pipeplan.Error, match="^export: only with runtime torch"):
        pipeplan.simulate(plan, export="torch-csv")


def test_compare_for_torch_has_each_exports_step():
    rows = pipeplan.compare(ranks=4, microbatches=8, forward=1, backward=2, comm=0.1,
                            runtime="torch")
    by_name = {row["strategy"]: row for row in rows}
    interleaved = by_name["interleaved-1f1b"]
    assert interleaved["torch_csv_comms"] < interleaved["torch_csv"]
    assert pipeplan.compare(ranks=4, microbatches=8)[0]["torch_csv"] is None


def test_compare_has_every_strategy_of_the_command_line(tmp_path):
    rows = pipeplan.compare(ranks=4, microbatches=8, forward=1, backward=2)
    table = run_cli("compare", "--ranks", 4, "--microbatches", 8, "--forward", 1,
                    "--backward", 2, cwd=tmp_path).stdout
    for row in rows:
        assert row["strategy"] in table
    by_name = {row["strategy"]: row for row in rows}
    assert by_name["1f1b"]["makespan"] == 33.0
    assert by_name["gpipe"]["peak_memory"] == 8.0
    best = min(row["makespan"] for row in rows if row["makespan"] is not None)
    assert all(row["best"] == (row["makespan"] == best) for row in rows)


# --- files --------------------------------------------------------------------------------


def test_files_round_trip_between_python_and_the_command_line(tmp_path):
    # Python -> CLI: a plan saved here simulates there.
    plan = pipeplan.plan("zb-h2", ranks=4, microbatches=8, backward_input=1, backward_weight=1)
    plan.save(tmp_path / "py.json")
    metrics = json.loads(run_cli("simulate", "py.json", "--json",
                                 "--timeline", "cli_timeline.pb", cwd=tmp_path).stdout)
    assert metrics["makespan"] == pipeplan.simulate(plan).makespan
    # CLI -> Python: its plan and timeline load here, by the kind they record.
    run_cli("plan", "--strategy", "zbv", "--ranks", 2, "--microbatches", 4, "-o", "cli.textproto",
            cwd=tmp_path)
    loaded = pipeplan.load(tmp_path / "cli.textproto")
    assert isinstance(loaded, pipeplan.Plan) and loaded.strategy == "zbv"
    timeline = pipeplan.load(tmp_path / "cli_timeline.pb")
    assert isinstance(timeline, pipeplan.Timeline)
    assert timeline.makespan == metrics["makespan"] and timeline.plan.strategy == "zb-h2"
    # A profile saved here calibrates there, and the cost file it writes loads here.
    pipeplan.profile([timeline], time_scale=1e-6).save(tmp_path / "profile.pb")
    run_cli("calibrate", "profile.pb", "-o", "costs.json", cwd=tmp_path)
    costs = pipeplan.load(tmp_path / "costs.json")
    assert isinstance(costs, pipeplan.CostModel) and costs.time_unit == "us"
    replanned = pipeplan.plan("zb-h2", ranks=4, microbatches=8, costs=costs)
    assert pipeplan.simulate(replanned).makespan == pytest.approx(metrics["makespan"])


def test_a_request_file_plans_as_the_command_plans_it(tmp_path):
    (tmp_path / "request.textproto").write_text(
        'topology { ranks: 4 stages_per_rank: 2 microbatches: 8 }\n'
        'strategy: "interleaved-1f1b"\n'
        'costs { stages { forward: 1 backward: 2 } }\n')
    request = pipeplan.load(tmp_path / "request.textproto")
    assert isinstance(request, pipeplan.Request)
    assert (request.strategy, request.ranks, request.stages_per_rank, request.microbatches) == (
        "interleaved-1f1b", 4, 2, 8)
    request.plan().save(tmp_path / "python.pb")
    run_cli("plan", "--request", "request.textproto", "-o", "cli.pb", cwd=tmp_path)
    assert (tmp_path / "python.pb").read_bytes() == (tmp_path / "cli.pb").read_bytes()
    request.save(tmp_path / "copy.json")
    assert pipeplan.load(tmp_path / "copy.json").plan().actions(1) == request.plan().actions(1)
    with pytest.raises(pipeplan.Error, match="time_limit applies to optimal"):
        request.plan(time_limit=5)


def test_a_hand_written_cost_file_plans(tmp_path):
    (tmp_path / "costs.json").write_text(
        json.dumps({"stages": [{"forward": 2, "backward": 4}], "time_unit": "ms"}))
    plan = pipeplan.plan("1f1b", ranks=4, microbatches=8, costs=tmp_path / "costs.json")
    assert pipeplan.simulate(plan).makespan == 66.0


# --- errors name the argument -------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, named",
    [
        (dict(ranks=0), "ranks must be >= 1"),
        (dict(microbatches=-3), "microbatches must be >= 1"),
        (dict(stages_per_rank=0), "stages_per_rank"),
        (dict(forward=-1.0), "forward"),
        (dict(comm=float("nan")), "comm"),
        (dict(memory_limit="12 parsecs"), "memory_limit"),
        (dict(memory_limit=-1), "memory_limit"),
        (dict(memory_limit="1GiB,2GiB"), "memory_limit: one limit for every rank here"),
        (dict(costs="/nonexistent/costs.json"), "/nonexistent/costs.json"),
        (dict(costs="/tmp", forward=1.0), "costs"),
        (dict(time_limit=5), "time_limit"),
        (dict(time_limit=0), "time_limit must be a number of seconds > 0, got 0"),
        (dict(time_limit=float("inf")), "time_limit must be a number of seconds > 0"),
        (dict(runtime="jax"), "runtime"),
        (dict(ranks="4"), "ranks must be an int, got str"),
        (dict(ranks=4.0), "ranks must be an int, got float"),
        (dict(microbatches=True), "microbatches must be an int, got bool"),
        (dict(forward="fast"), "forward must be a number"),
        (dict(post_validation="yes"), "post_validation must be a bool"),
        (dict(costs=42), "costs must be a path"),
    ],
)
def test_bad_arguments_raise_errors_naming_them(kwargs, named):
    request = dict(ranks=4, microbatches=8)
    request.update(kwargs)
    with pytest.raises(pipeplan.Error, match=named.replace("(", r"\(")) as caught:
        pipeplan.plan("1f1b", **request)
    assert isinstance(caught.value, ValueError)
    assert "--" not in str(caught.value), "names a flag, not the keyword argument"


def test_unknown_strategy_lists_the_known_ones():
    with pytest.raises(pipeplan.Error, match=r"unknown strategy 'zb-h9' \(known: gpipe, 1f1b"):
        pipeplan.plan("zb-h9", ranks=4, microbatches=8)
    with pytest.raises(pipeplan.Error, match="strategy must be a str"):
        pipeplan.plan(None, ranks=4, microbatches=8)


def test_files_of_the_wrong_kind_are_named(tmp_path):
    plan = pipeplan.plan("1f1b", ranks=2, microbatches=2)
    plan.save(tmp_path / "plan.pb")
    with pytest.raises(pipeplan.Error, match="costs: Plan file, not a cost model"):
        pipeplan.simulate(plan, tmp_path / "plan.pb")
    with pytest.raises(pipeplan.Error, match="plan.pb.*plan file"):
        pipeplan.plan("1f1b", ranks=2, microbatches=2, costs=tmp_path / "plan.pb")
    (tmp_path / "schedule.csv").write_text(plan.to_torch_csv())
    with pytest.raises(pipeplan.Error, match="torch pipelining CSV"):
        pipeplan.load(tmp_path / "schedule.csv")
    (tmp_path / "empty.pb").write_bytes(b"")
    with pytest.raises(pipeplan.Error, match="empty"):
        pipeplan.load(tmp_path / "empty.pb")
    with pytest.raises(pipeplan.Error, match="missing.pb"):
        pipeplan.load(tmp_path / "missing.pb")


def test_rank_out_of_range_and_bad_objects():
    plan = pipeplan.plan("1f1b", ranks=2, microbatches=2)
    with pytest.raises(pipeplan.Error, match=r"rank: 2 is not a rank of the plan \(0..1\)"):
        plan.actions(2)
    with pytest.raises(pipeplan.Error, match="rank: -1"):
        plan.stage_indices(-1)
    with pytest.raises(pipeplan.Error, match="rank must be an int, got str '0'"):
        plan.actions("0")
    with pytest.raises(pipeplan.Error, match="rank must be an int, got bool"):
        plan.stage_indices(True)
    with pytest.raises(pipeplan.Error, match="rank: int 4294967296 is out of range"):
        plan.actions(2**32)
    with pytest.raises(pipeplan.Error, match="comms must be a bool, got int 1"):
        plan.to_torch_csv(comms=1)
    with pytest.raises(pipeplan.Error, match="path must be a path .str or os.PathLike., got int"):
        plan.save(42)
    with pytest.raises(pipeplan.Error, match="plan must be a pipeplan.Plan"):
        pipeplan.simulate("plan.pb")
    with pytest.raises(pipeplan.Error, match="profile must be a pipeplan.Profile"):
        pipeplan.calibrate({})
    with pytest.raises(pipeplan.Error, match=r"timelines\[0\]: the timeline records no time "
                                             r"scale .*; give time_scale, the seconds per unit"):
        pipeplan.profile([pipeplan.simulate(plan)])
    other = pipeplan.simulate(pipeplan.plan("gpipe", ranks=2, microbatches=2))
    with pytest.raises(pipeplan.Error, match=r"timelines\[0\] and timelines\[1\] are timelines "
                                             "of different plans"):
        pipeplan.profile([pipeplan.simulate(plan), other], time_scale=1.0)
    with pytest.raises(pipeplan.Error, match="expected and measured are timelines of different "
                                             "plans"):
        pipeplan.diff(pipeplan.simulate(plan), other)
    profile = pipeplan.profile([pipeplan.simulate(plan)], time_scale=1.0)
    with pytest.raises(pipeplan.Error, match="unit: unknown unit 'fortnights'"):
        pipeplan.calibrate(profile, unit="fortnights")


def test_a_loaded_file_may_be_saved_over(tmp_path, capfd):
    pipeplan.plan("1f1b", ranks=2, microbatches=2).save(tmp_path / "plan.pb")
    loaded = pipeplan.load(tmp_path / "plan.pb")
    pipeplan.plan("zbv", ranks=2, microbatches=2).save(tmp_path / "plan.pb")
    loaded.save(tmp_path / "plan.pb")
    assert pipeplan.load(tmp_path / "plan.pb").strategy == "1f1b"
    # The command run in process still refuses to write over its own input.
    capfd.readouterr()
    assert pipeplan.main(["export", str(tmp_path / "plan.pb"), "--format", "json", "-o",
                          str(tmp_path / "plan.pb")]) == 1
    assert "it is an input of this command" in capfd.readouterr().err
    assert pipeplan.load(tmp_path / "plan.pb").strategy == "1f1b"


def test_a_failed_save_leaves_nothing(tmp_path):
    plan = pipeplan.plan("1f1b", ranks=2, microbatches=2)
    with pytest.raises(pipeplan.Error, match="missing_dir"):
        plan.save(tmp_path / "missing_dir" / "plan.pb")
    assert list(tmp_path.iterdir()) == []


# --- the command ----------------------------------------------------------------------------


def test_python_m_pipeplan_is_the_command(tmp_path):
    result = subprocess.run([sys.executable, "-m", "pipeplan", "--help"], capture_output=True,
                            text=True)
    assert result.returncode == 0 and result.stdout.startswith("usage: pipeplan <command>")
    bad = subprocess.run([sys.executable, "-m", "pipeplan", "plan", "--ranks", "x"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "--ranks" in bad.stderr


def test_console_script_is_installed():
    script = Path(sys.executable).parent / "pipeplan"
    if not script.exists():
        pytest.skip("no pipeplan console script beside this Python (a build-tree run)")
    result = subprocess.run([str(script), "--version"], capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.startswith("pipeplan ")


def test_help_shows_the_docstrings():
    assert "memory_limit" in pipeplan.plan.__doc__
    assert "torch pipelining tokens" in pipeplan.Plan.actions.__doc__
    assert pipeplan.__version__ == pipeplan._core.__version__


def test_the_solver_runs_where_ortools_is_or_says_how_to_get_it():
    import importlib.util

    try:
        plan = pipeplan.plan("optimal", ranks=2, microbatches=4, time_limit=30)
    except pipeplan.Error as error:
        # Only where no Python with ortools is known: this one has none (pipeplan[solver] not
        # installed) and the build named none.
        assert importlib.util.find_spec("ortools") is None, error
        assert "pip install 'pipeplan[solver]'" in str(error)
        return
    assert plan.strategy == "optimal" and any("CP-SAT" in note or "optimal" in note
                                              for note in plan.notes), plan.notes
    # The solver starts from the catalogue's best: never slower than a heuristic's order.
    heuristic = pipeplan.plan("zb-h1", ranks=2, microbatches=4)
    assert pipeplan.simulate(plan).makespan <= pipeplan.simulate(heuristic).makespan


# The layers of tests/cli/partition_command_test.cc: the head as heavy as three blocks, so
# that 1f1b at P = 2 balances only with the head alone on the last stage.
LAYERS = [
    {"name": "tok_embeddings", "forward": 1, "backward": 2, "activation": 100,
     "parameter_bytes": 1000, "output_bytes": 10},
    {"name": "layers.0", "forward": 1, "backward": 2, "activation": 100,
     "parameter_bytes": 1000, "output_bytes": 10},
    {"name": "layers.1", "forward": 1, "backward": 2, "activation": 100,
     "parameter_bytes": 1000, "output_bytes": 10},
    {"name": "output", "forward": 3, "backward": 6, "activation": 300, "parameter_bytes": 3000},
]


def test_partition_puts_the_head_alone_as_the_command_does(tmp_path):
    split = pipeplan.partition(LAYERS, ranks=2, microbatches=4, strategy="1f1b")
    assert split.stages == [["tok_embeddings", "layers.0", "layers.1"], ["output"]]
    assert split.makespan == 45 and split.even_same_strategy_makespan == 54
    assert split.plan.strategy == "1f1b" and split.plan.ranks == 2
    assert split.megatron_layout == "Et*2|L"
    assert len(split.peak_memory) == 2
    assert split.exhaustive == 3  # every split of 4 layers into 2 stages was weighed
    # A file, or the dict a file holds, gives the same split and plan as the command line.
    (tmp_path / "layers.json").write_text(json.dumps({"layers": LAYERS, "time_unit": "ms"}))
    from_file = pipeplan.partition(tmp_path / "layers.json", ranks=2, microbatches=4,
                                   strategy="1f1b")
    assert from_file.stages == split.stages and from_file.time_unit == "ms"
    from_file.plan.save(tmp_path / "python.pb")
    subprocess.run([sys.executable, "-m", "pipeplan", "partition", "--layers",
                    str(tmp_path / "layers.json"), "--ranks", "2", "--microbatches", "4",
                    "--strategy", "1f1b", "-o", str(tmp_path / "cli.pb")],
                   check=True, capture_output=True)
    assert (tmp_path / "python.pb").read_bytes() == (tmp_path / "cli.pb").read_bytes()


def test_partition_keeps_each_rank_within_another_plans_peaks():
    # "No rank above the even split's": its peaks as a limit per rank leave the even split
    # alone (rank 0 under 1f1b holds two microbatches: the head alone is above it there).
    even = pipeplan.partition(LAYERS, ranks=2, microbatches=4, strategy="1f1b")
    assert even.makespan == 45
    limited = pipeplan.partition(LAYERS, ranks=2, microbatches=4, strategy="1f1b",
                                 memory_limit=[2500, "5000B"])
    assert limited.stages == [["tok_embeddings", "layers.0"], ["layers.1", "output"]]
    assert limited.makespan == 54
    assert all(peak <= limit for peak, limit in zip(limited.peak_memory, [2500, 5000]))
    with pytest.raises(pipeplan.Error, match=r"give one for every rank or one per rank \(2\), "
                                             r"got 3"):
        pipeplan.partition(LAYERS, ranks=2, microbatches=4, memory_limit=[1e9, 1e9, 1e9])
    with pytest.raises(pipeplan.Error, match=r"memory_limit \(rank 1\): expected a number"):
        pipeplan.partition(LAYERS, ranks=2, microbatches=4, memory_limit=[1e9, "lots"])


def test_partition_errors_name_the_argument_and_the_layer():
    with pytest.raises(pipeplan.Error, match=r"layers: layer costs file: layers\[0\] \(a\)\."
                                             r"forward: must be a finite number >= 0, got -1"):
        pipeplan.partition([{"name": "a", "forward": -1, "backward": 1}], ranks=1,
                           microbatches=1)
    with pytest.raises(pipeplan.Error, match="layers: layer costs file: layers: none given"):
        pipeplan.partition([], ranks=1, microbatches=1)
    with pytest.raises(pipeplan.Error, match="ranks must be >= 1, got 0"):
        pipeplan.partition(LAYERS, ranks=0, microbatches=1)
    with pytest.raises(pipeplan.Error, match="no split fits memory limit 100 B"):
        pipeplan.partition(LAYERS, ranks=2, microbatches=4, memory_limit="100B")
    with pytest.raises(pipeplan.Error, match="runtime: unknown runtime 'jax'"):
        pipeplan.partition(LAYERS, ranks=2, microbatches=4, runtime="jax")
    with pytest.raises(pipeplan.Error, match="layers must be a path, a dict or a list"):
        pipeplan.partition(3, ranks=2, microbatches=4)


@pytest.mark.parametrize("field,value,named", [
    ("forward", float("nan"), r"layers\[1\] \(b\)\.forward: must be a finite number >= 0, got nan"),
    ("activation", float("inf"), r"layers\[1\] \(b\)\.activation: must be a finite number >= 0"),
    ("backward", "2", r"layers\[1\] \(b\)\.backward must be a number, got str '2'"),
    ("output_bytes", True, r"layers\[1\] \(b\)\.output_bytes must be a number, got bool"),
])
def test_partition_names_a_figure_json_cannot_hold_or_that_is_no_number(field, value, named):
    # A dict's figures are checked before they become the file's JSON, which has no NaN or
    # infinity, and whose reader would take "2" for 2.
    layers = [{"name": "a", "forward": 1, "backward": 2}, {"name": "b", "forward": 1, "backward": 2}]
    layers[1][field] = value
    with pytest.raises(pipeplan.Error, match="layers: " + named):
        pipeplan.partition(layers, ranks=1, microbatches=1)
    with pytest.raises(pipeplan.Error, match=r"layers: layers\[0\] must be a dict, got str"):
        pipeplan.partition(["a"], ranks=1, microbatches=1)
    with pytest.raises(pipeplan.Error, match="layers: optimizer_multiple: must be a finite"):
        pipeplan.partition({"layers": layers[:1], "optimizer_multiple": float("nan")}, ranks=1,
                           microbatches=1)

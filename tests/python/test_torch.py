"""pipeplan.torch.schedule in a 2-rank Gloo job (tests/python/torch_job.py): the gradients of
every layer equal torch's own Schedule1F1B run of the same model, and the loss goes down.
Skipped where torch is not importable (scripts/test_python.sh gives its venv the torch of
scripts/setup_torch.sh)."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed in this Python")

import pipeplan  # noqa: E402
import pipeplan.torch  # noqa: E402

JOB = Path(__file__).with_name("torch_job.py")


def run_job(out: Path, *args: str, ranks: int = 2) -> dict:
    out.mkdir()
    result = subprocess.run([sys.executable, str(JOB), "--out", str(out), "--ranks", str(ranks),
                             *args],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    saved = [torch.load(out / f"rank{r}.pt") for r in range(ranks)]
    grads, grads_copy_b = {}, {}
    for rank in saved:
        grads.update(rank["grads"])
        grads_copy_b.update(rank["grads_copy_b"])
    # Every rank holding a last stage reports the step's losses: a dual plan's two do.
    reported = [rank["losses"] for rank in saved if rank["losses"]]
    assert all(losses == reported[0] for losses in reported), reported
    return {"grads": grads, "grads_copy_b": grads_copy_b, "losses": reported[0]}


@pytest.fixture(scope="module")
def references(tmp_path_factory):
    """torch's Schedule1F1B run of the model, by rank count (run when first asked)."""
    runs = {}

    def reference(ranks):
        if ranks not in runs:
            runs[ranks] = run_job(tmp_path_factory.mktemp("torch") / f"1f1b_{ranks}",
                                  "--torch-1f1b", ranks=ranks)
        return runs[ranks]
    return reference


@pytest.mark.parametrize("strategy,ranks", [("zbv", 2), ("interleaved-1f1b", 2), ("dualpipe", 2),
                                            ("dualpipe", 4)])
def test_gradients_equal_torchs_schedule_1f1b(strategy, ranks, references, tmp_path):
    """dualpipe: both model copies' gradients, after the sum across the copies, are the whole
    batch's; each copy ran half of it (at P = 4 ranks 1 and 2 hold neither end of a copy)."""
    reference = references(ranks)
    ours = run_job(tmp_path / strategy, "--strategy", strategy, ranks=ranks)
    assert sorted(ours["grads"]) == sorted(reference["grads"]) == [0, 1, 2, 3]
    copies = {"": ours["grads"]}
    if strategy == "dualpipe":
        assert sorted(ours["grads_copy_b"]) == [0, 1, 2, 3]
        copies["second copy, "] = ours["grads_copy_b"]
    for copy, grads in copies.items():
        for layer, expected in reference["grads"].items():
            for got, want in zip(grads[layer], expected, strict=True):
                torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6,
                                           msg=lambda m: f"{copy}layer {layer}: {m}")
    losses = ours["losses"]
    assert len(losses) == 3 and losses[-1] < losses[0], losses
    # The same model and data: the first step's loss is the reference's.
    assert losses[0] == pytest.approx(reference["losses"][0], rel=1e-5)


def test_traces_of_the_job_import_calibrate_and_replan(tmp_path):
    """The loop of docs/python.md from Python: profile the job (pipeplan.torch.profile_steps),
    import its traces, calibrate, simulate beside the measurement, plan again."""
    traces = tmp_path / "traces"
    # zbv: torch holds stage 1's output (stage 2's input, on the same rank) until the next
    # step's forward overwrites it; the import counts that free as the last step's, not the F's.
    strategy = "zbv"
    run_job(tmp_path / "job", "--strategy", strategy, "--traces", str(traces), "--steps", "4")
    paths = sorted(traces.glob("rank*.json.gz"))
    assert len(paths) == 2
    plan = pipeplan.plan(strategy, ranks=2, microbatches=4, runtime="torch")
    measured = pipeplan.import_torch_traces(paths, plan)
    assert measured.measured and measured.plan.strategy == strategy and measured.makespan > 0
    # The command line imports the same traces to the same timeline.
    plan.save(tmp_path / "plan.pb")
    subprocess.run([sys.executable, "-m", "pipeplan", "import", "--format", "torch-trace",
                    *map(str, paths), "--plan", str(tmp_path / "plan.pb"), "-o",
                    str(tmp_path / "measured.pb")], check=True, capture_output=True)
    from_cli = pipeplan.load(tmp_path / "measured.pb")
    assert from_cli.makespan == measured.makespan and from_cli.busy == measured.busy
    # Without the plan, the plan is the order the job ran.
    assert pipeplan.import_torch_traces(paths).plan.ranks == 2

    costs = pipeplan.calibrate(pipeplan.profile([measured]), unit="us")
    assert costs.time_unit == "us" and costs.stages == 4
    simulated = pipeplan.simulate(plan, costs)
    diff = pipeplan.diff(simulated, measured)
    assert diff.expected_makespan == simulated.makespan
    assert diff.measured_makespan == measured.makespan
    assert diff.makespan_error == pytest.approx(measured.makespan / simulated.makespan - 1)
    replanned = pipeplan.plan("auto", ranks=2, microbatches=4, costs=costs, runtime="torch")
    assert replanned.notes[0].startswith("auto chose")
    with pytest.raises(pipeplan.Error, match="paths\\[0\\] must be a path"):
        pipeplan.import_torch_traces([3])
    with pytest.raises(pipeplan.Error, match="expected must be a pipeplan.Timeline"):
        pipeplan.diff(plan, measured)


def test_a_pipelined_jobs_marked_layers_come_back_in_model_order(tmp_path):
    """interleaved-1f1b over 2 processes: rank 0 holds layers 0 and 2, rank 1 layers 1 and 3;
    the layer import orders them by the stages that ran them, and partition splits them."""
    traces = tmp_path / "traces"
    run_job(tmp_path / "job", "--strategy", "interleaved-1f1b", "--traces", str(traces),
            "--mark-layers", "--steps", "3")
    with pytest.warns(UserWarning, match="I and W are not split"):
        costs = pipeplan.import_layer_traces(sorted(traces.glob("rank*.json.gz")))
    names = [f"layers.{i}" for i in range(4)]
    assert [layer["name"] for layer in costs["layers"]] == names
    for layer in costs["layers"]:
        assert layer["forward"] > 0 and layer["backward"] > 0, layer
        assert layer["parameter_bytes"] == 4 * (32 * 32 + 32)  # Linear(32, 32) in fp32
    split = pipeplan.partition(costs, ranks=2, microbatches=4, strategy="interleaved-1f1b",
                               runtime="torch")
    assert [name for stage in split.stages for name in stage] == names


def test_marking_layers_under_a_split_backward_is_refused_naming_why(tmp_path):
    """zbv runs I and W apart: a layer's marked range would time I alone, taken for its B."""
    out = tmp_path / "job"
    out.mkdir()
    result = subprocess.run([sys.executable, str(JOB), "--out", str(out), "--ranks", "2",
                             "--strategy", "zbv", "--traces", str(tmp_path / "traces"),
                             "--mark-layers", "--steps", "2"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode != 0
    assert "splits each backward into I and W" in result.stderr, result.stderr[-3000:]
    assert not list((tmp_path / "traces").glob("rank*.json.gz"))


def test_schedule_refuses_what_does_not_fit(tmp_path):
    plan = pipeplan.plan("1f1b", ranks=2, microbatches=2)
    with pytest.raises(pipeplan.Error, match="torch.distributed is not initialized"):
        pipeplan.torch.schedule(plan, [torch.nn.Linear(2, 2)] * 2, loss_fn=torch.nn.MSELoss())
    dualpipe = pipeplan.plan("dualpipe", ranks=2, microbatches=4)
    with pytest.raises(pipeplan.Error, match="comms: dualpipe places two model copies"):
        pipeplan.torch.schedule(dualpipe, [torch.nn.Linear(2, 2)] * 2, loss_fn=torch.nn.MSELoss(),
                                comms=False)
    ddp = subprocess.run([sys.executable, str(JOB), "--out", str(tmp_path), "--strategy",
                          "dualpipe", "--ddp"], capture_output=True, text=True, timeout=300)
    assert ddp.returncode != 0
    assert re.search(r"pipeplan.Error: stages: stage \d is wrapped in DDP or FSDP, which a "
                     r"dual plan \(dualpipe\) does not support", ddp.stderr), ddp.stderr[-2000:]
    with pytest.raises(pipeplan.Error, match="plan must be a pipeplan.Plan"):
        pipeplan.torch.schedule("plan.pb", [], loss_fn=torch.nn.MSELoss())
    assert callable(pipeplan.torch.profile_steps)


class _Decoder(torch.nn.Module):
    """A model of top-level layers: an embedding, blocks of two widths, a norm and a head."""

    def __init__(self):
        super().__init__()
        self.tok_embeddings = torch.nn.Embedding(100, 16)
        self.layers = torch.nn.ModuleList(
            torch.nn.Sequential(torch.nn.Linear(16, w), torch.nn.ReLU(), torch.nn.Linear(w, 16))
            for w in (8, 32, 8, 32, 8, 32))
        self.norm = torch.nn.LayerNorm(16)
        self.output = torch.nn.Linear(16, 100)

    def forward(self, tokens):
        x = self.tok_embeddings(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.output(self.norm(x))


def test_split_model_builds_each_ranks_stages_from_the_partition():
    torch.manual_seed(0)
    model = _Decoder()
    names = (["tok_embeddings"] + [f"layers.{i}" for i in range(6)] + ["norm", "output"])
    layers = []
    for name in names:
        params = sum(p.numel() for p in model.get_submodule(name).parameters())
        layers.append({"name": name, "forward": params / 1000, "backward_input": params / 1000,
                       "backward_weight": params / 1000, "parameter_bytes": 4 * params})
    split = pipeplan.partition(layers, ranks=2, microbatches=4, strategy="zbv")
    assert [name for stage in split.stages for name in stage] == names
    stages = {}
    for rank in range(2):
        built = pipeplan.torch.split_model(model, split, rank)
        assert sorted(built) == split.plan.stage_indices(rank)
        stages.update(built)
    # The stages in stage order are the model: the same output, from the same parameters.
    tokens = torch.randint(0, 100, (3, 5))
    x = tokens
    for index in range(len(split.stages)):
        x = stages[index](x)
    assert torch.equal(x, model(tokens))
    assert stages[0].layers[0] is model.tok_embeddings
    # dualpipe: rank r's second-copy stage (2P - 1 - r) is the model's stage P - 1 - r, the
    # other ranks' first copy of it; schedule() then makes its weights the first copy's.
    dual = pipeplan.partition(layers, ranks=2, microbatches=4, strategy="dualpipe")
    assert len(dual.stages) == 2 and dual.plan.stage_indices(0) == [0, 3]
    built = pipeplan.torch.split_model(model, dual, 0)
    assert built[0].names == dual.stages[0] and built[3].names == dual.stages[1]
    assert built[3].layers[-1] is model.output
    with pytest.raises(pipeplan.Error, match="holds layer 'tok_embeddings', which the model has "
                                             "no module of"):
        pipeplan.torch.split_model(torch.nn.Linear(2, 2), split, 0)
    # Marked for the layer trace, a rank's stages name their layers as the model does.
    from pipeplan.pipeplan_profiler import layers_of
    own = pipeplan.torch.split_model(model, split, 1)
    marked = layers_of(own)
    assert [name for name, _ in marked] == [n for i in sorted(own) for n in split.stages[i]]
    assert all(module is model.get_submodule(name) for name, module in marked)


def test_a_marked_training_loop_gives_the_layer_costs_partition_splits(tmp_path):
    torch.manual_seed(0)
    model = _Decoder()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    tokens = torch.randint(0, 100, (4, 64))
    with pipeplan.torch.profile_steps(tmp_path / "traces", warmup=1, active=2, quiet=True,
                                      layers=model) as next_step:
        for _ in range(3):
            for microbatch in tokens.chunk(2):
                out = model(microbatch)
                torch.nn.functional.cross_entropy(out.flatten(0, 1),
                                                  microbatch.flatten()).backward()
            optimizer.step()
            optimizer.zero_grad()
            next_step()
    with pytest.warns(UserWarning, match="I and W are not split by the ranges"):
        costs = pipeplan.import_layer_traces(tmp_path / "traces" / "rank0.json.gz")
    names = ["tok_embeddings"] + [f"layers.{i}" for i in range(6)] + ["norm", "output"]
    assert [layer["name"] for layer in costs["layers"]] == names
    assert costs["time_unit"] == "us"
    for layer in costs["layers"]:
        assert layer["forward"] > 0 and layer["backward"] > 0, layer
        assert layer["parameter_bytes"] == 4 * sum(
            p.numel() for p in model.get_submodule(layer["name"]).parameters())
    # One microbatch's hidden state (2 x 64 x 16 floats) leaves every layer but the head.
    assert costs["layers"][1]["output_bytes"] == 2 * 64 * 16 * 4
    split = pipeplan.partition(costs, ranks=2, microbatches=4, strategy="1f1b")
    assert [name for stage in split.stages for name in stage] == names
    with pytest.raises(pipeplan.Error, match="paths: no trace given"):
        pipeplan.import_layer_traces([])


def test_measured_layers_plan_a_split_of_the_model(tmp_path):
    torch.manual_seed(0)
    model = _Decoder()
    tokens = torch.randint(0, 100, (4, 64))
    costs = pipeplan.torch.measure_layers(
        model, tokens, lambda out, target: torch.nn.functional.cross_entropy(
            out.flatten(0, 1), target.flatten()), target=tokens, repeats=3, warmup=1,
        path=tmp_path / "layers.json")
    names = ["tok_embeddings"] + [f"layers.{i}" for i in range(6)] + ["norm", "output"]
    assert [layer["name"] for layer in costs["layers"]] == names
    for layer in costs["layers"]:
        assert layer["forward"] > 0 and layer["backward"] > 0, layer
        assert layer["backward_weight"] > 0, layer
        assert layer["parameter_bytes"] == 4 * sum(
            p.numel() for p in model.get_submodule(layer["name"]).parameters())
    embedding, block, head = costs["layers"][0], costs["layers"][1], costs["layers"][-1]
    assert embedding["backward_input"] == 0  # tokens have no gradient
    assert block["backward_input"] > 0
    # One microbatch's hidden state (4 x 64 x 16 floats) leaves every layer but the head.
    assert block["output_bytes"] == 4 * 64 * 16 * 4
    # The head keeps at least its input and its logits (4 x 64 x 100) for the backward.
    assert head["activation"] >= 4 * 64 * 100 * 4
    split = pipeplan.partition(tmp_path / "layers.json", ranks=2, microbatches=4,
                               strategy="1f1b")
    assert [name for stage in split.stages for name in stage] == names
    with pytest.raises(pipeplan.Error, match="layers: the model has no module 'nope'"):
        pipeplan.torch.measure_layers(model, tokens, layers=["nope"])


def test_measured_bytes_leave_out_the_weights_a_layer_saves_and_count_their_gradients():
    # A linear layer saves its input and its weight for the backward; the weight (here 100
    # times the input) is held by the rank anyway, so a microbatch keeps the input alone. The
    # batch norm saves its weight and per-channel statistics beside its input.
    torch.manual_seed(0)
    rows, width = 2, 200
    model = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.BatchNorm1d(width))
    costs = pipeplan.torch.measure_layers(model, torch.randn(rows, width), repeats=1, warmup=0)
    linear, norm = costs["layers"]
    assert linear["parameter_bytes"] == (width * width + width) * 4
    assert linear["activation"] == rows * width * 4
    # Its input, the normalised input, and two statistics per channel: no weight, bias or
    # running statistics.
    assert norm["activation"] <= 2 * rows * width * 4 + 2 * width * 4
    # A training rank holds each parameter's gradient too: static memory counts both by default.
    assert costs["optimizer_multiple"] == 1.0
    split = pipeplan.partition(costs, ranks=1, microbatches=1, strategy="1f1b")
    parameters = linear["parameter_bytes"] + norm["parameter_bytes"]
    # At its peak the one stage holds both layers' activations and the largest part's
    # transient: the linear layer's B, its weights' gradient made anew before it is added to
    # .grad.
    assert linear["backward_transient"] >= width * width * 4
    transient = max(layer[kind] for layer in costs["layers"]
                    for kind in ("forward_transient", "backward_transient"))
    assert split.peak_memory[0] == (2 * parameters + linear["activation"] + norm["activation"]
                                    + transient)
    with pytest.raises(pipeplan.Error, match="optimizer_multiple must be a finite number >= 0"):
        pipeplan.torch.measure_layers(model, torch.randn(rows, width), optimizer_multiple=-1)


def test_measured_w_is_the_weights_gradients_alone_as_torchs_zero_bubble_runs_it():
    # A block x + down(tanh(up(x))) on n tokens: I takes two matrix products (through down,
    # then up), W two (down's and up's weights). W measured as the weights' gradient asked of
    # the whole backward would also take the product through down again: three.
    from torch.utils.flop_counter import FlopCounterMode
    torch.manual_seed(0)
    n, hidden, width = 32, 16, 48
    up, down = torch.nn.Linear(hidden, width), torch.nn.Linear(width, hidden)
    params = list(up.parameters()) + list(down.parameters())
    product = 2 * n * hidden * width
    inp = torch.randn(n, hidden, requires_grad=True)
    out = inp + down(torch.tanh(up(inp)))
    with FlopCounterMode(display=False) as input_flops:
        groups = pipeplan.torch._backward_input([out], [torch.ones_like(out)], [inp], params)
    with FlopCounterMode(display=False) as weight_flops:
        pipeplan.torch._backward_weight(params, groups)
    assert input_flops.get_total_flops() == 2 * product
    assert weight_flops.get_total_flops() == 2 * product
    assert all(p.grad is not None for p in params)


class _Residual(torch.nn.Module):
    def __init__(self, hidden, width):
        super().__init__()
        self.up, self.down = torch.nn.Linear(hidden, width), torch.nn.Linear(width, hidden)

    def forward(self, x):
        return x + self.down(torch.tanh(self.up(x)))


def test_measured_i_keeps_for_w_the_gradient_its_weights_come_from():
    # torch's I keeps the gradient of each linear's output for W: up's is n x width (down's is
    # the output gradient, made before I); of the graph I frees a little (its outputs'
    # nodes, n x hidden each).
    torch.manual_seed(0)
    n, hidden, width = 256, 64, 1024
    model = torch.nn.Sequential(torch.nn.Linear(hidden, hidden), _Residual(hidden, width))
    costs = pipeplan.torch.measure_layers(model, torch.randn(n, hidden), repeats=1, warmup=0)
    block = costs["layers"][1]
    assert ((n * width - 2 * n * hidden) * 4 <= block["allocated_by_input"]
            <= (n * width + 2 * n * hidden) * 4), block
    # The first layer has no input gradient, so no split backward: nothing kept.
    assert costs["layers"][0]["allocated_by_input"] == 0


def test_measuring_layers_leaves_the_models_gradients_as_they_were():
    torch.manual_seed(0)
    model = _Decoder()
    tokens = torch.randint(0, 100, (2, 64))
    head = model.get_submodule("output").weight
    head.grad = torch.full_like(head, 3.0)
    pipeplan.torch.measure_layers(model, tokens, lambda out, target: torch.nn.functional.
                                  cross_entropy(out.flatten(0, 1), target.flatten()),
                                  target=tokens, repeats=2, warmup=1)
    assert torch.equal(head.grad, torch.full_like(head, 3.0))
    assert all(p.grad is None for name, p in model.named_parameters()
               if not name.startswith("output."))


SPLIT_JOB = Path(__file__).with_name("split_job.py")


def run_split_job(tmp_path, model, strategy, *args):
    """split_job.py's ranks' saves, the split's stage -> rank map, and the job module."""
    sys.path.insert(0, str(SPLIT_JOB.parent))
    import split_job
    result = subprocess.run([sys.executable, str(SPLIT_JOB), "--out", str(tmp_path), "--model",
                             model, "--strategy", strategy, *args],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    saved = [torch.load(tmp_path / f"rank{r}.pt") for r in range(split_job.RANKS)]
    stages = saved[0]["stages"]
    rank_of = {index % len(stages): r for r, s in enumerate(saved) for index in s["stage_indices"]}
    return saved, rank_of, split_job


def unsplit_run(split_job, model_name, steps=3):
    """The unsplit model, the same steps on the mean of the microbatches' losses: its
    gradients after the first step, its parameters after the last, and the losses."""
    model = split_job.MODELS[model_name]()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    tokens, targets = split_job.batch()
    rows = split_job.ROWS
    losses_per_step = []
    for step in range(steps):
        optimizer.zero_grad()
        losses = [split_job.loss_fn(model(tokens[i * rows:(i + 1) * rows]),
                                    targets[i * rows:(i + 1) * rows])
                  for i in range(split_job.MICROBATCHES)]
        torch.stack(losses).mean().backward()
        if step == 0:
            grads = {name: p.grad.clone() for name, p in model.named_parameters()}
        losses_per_step.append(torch.stack(losses).mean().item())
        optimizer.step()
    return grads, dict(model.named_parameters()), losses_per_step


def assert_trains_as_unsplit(saved, rank_of, split_job, model_name):
    grads, params, losses = unsplit_run(split_job, model_name)
    for rank, save in enumerate(saved):
        assert save["grads"], f"rank {rank} holds no parameters"
        for name, got in save["grads"].items():
            torch.testing.assert_close(got, grads[name], rtol=1e-5, atol=1e-7,
                                       msg=lambda m: f"rank {rank}, {name}'s gradient: {m}")
            torch.testing.assert_close(save["params"][name], params[name].detach(), rtol=1e-5,
                                       atol=1e-6,
                                       msg=lambda m: f"rank {rank}, {name} after 3 steps: {m}")
    last = rank_of[len(saved[0]["stages"]) - 1]
    assert saved[last]["losses"] == pytest.approx(losses, rel=1e-5)


@pytest.mark.parametrize("strategy,tie_ranks,options", [("interleaved-1f1b", [0, 1], []),
                                                        ("interleaved-1f1b", [0, 1],
                                                         ["--wrap", "ddp", "--free"]),
                                                        ("zbv", [0], [])])
def test_a_tied_embedding_and_head_train_as_the_unsplit_model(strategy, tie_ranks, options,
                                                              tmp_path):
    """interleaved-1f1b puts the embedding on rank 0 and the head on rank 1: each rank's copy of
    the shared matrix takes the sum of both ranks' gradients and the copies start equal (rank
    1 built its own differently), the stages wrapped in DDP (as a 2-D job's are, and the
    layers other ranks hold freed) or not. zbv
    puts both on rank 0, in two stages: the gradient is divided by the microbatch count once,
    not once per stage."""
    saved, rank_of, split_job = run_split_job(tmp_path, "tied", strategy, *options)
    stages = saved[0]["stages"]
    assert stages[0][0] == "tok_embeddings" and stages[-1][-1] == "output"
    assert sorted({rank_of[0], rank_of[len(stages) - 1]}) == tie_ranks, (stages, rank_of)
    assert_trains_as_unsplit(saved, rank_of, split_job, "tied")
    holding = [save["params"]["tok_embeddings.weight"] for save in saved
               if "tok_embeddings.weight" in save["params"]]
    assert len(holding) == len(tie_ranks)
    if len(holding) > 1:  # the copies, summed in one order, are the same bits
        assert torch.equal(holding[0], holding[1])


def test_blocks_passing_a_tuple_on_train_as_the_unsplit_model(tmp_path):
    """Each block takes and returns (x, aux), within a stage and from stage to stage (torch
    hands a stage the previous one's outputs as arguments); measure_layers measures them."""
    saved, rank_of, split_job = run_split_job(tmp_path, "aux", "interleaved-1f1b")
    assert len(saved[0]["stages"]) == 4
    assert_trains_as_unsplit(saved, rank_of, split_job, "aux")
    model = split_job.AuxDecoder()
    tokens, targets = split_job.batch()
    rows = split_job.ROWS
    measured = pipeplan.torch.measure_layers(model, tokens[:rows], split_job.loss_fn,
                                             target=targets[:rows], repeats=1, warmup=0)
    by_name = {layer["name"]: layer for layer in measured["layers"]}
    assert list(by_name) == split_job.NAMES["aux"]
    # A block's output: the rows' activations and their auxiliary losses, both float32.
    assert by_name["layers.0"]["output_bytes"] == (rows * split_job.SEQ * split_job.WIDTH
                                                   + rows) * 4
    assert by_name["layers.0"]["backward_input"] > 0 and by_name["layers.0"]["backward_weight"] > 0
    assert by_name["tok_embeddings"]["backward_input"] == 0


def test_measuring_layers_changes_no_buffer_and_no_random_draw():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.BatchNorm1d(8),
                                torch.nn.Dropout(0.5), torch.nn.Linear(8, 2))
    state = {name: value.clone() for name, value in model.state_dict().items()}
    torch.manual_seed(1)
    expected_draw = torch.rand(3)
    torch.manual_seed(1)
    pipeplan.torch.measure_layers(model, torch.ones(4, 8), torch.nn.functional.mse_loss,
                                  target=torch.zeros(4, 2))
    assert torch.equal(torch.rand(3), expected_draw)
    for name, value in model.state_dict().items():
        assert torch.equal(value, state[name]), name


def test_measured_transients_hold_a_large_heads_logits_gradient_and_softmax():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.Linear(16, 4000))
    x = torch.randn(2, 64, 16)
    target = torch.randint(0, 4000, (2, 64))
    costs = pipeplan.torch.measure_layers(model, x, _cross_entropy, target=target, repeats=1,
                                          warmup=1)
    logits = 2 * 64 * 4000 * 4
    head = costs["layers"][1]
    # B computes the logits' gradient from the saved softmax: two tensors of the logits' size
    # live together inside it, freed before it ends (less what little it frees itself).
    assert 1.95 * logits <= head["backward_transient"] < 3 * logits, head
    assert 1.95 * logits <= head["input_transient"] < 3 * logits, head
    # The small layer holds no tensor of that size inside any part.
    block = costs["layers"][0]
    assert all(block[kind] < logits / 10 for kind in ("forward_transient", "backward_transient",
                                                      "input_transient", "weight_transient"))


def test_the_first_layers_backward_takes_no_gradient_of_the_models_input():
    # A vision model's first layer takes float images: its stage's backward computes no
    # gradient of them, so its I is 0; the next layer's input is an activation, which has one.
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 4, stride=4), torch.nn.Conv2d(8, 8, 1))
    images = torch.randn(2, 3, 32, 32)
    costs = pipeplan.torch.measure_layers(model, images, repeats=1, warmup=0)
    patches, mixer = costs["layers"]
    assert patches["backward_input"] == 0
    assert patches["backward_weight"] > 0
    assert mixer["backward_input"] > 0


class _TiedFour(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.embed = torch.nn.Embedding(500, 16)
        self.block0 = torch.nn.Linear(16, 16)
        self.block1 = torch.nn.Linear(16, 16)
        self.head = torch.nn.Linear(16, 500, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, tokens):
        return self.head(self.block1(self.block0(self.embed(tokens))))


def test_a_tied_head_is_listed_and_held_once_by_a_rank_holding_both():
    tokens = torch.randint(0, 500, (2, 8))
    costs = pipeplan.torch.measure_layers(_TiedFour(), tokens, _cross_entropy, target=tokens,
                                          repeats=1, warmup=0)
    matrix = 500 * 16 * 4
    assert costs["shared_parameters"] == [
        {"name": "embed.weight", "bytes": matrix, "layers": ["embed", "head"]}]
    assert costs["layers"][0]["parameter_bytes"] == costs["layers"][3]["parameter_bytes"] == matrix
    untied = {key: value for key, value in costs.items() if key != "shared_parameters"}
    # Four layers onto four stages: one split. zbv's V shape puts the embedding and the head on
    # rank 0, which holds the matrix and its gradient once; interleaved-1f1b puts the head on
    # rank 1, and each rank holds its own copy.
    for strategy, rank_holding_both in (("zbv", 0), ("interleaved-1f1b", None)):
        tied = pipeplan.partition(costs, ranks=2, microbatches=4, strategy=strategy,
                                  stages_per_rank=2)
        apart = pipeplan.partition(untied, ranks=2, microbatches=4, strategy=strategy,
                                   stages_per_rank=2)
        for rank in range(2):
            saved = 2 * matrix if rank == rank_holding_both else 0  # parameters and gradients
            assert tied.peak_memory[rank] == apart.peak_memory[rank] - saved, (strategy, rank)


class _WithPositions(torch.nn.Module):
    """A parameter of the model's own, added between its layers: not its layers in order."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.embed = torch.nn.Embedding(50, 8)
        self.pos = torch.nn.Parameter(torch.randn(6, 8))
        self.block = torch.nn.Linear(8, 8)
        self.head = torch.nn.Linear(8, 50)

    def forward(self, tokens):
        return self.head(self.block(self.embed(tokens) + self.pos))


class _ActivatedBetween(torch.nn.Module):
    """A function applied between two layers in forward; dropout as a layer of its own."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.up = torch.nn.Linear(8, 16)
        self.drop = torch.nn.Dropout(0.5)
        self.down = torch.nn.Linear(16, 2)

    def forward(self, x):
        return self.down(self.drop(torch.nn.functional.gelu(self.up(x))))


def _cross_entropy(logits, target):
    return torch.nn.functional.cross_entropy(logits.flatten(0, 1), target.flatten())


def test_a_model_that_is_not_its_layers_in_order_is_refused_before_it_is_measured():
    tokens = torch.randint(0, 50, (2, 6))
    with pytest.raises(pipeplan.Error, match=r"model: it is not its layers \(embed, block, "
                       r"head\) applied in order.* differ by up to .*; the model's parameter\(s\) "
                       r"'pos' belong to none of the layers\. Move that work into a layer"):
        pipeplan.torch.measure_layers(_WithPositions(), tokens, _cross_entropy, target=tokens)
    with pytest.raises(pipeplan.Error, match=r"\(up, drop, down\) .*differ by up to .*; the "
                       r"model's forward does work between its layers.*check=False skips"):
        pipeplan.torch.measure_layers(_ActivatedBetween(), torch.ones(4, 8),
                                      torch.nn.functional.mse_loss, target=torch.zeros(4, 2))
    # Asked not to check, it measures what it is told to.
    costs = pipeplan.torch.measure_layers(_ActivatedBetween(), torch.ones(4, 8),
                                          torch.nn.functional.mse_loss, target=torch.zeros(4, 2),
                                          repeats=1, warmup=0, check=False)
    assert [layer["name"] for layer in costs["layers"]] == ["up", "drop", "down"]


def test_a_model_that_is_its_layers_in_order_passes_the_check_with_dropout_drawn_alike():
    model = _ActivatedBetween()
    model.forward = lambda x: model.down(model.drop(model.up(x)))
    torch.manual_seed(1)
    expected_draw = torch.rand(3)
    torch.manual_seed(1)
    costs = pipeplan.torch.measure_layers(model, torch.ones(4, 8), torch.nn.functional.mse_loss,
                                          target=torch.zeros(4, 2), repeats=1, warmup=0)
    assert [layer["name"] for layer in costs["layers"]] == ["up", "drop", "down"]
    assert torch.equal(torch.rand(3), expected_draw)


@pytest.mark.parametrize("forward, warning", [
    # Its forward takes more than the example input.
    (lambda m: lambda x, mask: m.down(m.drop(m.up(x)) * mask),
     r"model\(example_input\) failed \(TypeError: .*\), so whether the model is its layers "
     r"applied in order was not checked"),
    # It returns a dict of outputs, as Hugging Face models do.
    (lambda m: lambda x: {"logits": m.down(m.drop(m.up(x)))},
     r"the model returns dict, which holds no tensor or tuple of tensors to compare with its "
     r"layers' output, so whether the model is its layers applied in order was not checked"),
], ids=["needs_more_arguments", "returns_a_dict"])
def test_a_model_the_check_cannot_compare_is_measured_with_a_warning(forward, warning):
    model = _ActivatedBetween()
    model.forward = forward(model)
    with pytest.warns(UserWarning, match=warning):
        costs = pipeplan.torch.measure_layers(model, torch.ones(4, 8),
                                              torch.nn.functional.mse_loss,
                                              target=torch.zeros(4, 2), repeats=1, warmup=0)
    assert len(costs["layers"]) == 3


def test_a_layer_that_cannot_take_the_previous_ones_output_is_named():
    model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.Linear(8, 2))
    with pytest.raises(pipeplan.Error, match=r"layers: layer '1' failed on the previous layer's "
                       r"output \(RuntimeError: .*each to the previous one's output"):
        pipeplan.torch.measure_layers(model, torch.ones(4, 8))
    # A vision model flattening between its layers in forward: the hint says where to look,
    # and check=False, which would fail the same way, is not offered.
    vision = _ActivatedBetween()
    vision.up = torch.nn.Conv2d(3, 16, 4, stride=4)
    vision.forward = lambda x: vision.down(vision.drop(vision.up(x).flatten(1).mean(1, True)))
    with pytest.raises(pipeplan.Error, match=r"layer 'drop' failed|layer 'down' failed") as error:
        pipeplan.torch.measure_layers(vision, torch.ones(2, 3, 8, 8))
    assert "the model's forward does work between its layers" in str(error.value)
    assert "check=False" not in str(error.value)


def test_split_model_warns_of_parameters_no_stage_holds():
    split = pipeplan.partition({"layers": [{"name": n, "forward": 1.0, "backward": 2.0}
                                           for n in ("embed", "block", "head")]},
                               ranks=1, microbatches=2, strategy="1f1b")
    with pytest.warns(UserWarning, match=r"split_model: the model's parameter\(s\) 'pos' belong "
                      r"to none of the split's layers"):
        pipeplan.torch.split_model(_WithPositions(), split, rank=0)


def test_a_tie_across_stages_is_refused_with_stages_sharded_by_fsdp(tmp_path):
    result = subprocess.run([sys.executable, str(SPLIT_JOB), "--out", str(tmp_path), "--model",
                             "tied", "--strategy", "interleaved-1f1b", "--wrap", "fsdp"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode != 0
    assert re.search(r"pipeplan.Error: stages: stage \d is sharded by FSDP, and parameter "
                     r"'tok_embeddings.weight' is shared by stages 0, 3", result.stderr), \
        result.stderr[-2000:]


def test_a_tie_across_stages_is_refused_under_a_dual_plan():
    sys.path.insert(0, str(SPLIT_JOB.parent))
    import split_job
    split = pipeplan.partition(split_job.layer_costs("tied"), ranks=2, microbatches=4,
                               strategy="dualpipe")
    with pytest.raises(pipeplan.Error, match=r"model: parameter 'tok_embeddings.weight' is used "
                                             r"by layers of stages 0, 1, and a dual plan "
                                             r"\(dualpipe\) keeps no parameter shared"):
        pipeplan.torch.split_model(split_job.TiedDecoder(), split, 0)


def test_split_model_can_free_the_layers_a_rank_does_not_hold():
    sys.path.insert(0, str(SPLIT_JOB.parent))
    import split_job
    split = pipeplan.partition(split_job.layer_costs("tied"), ranks=2, microbatches=4,
                               strategy="interleaved-1f1b", runtime="torch")
    model, reference = split_job.TiedDecoder(), split_job.TiedDecoder()
    stages = pipeplan.torch.split_model(model, split, 1, free_other_layers=True)
    held = [name for index in stages for name in split.stages[index]]
    assert "output" in held and "tok_embeddings" not in held
    for name, param in model.named_parameters():
        if any(name.startswith(layer + ".") for layer in held) or \
                name == "tok_embeddings.weight":  # the head's matrix: tied
            assert param.device.type == "cpu", name
            assert torch.equal(param, reference.get_parameter(name)), name
        else:
            assert param.device.type == "meta", name
            assert param.shape == reference.get_parameter(name).shape, name
    assert model.output.weight is model.tok_embeddings.weight
    # The rank's stages compute as the model's layers do.
    x = torch.randn(2, split_job.SEQ, split_job.WIDTH)
    for index in sorted(stages):
        expected = x
        for name in split.stages[index]:
            expected = reference.get_submodule(name)(expected)
        torch.testing.assert_close(stages[index](x), expected)
    with pytest.raises(pipeplan.Error, match="free_other_layers must be a bool"):
        pipeplan.torch.split_model(split_job.TiedDecoder(), split, 0, free_other_layers="yes")

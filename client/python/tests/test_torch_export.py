"""Tests of placement.torch_export: a torchvision ResNet-18 and a small transformer stack, exported and
then validated and placed by the real placement_offline."""
import gzip
import json
import subprocess
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch.fx.experimental.proxy_tensor")

from placement import torch_export  # noqa: E402


def run_offline(binary, *args):
    completed = subprocess.run([binary, *args], capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr
    return completed.stdout


def check_graph(request):
    """Structural checks every exported step must pass (placement_offline checks the rest)."""
    ops = request["graph"]["ops"]
    names = [op["name"] for op in ops]
    assert len(set(names)) == len(names)
    for edge in request["graph"]["edges"]:
        assert 0 <= edge["src"] < len(ops) and 0 <= edge["dst"] < len(ops)
        assert edge["src"] < edge["dst"], "ops are written in a topological order"
    types = {op["type"] for op in ops}
    return ops, types


@pytest.fixture(scope="module")
def resnet_request(tmp_path_factory):
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10)
    images = torch.randn(2, 3, 32, 32)
    labels = torch.randint(0, 10, (2,))
    request = torch_export.export_training_step(
        model, (images,), lambda out, t: torch.nn.functional.cross_entropy(out, t[0]), "sgd", (labels,),
        devices=2, device_memory_gib=1.0)
    path = tmp_path_factory.mktemp("resnet") / "resnet18.json"
    torch_export.write_request(request, path)
    return request, path, model


def test_resnet_step_has_forward_backward_and_updates(resnet_request):
    request, _, model = resnet_request
    ops, types = check_graph(request)
    assert {"convolution", "convolution_backward", "native_batch_norm", "native_batch_norm_backward"} <= types
    params = {name: p for name, p in model.named_parameters()}
    param_ops = {op["name"]: op for op in ops if op["type"] == "parameter"}
    assert set(param_ops) == {f"param:{name}" for name in params}
    # SGD with momentum: the parameter and one state copy, in fp32.
    weight = params["conv1.weight"]
    assert int(param_ops["param:conv1.weight"]["persistent_bytes"]) == 2 * weight.numel() * 4
    # Every parameter's update ops share its colocation group; forward and backward ops are free.
    groups = {}
    for op in ops:
        groups.setdefault(op.get("colocation_group"), []).append(op)
    for name in params:
        members = groups[f"param:{name}"]
        assert any(op["type"] == "sub" for op in members), f"{name}: no update op colocated"
    assert all("colocation_group" not in op for op in ops if op["type"] in ("convolution", "convolution_backward"))
    # The first convolution's output: 2 x 64 x 16 x 16 floats.
    first_conv = next(op for op in ops if op["type"] == "convolution")
    assert int(first_conv["output_bytes"]) == 2 * 64 * 16 * 16 * 4
    assert all(int(op.get("compute_ns", 0)) >= torch_export.DEFAULT_LAUNCH_OVERHEAD_NS
               for op in ops if op["type"] not in ("parameter", "buffer", "input"))


def test_resnet_request_is_placed_by_placement_offline(resnet_request, offline_binary):
    request, path, _ = resnet_request
    placement = json.loads(run_offline(offline_binary, "place", f"--request={path}", "--algorithm=m_etf",
                                       "--time_limit_s=20"))
    assert placement["outcome"] == "FEASIBLE", placement.get("reason")
    assert len(placement["device"]) == len(request["graph"]["ops"])
    assert int(placement["metrics"]["makespan_ns"]) >= int(placement["metrics"]["lower_bound_ns"]) > 0


def test_roofline_flags_scale_compute(resnet_request):
    flops = torch_export.count_flops("mm", [torch.zeros(8, 16), torch.zeros(16, 4)], torch.zeros(8, 4))
    assert flops == 2 * 8 * 16 * 4
    fast = torch_export.roofline_ns(1e9, 1e6, 1e12, 1e12, 0)
    slow = torch_export.roofline_ns(1e9, 1e6, 1e11, 1e12, 0)
    assert (fast, slow) == (1_000_000, 10_000_000)


def test_transformer_stack_with_adam_as_binary_request(tmp_path, offline_binary):
    torch.manual_seed(0)
    model = torch_export.TransformerStack(layers=2, d_model=32, heads=2, vocab=50)
    tokens = torch.randint(0, 50, (2, 8))
    targets = torch.randint(0, 50, (2, 8))
    request = torch_export.export_training_step(model, (tokens,), torch_export._cross_entropy, "adam",
                                                (targets,), devices=3, profile_runs=2)
    ops, types = check_graph(request)
    assert {"bmm", "_softmax", "native_layer_norm", "embedding_dense_backward"} & types
    assert any(t in types for t in ("mm", "addmm", "bmm"))
    embedding = next(op for op in ops if op["name"] == "param:embedding.weight")
    assert int(embedding["persistent_bytes"]) == 3 * 50 * 32 * 4  # weight + Adam's two moments
    path = tmp_path / "transformer.pb"
    torch_export.write_request(request, path)
    evaluated = json.loads(run_offline(offline_binary, "place", f"--request={path}", "--time_limit_s=20"))
    assert evaluated["outcome"] == "FEASIBLE", evaluated.get("reason")
    assert len({*evaluated["device"]}) >= 1


def test_command_line(tmp_path, offline_binary):
    out = tmp_path / "t.json.gz"
    torch_export.main(["--model=transformer", "--layers=1", "--d_model=16", "--heads=2", "--seq=4",
                       "--batch=1", "--vocab=20", "--devices=2", f"--out={out}"])
    run_offline(offline_binary, "evaluate", f"--request={out}", f"--placement={write_zeros(tmp_path, out)}")


def write_zeros(tmp_path, request_path):
    """A placement with every op on device 0 (colocation always holds)."""
    import gzip

    request = json.loads(gzip.decompress(request_path.read_bytes()))
    path = tmp_path / "zeros.json"
    path.write_text(json.dumps({"device": [0] * len(request["graph"]["ops"])}))
    return path


# ---------------------------------------------------------------------------------------------------
# Training plans (api.md section 2.1): --microbatches, --max_in_flight, --data_parallel

DATA = Path(__file__).resolve().parent / "data"

# The requests these command lines wrote before plans existed (torch 1.13, roofline costs: no
# measurement in them). Without plan flags the exporter must still write them byte for byte.
GOLDEN_EXPORTS = {
    "export_transformer_adam.json.gz": ["--model=transformer", "--layers=1", "--d_model=16", "--heads=2", "--seq=4",
                                        "--batch=4", "--vocab=20", "--optimizer=adam", "--devices=2"],
    "export_resnet18_sgd.json.gz": ["--model=torchvision:resnet18", "--image_size=16", "--batch=4", "--classes=10",
                                    "--devices=2"],
}


@pytest.mark.parametrize("golden", sorted(GOLDEN_EXPORTS))
def test_export_without_plan_flags_is_byte_identical_to_before(golden, tmp_path):
    if not torch.__version__.startswith("1.13"):
        pytest.skip(f"the golden requests were traced by torch 1.13; this is {torch.__version__}")
    if "resnet" in golden:
        pytest.importorskip("torchvision")
    out = tmp_path / "request.json"
    torch_export.main([*GOLDEN_EXPORTS[golden], f"--out={out}"])
    expected = gzip.decompress((DATA / golden).read_bytes())
    assert out.read_bytes() == expected
    assert "once_per_step" not in out.read_text() and "microbatches" not in out.read_text()


def split_ops(request):
    """(once ops, update ops, source ops) by name. Update ops: the members of a parameter's colocation
    group other than the parameter itself (the exporter groups an update with its parameter)."""
    ops = request["graph"]["ops"]
    once = {op["name"] for op in ops if op.get("once_per_step")}
    sources = {op["name"] for op in ops if op["type"] in ("parameter", "buffer")}
    updates = {op["name"] for op in ops if op.get("colocation_group", "").startswith("param:")
               and op["type"] != "parameter"}
    return once, updates, sources


def check_plan_request(request, microbatches, batch, input_bytes_per_sample):
    ops = request["graph"]["ops"]
    once, updates, sources = split_ops(request)
    # Once ops are exactly the optimizer update (plus the parameters and buffers it and the
    # microbatches read, state that exists before the first microbatch).
    assert updates and once == updates | sources
    assert {op["type"] for op in ops if op["name"] in updates} <= {"mul", "add", "sub", "div", "sqrt"}
    assert not any(op.get("once_per_step") for op in ops if op["type"] == "input")
    # api.md's rule: a once op after a microbatch feeds only once ops.
    follows = {i for i, op in enumerate(ops) if not op.get("once_per_step")}
    for edge in request["graph"]["edges"]:
        src, dst = ops[edge["src"]], ops[edge["dst"]]
        if src["name"] in updates:
            assert dst.get("once_per_step"), f"{src['name']} -> {dst['name']}"
        if edge["src"] in follows and dst.get("once_per_step"):
            assert dst["name"] in updates
    assert request["options"]["microbatches"] == microbatches
    # The graph is one microbatch: M x its samples = the batch.
    first_input = next(op for op in ops if op["name"] == "input:0")
    microbatch = int(first_input["output_bytes"]) // input_bytes_per_sample
    assert microbatch * microbatches == batch


def place_plan(offline_binary, request, path, *flags):
    torch_export.write_request(request, path)
    return json.loads(run_offline(offline_binary, "place", f"--request={path}", "--time_limit_s=10", *flags))


def test_transformer_step_with_four_microbatches_is_placed_with_a_plan(tmp_path, offline_binary):
    torch.manual_seed(0)
    model = torch_export.TransformerStack(layers=2, d_model=32, heads=2, vocab=50)
    tokens, targets = torch.randint(0, 50, (8, 16)), torch.randint(0, 50, (8, 16))
    request = torch_export.export_training_step(model, (tokens,), torch_export._cross_entropy, "adam", (targets,),
                                                microbatches=4, max_in_flight=2, devices=4)
    check_plan_request(request, 4, batch=8, input_bytes_per_sample=16 * 8)  # 16 int64 tokens a sample
    assert request["options"]["max_in_flight"] == 2 and "data_parallel" not in request["options"]

    placed = place_plan(offline_binary, request, tmp_path / "t.json", "--algorithm=m_etf")
    assert placed["outcome"] == "FEASIBLE", placed.get("reason")
    assert placed["plan"] == {"microbatches": 4, "max_in_flight": 2, "data_parallel": 1}
    step = int(placed["metrics"]["makespan_ns"])
    assert placed["metrics"]["microbatches_per_second"] == pytest.approx(4e9 / step)
    # Two replica groups of two devices: the placement is group 0's, the throughput counts both.
    request["options"]["data_parallel"] = 2
    replicated = place_plan(offline_binary, request, tmp_path / "t2.json", "--algorithm=m_etf")
    assert replicated["outcome"] == "FEASIBLE" and replicated["plan"]["data_parallel"] == 2
    assert set(replicated["device"]) <= {0, 1}
    assert replicated["metrics"]["microbatches_per_second"] == pytest.approx(
        8e9 / int(replicated["metrics"]["makespan_ns"]))


def test_cnn_step_with_four_microbatches_is_placed_with_a_plan(tmp_path, offline_binary):
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10)
    images, labels = torch.randn(8, 3, 32, 32), torch.randint(0, 10, (8,))
    request = torch_export.export_training_step(
        model, (images,), lambda out, t: torch.nn.functional.cross_entropy(out, t[0]), "sgd", (labels,),
        microbatches=4, data_parallel=0, devices=4)
    check_plan_request(request, 4, batch=8, input_bytes_per_sample=3 * 32 * 32 * 4)
    assert request["options"]["data_parallel"] == 0
    ops = request["graph"]["ops"]
    first_conv = next(op for op in ops if op["type"] == "convolution")
    assert int(first_conv["output_bytes"]) == 2 * 64 * 16 * 16 * 4  # a microbatch of 2 images
    # Batch-norm statistics are state of the step, written by every microbatch's forward.
    assert all(op.get("once_per_step") for op in ops if op["type"] == "buffer")
    assert not any(op.get("once_per_step") for op in ops if op["type"] == "native_batch_norm")

    placed = place_plan(offline_binary, request, tmp_path / "r.json", "--algorithm=m_etf")
    assert placed["outcome"] == "FEASIBLE", placed.get("reason")
    assert placed["plan"]["microbatches"] == 4 and placed["plan"]["data_parallel"] in (1, 2, 4)
    # The same step as one batch (the plain request): the plan's one microbatch is a quarter of it.
    plain = torch_export.export_training_step(
        model, (images,), lambda out, t: torch.nn.functional.cross_entropy(out, t[0]), "sgd", (labels,), devices=4)
    assert "options" not in plain and not any(op.get("once_per_step") for op in plain["graph"]["ops"])
    plain_conv = next(op for op in plain["graph"]["ops"] if op["type"] == "convolution")
    assert int(plain_conv["output_bytes"]) == 4 * int(first_conv["output_bytes"])


def test_summed_microbatch_gradients_are_the_batch_gradient():
    """The exported microbatch step divides a mean loss by M, so that the sum of M microbatches'
    gradients (what a plan accumulates) is the full batch's gradient and the summed losses its loss."""
    torch.manual_seed(0)
    model = torch_export.TransformerStack(layers=1, d_model=16, heads=2, vocab=30)
    tokens, targets = torch.randint(0, 30, (8, 6)), torch.randint(0, 30, (8, 6))
    full, _, full_args = torch_export.trace_training_step(model, (tokens,), torch_export._cross_entropy, "sgd",
                                                          (targets,))
    (micro_tokens,), (micro_targets,) = torch_export.split_microbatch((tokens,), (targets,), 4)
    assert micro_tokens.shape == (2, 6)
    micro, placeholders, micro_args = torch_export.trace_training_step(
        model, (micro_tokens,), torch_export._cross_entropy, "sgd", (micro_targets,), microbatches=4)
    state = micro_args[:len(micro_args) - 2]
    with torch.no_grad():
        _, _, full_loss, full_grads = full(*full_args)
        losses, grads = [], None
        for m in range(4):
            rows = slice(2 * m, 2 * m + 2)
            _, _, loss, g = micro(*state, tokens[rows], targets[rows])
            losses.append(loss)
            grads = list(g) if grads is None else [a + b for a, b in zip(grads, g)]
    torch.testing.assert_close(sum(losses), full_loss, rtol=1e-5, atol=1e-6)
    for got, expected in zip(grads, full_grads):
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-6)


def test_batch_not_divisible_by_microbatches_is_refused(tmp_path, capsys):
    with pytest.raises(ValueError, match="batch 6 is not divisible by microbatches 4"):
        torch_export.split_microbatch((torch.zeros(6, 3),), (torch.zeros(6),), 4)
    with pytest.raises(ValueError, match="must agree"):
        torch_export.split_microbatch((torch.zeros(8, 3),), (torch.zeros(4),), 4)
    with pytest.raises(SystemExit):
        torch_export.main(["--model=transformer", "--batch=6", "--microbatches=4", f"--out={tmp_path / 'x.json'}"])
    assert "--batch 6 is not divisible by --microbatches 4" in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()


def test_command_line_plan_flags(tmp_path, offline_binary):
    out = tmp_path / "plan.json"
    torch_export.main(["--model=transformer", "--layers=1", "--d_model=16", "--heads=2", "--seq=4", "--batch=8",
                       "--vocab=20", "--devices=4", "--microbatches=4", "--max_in_flight=0", "--data_parallel=2",
                       f"--out={out}"])
    request = json.loads(out.read_text())
    assert request["options"] == {"microbatches": 4, "max_in_flight": 0, "data_parallel": 2}
    check_plan_request(request, 4, batch=8, input_bytes_per_sample=4 * 8)
    placed = json.loads(run_offline(offline_binary, "place", f"--request={out}", "--algorithm=m_etf",
                                    "--time_limit_s=10"))
    assert placed["plan"]["microbatches"] == 4 and placed["plan"]["data_parallel"] == 2
    assert 1 <= placed["plan"]["max_in_flight"] <= 4
    # Replicas without microbatches are a plan too: once ops marked, M = 1.
    torch_export.main(["--model=transformer", "--layers=1", "--d_model=16", "--heads=2", "--seq=4", "--batch=2",
                       "--vocab=20", "--devices=2", "--data_parallel=2", f"--out={out}"])
    request = json.loads(out.read_text())
    assert request["options"] == {"microbatches": 1, "data_parallel": 2}
    check_plan_request(request, 1, batch=2, input_bytes_per_sample=4 * 8)


def test_a_once_op_inside_the_microbatch_flow_is_refused():
    ops = [{"name": n} for n in ("input", "forward", "update", "late")]
    edges = {(0, 1): 8, (1, 2): 8, (2, 3): 8}
    assert torch_export.once_per_step_ops(ops, edges, [], [2, 3]) == [2, 3]
    with pytest.raises(ValueError, match="update runs once per step after a microbatch, but late reads it"):
        torch_export.once_per_step_ops(ops, edges, [], [2])
    # Before the first microbatch a once op may feed every microbatch.
    assert torch_export.once_per_step_ops(ops, {(0, 1): 8, (1, 3): 8}, [0], [2]) == [0, 2]


class _WithAuxiliaryHead(torch.nn.Module):
    """A classifier that, like torchvision's Inception-v3 and GoogLeNet while training, returns an
    auxiliary classifier's logits beside the main ones (a namedtuple)."""
    Outputs = __import__("collections").namedtuple("Outputs", ["logits", "aux_logits"])

    def __init__(self):
        super().__init__()
        self.body = torch.nn.Linear(6, 8)
        self.head = torch.nn.Linear(8, 5)
        self.aux = torch.nn.Linear(8, 5)

    def forward(self, x):
        h = torch.relu(self.body(x))
        return self.Outputs(self.head(h), self.aux(h) if self.training else None)


def test_auxiliary_outputs_add_their_weighted_loss():
    main, aux = torch.randn(4, 5), torch.randn(4, 5)
    assert torch_export.model_outputs(main) == (main, [])
    got_main, got_aux = torch_export.model_outputs(_WithAuxiliaryHead.Outputs(main, aux))
    assert got_main is main and len(got_aux) == 1 and got_aux[0] is aux
    got_main, got_aux = torch_export.model_outputs({"loss": torch.zeros(()), "logits": main})
    assert got_main is main and got_aux == []  # a scalar of another shape is no auxiliary output
    assert torch_export.model_outputs(_WithAuxiliaryHead.Outputs(main, None)) == (main, [])
    with pytest.raises(TypeError, match="holds no tensor"):
        torch_export.model_outputs((None, 3))

    torch.manual_seed(0)
    model = _WithAuxiliaryHead()
    x, labels = torch.randn(4, 6), torch.randint(0, 5, (4,))
    traced, placeholders, args = torch_export.trace_training_step(model, (x,), torch_export._cross_entropy, "sgd",
                                                                  (labels,))
    with torch.no_grad():
        _, _, loss, grads = traced(*args)
        out = model(x)
    cross_entropy = torch.nn.functional.cross_entropy
    expected = cross_entropy(out.logits, labels) + torch_export.AUX_LOSS_WEIGHT * cross_entropy(out.aux_logits, labels)
    torch.testing.assert_close(loss, expected)
    # The auxiliary head trains: its gradient is the weighted loss's, not zeros.
    names = [name for kind, name, _ in placeholders if kind == "param"]
    aux_grad = grads[names.index("aux.weight")]
    assert aux_grad.abs().sum() > 0


def test_torchvision_googlenet_with_its_auxiliary_classifiers_exports(tmp_path, offline_binary):
    pytest.importorskip("torchvision")
    out = tmp_path / "googlenet.json"
    torch_export.main(["--model=torchvision:googlenet", "--image_size=64", "--batch=2", "--classes=10",
                       f"--out={out}"])
    request = json.loads(out.read_text())
    ops, _ = check_graph(request)
    # Both auxiliary heads are trained: their weights have update ops.
    groups = {op.get("colocation_group") for op in ops}
    assert {"param:aux1.fc2.weight", "param:aux2.fc2.weight"} <= groups
    placed = json.loads(run_offline(offline_binary, "place", f"--request={out}", "--algorithm=m_etf",
                                    "--time_limit_s=20"))
    assert placed["outcome"] == "FEASIBLE", placed.get("reason")


# ---------------------------------------------------------------------------------------------------
# torchvision's other families: segmentation, video, optical flow, detection (refused)

def test_cross_entropy_takes_per_pixel_labels_along_dimension_one():
    torch.manual_seed(0)
    logits, labels = torch.randn(2, 5, 3, 4), torch.randint(0, 5, (2, 3, 4))
    expected = torch.nn.functional.cross_entropy(logits, labels)
    assert torch.allclose(torch_export._cross_entropy(logits, (labels,)), expected)
    # Segmentation output as torchvision gives it while training: {"out", "aux"}, the aux head weighed.
    aux = torch.randn(2, 5, 3, 4)
    got = torch_export._cross_entropy({"out": logits, "aux": aux}, (labels,))
    assert torch.allclose(got, expected + torch_export.AUX_LOSS_WEIGHT * torch.nn.functional.cross_entropy(aux, labels))
    # Token logits (N, T, V) keep their classes on the last dimension.
    tokens, targets = torch.randn(2, 3, 7), torch.randint(0, 7, (2, 3))
    assert torch.allclose(torch_export._cross_entropy(tokens, (targets,)),
                          torch.nn.functional.cross_entropy(tokens.reshape(-1, 7), targets.reshape(-1)))


@pytest.mark.parametrize("spec,flags,input_bytes", [
    # Per-pixel labels: the classifier head's parameters train through a (N, C, H, W) loss.
    ("torchvision:lraspp_mobilenet_v3_large", ["--image_size=32", "--classes=3"], 2 * 3 * 32 * 32 * 4),
    # A clip of --frames frames: (N, 3, T, H, W).
    ("torchvision:video.r3d_18", ["--image_size=16", "--frames=4", "--classes=5"], 2 * 3 * 4 * 16 * 16 * 4),
    # Two images in, a flow field as the target of RAFT's sequence loss.
    ("torchvision:raft_small", ["--image_size=64"], 2 * 3 * 64 * 64 * 4),
])
def test_torchvision_segmentation_video_and_flow_models_export_and_place(spec, flags, input_bytes, tmp_path,
                                                                           offline_binary):
    pytest.importorskip("torchvision")
    out = tmp_path / "model.json"
    torch_export.main([f"--model={spec}", "--batch=2", *flags, f"--out={out}"])
    request = json.loads(out.read_text())
    ops, types = check_graph(request)
    assert int(next(op for op in ops if op["name"] == "input:0")["output_bytes"]) == input_bytes
    if "raft" in spec:
        assert int(next(op for op in ops if op["name"] == "input:1")["output_bytes"]) == input_bytes
    assert "convolution_backward" in types
    # Every parameter trains: each has update ops in its group (none is left out of the loss).
    params = {op["name"] for op in ops if op["type"] == "parameter"}
    updated = {op["colocation_group"] for op in ops if op["type"] not in ("parameter", "buffer")
               and op.get("colocation_group", "").startswith("param:")}
    assert params and params == updated
    placed = json.loads(run_offline(offline_binary, "place", f"--request={out}", "--algorithm=m_etf",
                                    "--time_limit_s=20"))
    assert placed["outcome"] == "FEASIBLE", placed.get("reason")


@pytest.mark.parametrize("spec,message", [
    ("torchvision:fasterrcnn_resnet50_fpn", "is a detection model"),
    ("torchvision:detection.retinanet_resnet50_fpn", "is a detection model"),
    ("torchvision:no_such_net", "torchvision has no model 'no_such_net' in models, models.segmentation"),
    ("torchvision:video.resnet18", "torchvision has no model 'video.resnet18'"),
])
def test_torchvision_models_that_cannot_be_exported_are_refused_by_name(spec, message, tmp_path):
    pytest.importorskip("torchvision")
    with pytest.raises(SystemExit, match=message):
        torch_export.main([f"--model={spec}", f"--out={tmp_path / 'x.json'}"])


def test_torchvision_models_take_their_familys_class_count_unless_classes_is_given():
    pytest.importorskip("torchvision")
    import argparse

    def built(name, classes=None):
        args = argparse.Namespace(batch=1, image_size=32, classes=classes, frames=4)
        return torch_export.torchvision_model(name, args)

    model, _, _, targets = built("lraspp_mobilenet_v3_large")
    assert model.classifier.low_classifier.out_channels == 21 and int(targets[0].max()) < 21  # Pascal VOC
    assert built("video.r3d_18")[0].fc.out_features == 400  # Kinetics
    assert built("resnet18")[0].fc.out_features == 1000  # ImageNet
    assert built("lraspp_mobilenet_v3_large", classes=3)[0].classifier.low_classifier.out_channels == 3

"""Tests of placement.torch_export: a torchvision ResNet-18 and a small transformer stack, exported and
then validated and placed by the real placement_offline."""
import json
import subprocess

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

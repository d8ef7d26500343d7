"""Tests of placement.torch_run: placed training steps on CPU workers give the unplaced step's numbers.

Placements come from the real placement_offline (m_etf) and from colocation-respecting round-robin
assignments (the most cross-device traffic a placement can have: numerics must hold for any placement).
"""
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch.fx.experimental.proxy_tensor")

from conftest import SOURCE_DIR, ServerProcess, binary  # noqa: E402
from placement import torch_export, torch_run  # noqa: E402

STEPS = 3


def round_robin(request, k):
    """Op i on device i mod k; a colocation group on the device of its first op."""
    group_device = {}
    devices = []
    for i, op in enumerate(request["graph"]["ops"]):
        group = op.get("colocation_group")
        devices.append(group_device.setdefault(group, i % k) if group else i % k)
    return devices


def assert_same_training(traced, request, placement, inputs, targets, steps=STEPS):
    """Runs the placed step and the unplaced one side by side: same losses, parameters and buffers."""
    reference = torch_run.UnplacedStep(traced)
    placed = torch_run.PlacedStep(traced, request, placement, devices="cpu")
    for _ in range(steps):
        expected = reference.run(inputs, targets)
        got = placed.run(inputs, targets)
        torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-7)
    for name, value in reference.parameters().items():
        torch.testing.assert_close(placed.parameters()[name], value, rtol=1e-6, atol=1e-7, msg=name)
    for name, value in reference.buffers().items():
        torch.testing.assert_close(placed.buffers()[name], value, rtol=1e-6, atol=1e-7, msg=name)
    return placed


def cross_entropy(output, targets):
    return torch.nn.functional.cross_entropy(output, targets[0])


@pytest.fixture(scope="module")
def resnet():
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10)
    images = torch.randn(2, 3, 32, 32)
    labels = torch.randint(0, 10, (2,))
    return model, (images,), (labels,), torch_run.trace(model, (images,), cross_entropy, "sgd", (labels,))


def test_resnet18_on_two_devices_placed_by_placement_offline(resnet, offline_binary):
    model, inputs, targets, traced = resnet
    request = traced.request(devices=2, device_kind="cpu")
    placement = torch_run.place_offline(offline_binary, request, "m_etf", time_limit_s=20)
    assert placement["outcome"] == "FEASIBLE"
    assert set(placement["device"]) == {0, 1}
    placed = assert_same_training(traced, request, placement, inputs, targets)
    timing = placed.last_timing
    assert timing.copies > 0 and all(busy > 0 for busy in timing.busy_ns)

    # The traced update is torch.optim.SGD's (lr 0.01, momentum 0.9): one eager PyTorch step agrees.
    # (Only one: batch-norm over 2 images, 1x1 in layer4, amplifies float rounding ~1000x a step, so
    # eager and traced drift apart after that while placed and unplaced stay bit-identical.)
    one = torch_run.PlacedStep(traced, request, placement, devices="cpu")
    one.run(inputs, targets)
    eager = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    model.train()
    cross_entropy(model(*inputs), targets).backward()
    eager.step()
    for name, value in model.named_parameters():
        torch.testing.assert_close(one.parameters()[name], value.detach(), rtol=1e-5, atol=1e-6, msg=name)
    for name, value in model.named_buffers():
        torch.testing.assert_close(one.buffers()[name], value, rtol=1e-5, atol=1e-6, msg=name)


def test_resnet18_on_four_devices_round_robin(resnet):
    _, inputs, targets, traced = resnet
    request = traced.request(devices=4, device_kind="cpu")
    placement = round_robin(request, 4)
    # relu_ writes batch-norm's output in place; nothing reads the old value later, so it stays free
    # (batch-norm's other outputs, its mean and invstd, are other storages) and often runs elsewhere.
    ops = request["graph"]["ops"]
    relus = [i for i, op in enumerate(ops) if op["type"] == "relu_"]
    assert relus and not any("colocation_group" in ops[i] for i in relus)
    assert all("bytes" in edge for edge in request["graph"]["edges"]), "no control edges in ResNet-18"
    placed = assert_same_training(traced, request, placement, inputs, targets)
    assert len(placed.last_timing.busy_ns) == 4 and placed.last_timing.copies > 100


@pytest.mark.parametrize("devices", [2, 4])
def test_transformer_with_adam(devices, offline_binary):
    torch.manual_seed(0)
    model = torch_export.TransformerStack(layers=2, d_model=64, heads=4, vocab=100)
    tokens = torch.randint(0, 100, (2, 16))
    labels = torch.randint(0, 100, (2, 16))
    traced = torch_run.trace(model, (tokens,), torch_export._cross_entropy, "adam", (labels,))
    request = traced.request(devices=devices, device_kind="cpu")
    if devices == 2:
        placement = torch_run.place_offline(offline_binary, request, "m_etf", time_limit_s=20)
        assert set(placement["device"]) == {0, 1}
    else:
        placement = round_robin(request, devices)
    assert_same_training(traced, request, placement, (tokens,), (labels,))


def test_transformer_placed_by_the_server():
    """The same path through the real placement_server and the Python client (place_server)."""
    pytest.importorskip("grpc")
    server = ServerProcess(binary("PLACEMENT_SERVER_BINARY"), ["--workers=1"])
    try:
        torch.manual_seed(0)
        model = torch_export.TransformerStack(layers=1, d_model=32, heads=2, vocab=50)
        tokens, labels = torch.randint(0, 50, (2, 8)), torch.randint(0, 50, (2, 8))
        traced = torch_run.trace(model, (tokens,), torch_export._cross_entropy, "sgd", (labels,))
        request = traced.request(devices=2, device_kind="cpu")
        placement = torch_run.place_server(server.address, request, "m_etf")
    finally:
        server.stop()
    assert placement["outcome"] == "FEASIBLE" and set(placement["device"]) == {0, 1}
    assert torch_run.makespan_ns(placement) > 0
    assert_same_training(traced, request, placement, (tokens,), (labels,), steps=2)


class InPlace(torch.nn.Module):
    """A view read before an in-place write (the write must wait) and after it (a copy made before is
    stale): the traced graph has add_ in the forward, new_empty / zero_ / as_strided / copy_ in the
    backward."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, x):
        a = self.linear(x) * 2
        b = a.view(-1)
        before = b.sum() * 2
        a.add_(1)
        return before + (b * 3).sum() + a.sum()


def test_in_place_writes_are_ordered_and_colocated():
    torch.manual_seed(0)
    x = torch.randn(4, 8)
    traced = torch_run.trace(InPlace(), (x,), lambda out, t: out, "sgd")
    request = traced.request(devices=3, device_kind="cpu")
    groups = {op["name"]: op.get("colocation_group") for op in request["graph"]["ops"]}
    # The writes whose old value is read again through an older view run with what they write.
    assert groups["add_"] == groups["mul"] and groups["add_"].startswith("inplace:")
    assert groups["copy_"] == groups["zero_"]
    for k in (2, 3):
        request = traced.request(devices=k, device_kind="cpu")
        for shift in range(k):  # every op on every device once
            placement = [(d + shift) % k for d in round_robin(request, k)]
            assert_same_training(traced, request, placement, (x,), (), steps=2)


def test_bad_placements_are_refused(resnet):
    _, _, _, traced = resnet
    request = traced.request(devices=2, device_kind="cpu")
    ops = request["graph"]["ops"]
    with pytest.raises(ValueError, match="ops"):
        torch_run.PlacedStep(traced, request, [0] * (len(ops) - 1))
    with pytest.raises(ValueError, match="outside"):
        torch_run.PlacedStep(traced, request, [2] * len(ops))
    # Batch-norm statistics written away from where they live: the colocation group was ignored.
    split = [0] * len(ops)
    split[next(i for i, op in enumerate(ops) if op["type"] == "native_batch_norm")] = 1
    with pytest.raises(ValueError, match="colocate"):
        torch_run.PlacedStep(traced, request, split)
    other = torch_run.trace(torch.nn.Linear(3, 3), (torch.randn(1, 3),))
    with pytest.raises(ValueError, match="does not describe"):
        torch_run.PlacedStep(other, request, [0] * len(ops))


def test_reality_check_and_command_line(offline_binary, capsys):
    """--profile: costs measured by the runner itself, placed for K=1 and K=2, run, tabulated."""
    torch_run.main(["--model=transformer", "--layers=1", "--d_model=32", "--heads=2", "--seq=8", "--batch=2",
                    "--vocab=50", "--devices=2", f"--offline={offline_binary}", "--algorithm=m_etf",
                    "--profile=1", "--steps=1"])
    table = capsys.readouterr().out.strip().splitlines()
    assert len(table) == 4 and table[0].startswith("| model | K |")
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in table[2:]]
    assert [row[1] for row in rows] == ["1", "2"]
    for row in rows:
        assert float(row[3]) > 0 and float(row[4]) > 0  # simulated and measured ms
        assert float(row[9]) > 0  # replayed: the run's own op times through the simulator
        assert float(row[10]) > 0  # rehearsed: the schedule with sleeping ops
    assert rows[0][2] == "1" and rows[0][8] == "0"  # one device, no copies


def test_example_runs(offline_binary):
    example = SOURCE_DIR / "client" / "python" / "examples" / "torch_run_step.py"
    completed = subprocess.run([sys.executable, str(example), f"--offline={offline_binary}"],
                               capture_output=True, text=True, timeout=120, env=dict(os.environ))
    assert completed.returncode == 0, completed.stderr
    assert "same as unplaced: True" in completed.stdout


def test_rehearsed_schedule_matches_the_simulator(resnet, offline_binary):
    """With every op sleeping for its cost (no CPU needed), the placed schedule takes the simulated time:
    dependencies, per-device order and hand-offs between workers are the simulator's."""
    _, _, _, traced = resnet
    base = traced.request(devices=2, device_kind="cpu")
    costs = {op["name"]: int(op["compute_ns"]) * 150 for op in base["graph"]["ops"]
             if op["type"] not in ("parameter", "buffer", "input")}  # ~0.8 ms on average: sleeps overshoot less
    request = torch_run.with_costs(base, costs, link=(2000, 10e9))
    placement = torch_run.place_offline(offline_binary, request, "pardnn", time_limit_s=20)
    simulated, serial = torch_run.makespan_ns(placement), sum(costs.values())
    assert simulated < 0.8 * serial, "the placement overlaps work"
    step = torch_run.PlacedStep(traced, request, placement, devices="cpu")
    # The fastest of up to 8 (stopping at the first close one): a loaded machine only adds delays
    # (wake-ups, sleeps overshooting), and this machine's load spikes made single runs up to 3x slower.
    fastest = float("inf")
    for _ in range(8):
        fastest = min(fastest, step.rehearse(costs).wall_ns)
        if fastest <= 1.12 * simulated:
            break
    assert 0.9 * simulated <= fastest <= 1.12 * simulated, (fastest, simulated)


def test_check_says_when_a_step_cannot_equal_the_unplaced_one():
    """--check's verdict: random ops, or batch statistics with microbatches or replicas, make the
    placed step differ from the unplaced one by design; otherwise it must be the same."""
    torch.manual_seed(0)
    images, labels = torch.randn(4, 3, 8, 8), torch.randint(0, 10, (4,))
    plain = torch_export.SmallCNN(classes=10, width=4)
    traced = torch_run.trace(plain, (images,), torch_export._cross_entropy, "sgd", (labels,))
    assert torch_run.not_comparable(traced) == []
    assert torch_run.not_comparable(traced, microbatches=4, replicas=2) == []  # no batch norm in it

    dropout = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 8 * 8, 10), torch.nn.Dropout(0.5))
    reasons = torch_run.not_comparable(torch_run.trace(dropout, (images,), cross_entropy, "sgd", (labels,)))
    assert len(reasons) == 1 and reasons[0].startswith("the step draws random numbers: ")
    assert "dropout" in reasons[0] or "bernoulli" in reasons[0], reasons  # torch 1.13 traces dropout as bernoulli_

    normed = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.Flatten(),
                                 torch.nn.Linear(4 * 6 * 6, 10))
    traced = torch_run.trace(normed, (images,), cross_entropy, "sgd", (labels,))
    assert torch_run.not_comparable(traced) == []
    assert torch_run.not_comparable(traced, microbatches=2) == [
        "batch norm takes its statistics per microbatch and per replica"]
    assert torch_run.not_comparable(traced, replicas=2) == torch_run.not_comparable(traced, microbatches=2)

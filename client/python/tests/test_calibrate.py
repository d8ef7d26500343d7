"""Tests of placement.calibrate (op costs measured by the runner's executor, the link between two
processes, re-costing a request) and of the command line that calibrates, places, launches and checks
a plan (python3 -m placement.torch_run)."""
import gzip
import json
import os
import statistics
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch.fx.experimental.proxy_tensor")

from placement import calibrate, shm_channel, torch_export, torch_run  # noqa: E402


@pytest.fixture(scope="module")
def cnn_step():
    torch.manual_seed(0)
    model = torch_export.SmallCNN(classes=10, width=8)
    images, labels = torch.randn(8, 3, 16, 16), torch.randint(0, 10, (8,))
    micro = torch_export.split_microbatch((images,), (labels,), 2)
    traced = torch_run.trace(model, micro[0], torch_export._cross_entropy, "sgd", micro[1], microbatches=2)
    return traced, images, labels


def test_op_costs_are_measured_for_every_op_and_recost_keeps_the_graph(cnn_step, offline_binary, tmp_path):
    traced, images, labels = cnn_step
    torch.set_num_threads(1)
    costs = calibrate.measure_op_costs(traced, (images,), (labels,), runs=2)
    request = traced.request(devices=2, device_kind="cpu")
    names = [op["name"] for op in request["graph"]["ops"]]
    assert set(costs) == set(names) and all(ns > 0 for ns in costs.values())
    # Convolutions cost more than reading a parameter (the runner's work for an op with no kernel).
    conv = max(ns for name, ns in costs.items() if request["graph"]["ops"][names.index(name)]["type"] == "convolution")
    assert conv > min(costs[name] for name in names if name.startswith("param:"))
    recosted = calibrate.recost(request, costs, link=(20_000, 2e9), speeds={"cpu": 1.0})
    assert [op["name"] for op in recosted["graph"]["ops"]] == names
    assert recosted["graph"]["edges"] == request["graph"]["edges"] and recosted["options"] == request["options"]
    assert [int(op["compute_ns"]) for op in recosted["graph"]["ops"]] == [costs[n] for n in names]
    assert recosted["cluster"]["intra_node"] == {"bandwidth_bytes_per_second": "2000000000", "latency_ns": "20000"}
    path = tmp_path / "calibrated.json"
    torch_export.write_request(recosted, path)
    placed = torch_run.place_offline(offline_binary, json.loads(path.read_text()), "m_etf", time_limit_s=5)
    # The simulated step is at least the measured work of one device's share.
    assert int(placed["metrics"]["makespan_ns"]) >= sum(costs.values()) // 2 // 2


def test_a_run_slowed_down_does_not_raise_the_costs(cnn_step, monkeypatch):
    """An op's cost is the median over runs of its mean time in a run: one run that the machine's other
    load slowed (here every op 10 x) leaves every cost among its quiet runs' values."""
    traced, images, labels = cnn_step
    torch.set_num_threads(1)
    meter = calibrate.OpCostMeter(traced, (images,), (labels,))
    meter.sample(record=False)  # warm-up: a plan's first steps are slower
    for _ in range(4):
        meter.sample()
    assert all(len(values) == 4 for values in meter.samples.values())
    quiet = {name: list(values) for name, values in meter.samples.items()}
    run = meter.step.run

    def slowed_run(*args):
        run(*args)
        timing = meter.step.last_timing
        timing.instances = [(op, m, start, start + 10 * (end - start - wait), extra, 0)
                            for op, m, start, end, extra, wait in timing.instances]

    monkeypatch.setattr(meter.step, "run", slowed_run)
    meter.sample()
    assert all(len(values) == 5 for values in meter.samples.values())
    after = meter.costs()
    assert set(after) == set(quiet)
    # The third of five values, one of them inserted among four: between the quiet runs' second and
    # third, whatever the slowed run measured.
    for name, values in quiet.items():
        assert int(min(values)) <= after[name] <= max(values), name
    # The mean would have moved: the slowed run is about 10 x each quiet one.
    assert sum(statistics.fmean(v) for v in meter.samples.values()) > 1.5 * sum(after.values())


def test_recost_gives_the_all_reduce_rings_their_own_link(cnn_step):
    """With D > 1 replica groups the pairs the rings join (device d of each group and of the next) get
    the measured all-reduce link; the simulated step then pays for it. Without replicas: no links."""
    from placement import plan_schedule

    traced, _, _ = cnn_step
    costs = {op["name"]: 1000 for op in traced.request(devices=1)["graph"]["ops"]}
    request = traced.request(devices=4, device_kind="cpu", microbatches=2, data_parallel=2)
    names = [device["name"] for device in request["cluster"]["devices"]]
    fast = calibrate.recost(request, costs, link=(20_000, 2e9))
    slow = calibrate.recost(request, costs, link=(20_000, 2e9), ring_link=(50_000, 1e8))
    assert "links" not in fast["cluster"] or not fast["cluster"]["links"]
    spec = {"bandwidth_bytes_per_second": "100000000", "latency_ns": "50000"}
    assert slow["cluster"]["links"] == [{"a": names[0], "b": names[2], "spec": spec},
                                        {"a": names[1], "b": names[3], "spec": spec}]
    assert slow["cluster"]["intra_node"] == fast["cluster"]["intra_node"]
    placement = {"device": [0] * len(request["graph"]["ops"]), "plan": {"microbatches": 2, "data_parallel": 2}}
    assert plan_schedule.simulate(slow, placement).makespan_ns > plan_schedule.simulate(fast, placement).makespan_ns
    one_group = calibrate.recost(traced.request(devices=2, device_kind="cpu"), costs, ring_link=(50_000, 1e8))
    assert not one_group["cluster"].get("links")


def test_recost_refuses_a_request_of_another_step(cnn_step):
    traced, _, _ = cnn_step
    other = torch_run.trace(torch.nn.Linear(3, 3), (torch.randn(2, 3),)).request(devices=1)
    with pytest.raises(ValueError, match="not in the measured step"):
        calibrate.recost(other, {"param:weight": 5})


def test_calibrate_command_line_recosts_a_request_exported_elsewhere(tmp_path):
    exported = tmp_path / "exported.json.gz"
    torch_export.main(["--model=cnn", "--image_size=16", "--batch=8", "--classes=10", "--width=8", "--devices=2",
                       "--microbatches=2", f"--out={exported}"])
    out = tmp_path / "recosted.json"
    completed = subprocess.run(
        [sys.executable, "-m", "placement.calibrate", "--model=cnn", "--image_size=16", "--batch=8", "--classes=10",
         "--width=8", "--microbatches=2", f"--request={exported}", f"--out={out}", "--no_link", "--runs=2"],
        capture_output=True, text=True, timeout=120, env=dict(os.environ))
    assert completed.returncode == 0, completed.stderr[-2000:]
    before = json.loads(gzip.decompress(exported.read_bytes()))
    after = json.loads(out.read_text())
    assert [op["name"] for op in after["graph"]["ops"]] == [op["name"] for op in before["graph"]["ops"]]
    assert after["options"] == before["options"] == {"microbatches": 2}
    assert after["cluster"] == before["cluster"]  # --no_link: the link stays
    assert [op["compute_ns"] for op in after["graph"]["ops"]] != [op.get("compute_ns") for op in before["graph"]["ops"]]
    # Another batch size is another step: its ops' shapes (not names) differ, but a different model is refused.
    wrong = subprocess.run(
        [sys.executable, "-m", "placement.calibrate", "--model=transformer", "--layers=1", "--d_model=16",
         "--heads=2", "--seq=4", "--vocab=20", f"--request={exported}", f"--out={tmp_path / 'x.json'}",
         "--no_link", "--runs=1"], capture_output=True, text=True, timeout=120, env=dict(os.environ))
    assert wrong.returncode != 0 and "not in the measured step" in wrong.stderr


def test_torch_run_calibrates_places_launches_and_checks(tmp_path, offline_binary):
    split_path = tmp_path / "split.json"
    completed = subprocess.run(
        [sys.executable, "-m", "placement.torch_run", "--model=transformer", "--layers=1", "--d_model=16",
         "--heads=2", "--seq=6", "--vocab=40", "--batch=8", "--devices=2", "--microbatches=4",
         "--max_in_flight=2", f"--offline={offline_binary}", "--algorithm=pipeline", "--calibrate", "--steps=2",
         "--check", f"--module_split={split_path}"],
        capture_output=True, text=True, timeout=240, env=dict(os.environ))
    assert completed.returncode == 0, completed.stderr[-3000:]
    out = completed.stdout
    assert "2 processes (gloo; messages: " in out and "), plan: 4 microbatches, 2 in flight" in out
    # Between two processes of one host the messages go through shared memory (none if one device won).
    transport = out.split("messages: ")[1].split(")")[0]
    assert transport in (("shm", "none") if shm_channel.usable() else ("gloo", "none")), out
    assert out.count("step ") >= 2 and "runner overhead" in out
    simulated = float(out.split("simulated step ")[1].split(" ms")[0])
    assert simulated > 0.5, "calibrated costs: this CPU's op times, not a V100's"
    line = next(x for x in out.splitlines() if x.startswith("same as unplaced"))
    assert float(line.split("loss within ")[1].split(",")[0]) < 1e-5, line
    assert float(line.split("parameters within ")[1]) < 1e-6, line
    # Measured costs vary between runs, and so does the placement: module-level or not, it says which.
    if split_path.exists():
        assert "module split points:" in out and json.loads(split_path.read_text())["microbatches"] == 4
    else:
        assert "not written as module split points:" in out
    usage = subprocess.run([sys.executable, "-m", "placement.torch_run", "--help"], capture_output=True, text=True,
                           timeout=60, env=dict(os.environ))
    assert "torchrun --nproc_per_node=N -m placement.torch_run" in usage.stdout


def test_costs_measured_by_processes_at_once(tmp_path):
    """--concurrent=2: two processes run the step together and the request gets their mean op costs."""
    out = tmp_path / "concurrent.json"
    command = [sys.executable, "-m", "placement.calibrate", "--model=cnn", "--image_size=16", "--batch=8",
               "--classes=10", "--width=8", "--devices=2", f"--out={out}", "--no_link", "--runs=1"]
    completed = subprocess.run(command + ["--concurrent=2"], capture_output=True, text=True, timeout=240,
                               env=dict(os.environ))
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "(2 processes measuring at once)" in completed.stderr
    request = json.loads(out.read_text())
    alone = torch_run.trace(*_small_cnn_step()).request(devices=2)
    assert [op["name"] for op in request["graph"]["ops"]] == [op["name"] for op in alone["graph"]["ops"]]
    assert all(int(op["compute_ns"]) >= 1 for op in request["graph"]["ops"])
    refused = subprocess.run(command + ["--concurrent=0"], capture_output=True, text=True, timeout=120,
                             env=dict(os.environ))
    assert refused.returncode != 0 and "--concurrent takes a count of processes" in refused.stderr
    # A plan of two replicas: the two processes measure the step as its replicas, all-reduces running.
    replicas = subprocess.run(command + ["--concurrent=2", "--data_parallel=2"], capture_output=True, text=True,
                              timeout=240, env=dict(os.environ))
    assert replicas.returncode == 0, replicas.stderr[-3000:]
    assert "(2 processes measuring at once, as 2 replicas)" in replicas.stderr
    assert json.loads(out.read_text())["options"]["data_parallel"] == 2
    # A plan of more replicas than measuring processes: said, not hidden.
    fewer = subprocess.run(command + ["--devices=4", "--concurrent=2", "--data_parallel=4"],
                           capture_output=True, text=True, timeout=240, env=dict(os.environ))
    assert fewer.returncode == 0, fewer.stderr[-3000:]
    assert "without the all-reduces of the plan's 4 replicas" in fewer.stderr


def test_replica_costs_are_measured_with_the_all_reduces_running():
    """A meter of 2 replicas runs the step as a plan of two replica groups in two processes: the
    gradients are all-reduced (both end with the same parameters), and every op gets a cost."""
    script = """
import sys, torch, torch.distributed as dist
from placement import calibrate, torch_dist, torch_export, torch_run
torch.set_num_threads(1)
rank, _ = torch_dist.init_from_environment("gloo")
torch.manual_seed(0)
model = torch_export.SmallCNN(classes=10, width=8)
torch.manual_seed(1 + rank)  # each process its own samples: only the all-reduce makes them agree
images, labels = torch.randn(4, 3, 16, 16), torch.randint(0, 10, (4,))
traced = torch_run.trace(model, (images,), torch_export._cross_entropy, "sgd", (labels,))
meter = calibrate.OpCostMeter(traced, (images,), (labels,), replicas=2)
for run in range(3):
    meter.sample(record=run > 0)
costs = meter.costs()
assert set(costs) == set(meter.names) and all(ns >= 1 for ns in costs.values())
params = torch.cat([t.flatten() for t in meter.step.local_state()["param"].values()])
both = [torch.zeros_like(params) for _ in range(2)]
dist.all_gather(both, params)
print("same" if torch.equal(both[0], both[1]) else "differ", len(costs))
dist.destroy_process_group()
"""
    from placement import torch_dist

    output = torch_dist.launch_local(2, ["-c", script], timeout_s=240)
    assert output.split()[0] == "same", output
    with pytest.raises(ValueError, match="process group"):
        calibrate.OpCostMeter(*_one_replica_step(), replicas=2)


def _one_replica_step():
    torch.manual_seed(0)
    images, labels = torch.randn(4, 3, 16, 16), torch.randint(0, 10, (4,))
    traced = torch_run.trace(torch_export.SmallCNN(classes=10, width=8), (images,), torch_export._cross_entropy,
                             "sgd", (labels,))
    return traced, (images,), (labels,)


def _small_cnn_step():
    """The step the command line above traces (its model, one batch, the loss, the optimizer)."""
    import argparse

    args = argparse.Namespace(image_size=16, batch=8, classes=10, width=8, layers=2, d_model=64, heads=4, seq=32,
                              vocab=1000)
    model, inputs, loss_fn, targets = torch_export.builtin_model("cnn", args)
    return model, tuple(inputs), loss_fn, "sgd", tuple(targets)


def test_the_link_is_measured_by_either_transport():
    """The link-only measurement (what `calibrate` launches) fits a link and an all-reduce both through
    shared memory (the runner's default on one host) and through gloo (`--transport=gloo`)."""
    from placement import torch_dist

    for transport in ("shm", "gloo"):
        text = torch_dist.launch_local(2, ["-m", "placement.calibrate", "--link_only", "--model=cnn",
                                           f"--transport={transport}"], timeout_s=240)
        fitted = json.loads(text.strip().splitlines()[-1])
        assert fitted["latency_ns"] >= 0 and fitted["bandwidth_bytes_per_second"] > 0, (transport, fitted)
        ring = fitted["all_reduce"]
        assert ring["latency_ns"] >= 0 and ring["bandwidth_bytes_per_second"] > 0, (transport, fitted)

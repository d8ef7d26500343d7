"""placement.plan_schedule (the schedule the multi-process runner follows) against the service's
simulator: the same makespan, to the nanosecond, as `placement_offline evaluate` for random placements
of exported steps under plans (microbatches, windows, replica groups with ring all-reduces)."""
import gzip
import json
import random
import subprocess
from pathlib import Path

import pytest

from placement import plan_schedule

DATA = Path(__file__).resolve().parent / "data"


def evaluate(offline_binary, tmp_path, request, devices, plan):
    request = dict(request, options=dict(request.get("options", {}), **plan))
    (tmp_path / "r.json").write_text(json.dumps(request))
    (tmp_path / "p.json").write_text(json.dumps({"device": devices}))
    completed = subprocess.run([offline_binary, "evaluate", f"--request={tmp_path / 'r.json'}",
                                f"--placement={tmp_path / 'p.json'}", "--format=json"],
                               capture_output=True, text=True, timeout=60)
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)["placement"]


def random_placement(request, group, rng):
    group_device, devices = {}, []
    for op in request["graph"]["ops"]:
        g = op.get("colocation_group")
        devices.append(group_device.setdefault(g, rng.randrange(group)) if g else rng.randrange(group))
    return devices


def plan_requests():
    """The golden plain requests, and (with torch) an exported plan with once ops on a slow link."""
    requests = [json.loads(gzip.decompress((DATA / name).read_bytes()))
                for name in ("export_transformer_adam.json.gz", "export_resnet18_sgd.json.gz")]
    try:
        from placement import torch_export
        import torch
    except ImportError:
        return requests
    torch.manual_seed(0)
    model = torch_export.TransformerStack(layers=1, d_model=16, heads=2, vocab=20)
    tokens, targets = torch.randint(0, 20, (8, 4)), torch.randint(0, 20, (8, 4))
    requests.append(torch_export.export_training_step(
        model, (tokens,), torch_export._cross_entropy, "adam", (targets,), microbatches=4, devices=4,
        link_bandwidth_gbps=1, link_latency_us=10))
    return requests


@pytest.mark.parametrize("index", range(3))
def test_makespan_equals_placement_offline(index, offline_binary, tmp_path):
    requests = plan_requests()
    if index >= len(requests):
        pytest.skip("needs torch to export a plan")
    request = requests[index]
    for cluster_devices in (2, 4):
        request["cluster"]["devices"] = [dict(request["cluster"]["devices"][0], name=f"d{i}")
                                         for i in range(cluster_devices)]
        rng = random.Random(index * 10 + cluster_devices)
        for plan in ({"microbatches": 1}, {"microbatches": 4, "max_in_flight": 2},
                     {"microbatches": 3, "max_in_flight": 3}, {"microbatches": 4, "max_in_flight": 1,
                                                                "data_parallel": 2}):
            group = cluster_devices // plan.get("data_parallel", 1)
            for trial in range(3):
                devices = [0] * len(request["graph"]["ops"]) if trial == 0 else random_placement(request, group, rng)
                evaluated = evaluate(offline_binary, tmp_path, request, devices, plan)
                schedule = plan_schedule.simulate(request, (devices, evaluated["plan"]))
                assert schedule.makespan_ns == int(evaluated["metrics"]["makespan_ns"]), (plan, trial)
                # Every instance ran once, in one order per device, and transfers follow their producers.
                ran = [key for order in schedule.order for key in order]
                assert len(ran) == len(set(ran)) == len(schedule.start_ns)
                for t in schedule.transfers:
                    producer = (t.op, t.microbatch if t.kind == plan_schedule.PER_COPY else -1)
                    if t.kind != plan_schedule.GRADIENT:
                        assert schedule.finish_ns[producer] == t.departure_ns
                events = [t.event for t in schedule.transfers]
                assert events == sorted(events)


def test_refuses_what_the_service_refuses():
    request = {"graph": {"ops": [{"name": "a"}, {"name": "b"}], "edges": [{"src": 0, "dst": 1}, {"src": 1, "dst": 0}]},
               "cluster": {"devices": [{"name": "x"}, {"name": "y"}]}}
    with pytest.raises(ValueError, match="cycle"):
        plan_schedule.simulate(request, ([0, 0], {}))
    request["graph"]["edges"] = [{"src": 0, "dst": 1}]
    with pytest.raises(ValueError, match="does not divide"):
        plan_schedule.simulate(request, ([0, 0], {"data_parallel": 3}))
    with pytest.raises(ValueError, match="replica group 0"):
        plan_schedule.simulate(request, ([0, 1], {"data_parallel": 2}))

"""Tests of placement.torch_dist: placed plans run by one process per device (gloo) equal the unplaced
full-batch step (2 processes here, 4 in test_torch_dist_four.py; SGD and Adam, a CNN and a transformer,
M = 1 and 4, D = 1 and 2); plans it cannot run are refused; a plan written as module split points; the
NCCL path (skipped without CUDA). The command line: test_calibrate.py.

Tolerances (documented in placement/torch_dist.py): the loss within 1e-5 relative; SGD's parameters
within 1e-6 and every optimizer state within 1e-6 absolute (learning rate 0.01); Adam's parameters within
1e-3 (a tenth of the learning rate): Adam divides by sqrt(v) + 1e-8, so a gradient that is zero in exact
arithmetic (attention's key bias) steps by up to lr x 0.03 on its rounding noise, which depends on the
order of sums — the moments that hold those gradients agree within 1e-6.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch.fx.experimental.proxy_tensor")
pytest.importorskip("torch.distributed")

from conftest import SOURCE_DIR  # noqa: E402
from placement import module_split, shm_channel, torch_dist, torch_export, torch_run  # noqa: E402
from test_torch_run import InPlace  # noqa: E402 - a view read before and after an in-place write

HERE = Path(__file__).resolve().parent


def run_cases(tmp_path, world, cases, offline_binary):
    cases_path, results_path = tmp_path / "cases.json", tmp_path / "results.json"
    cases_path.write_text(json.dumps(cases))
    env = dict(os.environ, PLACEMENT_OFFLINE_BINARY=offline_binary)
    torch_dist.launch_local(world, [str(HERE / "dist_cases.py"), str(cases_path), str(results_path)], env=env,
                            timeout_s=240)
    return json.loads(results_path.read_text())


def check_numerics(results):
    for r in results:
        case = r["case"]
        label = f"{case}"
        assert r["loss_error"] <= 1e-5, label
        assert r["state_error"] <= 1e-6, label
        assert r["param_error"] <= (1e-3 if case["optimizer"] == "adam" else 1e-6), label
        assert r["plan"]["microbatches"] == case["microbatches"], label
        assert r["plan"]["data_parallel"] == case["data_parallel"], label
        assert r["losses"][1] < r["losses"][0], f"{label}: the step trains"
        if case["devices"] > 1:
            assert r["devices_used"] > 1 and r["messages"] > 0, label


def case(model, optimizer, devices, microbatches, data_parallel, placement="round_robin", window=None,
         rehearse_ns=0):
    return {"model": model, "optimizer": optimizer, "devices": devices, "microbatches": microbatches,
            "max_in_flight": window or microbatches, "data_parallel": data_parallel, "placement": placement,
            "steps": 2, "rehearse_ns": rehearse_ns}


def test_plans_on_two_processes_equal_the_unplaced_step(tmp_path, offline_binary):
    results = run_cases(tmp_path, 2, [
        case("cnn", "sgd", 2, 1, 1, "offline:m_etf"),
        case("cnn", "adam", 2, 4, 1, window=2),
        case("transformer", "adam", 2, 4, 1, "offline:m_etf"),
        case("transformer", "sgd", 2, 4, 1, window=1),
        case("transformer", "sgd", 1, 1, 2),
        case("cnn", "sgd", 1, 4, 2, window=1),
        dict(case("transformer", "adam", 2, 4, 1, window=2), ordered=True),  # NCCL's way of posting, on gloo
        dict(case("cnn", "adam", 2, 4, 1, window=2), transport="gloo"),  # messages over gloo, not shared memory
        dict(case("cnn", "sgd", 2, 1, 1), shm_full_on_rank=1),  # one process cannot: both keep gloo
    ], offline_binary)
    check_numerics(results)
    # Messages between the two processes of this host go through shared memory unless gloo is asked
    # for (or the posting is NCCL's ordered one, which keeps the process group's sends).
    shm = "shm" if shm_channel.usable() else "gloo"
    expected = [shm] * 4 + ["none", "none", "gloo", "gloo", "gloo"]  # D = 2 on one device each: no messages
    assert [r["transport"] for r in results] == expected
    # The replica rings' all-reduces likewise (the ordered case has no replicas).
    assert [r["all_reduce_transport"] for r in results] == ["none"] * 4 + [shm, shm, "none", "none", "none"]


def test_a_rehearsal_runs_the_simulated_schedule_and_leaves_the_state(tmp_path, offline_binary):
    """Every op sleeps 1 ms: the processes then take the simulated step's time (the messages' and the
    sleeps' own overheads on top: within 40 %, the fastest of three), and the real steps after the
    rehearsals still equal the unplaced step."""
    results = run_cases(tmp_path, 2, [
        case("transformer", "sgd", 2, 4, 1, "offline:m_etf", window=2, rehearse_ns=1_000_000),
        case("cnn", "sgd", 1, 2, 2, rehearse_ns=1_000_000),
    ], offline_binary)
    check_numerics(results)
    for r in results:
        ratio = r["rehearsal"]["rehearsed_ns"] / r["rehearsal"]["simulated_ns"]
        print(f"rehearsed / simulated {ratio:.3f}")
        assert 0.97 <= ratio <= 1.4, f"{r['case']}: rehearsed / simulated {ratio:.3f} ({r['rehearsal']})"


@pytest.fixture(scope="module")
def small_transformer():
    torch.manual_seed(0)
    model = torch_export.TransformerStack(layers=2, d_model=16, heads=2, vocab=40)
    tokens, labels = torch.randint(0, 40, (8, 6)), torch.randint(0, 40, (8, 6))
    micro = torch_export.split_microbatch((tokens,), (labels,), 4)
    traced = torch_run.trace(model, micro[0], torch_export._cross_entropy, "sgd", micro[1], microbatches=4)
    return model, traced, tokens, labels


def test_plans_that_cannot_run_are_refused(small_transformer):
    model, traced, tokens, labels = small_transformer
    request = traced.request(devices=4, device_kind="cpu", data_parallel=2)
    ops = request["graph"]["ops"]
    n = len(ops)
    with pytest.raises(torch_dist.PlanError, match="4 processes"):  # 2 devices x 2 groups, one running
        torch_dist.DistributedStep(traced, request, ([0] * n, {"microbatches": 4, "data_parallel": 2}))
    with pytest.raises(torch_dist.PlanError, match="devices for"):
        torch_dist.PlanProgram(traced, request, ([0] * (n - 1), {"microbatches": 4}))
    # An update away from its parameter: the colocation group was ignored.
    split = [0] * n
    update = next(i for i, op in enumerate(ops) if op.get("once_per_step") and op["type"] == "sub")
    split[update] = 1
    with pytest.raises(torch_dist.PlanError, match="colocation group"):
        torch_dist.PlanProgram(traced, request, (split, {"microbatches": 4, "data_parallel": 2}))
    # Replicas without the update marked: nothing says what to all-reduce.
    plain = torch_run.trace(model, (tokens,), torch_export._cross_entropy, "sgd", (labels,))
    plain_request = plain.request(devices=2, device_kind="cpu")
    with pytest.raises(torch_dist.PlanError, match="once_per_step"):
        torch_dist.PlanProgram(plain, plain_request, ([0] * len(plain_request["graph"]["ops"]),
                                                      {"data_parallel": 2}))
    with pytest.raises(torch_dist.PlanError, match="does not describe"):
        torch_dist.PlanProgram(plain, request, ([0] * n, {"microbatches": 4}))


def test_in_place_writes_run_in_one_process_and_forked_writes_are_refused():
    torch.manual_seed(0)
    x = torch.randn(4, 8)
    traced = torch_run.trace(InPlace(), (x,), lambda out, t: out, "sgd")
    request = traced.request(devices=1, device_kind="cpu")
    n = len(request["graph"]["ops"])
    step = torch_dist.DistributedStep(traced, request, ([0] * n, {}), local=True)
    reference = torch_run.UnplacedStep(traced)
    for _ in range(2):
        torch.testing.assert_close(step.run((x,)), reference.run((x,)))
    # The write's later reader elsewhere while the write runs away from what it writes.
    two = traced.request(devices=2, device_kind="cpu")
    names = [op["name"] for op in two["graph"]["ops"]]
    devices = [0] * n
    devices[names.index("add_")] = 1
    with pytest.raises(torch_dist.PlanError, match="in place"):
        torch_dist.PlanProgram(traced, two, (devices, {}))


def test_module_split_points(small_transformer, offline_binary):
    model, traced, tokens, _ = small_transformer
    request = traced.request(devices=2, device_kind="cpu")
    placement = torch_run.place_offline(offline_binary, request, "pipeline", time_limit_s=5)
    split = module_split.module_split(traced, request, placement)
    assert [s["device"] for s in split["stages"]] == sorted({s["device"] for s in split["stages"]},
                                                            key=[s["device"] for s in split["stages"]].index)
    assert split["microbatches"] == 4 and split["data_parallel"] == 1
    assert len(split["stages"]) == 2 and split["split_points"] == [split["stages"][1]["modules"][0]]
    named = [name for stage in split["stages"] for name in stage["modules"]]
    assert named[0] == "embedding" and named[-1] == "head"
    # Every parameter-owning module is named once, by itself or by an ancestor.
    owners = module_split.parameter_order(traced)
    assert all(sum(1 for n in named if o == n or o.startswith(n + ".")) == 1 for o in owners)
    # Round-robin is no module split.
    ops = request["graph"]["ops"]
    alternate = [i % 2 for i in range(len(ops))]
    for i, op in enumerate(ops):  # keep colocation groups whole
        group = op.get("colocation_group")
        if group:
            alternate[i] = alternate[next(j for j, o in enumerate(ops) if o.get("colocation_group") == group)]
    with pytest.raises(module_split.NotModuleLevel):
        module_split.module_split(traced, request, (alternate, {"microbatches": 4}))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: the NCCL path needs one per process")
def test_nccl_plan_on_cuda(tmp_path):
    """One CUDA device: the executor on cuda:0; two or more: a 2-process NCCL run of a plan."""
    torch.manual_seed(0)
    model = torch_export.SmallCNN(classes=10, width=8)
    images, labels = torch.randn(8, 3, 12, 12), torch.randint(0, 10, (8,))
    micro = torch_export.split_microbatch((images,), (labels,), 4)
    traced = torch_run.trace(model, micro[0], torch_export._cross_entropy, "sgd", micro[1], microbatches=4)
    request = traced.request(devices=1, device_kind="cuda")
    step = torch_dist.DistributedStep(traced, request, ([0] * len(request["graph"]["ops"]), {"microbatches": 4}),
                                      device="cuda:0", local=True)
    reference = torch_run.UnplacedStep(torch_run.trace(model, (images,), torch_export._cross_entropy, "sgd",
                                                       (labels,)))
    torch.testing.assert_close(step.run((images,), (labels,)), reference.run((images,), (labels,)),
                               rtol=1e-4, atol=1e-5)
    if torch.cuda.device_count() < 2:
        return
    completed = subprocess.run(
        [sys.executable, "-m", "placement.torch_run", "--model=cnn", "--image_size=12", "--batch=8", "--devices=2",
         "--microbatches=4", "--backend=nccl", "--steps=2", "--check",
         f"--placement={_round_robin_placement(tmp_path, traced, 2)}", f"--request={tmp_path / 'r.json'}"],
        capture_output=True, text=True, timeout=300, env=dict(os.environ))
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "(nccl)" in completed.stdout and "same as unplaced" in completed.stdout


def _round_robin_placement(tmp_path, traced, k):
    request = traced.request(devices=k, device_kind="cuda")
    (tmp_path / "r.json").write_text(json.dumps(request))
    sys.path.insert(0, str(HERE))
    from dist_cases import round_robin

    path = tmp_path / "p.json"
    path.write_text(json.dumps({"device": round_robin(request, k), "plan": {"microbatches": 4}}))
    return path


def test_launch_without_a_launcher_says_how():
    saved = {k: os.environ.pop(k) for k in ("MASTER_ADDR", "RANK") if k in os.environ}
    try:
        with pytest.raises(RuntimeError, match="torchrun"):
            torch_dist.init_from_environment("gloo")
    finally:
        os.environ.update(saved)
    assert (SOURCE_DIR / "client" / "python" / "placement" / "torch_dist.py").exists()


_FAULTS_PROBE = """
import resource, sys, torch
from placement import torch_dist
retained = torch_dist.retain_freed_memory()
faults = []
for _ in range(5):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    t = torch.empty(16 << 20, dtype=torch.float32)  # 64 MiB: above glibc's largest dynamic mmap threshold
    t.fill_(1.0)
    del t
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(retained, sum(faults[2:]))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_freed_tensor_memory_is_reused_without_faulting_it_in_again():
    """The runner keeps freed tensor memory in the heap (torch_dist.retain_freed_memory): the third and
    later 64 MiB tensors fault in almost no pages (the second now and then does, as the heap settles);
    with it turned off, each faults in all its pages again."""
    pages = 3 * (64 << 20) // os.sysconf("SC_PAGESIZE")  # the pages of the last three tensors

    def later_faults(**env):
        out = subprocess.run([sys.executable, "-c", _FAULTS_PROBE], capture_output=True, text=True, check=True,
                             env=dict(os.environ, **env)).stdout.split()
        return out[0] == "True", int(out[1])

    retained, faults = later_faults()
    assert retained and faults < pages // 20, faults
    retained, faults = later_faults(PLACEMENT_RETAIN_FREED_MEMORY="0")
    assert not retained and faults > pages // 2, faults

"""One process of a torch.distributed job that runs many placed plans and checks each against the
unplaced full-batch step (used by test_torch_dist.py through torch_dist.launch_local).

    python3 dist_cases.py CASES.json RESULTS.json     # in every process, with torchrun's environment

CASES.json: [{"model": "cnn"|"transformer", "optimizer": "sgd"|"adam", "devices": K, "microbatches": M,
"max_in_flight": W, "data_parallel": D, "placement": "round_robin"|"offline:ALGORITHM", "steps": S,
optional "ordered": bool, "transport": "shm"|"gloo" and "shm_full_on_rank": R (that process cannot
reserve shared memory)}].
Every rank runs every case (building a DistributedStep is collective; ranks beyond K x D idle); rank 0
writes, per case, the largest differences from the reference and the processes' timings.
"""
import argparse
import json
import os
import sys

import torch
import torch.distributed as dist

from placement import plan_schedule, torch_dist, torch_export, torch_run

BATCH = 8  # samples per replica group


def build(case, replicas):
    """(model, global inputs, targets, loss_fn) for a case; every process builds the same."""
    torch.manual_seed(0)
    if case["model"] == "cnn":
        model = torch_export.SmallCNN(classes=10, width=8)
        inputs = (torch.randn(BATCH * replicas, 3, 12, 12),)
        targets = (torch.randint(0, 10, (BATCH * replicas,)),)
    else:
        model = torch_export.TransformerStack(layers=2, d_model=16, heads=2, vocab=40)
        inputs = (torch.randint(0, 40, (BATCH * replicas, 6)),)
        targets = (torch.randint(0, 40, (BATCH * replicas, 6)),)
    return model, inputs, targets, torch_export._cross_entropy


def round_robin(request, k):
    """Op i on device i mod k, a colocation group where its first op went: the most traffic."""
    group_device, devices = {}, []
    for i, op in enumerate(request["graph"]["ops"]):
        group = op.get("colocation_group")
        devices.append(group_device.setdefault(group, i % k) if group else i % k)
    return devices


def run_case(case, offline):
    m, k, replicas = case["microbatches"], case["devices"], case["data_parallel"]
    model, inputs, targets, loss_fn = build(case, replicas)
    micro_inputs, micro_targets = torch_export.split_microbatch(
        tuple(t[:BATCH] for t in inputs), tuple(t[:BATCH] for t in targets), m)
    traced = torch_run.trace(model, micro_inputs, loss_fn, case["optimizer"], micro_targets, microbatches=m)
    request = traced.request(devices=k * replicas, device_kind="cpu", microbatches=m,
                             max_in_flight=case["max_in_flight"], data_parallel=replicas)
    shared = [None]
    if dist.get_rank() == 0:
        if case["placement"] == "round_robin":
            shared[0] = {"device": round_robin(request, k),
                         "plan": {"microbatches": m, "max_in_flight": case["max_in_flight"], "data_parallel": replicas}}
        else:
            shared[0] = torch_run.place_offline(offline, request, case["placement"].split(":", 1)[1], time_limit_s=5)
    dist.broadcast_object_list(shared, src=0)
    placement = shared[0]
    if case.get("shm_full_on_rank") == dist.get_rank():
        # This process finds /dev/shm full: every process must then keep gloo, together.
        import errno
        from placement import shm_channel

        def full(fd, offset, length):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        saved, shm_channel.os.posix_fallocate = shm_channel.os.posix_fallocate, full
    try:
        step = torch_dist.DistributedStep(traced, request, placement, ordered=case.get("ordered"),
                                          transport=case.get("transport"))
    finally:
        if case.get("shm_full_on_rank") == dist.get_rank():
            shm_channel.os.posix_fallocate = saved
    rehearsal = None
    if case.get("rehearse_ns"):
        # Every op sleeps for the same cost; the schedule of those costs is what the run must take. It runs
        # before the real steps, which then check that a rehearsal leaves the state untouched.
        costs = {op["name"]: case["rehearse_ns"] for op in request["graph"]["ops"]}
        rehearsed = []
        for _ in range(3):
            step.rehearse(costs)
            rehearsed.append(step.last_timing)
        recosted = dict(request, graph=dict(request["graph"], ops=[
            dict(op, compute_ns=case["rehearse_ns"]) for op in request["graph"]["ops"]]))
        rehearsal = {"rehearsed_ns": min(t.step_ns for t in rehearsed),
                     "simulated_ns": plan_schedule.simulate(recosted, placement).makespan_ns}
    losses = [float(step.run(inputs, targets)) for _ in range(case["steps"])]
    state = step.gather_state()
    timing = step.last_timing
    if dist.get_rank() != 0:
        return None
    reference = torch_run.UnplacedStep(torch_run.trace(model, inputs, loss_fn, case["optimizer"], targets))
    expected = [float(reference.run(inputs, targets)) for _ in range(case["steps"])]
    params = reference.parameters()
    moments = [value for _, value in zip(reference.traced.names("state"), reference.states)]
    return {
        "case": case,
        "plan": placement.get("plan"),
        "devices_used": len(set(placement["device"])),
        "losses": losses, "expected": expected,
        "loss_error": max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(losses, expected)),
        "param_error": max(float((state["param"][n] - v).abs().max()) for n, v in params.items()),
        "state_error": max(float((t - v).abs().max()) for (_, t), v in zip(state["state"], moments)),
        "buffers": sorted(state["buffer"]),
        "step_ms": timing.step_ns / 1e6,
        "messages": timing.messages_sent,
        "transport": step.transport,
        "all_reduce_transport": step.all_reduce_transport,
        "rehearsal": rehearsal,
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("cases")
    parser.add_argument("results")
    parser.add_argument("--offline", default=os.environ.get("PLACEMENT_OFFLINE_BINARY", ""))
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch_dist.init_from_environment("gloo")
    results = []
    for case in json.loads(open(args.cases).read()):
        results.append(run_case(case, args.offline))
    if dist.get_rank() == 0:
        with open(args.results, "w") as out:
            json.dump(results, out)
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())

"""Measures a training step's op costs and the link between two processes; writes a request with them.

    python3 -m placement.calibrate --model=transformer --batch=8 --microbatches=4 --devices=2 --out=cal.json
    python3 -m placement.calibrate --model=transformer --batch=8 --microbatches=4 \\
        --request=exported_elsewhere.json --out=recosted.json        # the same graph, this machine's costs

Op costs: the step (one microbatch's graph, as placement.torch_export traces it) runs in this process on
one device with the multi-process runner's own executor (placement.torch_dist, one intra-op thread
unless --threads), `--runs` times after a warm-up; an op's cost is the median over the runs of its
instances' mean time in a run (a run slowed by the machine's other load does not count): its aten
calls and the runner's own work around them (what a device spends on it in a placed step; waiting for
messages is not counted). On CUDA the device is synchronised after every op while
measuring. With several `--kinds` (cpu, cuda) each kind is measured; compute_ns are the first kind's and
a device of another kind gets speed = (first kind's total) / (its total): the request has one cost per
op and a speed per device. With `--concurrent=N` (CPU) N processes run the step at once, each run
starting together, and an op's cost is the mean over them: what it costs while N devices of this host
compute, where they share its cores and memory (on the 2-core development VM two processes slow each
other's ops by 10 % to 2 x, depending on the sitting) — the costs to give a plan that runs N processes
here; one process alone suits a plan of one. With `--data_parallel=N` too, the N processes run the step
as that plan's N replica groups (OpCostMeter's `replicas`): their gradient all-reduces run beside the
ops, as in the plan, and take their share of the host's cores.

The link: two processes send each other packed buffers of sizes from 64 bytes to 4 MiB as the runner
sends a transfer — on one host's CPUs a copy into shared memory the peer reads in place
(placement.shm_channel), else (gloo across hosts, NCCL on CUDA, or `--transport=gloo`) a copy into a
fresh buffer, then isend / irecv; half the round trip, least squares over the sizes, gives latency +
bytes / bandwidth, written as the cluster's intra_node link. The same two processes time the all-reduce
the runner runs over sizes from 4 KiB to 16 MiB (measure_all_reduce); where the request has D > 1 replica groups, the pairs its all-reduce rings join
get that fit as `cluster.links` (on CPU a collective is ~3 x slower per byte than a message here).

Re-costing: --request takes a request exported on another machine (or by another tool) for the same
step; its ops are matched by name, everything but compute_ns, the link and the device kinds and speeds
is kept. A request whose ops the traced step does not have is refused.
"""
import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist

from placement import plan_schedule, shm_channel, torch_dist, torch_export, torch_run

LINK_SIZES = (64, 4096, 65536, 1 << 20, 4 << 20)
ALL_REDUCE_SIZES = (4096, 65536, 1 << 20, 4 << 20, 16 << 20)


class OpCostMeter:
    """Op costs of one traced step, sampled run by run, so that several steps can be measured in turn
    (a change in a shared machine's load then hits them alike). measure_op_costs is the simple form.

    With `replicas` = D > 1 the step runs as a plan of D replica groups of one device each, with the
    gradient all-reduces the runner runs beside the backward pass: every process of the group (at least
    D, initialised) constructs a meter and samples together; an op's time then includes what the
    all-reduces take from it. On one host's CPUs they share its cores: on the 2-core development VM,
    ResNet-18's ops took 15-40 % longer beside them than in two processes without them."""

    def __init__(self, traced, inputs, targets=(), device="cpu", replicas=1):
        """`inputs` and `targets`: one replica's batch (M microbatches of the traced size)."""
        kind = torch.device(device).type
        m = traced.microbatches
        if replicas > 1:
            if not dist.is_initialized() or dist.get_world_size() < replicas:
                raise ValueError(f"a meter of {replicas} replicas needs a process group of at least {replicas} "
                                 f"processes")
            request = traced.request(devices=replicas, device_kind=kind, microbatches=m, max_in_flight=m,
                                     data_parallel=replicas)
            # Every replica gets the same samples: the runner hands replica r the r-th slice of the batch.
            inputs = tuple(torch.cat([t] * replicas) for t in inputs)
            targets = tuple(torch.cat([t] * replicas) for t in targets)
        else:
            request = traced.request(devices=1, device_kind=kind)
        self.names = [op["name"] for op in request["graph"]["ops"]]
        self.step = torch_dist.DistributedStep(
            traced, request,
            ([0] * len(self.names), {"microbatches": m, "max_in_flight": m, "data_parallel": replicas}),
            device=device, local=replicas == 1)
        if kind == "cuda":
            _synchronize_every_op(self.step, device)
        self.inputs, self.targets = inputs, targets
        self.samples = {}

    def sample(self, record=True):
        """Runs the step once; with `record`, its instances' times count (their mean per op, one value
        per run)."""
        self.step.run(self.inputs, self.targets)
        if record:
            run = {}
            for op, _, start, end, _, wait in self.step.last_timing.instances:
                run.setdefault(self.names[op], []).append(end - start - wait)
            for name, values in run.items():
                self.samples.setdefault(name, []).append(statistics.fmean(values))

    def costs(self):
        """{op name: ns}: the median over the recorded runs of the op's mean time in a run. The median,
        not the mean: on a shared machine a run that a neighbour slowed down (by up to 1.5 x on the
        2-core development VM) would otherwise raise every op's cost by a fifth of its slowdown (of five
        runs), while the step a plan is judged by is a median of runs too."""
        return {name: max(1, int(statistics.median(values))) for name, values in self.samples.items()}


def measure_op_costs(traced, inputs, targets=(), runs=5, warmup=1, device="cpu"):
    """{op name: ns} (OpCostMeter.costs) of the traced step's ops, run here on `device` by the runner's executor.
    `inputs` and `targets` are one replica's batch (M microbatches of the traced size)."""
    meter = OpCostMeter(traced, inputs, targets, device)
    for run in range(warmup + runs):
        meter.sample(record=run >= warmup)
    return meter.costs()


def _synchronize_every_op(step, device):
    execute = step._execute

    def timed(*args, **kwargs):
        result = execute(*args, **kwargs)
        torch.cuda.synchronize(device)
        return result

    step._execute = timed


def measure_link(sizes=LINK_SIZES, repeats=20, device="cpu", group=None, transport=None):
    """(latency ns, bytes per second) between ranks 0 and 1 of the process group (both call it, any
    other rank returns at once): half the round trip of a packed buffer, fitted over `sizes`, by the
    transport the runner uses between them (torch_dist.DistributedStep's `transport`): shared memory
    where both are on this host, on CPU, and gloo is not asked for; else the process group's isend and
    irecv."""
    torch_dist.retain_freed_memory()  # as in a step
    rank = dist.get_rank()
    result = torch.zeros(2, dtype=torch.float64, device=device)  # NCCL moves CUDA tensors only
    channels = _link_channels(sizes, device, group, transport)
    if rank in (0, 1):
        peer = 1 - rank
        points = []
        for index, size in enumerate(sizes):
            payload = torch.ones(size, dtype=torch.uint8, device=device)
            incoming = torch.empty(size, dtype=torch.uint8, device=device)
            times = []
            for i in range(repeats + 2):
                began = time.perf_counter_ns()
                if channels is not None:
                    # As the runner: pack into the peer's memory, say so; the answer is read in place.
                    channels.begin_step(i)
                    if rank == 0:
                        channels.outbound(peer, index).copy_(payload)
                        channels.notify(peer, index)
                        channels.wait(peer, index, 300)
                    else:
                        channels.wait(peer, index, 300)
                        channels.outbound(peer, index).copy_(channels.inbound(peer, index))
                        channels.notify(peer, index)
                elif rank == 0:
                    dist.isend(payload.clone(), peer, group=group, tag=i).wait()
                    dist.irecv(incoming, peer, group=group, tag=i).wait()
                else:
                    dist.irecv(incoming, peer, group=group, tag=i).wait()
                    dist.isend(incoming.clone(), peer, group=group, tag=i).wait()
                times.append((time.perf_counter_ns() - began) / 2)
            points.append((size, statistics.median(times[2:])) if rank == 0 else (size, 0.0))
        if rank == 0:
            latency, per_byte = _fit(points)
            result[0], result[1] = latency, (1e9 / per_byte if per_byte > 0 else 1e12)
    if channels is not None:
        dist.barrier(group=group)  # the last answer has been read before the memory goes
        channels.close()
    dist.broadcast(result, src=0, group=group)
    return int(max(0.0, result[0].item())), float(result[1].item())


def _link_channels(sizes, device, group, transport):
    """Shared-memory channels between ranks 0 and 1 (one message of each size each way), where the
    runner would use them; None where it would use the process group. Every rank calls it."""
    rank = dist.get_rank()
    everyone = _shared_memory_peers(device, group, transport)
    if len(everyone) < 2 or not (everyone[0]["wanted"] and everyone[1]["wanted"]) or \
            everyone[0]["host"] != everyone[1]["host"]:
        return None
    made, ok = [], True
    if rank in (0, 1):
        try:
            made.append(shm_channel.SameHostChannels(everyone[0]["token"], rank, {1 - rank: list(sizes)},
                                                     {1 - rank: list(sizes)}))
        except (OSError, shm_channel.ChannelError):
            ok = False
    return made[0] if torch_dist.set_up_together(made, ok, group) and made else None


def measure_all_reduce(sizes=ALL_REDUCE_SIZES, repeats=10, device="cpu", group=None, transport=None):
    """(latency ns, bytes per second) of the ring all-reduce among the group's processes, in api.md
    §2.1's terms: a float32 all-reduce of `size` bytes is timed (the slowest process's median) and
    t = a + b * size is fitted over `sizes`; §2.1 charges 2(W-1)/W * bytes / bandwidth + 2(W-1) *
    latency among W replicas, so bandwidth = 2(W-1)/W / b and latency = a / (2(W-1)). Every process of
    the group calls it. Timed as the runner all-reduces (torch_dist.DistributedStep's `transport`):
    through shared memory where every process is on this host, on CPU, and gloo is not asked for
    (placement.shm_channel.SameHostRing), else the process group's all_reduce. A collective moves and
    sums the bytes on the processes' own cores, so on CPU it is slower than the point-to-point link (a
    45 MB gloo all_reduce between two processes here: ~30 ms, where the link measured by measure_link
    gives ~11 ms)."""
    torch_dist.retain_freed_memory()  # as in a step: a sum's fresh tensor is not faulted in page by page
    world = dist.get_world_size(group)
    ring = _measuring_ring([max(1, size // 4) * 4 for size in sizes], device, group, transport)
    points = []
    for index, size in enumerate(sizes):
        tensor = torch.ones(max(1, size // 4), dtype=torch.float32, device=device)
        times = []
        for i in range(repeats + 2):
            dist.barrier(group=group)  # also: every member has read the last round's parts
            began = time.perf_counter_ns()
            if ring is not None:
                ring.begin_step(i)
                ring.contribute(index, tensor)
                ring.total(index, tensor.dtype, tensor.shape, 300, divide_by=world)
            else:
                dist.all_reduce(tensor, group=group)
            if device != "cpu":
                torch.cuda.synchronize()
            elapsed = torch.tensor([float(time.perf_counter_ns() - began)], dtype=torch.float64, device=device)
            dist.all_reduce(elapsed, op=dist.ReduceOp.MAX, group=group)
            times.append(elapsed.item())
        points.append((tensor.numel() * 4, statistics.median(times[2:])))
    if ring is not None:
        dist.barrier(group=group)
        ring.close()
    a, b = _fit(points)
    if world < 2:
        return 0, 1e12
    bandwidth = 1e9 * 2.0 * (world - 1) / world / b if b > 0 else 1e12  # b: ns per byte
    return int(max(0.0, a / (2.0 * (world - 1)))), float(bandwidth)


def _measuring_ring(sizes, device, group, transport):
    """A shared-memory ring of the group's processes (one item of each size), where the runner would
    all-reduce through one; None where it would use the process group. Every process of it calls it."""
    everyone = _shared_memory_peers(device, group, transport)
    if len(everyone) < 2 or not all(x["wanted"] for x in everyone) or len({x["host"] for x in everyone}) != 1:
        return None
    made, ok = [], True
    try:
        made.append(shm_channel.SameHostRing(everyone[0]["token"], dist.get_rank(group),
                                             [x["rank"] for x in everyone], sizes))
    except (OSError, shm_channel.ChannelError):
        ok = False
    return made[0] if torch_dist.set_up_together(made, ok, group) else None


def _shared_memory_peers(device, group, transport):
    """torch_dist.shared_memory_peers, each process wanting shared memory where the runner would send
    through it: CPU, gloo, not asked for gloo, a usable /dev/shm."""
    wanted = transport != "gloo" and str(device) == "cpu" and dist.get_backend(group) == "gloo" and \
        shm_channel.usable()
    return torch_dist.shared_memory_peers(wanted, group)


def _fit(points):
    """Least squares t = a + b * size."""
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / max(sum((x - mx) ** 2 for x in xs), 1e-12)
    return my - b * mx, b


def recost(request, costs, link=None, kind=None, speeds=None, ring_link=None):
    """A copy of `request` with compute_ns from `costs` ({op name: ns}; every op must have one), the
    intra_node link from `link` ((latency ns, bytes/s)), device kind `kind`, and speeds per kind.
    `ring_link` ((latency ns, bytes/s), measure_all_reduce's): where the request's plan has D > 1
    replica groups, the pairs of devices its all-reduce rings join (device d of each group and of the
    next, api.md §2.1) get that link in `cluster.links`: transfers never cross groups, so those pairs
    carry only the all-reduces, which cost what the collective costs, not what a message does."""
    request = json.loads(json.dumps(request))
    missing = [op["name"] for op in request["graph"]["ops"] if op["name"] not in costs]
    if missing:
        raise ValueError(f"{len(missing)} ops of the request are not in the measured step (first: {missing[0]}); "
                         f"was it exported from the same model, batch and microbatches?")
    for op in request["graph"]["ops"]:
        op["compute_ns"] = str(max(1, int(costs[op["name"]])))
    if link is not None:
        latency, bandwidth = link
        request["cluster"]["intra_node"] = {"bandwidth_bytes_per_second": str(max(1, int(bandwidth))),
                                            "latency_ns": str(int(latency))}
    for device in request["cluster"]["devices"]:
        if kind is not None:
            device["kind"] = kind
        if speeds and device.get("kind") in speeds and speeds[device["kind"]] != 1.0:
            device["speed"] = speeds[device["kind"]]
    replicas = int(request.get("options", {}).get("data_parallel", 1) or 1)
    if ring_link is not None and replicas > 1:
        latency, bandwidth = ring_link
        names = [device["name"] for device in request["cluster"]["devices"]]
        pairs = set()
        for d in range(len(names) // replicas):
            ring = plan_schedule.ring_of(len(names), replicas, d)
            pairs |= {tuple(sorted((names[a], names[b]))) for a, b in zip(ring, ring[1:] + ring[:1])}
        spec = {"bandwidth_bytes_per_second": str(max(1, int(bandwidth))), "latency_ns": str(int(latency))}
        links = [link_ for link_ in request["cluster"].get("links", [])
                 if tuple(sorted((link_["a"], link_["b"]))) not in pairs]
        request["cluster"]["links"] = links + [{"a": a, "b": b, "spec": dict(spec)} for a, b in sorted(pairs)]
    return request


def _link_only(args):
    """One process of the link measurement (started by launch_local)."""
    torch_dist.init_from_environment(None if args.kinds.split(",")[0] == "cuda" else "gloo")
    device = "cuda" if dist.get_backend() == "nccl" else "cpu"
    latency, bandwidth = measure_link(device=device, transport=args.transport)
    ring_latency, ring_bandwidth = measure_all_reduce(device=device, transport=args.transport)
    if dist.get_rank() == 0:
        print(json.dumps({"latency_ns": latency, "bandwidth_bytes_per_second": bandwidth,
                          "all_reduce": {"latency_ns": ring_latency, "bandwidth_bytes_per_second": ring_bandwidth}}))
    dist.destroy_process_group()


def _traced_step(args):
    """(traced step, the batch's inputs, targets, M) of the command line's model."""
    model, inputs, loss_fn, targets = torch_export.builtin_model(args.model, args)
    m = args.microbatches or 1
    micro_inputs, micro_targets = torch_export.split_microbatch(tuple(inputs), tuple(targets), m) if m > 1 else \
        (tuple(inputs), tuple(targets))
    traced = torch_run.trace(model, micro_inputs, loss_fn, args.optimizer, micro_targets, microbatches=m)
    return traced, inputs, targets, m


def _costs_only(args):
    """One of --concurrent processes (started by launch_local): every process runs the step, each run
    starting from a barrier, and rank 0 prints the op costs averaged over the processes."""
    torch_dist.init_from_environment("gloo")
    torch.set_num_threads(args.threads)
    traced, inputs, targets, _ = _traced_step(args)
    # A plan of N replicas measured by its N processes: the step runs as it will, with its all-reduces.
    replicas = args.data_parallel if args.data_parallel and args.data_parallel == dist.get_world_size() else 1
    meter = OpCostMeter(traced, inputs, targets, "cpu", replicas=replicas)
    for run in range(1 + args.runs):
        dist.barrier()
        meter.sample(record=run > 0)
    parts = [None] * dist.get_world_size()
    dist.all_gather_object(parts, meter.costs())
    if dist.get_rank() == 0:
        print(json.dumps({name: int(statistics.fmean(part[name] for part in parts)) for name in parts[0]}))
    dist.destroy_process_group()


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python3 -m placement.calibrate",
        description="Measure a training step's op costs and the link between two processes on this machine; "
                    "write a request with them (a new export, or --request re-costed).")
    parser.add_argument("--model", required=True, help="as placement.torch_export: torchvision:NAME, cnn, "
                                                       "transformer, module:factory")
    parser.add_argument("--out", help=".json, .json.gz or .pb")
    parser.add_argument("--request", help="re-cost this request (same step) instead of exporting a new one")
    for flag, default in (("batch", 8), ("image_size", 32), ("classes", 10), ("width", 16), ("layers", 2),
                          ("d_model", 64), ("heads", 4), ("seq", 32), ("vocab", 1000)):
        parser.add_argument(f"--{flag}", type=int, default=default)
    parser.add_argument("--optimizer", choices=sorted(torch_export.OPTIMIZER_STATE_COPIES), default="sgd")
    parser.add_argument("--microbatches", type=int, default=None, metavar="M",
                        help="the step is one of M microbatches of --batch samples (a training plan)")
    parser.add_argument("--max_in_flight", type=int, default=None)
    parser.add_argument("--data_parallel", type=int, default=None)
    parser.add_argument("--devices", type=int, default=2, help="devices of the written cluster")
    parser.add_argument("--device_memory_gib", type=float, default=16.0)
    parser.add_argument("--kinds", default="cpu", help="device kinds to measure: cpu, cuda or cpu,cuda")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads while measuring (CPU)")
    parser.add_argument("--no_link", action="store_true", help="keep the link; measure the op costs only")
    parser.add_argument("--link_only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--costs_only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--concurrent", type=int, default=1, metavar="N",
                        help="measure the op costs in N processes at once, each running the step (CPU): what an "
                             "op costs while N devices of this host compute, where they share cores and memory "
                             "(default 1: one process alone); with --data_parallel=N as well, the N processes run the "
                             "step as the plan's N replicas, with their gradient all-reduces beside the ops")
    parser.add_argument("--transport", choices=("shm", "gloo"), default=None,
                        help="the link to measure between two CPU processes of this host, as the runner "
                             "sends (placement.torch_dist): shared memory (default where possible) or gloo")
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    if args.link_only:
        return _link_only(args)
    if args.costs_only:
        return _costs_only(args)
    if not args.out:
        parser.error("--out is required")
    kinds = args.kinds.split(",")
    if "cuda" in kinds and not torch.cuda.is_available():
        parser.error("--kinds names cuda; CUDA has no device here")
    if args.concurrent < 1 or (args.concurrent > 1 and kinds != ["cpu"]):
        parser.error("--concurrent takes a count of processes >= 1, measuring cpu alone")
    torch.set_num_threads(args.threads)

    traced, inputs, targets, m = _traced_step(args)
    started = time.monotonic()
    totals, costs = {}, None
    for kind in kinds:
        if args.concurrent > 1:
            text = torch_dist.launch_local(args.concurrent, ["-m", "placement.calibrate", "--costs_only", *argv],
                                           timeout_s=1800)
            measured = {name: int(ns) for name, ns in json.loads(text.strip().splitlines()[-1]).items()}
        else:
            measured = measure_op_costs(traced, inputs, targets, runs=args.runs, device=kind)
        totals[kind] = sum(measured.values())
        costs = costs or measured
    speeds = {kind: totals[kinds[0]] / totals[kind] for kind in kinds}
    link = ring_link = None
    if not args.no_link:
        text = torch_dist.launch_local(2, ["-m", "placement.calibrate", "--link_only", f"--model={args.model}",
                                           f"--kinds={kinds[0]}"] + ([f"--transport={args.transport}"]
                                                                     if args.transport else []), timeout_s=300)
        measured_link = json.loads(text.strip().splitlines()[-1])
        link = (measured_link["latency_ns"], measured_link["bandwidth_bytes_per_second"])
        ring = measured_link["all_reduce"]
        ring_link = (ring["latency_ns"], ring["bandwidth_bytes_per_second"])
    if args.request:
        base = _read_request(args.request)
    else:
        plan = {name: getattr(args, name) for name in ("max_in_flight", "data_parallel") if getattr(args, name) is not None}
        base = traced.request(devices=args.devices, device_kind=kinds[0], device_memory_gib=args.device_memory_gib,
                              **({"microbatches": m} if args.microbatches else {}), **plan)
    request = recost(base, costs, link, kind=kinds[0] if not args.request else None, speeds=speeds,
                     ring_link=ring_link)
    torch_export.write_request(request, args.out)
    total = sum(int(op["compute_ns"]) for op in request["graph"]["ops"])
    link_text = (f"; link {link[0] / 1e3:.1f} us + {link[1] / 1e9:.2f} GB/s, all-reduce ring "
                 f"{ring_link[0] / 1e3:.1f} us + {ring_link[1] / 1e9:.2f} GB/s" if link else "")
    alone = f" ({args.concurrent} processes measuring at once)" if args.concurrent > 1 else ""
    if args.concurrent > 1 and args.data_parallel == args.concurrent:
        alone = f" ({args.concurrent} processes measuring at once, as {args.concurrent} replicas)"
    elif args.concurrent > 1 and (args.data_parallel or 1) > 1:
        alone = (f" ({args.concurrent} processes measuring at once, without the all-reduces of the plan's "
                 f"{args.data_parallel} replicas: they run beside the ops only with --concurrent={args.data_parallel})")
    print(f"{args.out}: {len(request['graph']['ops'])} ops, {total / 1e6:.2f} ms of op time on {kinds[0]}{alone}"
          f"{link_text} ({time.monotonic() - started:.1f} s)", file=sys.stderr)


def _read_request(path):
    path = Path(path)
    if path.name.endswith(".pb"):
        from google.protobuf import json_format

        from placement.client import load_request

        return json_format.MessageToDict(load_request(path), preserving_proto_field_name=True)
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        import gzip

        data = gzip.decompress(data)
    return json.loads(data)


if __name__ == "__main__":
    main()

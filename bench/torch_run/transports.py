"""The same placed plans run with their messages over gloo and over shared memory, in turn, in one pair
of processes: what the transport alone changes in a measured step (placement.shm_channel).

    PYTHONPATH=client/python /usr/bin/python3 bench/torch_run/transports.py \
        --offline=build/service/offline/placement_offline [--models=cnn,resnet18] [--steps=10]

For each model (run.py's models and batch sizes) and each plan of two processes (run.py's `m_etf`,
`pardnn`, `pipeline, M=4`, `auto, M=4` and its two replica plans, whose all-reduces change transport
too), the step is traced, its op costs calibrated once, placed once,
and then two DistributedSteps of that one placement — transport "gloo" and "shm" — run step by step in
turn (warm-up steps first), so that the machine's load hits both alike. Prints, per plan, the median
measured step of each and their ratio, the time each process spent waiting for messages, and the
ratio's geomean per model. Nothing here re-plans: the simulated step is the same for both.
"""
import argparse
import json
import math
import os
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "client" / "python"))
sys.path.insert(0, str(HERE))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from placement import calibrate, torch_dist, torch_export, torch_run  # noqa: E402
import run as bench  # noqa: E402 - the models of bench/torch_run/run.py

PLANS = [p for p in bench.PLANS if p[1] * p[4] == 2]  # two processes: K = 2, or two replicas of one device


def worker(args):
    torch.set_num_threads(1)
    rank, _ = torch_dist.init_from_environment("gloo")
    link = calibrate.measure_link(transport="gloo")
    ring_link = calibrate.measure_all_reduce(transport="gloo")
    rows = []
    for model_name in args.models.split(","):
        label, model, inputs, targets, loss_fn, optimizer = bench.build(model_name)
        batch = inputs[0].shape[0]
        pairs = []
        for plan_label, k, m, w, d, algorithm in PLANS:
            part = (tuple(t[:batch // d] for t in inputs), tuple(t[:batch // d] for t in targets))
            micro = torch_export.split_microbatch(*part, m)
            traced = torch_run.trace(model, micro[0], loss_fn, optimizer, micro[1], microbatches=m)
            request = traced.request(devices=k * d, device_kind="cpu", microbatches=m, max_in_flight=w,
                                     data_parallel=d)
            shared = [None]
            if rank == 0:
                costs = calibrate.measure_op_costs(traced, *part, runs=2)
                request = calibrate.recost(request, costs, link, ring_link=ring_link)
                shared[0] = (request, torch_run.place_offline(args.offline, request, algorithm, time_limit_s=10))
            dist.broadcast_object_list(shared, src=0)
            request, placement = shared[0]
            steps = {t: torch_dist.DistributedStep(traced, request, placement, transport=t) for t in ("gloo", "shm")}
            pairs.append((plan_label, placement, steps, {"gloo": [], "shm": []}))
        for round_ in range(args.warmup + args.steps):
            for _, _, steps, timings in pairs:
                for transport, step in steps.items():
                    step.run(inputs, targets)
                    if round_ >= args.warmup:
                        wait = torch.tensor([float(step.last_timing.wait_ns)], dtype=torch.float64)
                        dist.all_reduce(wait)
                        timings[transport].append((step.last_timing.step_ns, wait.item() / 2))
        if rank != 0:
            continue
        for plan_label, placement, steps, timings in pairs:
            used = {t: s.transport if s.transport != "none" else s.all_reduce_transport for t, s in steps.items()}
            row = {"model": label, "plan": plan_label, "used": used,
                   "simulated_ms": int(placement["metrics"]["makespan_ns"]) / 1e6}
            for transport, values in timings.items():
                row[transport + "_ms"] = statistics.median(v for v, _ in values) / 1e6
                row[transport + "_wait_ms"] = statistics.median(w for _, w in values) / 1e6
            row["shm_over_gloo"] = row["shm_ms"] / row["gloo_ms"]
            rows.append(row)
            print(json.dumps(row), flush=True)
    if rank == 0:
        Path(args.results).write_text(json.dumps(rows))
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--offline", help="placement_offline binary")
    parser.add_argument("--models", default="cnn,resnet18")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--results", default="")
    args = parser.parse_args()
    if "RANK" in os.environ:
        return worker(args)
    if not args.offline:
        parser.error("--offline is required")
    import tempfile

    with tempfile.TemporaryDirectory(prefix="transports_") as folder, open(os.devnull, "w") as quiet:
        results = Path(args.results or Path(folder) / "rows.json")
        torch_dist.launch_local(2, [str(Path(__file__).resolve()), f"--offline={args.offline}",
                                    f"--models={args.models}", f"--steps={args.steps}", f"--warmup={args.warmup}",
                                    f"--results={results}"], stdout=quiet)
        rows = json.loads(results.read_text())
    print("| model | plan | simulated ms | gloo ms | shm ms | shm / gloo | wait per process, gloo ms | shm ms |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['model']} | {r['plan']} | {r['simulated_ms']:.1f} | {r['gloo_ms']:.1f} | {r['shm_ms']:.1f} "
              f"| {r['shm_over_gloo']:.2f} | {r['gloo_wait_ms']:.1f} | {r['shm_wait_ms']:.1f} |")
    for model in dict.fromkeys(r["model"] for r in rows):
        ratios = [r["shm_over_gloo"] for r in rows if r["model"] == model]
        print(f"{model}: shm / gloo geomean {math.exp(statistics.fmean(math.log(x) for x in ratios)):.3f} "
              f"over {len(ratios)} plans; messages went by {sorted({t for r in rows for t in r['used'].values()})}")


if __name__ == "__main__":
    main()

"""The simulator against placed training plans run for real by placement.torch_dist (one process per
device on this machine's CPU; messages and all-reduces through shared memory, gloo's process group).

    PYTHONPATH=client/python /usr/bin/python3 bench/torch_run/run.py \
        --offline=build/service/offline/placement_offline [--models=cnn,transformer,resnet18] [--steps=5]

For each model: trace the step as every plan needs it (one microbatch of the global batch / (D x M)),
calibrate each traced step (placement.calibrate: op costs measured by the runner's own executor in one
process alone, and again by both processes at once — what an op costs while the other process computes
too, which the plans of two processes get; the replica plans' step run by both as two replicas with
their gradient all-reduces, which take their share of the cores; the link between the two processes
measured once), place the calibrated request with placement_offline for each plan (several algorithms, K = 1 and 2, M = 1 and 4, D = 1 and 2), then run
every plan in two processes, the plans taking turns step by step so that a change in the machine's
load hits them alike. Writes the table between the markers of bench/torch_run/README.md: simulated
against measured step per plan, the median and worst |measured / simulated - 1| and Kendall's tau per
model, measured against simulated speed-ups, the runner's overhead per op, and how loaded the machine was.
"""
import argparse
import json
import os
import re
import statistics
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "client" / "python"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from placement import calibrate, plan_schedule, torch_dist, torch_export, torch_run  # noqa: E402

BEGIN, END = "<!-- torch_run table: begin -->", "<!-- torch_run table: end -->"

# (label, K devices per group, M microbatches, W (0 = the solver's), D replica groups, algorithm)
PLANS = [
    ("1 device", 1, 1, 1, 1, "single_device"),
    ("1 device, M=4", 1, 4, 4, 1, "single_device"),
    ("m_etf", 2, 1, 1, 1, "m_etf"),
    ("pardnn", 2, 1, 1, 1, "pardnn"),
    ("m_etf, M=4", 2, 4, 4, 1, "m_etf"),
    ("pipeline, M=4", 2, 4, 2, 1, "pipeline"),
    ("auto, M=4", 2, 4, 0, 1, "auto"),
    ("2 replicas", 1, 1, 1, 2, "single_device"),
    ("2 replicas, M=4", 1, 4, 4, 2, "single_device"),
]


def build(name):
    """(label, model, global inputs, targets, loss_fn, optimizer): a step of 50-300 ms on one core here."""
    torch.manual_seed(0)
    if name == "cnn":
        model = torch_export.SmallCNN(classes=10, width=32)
        batch = 32
        return ("CNN (3 conv), batch 32, 32x32, SGD", model, (torch.randn(batch, 3, 32, 32),),
                (torch.randint(0, 10, (batch,)),), torch_export._cross_entropy, "sgd")
    if name == "transformer":
        model = torch_export.TransformerStack(layers=2, d_model=128, heads=4, vocab=500)
        batch = 8
        return ("transformer, 2 blocks, d_model 128, batch 8 x 64 tokens, Adam", model,
                (torch.randint(0, 500, (batch, 64)),), (torch.randint(0, 500, (batch, 64)),),
                torch_export._cross_entropy, "adam")
    if name == "resnet18":
        import torchvision

        model = torchvision.models.resnet18(num_classes=10)
        batch = 16
        return ("ResNet-18, batch 16, 32x32, SGD", model, (torch.randn(batch, 3, 32, 32),),
                (torch.randint(0, 10, (batch,)),), torch_export._cross_entropy, "sgd")
    raise SystemExit(f"unknown model {name}")


def two_thread_ceiling(seconds=1.0):
    """Speed-up of two threads, each doing independent 256x256 matrix products, over one thread."""
    a, b = torch.randn(256, 256), torch.randn(256, 256)
    mm = torch.ops.aten.mm.default

    def work(count):
        torch.set_num_threads(1)
        for _ in range(count):
            mm(a, b)

    started, count = time.perf_counter(), 0
    while time.perf_counter() - started < seconds / 2:
        work(4)
        count += 4
    one = (time.perf_counter() - started) / count
    threads = [threading.Thread(target=work, args=(count,)) for _ in range(2)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return one / ((time.perf_counter() - started) / (2 * count))


def kendall_tau(xs, ys):
    """Kendall's tau-b of two equally long lists."""
    concordant = discordant = ties_x = ties_y = 0
    for i in range(len(xs)):
        for j in range(i + 1, len(xs)):
            dx, dy = xs[i] - xs[j], ys[i] - ys[j]
            if dx == 0 and dy == 0:
                continue
            if dx == 0:
                ties_x += 1
            elif dy == 0:
                ties_y += 1
            elif (dx > 0) == (dy > 0):
                concordant += 1
            else:
                discordant += 1
    denominator = ((concordant + discordant + ties_x) * (concordant + discordant + ties_y)) ** 0.5
    return (concordant - discordant) / denominator if denominator else 0.0


def worker(args):
    """One of the two processes: every rank runs every plan (DistributedStep is collective)."""
    torch.set_num_threads(1)
    rank, _ = torch_dist.init_from_environment("gloo")
    link = calibrate.measure_link(transport=args.transport)
    ring_link = calibrate.measure_all_reduce(transport=args.transport)
    results = []
    transport = "none"  # what the plans' messages went by (the last plan with any)
    for model_name in args.models.split(","):
        label, model, inputs, targets, loss_fn, optimizer = build(model_name)
        batch = inputs[0].shape[0]
        traced, costs = {}, {}
        for _, _, m, _, d, _ in PLANS:
            if (m, d) not in traced:
                micro = torch_export.split_microbatch(tuple(t[:batch // d] for t in inputs),
                                                      tuple(t[:batch // d] for t in targets), m)
                traced[(m, d)] = torch_run.trace(model, micro[0], loss_fn, optimizer, micro[1], microbatches=m)
        # Op costs, two ways, their samples interleaved so that the machine's drift hits both alike: rank
        # 0 alone (rank 1 waits), and — unless --solo_costs — both processes at once, each sample from a
        # barrier: what an op costs while the other process computes too, as in every plan of two.
        # The replica plans' steps (D = 2) are measured together as the plan runs them: two replica groups
        # with their gradient all-reduces, which take a share of the two cores from the ops here.
        def meter(step, key, replicas=1):
            return calibrate.OpCostMeter(step, tuple(t[:batch // key[1]] for t in inputs),
                                         tuple(t[:batch // key[1]] for t in targets), replicas=replicas)

        alone = {key: meter(step, key) for key, step in traced.items()} if rank == 0 else {}
        together = ({key: meter(step, key, replicas=key[1]) for key, step in traced.items()}
                    if not args.solo_costs else {})
        for run in range(1 + args.profile):  # the traced steps in turn
            for key in traced:
                dist.barrier()
                if rank == 0:
                    alone[key].sample(record=run > 0)
                dist.barrier()
                if together:
                    together[key].sample(record=run > 0)
        costs = {key: m.costs() for key, m in alone.items()}
        contended = {}
        if together:
            both = [None] * 2 if rank == 0 else None
            dist.gather_object({key: m.costs() for key, m in together.items()}, both, dst=0)
            if rank == 0:
                contended = {key: {name: (both[0][key][name] + both[1][key][name]) // 2 for name in both[0][key]}
                             for key in both[0]}
        steps = []
        for plan_label, k, m, w, d, algorithm in PLANS:
            request = traced[(m, d)].request(devices=k * d, device_kind="cpu", microbatches=m, max_in_flight=w,
                                             data_parallel=d)
            shared = [None]
            if rank == 0:
                chosen = contended if contended and k * d > 1 else costs
                solo_request = calibrate.recost(request, costs[(m, d)], link, ring_link=ring_link)
                request = calibrate.recost(request, chosen[(m, d)], link, ring_link=ring_link)
                placement = torch_run.place_offline(args.offline, request, algorithm, time_limit_s=args.time_limit)
                # The same placement costed as if its ops ran alone (what the step would be simulated at
                # without the contended costs): the two cost models side by side on one run.
                placement["solo_ns"] = plan_schedule.simulate(solo_request, placement).makespan_ns
                shared[0] = (request, placement)
            dist.broadcast_object_list(shared, src=0)
            request, placement = shared[0]
            step = torch_dist.DistributedStep(traced[(m, d)], request, placement, transport=args.transport)
            transport = step.transport if step.transport != "none" else transport
            steps.append((plan_label, k, m, d, algorithm, request, placement, step, []))
        dist.barrier()
        load_before = os.getloadavg()[0]
        ceiling = two_thread_ceiling() if rank == 0 else 0.0
        dist.barrier()
        rehearsals = {}
        for round_ in range(args.warmup + args.steps):
            for *_, step, timings in steps:
                step.run(inputs, targets)
                if round_ >= args.warmup:
                    timings.append(step.last_timing)
        for round_ in range(1 + args.rehearsals):  # the first one makes the placeholders
            for plan_label, _, m, d, _, request, _, step, _ in steps:
                step.rehearse({op["name"]: int(op["compute_ns"]) for op in request["graph"]["ops"]})
                if round_ > 0:
                    rehearsals.setdefault(plan_label, []).append(step.last_timing.step_ns)
        for plan_label, k, m, d, algorithm, request, placement, step, timings in steps:
            # The op times this run really took (both processes), for the replay through the schedule.
            mine = {}
            for timing in timings:
                for op, _, start, end, _, wait in timing.instances:
                    mine.setdefault(op, []).append(end - start - wait)
            shares = [None] * 2 if rank == 0 else None
            overhead = (sum(t.overhead_ns for t in timings), sum(len(t.instances) for t in timings))
            dist.gather_object((mine, overhead), shares, dst=0)
            if rank != 0:
                continue
            taken = {}
            for part, _ in shares:
                for op, values in part.items():
                    taken.setdefault(op, []).extend(values)
            names = [op["name"] for op in request["graph"]["ops"]]
            replayed_request = calibrate.recost(request, {names[op]: statistics.fmean(v) for op, v in taken.items()})
            replayed = plan_schedule.simulate(replayed_request, placement).makespan_ns
            results.append({
                "model": label, "plan": plan_label, "k": k, "m": m, "d": d, "algorithm": algorithm,
                "w": placement["plan"]["max_in_flight"], "devices_used": len(set(placement["device"])),
                "winner": placement.get("provenance", {}).get("winner", ""),
                "simulated_ns": int(placement["metrics"]["makespan_ns"]),
                "solo_ns": int(placement["solo_ns"]),
                "measured_ns": int(statistics.median(t.step_ns for t in timings)),
                "replayed_ns": replayed,
                "rehearsed_ns": int(statistics.median(rehearsals[plan_label])) if rehearsals else 0,
                "overhead_ns": sum(o for _, (o, _) in shares), "instances": sum(c for _, (_, c) in shares),
                "messages": timings[-1].messages_sent,
                "ceiling": ceiling, "load": load_before,
            })
            print(json.dumps(results[-1]), flush=True)
    if rank == 0:
        Path(args.results).write_text(json.dumps({"results": results, "link": link, "ring_link": ring_link,
                                                  "transport": transport, "contended": not args.solo_costs}))
    dist.destroy_process_group()


def table(data, steps, warmup, profile, rehearsals):
    results, (latency, bandwidth) = data["results"], data["link"]
    ring_latency, ring_bandwidth = data.get("ring_link") or (0, 0)
    loads = ", ".join(dict.fromkeys("%.1f" % r["load"] for r in results))
    ceilings = ", ".join(dict.fromkeys("%.2fx" % r["ceiling"] for r in results))
    lines = [f"Machine: {os.cpu_count()} CPUs; load average (1 min) before each model's runs: {loads}; "
             f"*2-thread ceiling* (two threads of independent matrix products against one, just before each "
             f"model's runs): {ceilings}.", "",
             "| model | plan | K | M | W | D | devices used | simulated ms | measured ms | measured / simulated "
             "| replayed ms | rehearsed ms | rehearsed / simulated | simulated speed-up | measured speed-up "
             "| messages / step (rank 0) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    summary = ["", "| model | plans | median \\|measured / simulated - 1\\| | worst | Kendall's tau "
                   "| median \\|rehearsed / simulated - 1\\| | worst | Kendall's tau, rehearsed | runner overhead per op "
                   "| the same placements, every op costed alone: median | worst | Kendall's tau |",
               "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for model in dict.fromkeys(r["model"] for r in results):
        rows = [r for r in results if r["model"] == model]
        base = {r["m"]: r for r in rows if r["k"] == 1 and r["d"] == 1}
        for r in rows:
            b = base.get(r["m"])
            sim_up = b["simulated_ns"] / r["simulated_ns"] if b else 0
            meas_up = b["measured_ns"] / r["measured_ns"] if b else 0
            plan = r["plan"] + (f" (won: {r['winner']})" if r["winner"] else "")
            lines.append(f"| {model} | {plan} | {r['k']} | {r['m']} | {r['w']} | {r['d']} | {r['devices_used']} "
                         f"| {r['simulated_ns'] / 1e6:.1f} | {r['measured_ns'] / 1e6:.1f} "
                         f"| {r['measured_ns'] / r['simulated_ns']:.2f} | {r['replayed_ns'] / 1e6:.1f} "
                         f"| {r['rehearsed_ns'] / 1e6:.1f} | {r['rehearsed_ns'] / r['simulated_ns']:.2f} "
                         f"| {sim_up:.2f}x | {meas_up:.2f}x | {r['messages']} |")
        errors = [abs(r["measured_ns"] / r["simulated_ns"] - 1) for r in rows]
        tau = kendall_tau([r["simulated_ns"] for r in rows], [r["measured_ns"] for r in rows])
        rehearsed = [abs(r["rehearsed_ns"] / r["simulated_ns"] - 1) for r in rows]
        tau_rehearsed = kendall_tau([r["simulated_ns"] for r in rows], [r["rehearsed_ns"] for r in rows])
        overhead = sum(r["overhead_ns"] for r in rows) / max(sum(r["instances"] for r in rows), 1)
        solo = [r.get("solo_ns") or r["simulated_ns"] for r in rows]
        solo_errors = [abs(r["measured_ns"] / x - 1) for r, x in zip(rows, solo)]
        tau_solo = kendall_tau(solo, [r["measured_ns"] for r in rows])
        summary.append(f"| {model} | {len(rows)} | {statistics.median(errors) * 100:.0f} % | {max(errors) * 100:.0f} % "
                       f"| {tau:.2f} | {statistics.median(rehearsed) * 100:.1f} % | {max(rehearsed) * 100:.1f} % "
                       f"| {tau_rehearsed:.2f} | {overhead / 1e3:.0f} us | {statistics.median(solo_errors) * 100:.0f} % "
                       f"| {max(solo_errors) * 100:.0f} % | {tau_solo:.2f} |")
    lines += summary
    contended = (" (plans of two processes: both processes measuring at once, their mean, the replica plans' "
                 "steps as two replicas with their all-reduces; one-process plans: one process alone)") if data.get("contended") else " (one process alone)"
    how = {"shm": "shared memory (placement.shm_channel)", "gloo": "gloo's isend / irecv"}.get(
        data.get("transport", "gloo"), data.get("transport"))
    lines += ["", f"Messages between the two processes: {how}. "
              f"Link between them (measured, the requests' intra_node link): {latency / 1e3:.1f} us + "
              f"{bandwidth / 1e9:.2f} GB/s; their all-reduce (measured, the replica plans' ring link, api.md §2.1's "
              f"terms): {ring_latency / 1e3:.1f} us + {ring_bandwidth / 1e9:.2f} GB/s. Measured: median step (the slowest process, from a common barrier) "
              f"of {steps} steps after {warmup} warm-up steps, the plans taking turns; op costs: per op the median of {profile} calibration "
              f"runs{contended}. Replayed: the placement's schedule with the op times the run itself took. Rehearsed: the "
              f"plan run by the same processes with every op sleeping for its calibrated cost (median of "
              f"{rehearsals}). Speed-ups: over the 1-device plan at the same M."]
    return "\n".join(lines)


def measure(args, results):
    """Runs the two processes; returns the markdown table of what rank 0 wrote to `results`."""
    torch_dist.launch_local(2, [str(Path(__file__).resolve()), f"--offline={args.offline}", f"--models={args.models}",
                                f"--steps={args.steps}", f"--warmup={args.warmup}", f"--profile={args.profile}",
                                f"--time_limit={args.time_limit}", f"--rehearsals={args.rehearsals}",
                                f"--results={results}"] + ([f"--transport={args.transport}"] if args.transport else [])
                            + (["--solo_costs"] if args.solo_costs else []),
                            stdout=sys.stdout)
    return table(json.loads(results.read_text()), args.steps, args.warmup, args.profile, args.rehearsals)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--offline", help="placement_offline binary")
    parser.add_argument("--models", default="cnn,transformer,resnet18")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=3, help="steps of each plan before the measured ones")
    parser.add_argument("--profile", type=int, default=5, help="calibration runs per traced step")
    parser.add_argument("--time_limit", type=int, default=10, help="placement time limit, s")
    parser.add_argument("--rehearsals", type=int, default=3, help="runs of each plan with sleeping ops")
    parser.add_argument("--out", default=str(HERE / "README.md"), help="markdown file with the markers")
    parser.add_argument("--results", default="", help="(internal) where rank 0 writes its results")
    parser.add_argument("--solo_costs", action="store_true",
                        help="cost every plan with op times measured in one process alone (default: the plans "
                             "of two processes get op times measured by both processes at once)")
    parser.add_argument("--transport", choices=("shm", "gloo"), default=None,
                        help="messages between the two processes (default: shared memory where possible)")
    args = parser.parse_args()
    if "RANK" in os.environ:
        return worker(args)
    if not args.offline:
        parser.error("--offline is required")
    import tempfile

    with tempfile.TemporaryDirectory(prefix="torch_run_bench_") as folder:  # removed afterwards
        results = Path(args.results) if args.results else Path(folder) / "results.json"
        text = measure(args, results)
    out = Path(args.out)
    page = out.read_text() if out.exists() else f"{BEGIN}\n{END}\n"
    if BEGIN not in page:
        page += f"\n{BEGIN}\n{END}\n"
    page = re.sub(re.escape(BEGIN) + ".*?" + re.escape(END), lambda _: f"{BEGIN}\n{text}\n{END}", page, flags=re.S)
    out.write_text(page)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()

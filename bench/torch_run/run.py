"""Reality check of the simulator against placed PyTorch training steps run on this machine's CPU.

    PYTHONPATH=client/python /usr/bin/python3 bench/torch_run/run.py \
        --offline=build/service/offline/placement_offline [--algorithms=m_etf,pardnn] [--devices=1,2]

For each model: profile every op with placement.torch_run's own interpreter (one CPU worker, one intra-op
thread), measure the copy speed between workers, place the profiled request on K devices, run the placed
step on K CPU workers (the K settings taking turns step by step), and write simulated against measured
step times into the table between the markers of bench/torch_run/README.md. A first row measures what
the machine gives two threads at the moment: two independent matrix products on two threads against one.
"""
import argparse
import os
import re
import sys
import threading
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "client" / "python"))

from placement import torch_export, torch_run  # noqa: E402

BEGIN, END = "<!-- torch_run table: begin -->", "<!-- torch_run table: end -->"


def models():
    """(label, model, inputs, loss_fn, targets): a ResNet-18 and a transformer stack sized so that a
    step takes a few hundred ms on one worker here."""
    import torchvision

    torch.manual_seed(0)
    resnet = torchvision.models.resnet18(num_classes=10)
    yield ("ResNet-18, batch 8, 64x64, SGD", resnet, (torch.randn(8, 3, 64, 64),),
           lambda out, t: torch.nn.functional.cross_entropy(out, t[0]), (torch.randint(0, 10, (8,)),))
    torch.manual_seed(0)
    transformer = torch_export.TransformerStack(layers=2, d_model=128, heads=4, vocab=500)
    yield ("transformer, 2 blocks, d_model 128, batch 4 x 64 tokens, Adam", transformer,
           (torch.randint(0, 500, (4, 64)),), torch_export._cross_entropy, (torch.randint(0, 500, (4, 64)),))


def two_thread_ceiling(seconds=1.0):
    """Speed-up of two threads, each doing independent 256x256 matrix products, over one thread."""
    a, b = torch.randn(256, 256), torch.randn(256, 256)
    mm = torch.ops.aten.mm.default

    def work(count):
        torch.set_num_threads(1)
        for _ in range(count):
            mm(a, b)

    started = time.perf_counter()
    count = 0
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
    two = (time.perf_counter() - started) / (2 * count)
    return one / two


def run(args):
    ks = [int(k) for k in args.devices.split(",")]
    lines = [f"Machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start. *2-thread "
             f"ceiling*: what two threads doing independent matrix products ran against one, measured "
             f"just before each pair of rows (no 2-worker speed-up can beat it).", "",
             "| model | algorithm | 2-thread ceiling | K | simulated ms | measured ms | measured / simulated "
             "| simulated, profile of the run ms | measured / that | simulated speed-up | measured speed-up "
             "| worker busy ms | worker CPU ms | late starts ms | copies | replayed ms | rehearsed ms |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for label, model, inputs, loss_fn, targets in models():
        traced = torch_run.trace(model, inputs, loss_fn, "adam" if "Adam" in label else "sgd", targets)
        for algorithm in args.algorithms.split(","):
            ceiling = two_thread_ceiling()
            rows = torch_run.reality_check(
                traced, inputs, targets, lambda r: torch_run.place_offline(args.offline, r, algorithm),
                devices=ks, profile_runs=args.profile, steps=args.steps,
                evaluate=lambda r, p: torch_run.evaluate_offline(args.offline, r, p))
            base = rows[0]
            for r in rows:
                lines.append(
                    f"| {label} | {algorithm} | {ceiling:.2f}x | {r['devices']} | {r['simulated_ns'] / 1e6:.0f} "
                    f"| {r['measured_ns'] / 1e6:.0f} | {r['measured_ns'] / r['simulated_ns']:.2f} "
                    f"| {r['resimulated_ns'] / 1e6:.0f} | {r['measured_ns'] / r['resimulated_ns']:.2f} "
                    f"| {base['simulated_ns'] / r['simulated_ns']:.2f}x "
                    f"| {base['measured_ns'] / r['measured_ns']:.2f}x "
                    f"| {' / '.join(f'{b / 1e6:.0f}' for b in r['busy_ns'])} "
                    f"| {' / '.join(f'{c / 1e6:.0f}' for c in r['cpu_ns'])} "
                    f"| {' / '.join(f'{c / 1e6:.0f}' for c in r['late_ns'])} | {r['copies']} "
                    f"| {r['replayed_ns'] / 1e6:.0f} | {r['rehearsed_ns'] / 1e6:.0f} |")
                print(lines[-1], flush=True)
    latency, bandwidth = rows[0]["link"]
    lines += ["", f"Copy between CPU workers (measured, used as the request's link): {latency / 1e3:.1f} us + "
              f"{bandwidth / 1e9:.1f} GB/s. Load average at the end: {os.getloadavg()[0]:.1f}. "
              f"Median of {args.steps} steps after 1 warm-up; op costs: mean of {args.profile} profiled steps."]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--offline", required=True, help="placement_offline binary")
    parser.add_argument("--algorithms", default="m_etf,pardnn")
    parser.add_argument("--devices", default="1,2", help="K values; the first is the speed-up's base")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--profile", type=int, default=5)
    parser.add_argument("--out", default=str(HERE / "README.md"), help="markdown file with the markers")
    args = parser.parse_args()
    torch.set_num_threads(1)
    table = run(args)
    out = Path(args.out)
    text = out.read_text() if out.exists() else f"{BEGIN}\n{END}\n"
    if BEGIN not in text:
        text += f"\n{BEGIN}\n{END}\n"
    text = re.sub(re.escape(BEGIN) + ".*?" + re.escape(END), lambda _: f"{BEGIN}\n{table}\n{END}", text,
                  flags=re.S)
    out.write_text(text)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Builds the tight-memory corpus: real PyTorch training steps exported with placement.torch_export.

    PYTHONPATH=client/python:build/client/python/generated \
        /usr/bin/python3 bench/tight_memory/make_corpus.py --out_dir=build/corpus-tight [--only=gpt]

Every model below becomes one request (`<name>.json.gz`) on 8 identical accelerators, two per host
(bench/compare keeps the first K, so K = 2 is one host, K = 4 two hosts, K = 8 four): links inside a
host at --intra_gbps / --intra_us, between hosts at --inter_gbps / --inter_us. Device memory is left
at the exporter's default: bench/compare's `peak:F` regimes set it to F x the step's one-device peak.
Existing files are kept (delete one to rebuild it). Needs python3-torch and python3-torchvision.
"""
import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

# name -> torch_export arguments (sizes kept small enough for the exporter, which holds every value of
# the traced step in host memory). CNNs with SGD, transformers (GPT-like stacks of encoder blocks with a
# language-model head) and LSTMs with Adam, whose two state copies make the weights weigh as in training.
MODELS = {
    "resnet50": ["--model=torchvision:resnet50", "--batch=8", "--image_size=224"],
    "densenet121": ["--model=torchvision:densenet121", "--batch=8", "--image_size=224"],
    "vgg19": ["--model=torchvision:vgg19", "--batch=32", "--image_size=160"],
    "mobilenet_v2": ["--model=torchvision:mobilenet_v2", "--batch=16", "--image_size=224"],
    "inception_v3": ["--model=models:inception_v3"],
    "gpt_12x768": ["--model=transformer", "--layers=12", "--d_model=768", "--heads=12", "--seq=128",
                   "--batch=4", "--vocab=4000", "--optimizer=adam"],
    "gpt_24x512": ["--model=transformer", "--layers=24", "--d_model=512", "--heads=8", "--seq=128",
                   "--batch=4", "--vocab=4000", "--optimizer=adam"],
    "gpt_96x256": ["--model=transformer", "--layers=96", "--d_model=256", "--heads=4", "--seq=64",
                   "--batch=4", "--vocab=4000", "--optimizer=adam"],
    "lstm_4x1024": ["--model=models:lstm_4x1024", "--optimizer=adam"],
    "lstm_2x512": ["--model=models:lstm_2x512", "--optimizer=adam"],
}


def set_hosts(request, per_host, inter_gbps, inter_us):
    for i, device in enumerate(request["cluster"]["devices"]):
        device["node"] = f"host{i // per_host}"
    request["cluster"]["inter_node"] = {"bandwidth_bytes_per_second": str(int(inter_gbps * 1e9)),
                                        "latency_ns": str(int(inter_us * 1000))}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out_dir", default="build/corpus-tight")
    parser.add_argument("--only", default="", help="only models whose name contains this")
    parser.add_argument("--devices", type=int, default=8)
    parser.add_argument("--per_host", type=int, default=2)
    parser.add_argument("--intra_gbps", type=float, default=100.0)
    parser.add_argument("--intra_us", type=float, default=2.0)
    parser.add_argument("--inter_gbps", type=float, default=12.5)
    parser.add_argument("--inter_us", type=float, default=10.0)
    args = parser.parse_args()
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")])
    failed = []
    for name, model_args in MODELS.items():
        if args.only not in name:
            continue
        target = out_dir / f"{name}.json.gz"
        if target.exists():
            print(f"{target}: kept", file=sys.stderr)
            continue
        started = time.monotonic()
        with tempfile.TemporaryDirectory() as tmp:
            raw = Path(tmp) / "step.json"
            done = subprocess.run([sys.executable, "-m", "placement.torch_export", *model_args, f"--out={raw}",
                                   f"--devices={args.devices}", f"--link_bandwidth_gbps={args.intra_gbps}",
                                   f"--link_latency_us={args.intra_us}"], env=env)
            if done.returncode != 0:
                failed.append(name)
                print(f"{name}: the exporter failed (rc {done.returncode})", file=sys.stderr)
                continue
            request = json.loads(raw.read_text())
        set_hosts(request, args.per_host, args.inter_gbps, args.inter_us)
        target.write_bytes(gzip.compress(json.dumps(request).encode("utf-8")))
        print(f"{target}: {len(request['graph']['ops'])} ops ({time.monotonic() - started:.0f} s)",
              file=sys.stderr)
    if failed:
        sys.exit("not exported: " + ", ".join(failed))


if __name__ == "__main__":
    main()

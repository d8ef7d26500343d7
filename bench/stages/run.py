#!/usr/bin/env python3
"""The stage planner against the published NeurIPS'20 DP (msr-fiddle/dnn-partitioning, MIT).

Two measurements (README.md has the commands and the figures):

  objective  target (a): on every training input, the published DP's max-load (`dp.exe < input`) and
             our DP's in the same cost model (`stages_msr_dp`), side by side; exit 1 on a mismatch.
  plans      target (b): the published DP's and PipeDream's splits at K accelerators (`dp.exe` and
             `dp.exe -pipeDream` on the input with maxFPGAs = K, maxCPUs = 0), then `stages_bench`, which simulates
             them, the human experts' splits and our algorithms under training plans.

The published code is never part of this repository: pass --dp_src=DIR (a copy of the repository, e.g.
`git --git-dir=MIRROR archive HEAD | tar -x -C DIR`; built here with g++ -O2 into --work) or --dp=BINARY
(or set PUBLISHED_MSR_DP). Without either, the script prints SKIPPED and exits 77 (ctest: skipped).

  bench/stages/run.py --what=objective --dp_src=/tmp/dnn-partitioning --out=/tmp/objective.md
  bench/stages/run.py --what=plans --dp=/tmp/work/dp.exe --work=/tmp/work --out=/tmp/plans.md
"""
import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[2]
SKIP = 77


def training_inputs(inputs, only):
    files = sorted(Path(inputs).glob("*/*training*.json"))
    return [f for f in files if only in str(f)]


def case_stem(path):
    """LayerGraphs-resnet50_training: both folders have a resnet50_training."""
    return f"{path.parent.name}-{path.stem}"


def limited(memory_gb):
    """preexec_fn: caps the child's address space, so a run that would exhaust the machine fails."""
    def apply():
        if memory_gb > 0:
            limit = int(memory_gb * (1 << 30))
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return apply


def run_published(dp, input_text, args, flags=()):
    """Runs dp.exe on input_text; returns (parsed JSON answer or None, seconds, note)."""
    start = time.monotonic()
    try:
        done = subprocess.run([str(dp), *flags], input=input_text, capture_output=True, text=True,
                              timeout=args.timeout, preexec_fn=limited(args.memory_gb))
    except subprocess.TimeoutExpired:
        return None, time.monotonic() - start, f"timed out after {args.timeout} s"
    seconds = time.monotonic() - start
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["?"])[-1]
        return None, seconds, f"exit {done.returncode} ({tail[:80]})"
    # The answer is the last JSON object on stdout (the -scotch mode prints a line before it).
    text = done.stdout[done.stdout.find("{"):]
    try:
        return json.loads(text), seconds, ""
    except json.JSONDecodeError:
        return None, seconds, "no JSON answer"


def run_ours(binary, path, fpgas=0, out=None):
    command = [str(binary), f"--input={path}"]
    if fpgas:
        command.append(f"--fpgas={fpgas}")
    if out:
        command.append(f"--out={out}")
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    fields = dict(re.findall(r"(\w+)=(\S+)", done.stdout))
    return fields


def find_dp(args, work):
    if args.dp:
        return Path(args.dp)
    if args.dp_src:
        binary = work / "dp.exe"
        if not binary.exists():
            source = Path(args.dp_src) / "throughput-dp" / "dp.cpp"
            print(f"building {source} -> {binary}", file=sys.stderr)
            subprocess.run(["g++", "-O2", "-std=c++17", str(source), "-o", str(binary)], check=True)
        return binary
    if os.environ.get("PUBLISHED_MSR_DP"):
        return Path(os.environ["PUBLISHED_MSR_DP"])
    return None


def objective(args, dp, work):
    rows, mismatches = [], 0
    header = ("| input | ideals | published DP max-load | our DP max-load | relative difference | "
              "published s | ours s |\n|---|---:|---:|---:|---:|---:|---:|")
    for path in training_inputs(args.inputs, args.only):
        ours = run_ours(args.ours, path)
        if args.skip_published and re.search(args.skip_published, path.stem):
            answer, seconds, note = None, 0.0, f"skipped (--skip_published={args.skip_published})"
        else:
            answer, seconds, note = run_published(dp, path.read_text(), args)
        name = f"{path.parent.name}/{path.stem}"
        mine = float(ours["max_load"])
        if answer is None:
            rows.append(f"| {name} | {ours['ideals']} | not run: {note} | {mine:.9f} | — | {seconds:.1f} | "
                        f"{float(ours['seconds']):.2f} |")
            continue
        theirs = float(answer["maxLoad"])
        difference = abs(mine - theirs) / max(1.0, abs(theirs))
        if difference > 1e-7:
            mismatches += 1
        rows.append(f"| {name} | {ours['ideals']} | {theirs:.9f} | {mine:.9f} | {difference:.1e} | "
                    f"{seconds:.1f} | {float(ours['seconds']):.2f} |")
        print(rows[-1], file=sys.stderr)
    table = header + "\n" + "\n".join(rows) + "\n"
    return table, mismatches


def plans(args, dp, work):
    splits = work / "splits"
    inputs = work / "inputs"
    splits.mkdir(parents=True, exist_ok=True)
    inputs.mkdir(parents=True, exist_ok=True)
    notes = []
    ks = [int(k) for k in args.devices.split(",")]
    for path in training_inputs(args.inputs, args.only):
        doc = json.loads(path.read_text())
        name = path.stem.split("_training")[0]
        stem = case_stem(path)
        expert = Path(args.experts) / f"{name}_training_expert.json"
        case_ks = list(ks)
        if expert.exists():
            expert_k = len(json.loads(expert.read_text())["fpgas"])
            if expert_k not in case_ks:
                case_ks.append(expert_k)
        # The simulated cluster has K accelerators and no CPU, so the splits may not use one (with a CPU
        # the published DP moves layers there at small K: no transfers are charged to it).
        doc["maxCPUs"] = 0
        for k in case_ks:
            doc["maxFPGAs"] = k
            text = json.dumps(doc)
            (inputs / f"{stem}_k{k}.json").write_text(text)
            for mode, flags in (("dp", ()), ("pipedream", ("-pipeDream",))):
                target = splits / f"{stem}_k{k}_{mode}.json"
                if target.exists() and args.reuse:
                    continue
                if mode == "dp" and args.skip_published and re.search(args.skip_published, stem):
                    answer, seconds, note = None, 0.0, f"skipped (--skip_published={args.skip_published})"
                else:
                    answer, seconds, note = run_published(dp, text, args, flags)
                if answer is not None:
                    target.write_text(json.dumps(answer))
                    print(f"{stem} K={k} {mode}: {seconds:.1f} s", file=sys.stderr)
                elif mode == "dp":
                    # Our reproduction of the same DP (same objective in its cost model, possibly
                    # another optimal split) stands in, and the table says so.
                    run_ours(args.ours, inputs / f"{stem}_k{k}.json", out=target)
                    notes.append(f"{stem} K={k}: published DP not run ({note}); the DP split is "
                                 f"our reproduction's (stages_msr_dp)")
                else:
                    notes.append(f"{stem} K={k} {mode}: not run ({note})")
                if answer is None:
                    print(notes[-1], file=sys.stderr)
    command = [str(args.bench), f"--msr_dir={args.inputs}", f"--splits_dir={splits}",
               f"--experts_dir={args.experts}", f"--devices={args.devices}",
               f"--microbatches={args.microbatches}", f"--time_limit_s={args.time_limit_s}",
               f"--only={args.only}"]
    print(" ".join(command), file=sys.stderr)
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    table = done.stdout
    if notes:
        table += "\nSplits:\n" + "".join(f"- {n}\n" for n in notes)
    return table, 0


def main():
    shared = SOURCE.parent / "shared" / "workloads" / "msr_dnn_partitioning"
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--what", choices=["objective", "plans"], default="objective")
    parser.add_argument("--dp", help="the published dp.exe")
    parser.add_argument("--dp_src", help="a copy of msr-fiddle/dnn-partitioning to build dp.exe from")
    parser.add_argument("--work", help="work folder, kept (default: a temporary one, removed afterwards)")
    parser.add_argument("--inputs", default=str(shared / "throughput-inputs"))
    parser.add_argument("--experts", default=str(shared / "human-experts"))
    parser.add_argument("--ours", default=str(SOURCE / "build/bench/stages/stages_msr_dp"))
    parser.add_argument("--bench", default=str(SOURCE / "build/bench/stages/stages_bench"))
    parser.add_argument("--only", default="")
    parser.add_argument("--devices", default="2,4,8")
    parser.add_argument("--microbatches", default="16,64")
    parser.add_argument("--time_limit_s", default="30")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per published run")
    parser.add_argument("--memory_gb", type=float, default=8, help="address-space cap per published run")
    parser.add_argument("--reuse", action="store_true", help="keep splits already in --work")
    parser.add_argument("--skip_published", default="",
                        help="regex of inputs whose DP split comes from our reproduction without trying the "
                             "published DP (inceptionv3: its pair table needs more memory than a 24 GiB machine)")
    parser.add_argument("--out")
    args = parser.parse_args()

    if not Path(args.inputs).is_dir():
        print(f"SKIPPED: no msr inputs at {args.inputs}")
        return SKIP
    if args.work:
        return run_in(args, Path(args.work))
    with tempfile.TemporaryDirectory(prefix="stages_msr_") as work:  # removed afterwards; --work keeps it
        return run_in(args, Path(work))


def run_in(args, work):
    """The comparison with its builds, splits and logs in `work`; the exit status."""
    work.mkdir(parents=True, exist_ok=True)
    dp = find_dp(args, work)
    if dp is None or not dp.exists():
        print("SKIPPED: the published DP is not available (--dp, --dp_src or PUBLISHED_MSR_DP)")
        return SKIP
    table, mismatches = (objective if args.what == "objective" else plans)(args, dp, work)
    print(table)
    if args.out:
        Path(args.out).write_text(table)
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())

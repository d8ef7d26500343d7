#!/usr/bin/env python3
"""Derives resnet_kineto_pid23442_3iter.json.gz from the full Kineto trace in
../shared/workloads/pytorch_execution_traces_param/resnet_kineto_pid23442.json.gz (MIT, facebookresearch/param).

Keeps the first three training iterations (CPU events before the 4th DataLoader fetch) and only what the
chakra importer reads: cpu_op, cuda_runtime and GPU (kernel / memcpy / memset) events, with their
External id / correlation args; kernel names are shortened. Usage:
  python3 make_kineto_subset.py FULL.json.gz OUT.json.gz
"""
import gzip
import json
import sys


def main(src, dst):
    with gzip.open(src) as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    fetches = [e for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("enumerate")]
    cut = fetches[3]["ts"]
    keep = []
    for e in events:
        cat = e.get("cat")
        if cat not in ("cpu_op", "cuda_runtime", "kernel", "gpu_memcpy", "gpu_memset"):
            continue
        if cat in ("cpu_op", "cuda_runtime") and e["ts"] >= cut:
            continue
        args = {k: e["args"][k] for k in ("External id", "correlation") if k in e["args"]}
        keep.append({"ph": "X", "cat": cat, "name": e["name"] if cat == "cpu_op" else e["name"][:40],
                     "pid": e["pid"], "tid": e["tid"], "ts": e["ts"], "dur": e["dur"], "args": args})
    launched = {e["args"].get("correlation") for e in keep if e["cat"] == "cuda_runtime"}
    keep = [e for e in keep if e["cat"] in ("cpu_op", "cuda_runtime") or e["args"].get("correlation") in launched]
    with gzip.open(dst, "wt") as f:
        json.dump({"schemaVersion": trace.get("schemaVersion"), "traceEvents": keep}, f, separators=(",", ":"))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

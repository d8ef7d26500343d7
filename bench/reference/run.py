#!/usr/bin/env python3
"""Side-by-side harness: the published ParDNN code against our `pardnn` and `auto` (see README.md).

For every corpus request and K it exports the graph as ParDNN's input folder
(`placement_offline export --to=pardnn --out=DIR`), reads that folder back with the reference's cluster
model (`convert --from=pardnn --cluster=...`: K homogeneous devices, 130 GB/s, 25 us, memory that never
binds), so both sides solve exactly the same graph; runs the published binary (built here with -O2) in
a run folder of its own, imports its `placement.place`, scores it with our simulator (`evaluate`) and
runs `place --algorithm=pardnn` and `--algorithm=auto` on the same request.

Python 3 standard library only. The published code is never copied into this repository: its sources
come from --pardnn_src / $PARDNN_SRC, everything generated goes to --work (a temporary folder).
"""

import argparse
import datetime
import json
import math
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time

LATENCY_US = 25          # the reference's own model (settings.json, Python v5 constants)
RATE_GB_S = 130          # decimal GB/s: the reference charges bytes / (rate * 1000) us
MEMORY_BYTES = 1 << 50   # "no memory pressure"
REFERENCE_MEM_CAPACITY = 1 << 50
JSON_MAX_OPS = 200000    # larger requests are written as .pb


def log(message):
    print(message, file=sys.stderr, flush=True)


def run(cmd, cwd=None, timeout=None, stdout=subprocess.PIPE):
    """Runs cmd; returns (rc or 'timeout', stdout text, stderr text, wall s, child cpu s)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=cwd, timeout=timeout, stdout=stdout, stderr=subprocess.PIPE)
        rc = proc.returncode
        out = proc.stdout.decode(errors="replace") if proc.stdout is not None else ""
        err = proc.stderr.decode(errors="replace")
    except subprocess.TimeoutExpired as expired:
        rc, out = "timeout", ""
        err = (expired.stderr or b"").decode(errors="replace")
    except OSError as error:  # not executable, missing
        rc, out, err = "exec failed", "", str(error)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return rc, out, err, wall, cpu


def build_reference(src, work):
    """Compiles the published sources with -O2 (their Makefile uses no -O at all)."""
    build = os.path.join(work, "reference-build")
    shutil.rmtree(build, ignore_errors=True)
    shutil.copytree(os.path.join(src, "src"), os.path.join(build, "src"),
                    ignore=shutil.ignore_patterns("preprocessing", "placements", "*.py", "*.pyc"))
    sources = sorted(os.path.join("src", f) for f in os.listdir(os.path.join(build, "src"))
                     if f.endswith(".cpp"))
    cxx = os.environ.get("CXX", "g++")
    cmd = [cxx, "-O2", "-std=c++17", "-w", "-Isrc/include"] + sources + ["-o", "pardnn"]
    log("building the reference: " + " ".join(cmd))
    rc, _, err, wall, _ = run(cmd, cwd=build, timeout=1800)
    if rc != 0:
        raise SystemExit("building the published code failed (rc=%s):\n%s" % (rc, err[-4000:]))
    log("built in %.0f s" % wall)
    return os.path.join(build, "pardnn")


def find_requests(paths):
    found = []
    for path in paths:
        if os.path.isfile(path):
            found.append(path)
            continue
        for root, _, files in os.walk(path):
            for name in files:
                if re.search(r"\.(json|json\.gz|pb)$", name):
                    found.append(os.path.join(root, name))
    return sorted(found)


def case_name(path, roots):
    for root in roots:
        if os.path.isdir(root) and os.path.abspath(path).startswith(os.path.abspath(root) + os.sep):
            rel = os.path.relpath(path, root)
            break
    else:
        rel = os.path.basename(path)
    return re.sub(r"\.(json|json\.gz|pb)$", "", rel)


def cluster_json(k):
    return {
        "devices": [{"name": "gpu%d" % i, "kind": "gpu", "node": "node0",
                     "memoryBytes": str(MEMORY_BYTES), "speed": 1.0} for i in range(k)],
        "intraNode": {"bandwidthBytesPerSecond": str(RATE_GB_S * 10**9),
                      "latencyNs": str(LATENCY_US * 1000)},
        "interNode": {"bandwidthBytesPerSecond": str(RATE_GB_S * 10**9),
                      "latencyNs": str(LATENCY_US * 1000)},
    }


def settings_json(inputs, k):
    return {"folder": inputs, "K": k, "COMM_LATENCY": LATENCY_US, "COMM_TRANSFER_RATE": RATE_GB_S,
            "BALANCE_MEMORY": False, "REPLICATION_FACTOR": 1,
            "DEVICE_MEM_CAPACITY": REFERENCE_MEM_CAPACITY}


def dot_op_order(path):
    """Op names in first-appearance order of the exported DOT file, src/snk left out (the order
    `convert --from=pardnn` gives the ops)."""
    seen, names = set(), []
    with open(path) as f:
        for line in f:
            parts = line.strip().split("->")
            if len(parts) != 2:
                continue
            for name in parts:
                if name not in ("src", "snk") and name not in seen:
                    seen.add(name)
                    names.append(name)
    return names


def read_placement_place(path, index_of, k):
    """The reference's 'name part' lines -> device per op. Returns (devices, unplaced count)."""
    devices = [None] * len(index_of)
    with open(path, errors="replace") as f:
        for line in f:
            fields = line.split()
            if len(fields) != 2 or fields[0] not in index_of:
                continue
            try:
                part = int(fields[1])
            except ValueError:
                continue
            devices[index_of[fields[0]]] = part
    unplaced = 0
    for i, part in enumerate(devices):
        if part is None or part < 0 or part >= k:
            # Missing or -1 (its bug 7: zero-weight ops never clustered); device 0 keeps it scorable.
            unplaced += 1
            devices[i] = 0
    return devices, unplaced


def field(message, snake):
    """A protobuf JSON field under its proto name or its lowerCamelCase JSON name."""
    parts = snake.split("_")
    camel = parts[0] + "".join(p.title() for p in parts[1:])
    return message.get(snake, message.get(camel, 0))


def metrics_of(text):
    doc = json.loads(text)
    placement = doc.get("placement", doc)
    metrics = placement.get("metrics", {})
    prov = placement.get("provenance", {})
    return {
        "makespan": int(field(metrics, "makespan_ns")),
        "lower_bound": int(field(metrics, "lower_bound_ns")),
        "solve_ns": int(field(prov, "solve_ns")),
        "outcome": placement.get("outcome", ""),
        "winner": prov.get("winner", ""),
        "violations": len(doc.get("violations", [])),
    }


def ours(offline, request, algorithm, time_limit, case_dir):
    out_path = os.path.join(case_dir, "%s.placement.json" % algorithm)
    rc, out, err, wall, _ = run([offline, "place", "--request=" + request, "--algorithm=" + algorithm,
                                 "--time_limit_s=%g" % time_limit, "--out=" + out_path],
                                timeout=time_limit * 3 + 120)
    if rc != 0:
        return {"error": "rc=%s %s" % (rc, err.strip().splitlines()[-1:] or "")}
    with open(out_path) as f:
        result = metrics_of(f.read())
    result["wall"] = wall
    return result


def fmt_ms(ns):
    return "%.3f" % (ns / 1e6) if ns else "-"


def fmt_s(seconds):
    if seconds is None:
        return "-"
    return "%.3f" % seconds if seconds < 10 else "%.1f" % seconds


def geomean(values):
    values = [v for v in values if v and v > 0]
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


COLUMNS = ["graph", "ops", "K", "lower bound ms", "reference ms", "pardnn ms", "auto ms",
           "pardnn/ref", "auto/ref", "ref wall s", "ref cpu s", "pardnn solve s", "auto solve s",
           "speed ref/pardnn", "note"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pardnn_src", default=os.environ.get("PARDNN_SRC", ""),
                        help="folder with the published ParDNN sources (Makefile, src/); "
                             "default $PARDNN_SRC; absent = skip")
    parser.add_argument("--reference_binary", default=os.environ.get("PARDNN_BINARY", ""),
                        help="an already built reference binary (skips the -O2 build)")
    parser.add_argument("--offline", default=os.environ.get("PLACEMENT_OFFLINE",
                                                             "build/service/offline/placement_offline"),
                        help="the placement_offline binary to compare (default: ./build's)")
    parser.add_argument("--corpus", action="append", default=[],
                        help="request file or folder (repeatable; default build/corpus/workloads)")
    parser.add_argument("--ks", default="2,4,8")
    parser.add_argument("--min_ops", type=int, default=0)
    parser.add_argument("--max_ops", type=int, default=0, help="0 = no limit")
    parser.add_argument("--only", default="", help="regex on the case name")
    parser.add_argument("--timeout", type=float, default=600, help="cap per reference run, seconds")
    parser.add_argument("--time_limit_s", type=float, default=60, help="our solver's limit per case")
    parser.add_argument("--work", default="", help="run folders (kept; default a new temp folder)")
    parser.add_argument("--out", default="", help="also write the markdown table here")
    parser.add_argument("--reuse_reference", action="store_true",
                        help="take the reference's answer and time from --work's earlier run where "
                             "there is one (reruns only ours: e.g. with another --offline)")
    parser.add_argument("--rows", default="", help="append rows as JSON lines here (default "
                                                    "WORK/rows.jsonl)")
    parser.add_argument("--from_rows", default="",
                        help="comma-separated rows.jsonl files of earlier runs: only render the table")
    args = parser.parse_args()

    if args.from_rows:
        rows = []
        for path in args.from_rows.split(","):
            with open(path) as f:
                rows += [json.loads(line) for line in f if line.strip()]
        return emit(render(rows, args, ""), args.out)

    if not args.pardnn_src or not os.path.isdir(os.path.join(args.pardnn_src, "src")):
        if not args.reference_binary and not args.reuse_reference:
            print("SKIPPED: no published ParDNN sources (give --pardnn_src=DIR or PARDNN_SRC=DIR; "
                  "they are not in this repository and CI has no network)")
            return 0
    if not os.access(args.offline, os.X_OK):
        raise SystemExit("no placement_offline at %s (ninja -C build placement_offline, or --offline=)"
                         % args.offline)
    offline = os.path.abspath(args.offline)
    corpus = args.corpus or ["build/corpus/workloads"]
    requests = find_requests(corpus)
    if not requests:
        print("SKIPPED: no requests under %s (build them: placement_corpus convert-all "
              "--out_dir=build/corpus/workloads)" % ", ".join(corpus))
        return 0
    ks = [int(k) for k in args.ks.split(",") if k]
    work = os.path.abspath(args.work or tempfile.mkdtemp(prefix="pardnn-reference-"))
    os.makedirs(work, exist_ok=True)
    log("run folders: " + work)
    if args.reference_binary:
        binary = os.path.abspath(args.reference_binary)
    elif args.pardnn_src and os.path.isdir(os.path.join(args.pardnn_src, "src")):
        binary = build_reference(args.pardnn_src, work)
    else:
        # --reuse_reference alone: a case without an earlier answer is reported as failed.
        binary = "/nonexistent-reference-binary"
    rows_path = args.rows or os.path.join(work, "rows.jsonl")

    def save(row):
        with open(rows_path, "a") as f:
            f.write(json.dumps(row) + "\n")

    clusters = {}
    for k in ks:
        clusters[k] = os.path.join(work, "cluster_k%d.json" % k)
        with open(clusters[k], "w") as f:
            json.dump(cluster_json(k), f, indent=1)

    rows = []
    for path in requests:
        name = case_name(path, corpus)
        if args.only and not re.search(args.only, name):
            continue
        case_dir = os.path.join(work, "cases", name.replace("/", "__"))
        inputs = os.path.join(case_dir, "inputs")
        existed = os.path.isdir(case_dir)  # an earlier run's folder is never removed
        os.makedirs(case_dir, exist_ok=True)
        rc, _, err, _, _ = run([offline, "export", "--request=" + path, "--to=pardnn", "--out=" + inputs])
        if rc != 0:
            log("%s: export failed: %s" % (name, err.strip()))
            continue
        with open(os.path.join(inputs, "nodes_average_durations_fixed.txt")) as f:
            durations = [int(line.rsplit("::", 1)[1]) for line in f if "::" in line]
        ops = len(durations)
        # The reference keeps durations, their total and its per-level Fenwick sums in `int` (us):
        # beyond 2^31 - 1 us of total work its load arithmetic overflows (long workflows do).
        overflow = sum(durations) > 2**31 - 1
        if ops < args.min_ops or (args.max_ops and ops > args.max_ops):
            if not existed:
                shutil.rmtree(case_dir)
            continue
        for k in ks:
            row = {"graph": name, "ops": ops, "K": k, "note": []}
            if overflow:
                row["overflow"] = True
                row["note"].append("total work > 2^31 us: the reference's int sums overflow")
            rows.append(row)
            k_dir = os.path.join(case_dir, "k%d" % k)
            os.makedirs(os.path.join(k_dir, "src", "preprocessing"), exist_ok=True)
            # The driver runs `python3 src/preprocessing/prepare_it.py <folder>`, which would rewrite
            # the inputs from TF logs; an empty script keeps ours.
            open(os.path.join(k_dir, "src", "preprocessing", "prepare_it.py"), "w").close()
            with open(os.path.join(k_dir, "settings.json"), "w") as f:
                json.dump(settings_json(inputs, k), f, indent=1)
            # Protobuf JSON is slow beyond ~100K ops (bench/corpus/README.md): binary there, and the
            # op order comes from the DOT file (the importer's order: first appearance).
            big = ops > JSON_MAX_OPS
            request = os.path.join(k_dir, "request.pb" if big else "request.json")
            rc, _, err, _, _ = run([offline, "convert", "--from=pardnn", "--in=" + inputs,
                                    "--cluster=" + clusters[k], "--out=" + request])
            if rc != 0:
                row["note"].append("convert failed: " + err.strip()[-200:])
                save(row)
                continue
            if big:
                names = dot_op_order(os.path.join(inputs, "crn_src_sink_low.dot"))
            else:
                with open(request) as f:
                    names = [op.get("name", "") for op in json.load(f)["graph"]["ops"]]
            if len(names) != ops:
                row["note"].append("op order: %d names for %d ops" % (len(names), ops))
                save(row)
                continue
            index_of = {n: i for i, n in enumerate(names)}

            placement_place = os.path.join(k_dir, "placement.place")
            ref_meta = os.path.join(k_dir, "reference.json")
            if args.reuse_reference and os.path.exists(ref_meta):
                # The published code is deterministic: its earlier answer (and time) stands.
                with open(ref_meta) as f:
                    meta = json.load(f)
                log("%s K=%d (%d ops): reference reused" % (name, k, ops))
            else:
                log("%s K=%d (%d ops): reference..." % (name, k, ops))
                if os.path.exists(placement_place):
                    os.remove(placement_place)
                with open(os.path.join(k_dir, "reference.log"), "w") as ref_log:
                    rc, _, _, wall, cpu = run([binary], cwd=k_dir, timeout=args.timeout, stdout=ref_log)
                meta = {"rc": rc, "wall": wall, "cpu": cpu, "timeout": args.timeout}
                with open(ref_meta, "w") as f:
                    json.dump(meta, f)
            rc, wall, cpu = meta["rc"], meta["wall"], meta["cpu"]
            row["ref_wall"], row["ref_cpu"] = wall, cpu
            if rc == "timeout":
                row["note"].append("reference timed out after %.0f s" % meta["timeout"])
            elif rc != 0 or not os.path.exists(placement_place):
                row["note"].append("reference failed (rc=%s%s)" % (
                    rc, ", signal %d" % -rc if isinstance(rc, int) and rc < 0 else ""))
            else:
                devices, unplaced = read_placement_place(placement_place, index_of, k)
                if unplaced:
                    row["note"].append("%d ops unplaced by the reference -> gpu0" % unplaced)
                ref_placement = os.path.join(k_dir, "reference.placement.json")
                with open(ref_placement, "w") as f:
                    json.dump({"device": devices}, f)
                rc, out, err, _, _ = run([offline, "evaluate", "--request=" + request,
                                          "--placement=" + ref_placement])
                if rc != 0:
                    row["note"].append("evaluate failed: " + err.strip()[-200:])
                else:
                    m = metrics_of(out)
                    row["ref"], row["lower_bound"] = m["makespan"], m["lower_bound"]
            for algorithm in ("pardnn", "auto"):
                log("%s K=%d: %s..." % (name, k, algorithm))
                result = ours(offline, request, algorithm, args.time_limit_s, k_dir)
                if "error" in result:
                    row["note"].append("%s failed: %s" % (algorithm, result["error"]))
                    continue
                row[algorithm] = result["makespan"]
                row[algorithm + "_solve"] = result["solve_ns"] / 1e9
                row.setdefault("lower_bound", result["lower_bound"])
                if result["outcome"] != "FEASIBLE":
                    row["note"].append("%s %s" % (algorithm, result["outcome"]))
            log("  " + format_row(row))
            save(row)

    return emit(render(rows, args, work), args.out)


def emit(table, out):
    print(table)
    if out:
        with open(out, "w") as f:
            f.write(table)
    return 0


def ratio(row, key):
    if row.get(key) and row.get("ref"):
        return row[key] / row["ref"]
    return None


def format_row(row):
    r_p, r_a = ratio(row, "pardnn"), ratio(row, "auto")
    speed = None
    if row.get("ref") and row.get("pardnn_solve"):
        speed = row["ref_wall"] / row["pardnn_solve"]
    cells = [row["graph"], str(row["ops"]), str(row["K"]), fmt_ms(row.get("lower_bound", 0)),
             fmt_ms(row.get("ref", 0)), fmt_ms(row.get("pardnn", 0)), fmt_ms(row.get("auto", 0)),
             "%.3f" % r_p if r_p else "-", "%.3f" % r_a if r_a else "-", fmt_s(row.get("ref_wall")),
             fmt_s(row.get("ref_cpu")), fmt_s(row.get("pardnn_solve")), fmt_s(row.get("auto_solve")),
             "%.1f" % speed if speed else "-", "; ".join(row["note"])]
    return "| " + " | ".join(cells) + " |"


def render(rows, args, work):
    lines = ["# ParDNN: published code vs ours (bench/reference)", "",
             "Generated %s UTC by `bench/reference/run.py` (%s); reference cluster model: K devices of "
             "speed 1, %d GB/s, %d us latency, memory that never binds. Makespans: our simulator on "
             "the same round-tripped request. Times: the published binary's wall and CPU time (whole "
             "run: parsing included), our `provenance.solve_ns`." % (
                 datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M"),
                 "rows of earlier runs" if args.from_rows else
                 "K=" + args.ks + (", ops %d..%s" % (args.min_ops, args.max_ops or "any")),
                 RATE_GB_S, LATENCY_US),
             "", "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    # Rows sorted by size; cases whose total work overflows the reference's int sums go last and
    # stay out of the summary (they measure that overflow, not the algorithm).
    rows = sorted(rows, key=lambda r: (bool(r.get("overflow")), r["ops"], r["graph"], r["K"]))
    lines += [format_row(row) for row in rows]
    overflow = sum(1 for r in rows if r.get("overflow"))
    rows = [r for r in rows if not r.get("overflow")]
    lines += ["", "**Summary**, leaving out the %d cases whose work overflows the reference's int sums:"
              % overflow, ""]
    lines.append(summary("all cases", rows))
    lines.append(summary("graphs >= 5,000 ops", [r for r in rows if r["ops"] >= 5000]))
    lines.append("")
    return "\n".join(lines) + "\n"


def summary(label, rows):
    both = [r for r in rows if ratio(r, "pardnn")]
    room = [r for r in both if r.get("lower_bound") and r["ref"] > 1.05 * r["lower_bound"]]
    fmt = lambda v: "%.3f" % v if v else "-"
    g_all = geomean([ratio(r, "pardnn") for r in both])
    g_room = geomean([ratio(r, "pardnn") for r in room])
    g_auto = geomean([ratio(r, "auto") for r in both if ratio(r, "auto")])
    better = sum(1 for r in both if ratio(r, "pardnn") <= 0.97)
    worse = sum(1 for r in both if ratio(r, "pardnn") > 1.0)
    failed = len(rows) - len(both)
    speeds = geomean([r["ref_wall"] / r["pardnn_solve"] for r in both if r.get("pardnn_solve")])
    return ("- %s: %d cases, the reference answered %d (%d crashed, timed out or failed). "
            "pardnn/reference geomean **%s** (auto/reference %s); pardnn <= 0.97x the reference in "
            "**%d of %d**, worse than it in %d; geomean pardnn/reference over the %d cases where the "
            "reference is > 5 %% above the lower bound: **%s**; geomean speed (reference wall / "
            "pardnn solve): %s x." % (label, len(rows), len(both), failed, fmt(g_all), fmt(g_auto),
                                     better, len(both), worse, len(room), fmt(g_room),
                                     "%.1f" % speeds if speeds else "-"))


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Self-test of run.py without the published code (CI has none): a stand-in reference binary.

    python3 bench/reference/selftest.py PLACEMENT_OFFLINE SOURCE_DIR

The stand-in behaves like the published binary where the harness depends on it: it reads
settings.json in its working directory, runs `python3 src/preprocessing/prepare_it.py <folder>`, reads
the exported DOT file and writes `placement.place` ("name part"). Per K it answers (K=2, leaving one op
out, which the harness must put on device 0 and report), crashes with SIGSEGV (K=3) or hangs past the
time-out (K=4). Checks the skip without sources, each of those rows, and a rerun of ours only
(--reuse_reference).
"""

import os
import subprocess
import sys
import tempfile

STAND_IN = r'''#!/usr/bin/env python3
import json, os, signal, subprocess, sys, time
settings = json.load(open("settings.json"))
if subprocess.call(["python3", "src/preprocessing/prepare_it.py", settings["folder"]]) != 0:
    sys.exit("prepare_it.py failed")
k = settings["K"]
if k == 3:
    os.kill(os.getpid(), signal.SIGSEGV)
if k == 4:
    time.sleep(60)
names = []
for line in open(os.path.join(settings["folder"], "crn_src_sink_low.dot")):
    for name in line.strip().split("->") if "->" in line else []:
        if name not in ("src", "snk") and name not in names:
            names.append(name)
with open("placement.place", "w") as out:
    for i, name in enumerate(names[:-1]):
        out.write("%s %d\n" % (name, i % k))
'''


def main():
    offline, source = sys.argv[1], sys.argv[2]
    run_py = os.path.join(source, "bench", "reference", "run.py")
    fixture = os.path.join(source, "tests", "data", "offline", "three_ops.json")
    failures = []

    env = dict(os.environ)
    env.pop("PARDNN_SRC", None)
    env.pop("PARDNN_BINARY", None)
    skipped = subprocess.run([sys.executable, run_py, "--offline=" + offline], env=env,
                             capture_output=True, text=True)
    if skipped.returncode != 0 or "SKIPPED" not in skipped.stdout:
        failures.append("no sources: expected SKIPPED and exit 0, got %d: %s %s" % (
            skipped.returncode, skipped.stdout, skipped.stderr))

    with tempfile.TemporaryDirectory() as tmp:
        binary = os.path.join(tmp, "stand-in")
        with open(binary, "w") as f:
            f.write(STAND_IN)
        os.chmod(binary, 0o755)
        table = os.path.join(tmp, "table.md")
        done = subprocess.run([sys.executable, run_py, "--offline=" + offline,
                               "--reference_binary=" + binary, "--corpus=" + fixture, "--ks=2,3,4",
                               "--timeout=3", "--time_limit_s=5", "--work=" + os.path.join(tmp, "w"),
                               "--out=" + table], env=env, capture_output=True, text=True)
        if done.returncode != 0:
            failures.append("run.py failed (%d): %s" % (done.returncode, done.stderr[-2000:]))
        else:
            rows = {}
            for line in open(table):
                cells = [c.strip() for c in line.strip().strip("|").split("|")]
                if len(cells) > 3 and cells[0] == "three_ops":
                    rows[cells[2]] = cells
            expect = {
                "2": lambda c: c[4] != "-" and c[5] != "-" and c[7] != "-" and
                "1 ops unplaced by the reference" in c[-1],
                "3": lambda c: c[4] == "-" and "reference failed (rc=-11" in c[-1] and c[5] != "-",
                "4": lambda c: c[4] == "-" and "timed out" in c[-1],
            }
            for k, check in expect.items():
                if k not in rows or not check(rows[k]):
                    failures.append("K=%s row wrong: %s" % (k, rows.get(k)))
            if "three_ops" not in done.stdout or "**Summary**" not in done.stdout:
                failures.append("table not on stdout")
        # Rerun with only ours: the stand-in's answers come back from the run folders.
        again = subprocess.run([sys.executable, run_py, "--offline=" + offline, "--reuse_reference",
                                "--corpus=" + fixture, "--ks=2,3", "--time_limit_s=5",
                                "--work=" + os.path.join(tmp, "w"), "--rows=" + os.path.join(tmp, "r")],
                               env=env, capture_output=True, text=True)
        reused = [line for line in again.stdout.splitlines() if line.startswith("| three_ops | 3 | 2 |")]
        if again.returncode != 0 or not reused or reused[0].split("|")[5].strip() == "-" or \
                "reference reused" not in again.stderr:
            failures.append("--reuse_reference: %d %s %s" % (again.returncode, reused, again.stderr[-1000:]))
    for failure in failures:
        print("FAIL: " + failure)
    print("selftest: %s" % ("FAILED" if failures else "ok"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

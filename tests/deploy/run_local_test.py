#!/usr/bin/env python3
"""deploy/run_local.sh, the README's first command, as a new user runs it.

Runs it against this build folder (BUILD_DIR) and checks what a person sees: exit status 0, at most 40
lines in all (the issue's target: a screenful, not 600 lines of JSON), the health check, the summary
(outcome, step time against the lower bound and against one device, the device table), the cache hit of
the second ask, and the server's log. Prints the line count.

    python3 tests/deploy/run_local_test.py SOURCE_DIR BUILD_DIR
"""
import os
import re
import subprocess
import sys

MAX_LINES = 40


def main():
    source, build = sys.argv[1], sys.argv[2]
    env = dict(os.environ, BUILD_DIR=os.path.abspath(build))
    ran = subprocess.run(["bash", os.path.join(source, "deploy", "run_local.sh")], env=env,
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=900)
    output = ran.stdout + ran.stderr
    lines = output.splitlines()
    print(output)
    problems = []
    if ran.returncode != 0:
        problems.append(f"exit status {ran.returncode}")
    if len(lines) > MAX_LINES:
        problems.append(f"{len(lines)} lines, more than {MAX_LINES}")
    for wanted in (r"^SERVING$", r"^outcome +FEASIBLE", r"^step +[\d.]+ \w+ +lower bound",
                   r"^one device +[\d.]+ \w+ alone on \S+: speed-up [\d.]+x", r"^device +ops +busy",
                   r"^cache +MISS", r"^cache +HIT", r"listening on",
                   r"^plan +8 microbatches, at most \d+ in flight: [\d.]+ microbatches/s",
                   r"^one device +[\d.]+ \w+ alone on \S+ \(8 microbatches\): speed-up [\d.]+x"):
        if not re.search(wanted, output, re.M):
            problems.append(f"no line matching {wanted!r}")
    if "{" in ran.stdout:
        problems.append("JSON on standard output")
    # The summary fits a 100-column terminal (the server's own log lines are not held to it).
    summary = output.split("--format=summary\n", 1)[-1].split("== the same request", 1)[0]
    too_wide = [line for line in summary.splitlines() if len(line) > 100]
    if too_wide:
        problems.append(f"summary lines wider than 100 columns: {too_wide[:3]}")
    print(f"run_local.sh printed {len(lines)} lines")
    if problems:
        print("FAILED: " + "; ".join(problems))
        return 1
    print("1 passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Shared helpers of the deployment-file tests: flags the server accepts, metrics it exports, skipping.

Tests exit 77 (CTest SKIP_RETURN_CODE) when a tool they need is absent, 1 on any failed check.
"""
import os
import re
import subprocess
import sys

SKIP = 77


def skip(reason):
    print(f"SKIP: {reason}")
    sys.exit(SKIP)


class Checker:
    """Collects failures so that one run reports all of them."""

    def __init__(self):
        self.failures = []

    def check(self, condition, message):
        if not condition:
            self.failures.append(message)
        return condition

    def finish(self, what):
        if self.failures:
            print(f"{what}: {len(self.failures)} problem(s)")
            for failure in self.failures:
                print(f"  - {failure}")
            sys.exit(1)
        print(f"{what}: OK")
        sys.exit(0)


def server_flags(server_binary):
    """Names of the flags placement_server accepts, from its --helpfull output."""
    result = subprocess.run([server_binary, "--helpfull"], capture_output=True, text=True,
                            timeout=60)
    text = result.stdout + result.stderr
    names = set(re.findall(r"^\s+--([A-Za-z0-9_]+) \(", text, re.MULTILINE))
    if "port" not in names or "flagfile" not in names:
        raise RuntimeError(f"cannot read the flags of {server_binary} from --helpfull:\n{text[:2000]}")
    return names


def parse_flag_lines(text):
    """`--name=value` lines (a --flagfile) → {name: value}; other lines are reported as None keys."""
    flags = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = re.fullmatch(r"--([A-Za-z0-9_]+)(?:=(.*))?", line)
        flags[match.group(1) if match else f"<malformed: {line}>"] = match.group(2) if match else None
    return flags


def duration_seconds(text):
    """absl duration text ("10s", "1m30s", "250ms") → seconds."""
    units = {"h": 3600, "m": 60, "s": 1, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
    parts = re.findall(r"([0-9.]+)(h|ms|us|ns|m|s)", text)
    if not parts or "".join(a + b for a, b in parts) != text:
        raise ValueError(f"not a duration: {text!r}")
    return sum(float(value) * units[unit] for value, unit in parts)


def exported_metric_names(source_dir):
    """Every metric family the server exports: the `placement_*` / `process_*` names in
    service_metrics.cc, with the series suffixes of histograms."""
    path = os.path.join(source_dir, "service", "server", "service_metrics.cc")
    with open(path, encoding="utf-8") as file:
        source = file.read()
    names = set(re.findall(r'"((?:placement|process)_[a-z0-9_]+)"', source))
    series = set(names)
    for name in names:
        series.update({name + "_bucket", name + "_sum", name + "_count"})
    return series


def metric_names_in_expression(expression):
    """Identifiers in a PromQL expression that look like this service's metric names."""
    return set(re.findall(r"\b((?:placement|process)_[a-z0-9_]+)\b", expression))

"""Shared helpers of the deployment-file tests: flags the server accepts, metrics it exports, skipping.

Tests exit 77 (CTest SKIP_RETURN_CODE) when a tool they need is absent, 1 on any failed check.
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading

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


# Metrics of the operations shared between replicas, which the dashboard's "Shared operations" row
# must show (each is also checked to be exported, like every other name).
SHARED_OPERATION_METRICS = frozenset({
    "placement_operations",
    "placement_operations_taken_over_total",
    "placement_operation_remote_cancels_total",
    "placement_operation_lease_renewals_failed_total",
    "placement_operation_leases_lost_total",
    "placement_shared_operations_fallback_total",
    "placement_shared_operations_redis_round_trips_total",
    "placement_shared_operations_redis_errors_total",
    "placement_shared_requests_not_stored_total",
})


def exported_metric_names(source_dir):
    """Every metric family the server exports: the `placement_*` / `process_*` string literals in
    service/**/*.cc (not tests), with the series suffixes of histograms."""
    names = set()
    for path in glob.glob(os.path.join(source_dir, "service", "**", "*.cc"), recursive=True):
        if path.endswith("_test.cc"):
            continue
        with open(path, encoding="utf-8") as file:
            names.update(re.findall(r'"((?:placement|process)_[a-z0-9_]+)"', file.read()))
    series = set(names)
    for name in names:
        series.update({name + "_bucket", name + "_sum", name + "_count"})
    return series


def metric_names_in_expression(expression):
    """Identifiers in a PromQL expression that look like this service's metric names."""
    return set(re.findall(r"\b((?:placement|process)_[a-z0-9_]+)\b", expression))


def effective_redis_config(arguments, names, timeout=20):
    """Starts the real redis-server with `arguments` (a config file and/or --options, as a launcher
    passes them), on a Unix socket in a temp directory instead of its TCP port, and returns
    {name: value} of `names` from CONFIG GET — what Redis made of the settings, not what the files
    say. None when redis-server or redis-cli is not installed; raises when Redis refuses them."""
    server, cli = shutil.which("redis-server"), shutil.which("redis-cli")
    if server is None or cli is None:
        return None
    with tempfile.TemporaryDirectory(prefix="placement_redis_") as directory:
        socket_path = os.path.join(directory, "redis.sock")
        process = subprocess.Popen(
            [server, *arguments, "--port", "0", "--bind", "127.0.0.1", "--unixsocket", socket_path,
             "--dir", directory, "--daemonize", "no", "--logfile", ""],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        watchdog = threading.Timer(timeout, process.kill)
        watchdog.start()
        try:
            log = []
            for line in process.stdout:
                log.append(line)
                if "ready to accept connections" in line.lower():
                    break
            else:
                raise RuntimeError(f"redis-server {' '.join(arguments)} did not start:\n{''.join(log)}")
            values = {}
            for name in names:
                result = subprocess.run([cli, "-s", socket_path, "--raw", "CONFIG", "GET", name],
                                        capture_output=True, text=True, timeout=timeout)
                lines = result.stdout.split("\n")
                values[name] = lines[1] if len(lines) > 1 and lines[0] == name else None
            return values
        finally:
            watchdog.cancel()
            process.kill()
            process.wait()

"""Shared fixtures: the real placement_server on a free port, and the repository's test data.

CTest passes the binaries' paths in PLACEMENT_SERVER_BINARY / PLACEMENT_OFFLINE_BINARY (see
client/python/CMakeLists.txt); tests needing one are skipped when it is not set.
"""
import functools
import os
import re
import subprocess
import threading
from pathlib import Path

import pytest

SOURCE_DIR = Path(os.environ.get("PLACEMENT_SOURCE_DIR", Path(__file__).resolve().parents[3]))


class ServerProcess:
    """placement_server started with --port=0 and --metrics_port=0 on 127.0.0.1, as the C++ end-to-end
    tests start it (tests/e2e/server_process.cc); the chosen port is read from its log."""

    def __init__(self, binary, flags=(), timeout=30.0):
        args = [binary, "--host=127.0.0.1", "--port=0", "--metrics_port=0", *flags]
        # Servers that refuse plaintext unless told (TLS by default) get --insecure, as the C++ tests
        # pass it, unless the test chooses the transport itself.
        if server_knows_flag(binary, "insecure") and not any(
                f.startswith(("--tls_", "--insecure", "--noinsecure")) for f in flags):
            args.append("--insecure")
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.log = []
        self._ready = threading.Event()
        self._reader = threading.Thread(target=self._read_log, daemon=True)
        self._reader.start()
        if not self._ready.wait(timeout) or self.port is None:
            self.stop()
            raise RuntimeError("placement_server did not start:\n" + "".join(self.log))

    def _read_log(self):
        self.port = None
        for line in self.process.stderr:
            self.log.append(line)
            match = re.search(r"listening on \S+:(\d+)", line)
            if match:
                self.port = int(match.group(1))
            if self.port is not None and any("metrics on" in entry for entry in self.log):
                self._ready.set()
        self._ready.set()  # the server exited

    @property
    def address(self):
        return f"127.0.0.1:{self.port}"

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@functools.lru_cache(maxsize=None)
def server_knows_flag(binary, flag):
    """True when `binary --helpfull` lists --`flag`."""
    listed = subprocess.run([binary, "--helpfull"], capture_output=True, text=True, timeout=30)
    return f"--{flag} (" in listed.stdout + listed.stderr


def binary(name):
    path = os.environ.get(name)
    if not path or not Path(path).exists():
        pytest.skip(f"{name} is not set (run through ctest)")
    return path


@pytest.fixture(scope="session")
def offline_binary():
    return binary("PLACEMENT_OFFLINE_BINARY")


@pytest.fixture
def three_ops_path():
    return SOURCE_DIR / "tests" / "data" / "offline" / "three_ops.json"


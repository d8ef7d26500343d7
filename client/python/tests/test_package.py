"""`pip install ./client/python` into a fresh virtualenv, then an example against the real server.

The virtualenv is made with `--system-site-packages` (Debian's python3-grpcio and python3-protobuf
satisfy the declared dependencies), pip runs with build isolation as a user's plain `pip install`
does, and with no package index at all (PIP_NO_INDEX), which proves the install needs nothing from
outside. PYTHONPATH is removed, so `placement.client` and `placement.v1` can only come from the
installed package.
"""
import os
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from conftest import SOURCE_DIR, ServerProcess, binary

SYSTEM_PYTHON = "/usr/bin/python3"


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PIP_", "VIRTUAL_ENV"))}
    env.update(PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1", PYTHONDONTWRITEBYTECODE="1", **extra)
    return env


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    if not Path(SYSTEM_PYTHON).exists():
        pytest.skip("no /usr/bin/python3")
    root = tmp_path_factory.mktemp("venv")
    made = subprocess.run([SYSTEM_PYTHON, "-m", "venv", "--system-site-packages", str(root)],
                          capture_output=True, text=True, timeout=120)
    if made.returncode != 0:
        pytest.skip(f"cannot make a virtualenv (python3-venv missing?): {made.stderr}")
    python = root / "bin" / "python"
    installed = subprocess.run([str(python), "-m", "pip", "install", str(SOURCE_DIR / "client" / "python")],
                               capture_output=True, text=True, timeout=300, env=clean_env(),
                               cwd=root)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    return python


def run_python(python, code, **kwargs):
    return subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=120,
                          env=clean_env(), **kwargs)


def test_installed_package_has_the_client_the_stubs_and_a_version(venv, tmp_path):
    checked = run_python(venv, (
        "import placement, placement.client, placement.v1.placement_pb2 as pb, "
        "placement.v1.placement_service_pb2_grpc as g\n"
        "from importlib.metadata import version\n"
        "print(placement.__version__, version('placement-client'))\n"
        "print(pb.__file__)\n"
        "print(pb.Provenance.DESCRIPTOR.fields_by_name['winner'].number)\n"
        "print(g.PlacementServiceStub.__name__)\n"), cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    versions, stub_file, winner_field, stub = checked.stdout.split("\n")[:4]
    package_version, dist_version = versions.split()
    assert package_version == dist_version
    cmake = (SOURCE_DIR / "CMakeLists.txt").read_text()
    assert package_version == re.search(r"project\(placement_service VERSION ([0-9.]+)", cmake).group(1)
    # The stubs come from the virtualenv, not from a build tree or the source folder.
    assert stub_file.startswith(str(venv.parent.parent)), stub_file
    assert winner_field == "12"
    assert stub == "PlacementServiceStub"
    # Nothing generated was written into the source tree.
    assert not list((SOURCE_DIR / "client" / "python" / "placement").rglob("*_pb2.py"))


def test_example_runs_against_a_real_server_of_the_same_version(venv, tmp_path):
    server = ServerProcess(binary("PLACEMENT_SERVER_BINARY"))
    try:
        example = SOURCE_DIR / "client" / "python" / "examples" / "place_file.py"
        request = SOURCE_DIR / "tests" / "data" / "offline" / "three_ops.json"
        ran = subprocess.run([str(venv), str(example), f"--server={server.address}", f"--request={request}"],
                             capture_output=True, text=True, timeout=120, env=clean_env(), cwd=tmp_path)
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert "feasible; step" in ran.stdout, ran.stdout
        assert " -> " in ran.stdout  # the op -> device lines

        metrics_port = re.search(r"metrics on \S+:(\d+)", "".join(server.log)).group(1)
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as page:
            server_version = re.search(r'placement_build_info\{[^}]*version="([^"]+)"',
                                       page.read().decode()).group(1)
        package_version = run_python(venv, "import placement; print(placement.__version__)",
                                     cwd=tmp_path).stdout.strip()
        assert package_version == server_version
    finally:
        server.stop()


def test_sdist_carries_the_protos_and_builds_the_same_wheel(venv, tmp_path):
    """An sdist (for building elsewhere) holds the .proto files but no generated stubs, and a wheel
    built from it has the stubs."""
    backend_dir = SOURCE_DIR / "client" / "python" / "build_backend"
    code = ("import sys, tarfile, zipfile, pathlib\n"
            f"sys.path.insert(0, {str(backend_dir)!r})\n"
            "import placement_build_backend as b\n"
            f"out = pathlib.Path({str(tmp_path)!r})\n"
            "sdist = out / b.build_sdist(str(out))\n"
            "names = tarfile.open(sdist).getnames()\n"
            "assert any(n.endswith('proto/placement/v1/placement.proto') for n in names), names\n"
            "assert not any(n.endswith('_pb2.py') for n in names), names\n"
            "tarfile.open(sdist).extractall(out / 'unpacked')\n"
            "root = next((out / 'unpacked').iterdir())\n"
            "import subprocess\n"
            "subprocess.run([sys.executable, '-c', 'import sys; sys.path.insert(0, \"build_backend\"); '\n"
            "    'import placement_build_backend as b; print(b.build_wheel(sys.argv[1]))', str(out)],\n"
            "    cwd=root, check=True)\n"
            "wheel = next(out.glob('*.whl'))\n"
            "names = zipfile.ZipFile(wheel).namelist()\n"
            "assert 'placement/v1/placement_service_pb2_grpc.py' in names, names\n"
            "assert 'placement/client.py' in names, names\n"
            "print(wheel.name)\n")
    built = run_python(venv, code, cwd=tmp_path)
    assert built.returncode == 0, built.stdout + built.stderr
    assert built.stdout.strip().endswith("-py3-none-any.whl")

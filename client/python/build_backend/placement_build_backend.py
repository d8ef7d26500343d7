"""The PEP 517 build backend of the `placement-client` package, in the standard library only.

Why not setuptools: `pip install ./client/python` builds in an isolated environment and would fetch
setuptools from a package index first, which fails on a machine without one (and Debian's pip
offers no wheel cache). This backend needs nothing to be installed, so the plain command works
offline, with or without build isolation.

What it does:
  * generates the `placement.v1` stubs (`*_pb2.py`, `placement_service_pb2_grpc.py`) from the
    repository's `proto/placement/v1/*.proto` at build time (they are never committed), with the
    first of:
      1. `PLACEMENT_PYTHON_STUBS=DIR`: a folder holding `placement/v1/*_pb2*.py` already generated
         (the CMake build writes `<build>/client/python/generated/`);
      2. `protoc` and `grpc_python_plugin` (Debian: protobuf-compiler, protobuf-compiler-grpc; or
         `PROTOC=` / `GRPC_PYTHON_PLUGIN=` paths);
      3. `python -m grpc_tools.protoc` (the grpcio-tools package) when it is 1.51 or newer;
  * writes a pure-Python wheel: the `placement` package (every module in `placement/`), the stubs,
    `placement/_version.py`, and the metadata of `pyproject.toml`'s [project] table;
  * writes an sdist that carries the .proto files, so a wheel can be built from it elsewhere.

The version is the server's: `project(placement_service VERSION x.y.z)` in the top-level
CMakeLists.txt, the number `placement_server` reports in `placement_build_info{version=...}`.
"""
import base64
import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # client/python (or the unpacked sdist)
DIST_NAME = "placement_client"  # normalised for file names
PROTO_NAMES = ("graph", "cluster", "placement", "operation", "placement_service")
# A fixed timestamp keeps wheels byte-for-byte reproducible (1980-01-01, the zip format's epoch).
ZIP_TIME = (1980, 1, 1, 0, 0, 0)


# ---- pyproject.toml ----------------------------------------------------------------------------

def _read_project():
    """The [project] table of pyproject.toml. tomllib where Python has it (3.11+); otherwise a reader
    of the subset used here (strings, lists of strings, inline tables of strings)."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    try:
        import tomllib  # Python 3.11+
        return tomllib.loads(text)["project"]
    except ImportError:
        return _read_simple_toml(text)["project"]


def _read_simple_toml(text):
    tables, current = {}, None
    pending = ""
    for raw in text.splitlines():
        line = raw.split(" #")[0].strip() if not raw.strip().startswith("#") else ""
        if not line:
            continue
        if pending:
            line = pending + " " + line
            pending = ""
        if line.startswith("[") and "=" not in line:
            current = tables
            for part in line.strip("[]").split("."):
                current = current.setdefault(part.strip(), {})
            continue
        key, _, value = line.partition("=")
        if value.strip().startswith("[") and not value.strip().endswith("]"):
            pending = line
            continue
        current[key.strip().strip('"')] = _simple_value(value.strip())
    return tables


def _simple_value(value):
    if value.startswith("["):
        return [item for item in re.findall(r'"((?:[^"\\]|\\.)*)"', value)]
    if value.startswith("{"):
        return dict(re.findall(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"', value))
    return value.strip('"')


# ---- version -----------------------------------------------------------------------------------

def _version():
    """The server's version: from an sdist's PKG-INFO, else the repository's CMakeLists.txt."""
    pkg_info = ROOT / "PKG-INFO"
    if pkg_info.exists():
        match = re.search(r"^Version: (\S+)$", pkg_info.read_text(encoding="utf-8"), re.M)
        if match:
            return match.group(1)
    cmake = ROOT.parent.parent / "CMakeLists.txt"
    if cmake.exists():
        match = re.search(r"project\(\s*placement_service\s+VERSION\s+([0-9][0-9.]*)",
                          cmake.read_text(encoding="utf-8"))
        if match:
            return match.group(1)
    raise RuntimeError(f"cannot find the version: neither {pkg_info} nor {cmake} "
                       "(project(placement_service VERSION ...))")


# ---- stubs -------------------------------------------------------------------------------------

def _proto_root():
    """The folder holding placement/v1/*.proto: the sdist's copy, else the repository's."""
    for candidate in (ROOT / "proto", ROOT.parent.parent / "proto"):
        if (candidate / "placement" / "v1" / "placement.proto").exists():
            return candidate
    raise RuntimeError("placement/v1/*.proto not found (expected in proto/ or ../../proto); pip older "
                       "than 21.3 builds in a copy of this folder, away from the repository: upgrade "
                       "pip, or install from an sdist (build_sdist carries the .proto files)")


def _stub_files():
    return [f"{name}_pb2.py" for name in PROTO_NAMES] + ["placement_service_pb2_grpc.py"]


def _grpc_tools_usable():
    try:
        from grpc_tools import grpc_version  # noqa: F401  (grpcio-tools)
    except ImportError:
        return False
    major_minor = tuple(int(x) for x in re.findall(r"\d+", grpc_version.VERSION)[:2])
    return major_minor >= (1, 51)


def _generate_stubs(out_dir):
    """Writes out_dir/placement/v1/*_pb2*.py; returns how they were made (for the build log)."""
    target = Path(out_dir) / "placement" / "v1"
    target.mkdir(parents=True, exist_ok=True)

    prebuilt = os.environ.get("PLACEMENT_PYTHON_STUBS")
    if prebuilt:
        source = Path(prebuilt) / "placement" / "v1"
        missing = [name for name in _stub_files() if not (source / name).exists()]
        if missing:
            raise RuntimeError(f"PLACEMENT_PYTHON_STUBS={prebuilt}: missing {', '.join(missing)}")
        for name in _stub_files():
            shutil.copyfile(source / name, target / name)
        return f"copied from {prebuilt}"

    proto_root = _proto_root()
    protos = [str(proto_root / "placement" / "v1" / f"{name}.proto") for name in PROTO_NAMES]
    protoc = os.environ.get("PROTOC") or shutil.which("protoc")
    plugin = os.environ.get("GRPC_PYTHON_PLUGIN") or shutil.which("grpc_python_plugin")
    if protoc and plugin:
        command = [protoc, f"--python_out={out_dir}", f"--grpc_python_out={out_dir}",
                   f"--plugin=protoc-gen-grpc_python={plugin}", f"-I{proto_root}", *protos]
        how = f"{protoc} + {plugin}"
    elif _grpc_tools_usable():
        command = [sys.executable, "-m", "grpc_tools.protoc", f"--python_out={out_dir}",
                   f"--grpc_python_out={out_dir}", f"-I{proto_root}", *protos]
        how = "grpc_tools.protoc"
    else:
        raise RuntimeError(
            "cannot generate the placement.v1 stubs: install protoc and grpc_python_plugin (Debian: "
            "apt-get install protobuf-compiler protobuf-compiler-grpc), or grpcio-tools >= 1.51, or set "
            "PLACEMENT_PYTHON_STUBS to a folder with placement/v1/*_pb2*.py (e.g. "
            "<build>/client/python/generated after `cmake --build build --target placement_python_stubs`)")
    subprocess.run(command, check=True)
    missing = [name for name in _stub_files() if not (target / name).exists()]
    if missing:
        raise RuntimeError(f"{how} did not write {', '.join(missing)}")
    return how


# ---- metadata ----------------------------------------------------------------------------------

def _metadata(version):
    project = _read_project()
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {project['name']}",
        f"Version: {version}",
        f"Summary: {project.get('description', '')}",
    ]
    if "requires-python" in project:
        lines.append(f"Requires-Python: {project['requires-python']}")
    license_ = project.get("license")
    if isinstance(license_, dict) and "text" in license_:
        lines.append(f"License: {license_['text']}")
    for requirement in project.get("dependencies", []):
        lines.append(f"Requires-Dist: {requirement}")
    for extra, requirements in project.get("optional-dependencies", {}).items():
        lines.append(f"Provides-Extra: {extra}")
        for requirement in requirements:
            lines.append(f'Requires-Dist: {requirement}; extra == "{extra}"')
    readme = project.get("readme")
    body = ""
    if isinstance(readme, str) and (ROOT / readme).exists():
        lines.append("Description-Content-Type: text/markdown")
        body = "\n" + (ROOT / readme).read_text(encoding="utf-8")
    return "\n".join(lines) + "\n" + body


def _package_files():
    """(path in the wheel, bytes) of the hand-written package: every .py file under placement/."""
    files = []
    for path in sorted((ROOT / "placement").rglob("*.py")):
        relative = path.relative_to(ROOT)
        if "__pycache__" in relative.parts or relative.parts[:2] == ("placement", "v1"):
            continue
        files.append((relative.as_posix(), path.read_bytes()))
    return files


def _record_hash(data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def _write_wheel(wheel_directory, files, version, tag_note):
    dist_info = f"{DIST_NAME}-{version}.dist-info"
    files = list(files) + [
        (f"{dist_info}/METADATA", _metadata(version).encode()),
        (f"{dist_info}/WHEEL", (f"Wheel-Version: 1.0\nGenerator: placement_build_backend ({tag_note})\n"
                                "Root-Is-Purelib: true\nTag: py3-none-any\n").encode()),
        (f"{dist_info}/top_level.txt", b"placement\n"),
    ]
    record = "".join(f"{name},{_record_hash(data)},{len(data)}\n" for name, data in files)
    record += f"{dist_info}/RECORD,,\n"
    files.append((f"{dist_info}/RECORD", record.encode()))
    name = f"{DIST_NAME}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(Path(wheel_directory) / name, "w", zipfile.ZIP_DEFLATED) as wheel:
        for path, data in files:
            info = zipfile.ZipInfo(path, date_time=ZIP_TIME)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            wheel.writestr(info, data)
    return name


# ---- PEP 517 / PEP 660 hooks -------------------------------------------------------------------

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    version = _version()
    with tempfile.TemporaryDirectory() as scratch:
        how = _generate_stubs(scratch)
        files = _package_files()
        stub_dir = Path(scratch) / "placement" / "v1"
        files.append(("placement/v1/__init__.py", b'"""placement.v1 messages and stubs, generated at build '
                                                  b'time from proto/placement/v1."""\n'))
        for name in _stub_files():
            files.append((f"placement/v1/{name}", (stub_dir / name).read_bytes()))
        files.append(("placement/_version.py", f'__version__ = "{version}"\n'.encode()))
        print(f"placement_build_backend: stubs {how}", file=sys.stderr)
        return _write_wheel(wheel_directory, files, version, "stubs generated at build time")


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """`pip install -e`: the source folder on sys.path through a .pth file; the stubs and
    _version.py are generated into client/python/.generated/ (git-ignored), also on the path, and
    `placement/__init__.py` joins the two `placement` folders."""
    version = _version()
    generated = ROOT / ".generated"
    shutil.rmtree(generated, ignore_errors=True)
    how = _generate_stubs(generated)
    (generated / "placement" / "_version.py").write_text(f'__version__ = "{version}"\n')
    pth = f"{ROOT}\n{generated}\n".encode()
    print(f"placement_build_backend: stubs {how} (editable)", file=sys.stderr)
    return _write_wheel(wheel_directory, [(f"__editable__.{DIST_NAME}.pth", pth)], version, "editable")


def build_sdist(sdist_directory, config_settings=None):
    version = _version()
    base = f"{DIST_NAME}-{version}"
    name = f"{base}.tar.gz"
    members = [("pyproject.toml", (ROOT / "pyproject.toml").read_bytes()),
               ("README.md", (ROOT / "README.md").read_bytes()),
               ("PKG-INFO", _metadata(version).encode()),
               ("build_backend/placement_build_backend.py", Path(__file__).read_bytes())]
    members += _package_files()
    proto_root = _proto_root()
    for proto in PROTO_NAMES:
        path = proto_root / "placement" / "v1" / f"{proto}.proto"
        members.append((f"proto/placement/v1/{proto}.proto", path.read_bytes()))
    with tarfile.open(Path(sdist_directory) / name, "w:gz", format=tarfile.PAX_FORMAT) as sdist:
        for path, data in members:
            info = tarfile.TarInfo(f"{base}/{path}")
            info.size = len(data)
            info.mode = 0o644
            info.mtime = 315532800
            sdist.addfile(info, io.BytesIO(data))
    return name

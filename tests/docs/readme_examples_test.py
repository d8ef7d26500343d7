"""Every example in the READMEs runs as written.

What counts as an example: a fenced code block, in any README*.md of the repository, whose language is
`sh`, `bash`, `shell`, `console` or `python`, or that has no language. Blocks in other languages
(`text` for usage synopses, diagrams and file formats; `json`, `yaml`, `c++`) are not examples.

An example is run unless
  * the line before its fence (blank lines aside) is a marker naming why not:
        <!-- example: not run: needs a Docker engine (tests/deploy/compose_test.py checks the file) -->
    (the reason is required and printed in the test's output), or
  * every command in it builds or runs the project's own tests and benchmarks (`cmake`, `ninja`,
    `ctest`, `build*/...` binaries, and the README's two entry points `bash tests/run_tests.sh` (what CI
    runs) and `bash deploy/run_local.sh` (tests/deploy/run_local_test.py)): ctest and CI run those already.

How it runs (the setup a reader of the README has, made here in a temporary folder):
  * the working directory mirrors the repository root (a symbolic link per top-level entry, and `build`
    pointing at the real build folder), so relative paths in the examples work and their outputs land
    in the temporary folder;
  * a real `placement_server --insecure` on a free loopback port stands for `localhost:50051`, which is
    replaced by its address;
  * `PATH` starts with a virtualenv (made with `--system-site-packages`, `pip install ./client/python`
    done), then the folders of `placement_server`, `placementctl` and `placement_offline`;
  * `HOME` is a fresh folder; pip runs offline (PIP_NO_INDEX).
Shell examples run with `bash -euo pipefail`, Python examples with the virtualenv's python; each must
exit 0 within EXAMPLE_TIMEOUT seconds.

Example files: every `client/python/examples/*.py` must show how to run it in its docstring, as a line
`python3 client/python/examples/NAME.py ...` (continued with trailing backslashes); that command is run
the same way. New examples (and new README sections) are picked up without touching this test.
"""
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

SOURCE_DIR = Path(os.environ.get("PLACEMENT_SOURCE_DIR", Path(__file__).resolve().parents[2]))
BUILD_DIR = os.environ.get("PLACEMENT_BUILD_DIR", "")
EXAMPLE_TIMEOUT = 300
RUN_LANGUAGES = {"", "sh", "bash", "shell", "console", "python"}
MARKER = re.compile(r"<!--\s*example:\s*not run:\s*(.+?)\s*-->")
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([^\s`]*)")
# A command that builds or runs the project's own tests or benchmarks.
BUILD_OR_TEST = re.compile(
    r"^(\w+=\S*\s+)*(ninja|cmake|ctest|build[-\w]*/\S+|bash tests/run_tests\.sh|bash deploy/run_local\.sh)(\s|$)")
SKIPPED_TREES = {".git", "node_modules"}

sys.path.insert(0, str(SOURCE_DIR / "client" / "python" / "tests"))
from conftest import ServerProcess  # noqa: E402  (the Python client tests' real-server fixture)


# ---- finding the examples ----------------------------------------------------------------------

class Block:
    def __init__(self, path, line, language, text, marker):
        self.path, self.line, self.language, self.text, self.marker = path, line, language, text, marker

    @property
    def id(self):
        return f"{self.path}:{self.line}"


def readme_files():
    listed = subprocess.run(["git", "-C", str(SOURCE_DIR), "ls-files", "*README*.md"],
                            capture_output=True, text=True)
    if listed.returncode == 0 and listed.stdout.strip():
        return sorted(listed.stdout.split())
    found = []
    for root, dirs, files in os.walk(SOURCE_DIR):
        dirs[:] = [d for d in dirs if d not in SKIPPED_TREES and not d.startswith("build")]
        found += [str(Path(root, f).relative_to(SOURCE_DIR)) for f in files
                  if f.startswith("README") and f.endswith(".md")]
    return sorted(found)


def parse_blocks(path, text):
    """The fenced blocks of one Markdown file, with the marker before each (or None)."""
    blocks, lines = [], text.split("\n")
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        indent, fence, language = match.groups()
        start = i
        body = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
            i += 1
        i += 1
        before = start - 1
        while before >= 0 and not lines[before].strip():
            before -= 1
        marker = MARKER.search(lines[before]) if before >= 0 else None
        blocks.append(Block(path, start + 1, language.lower(), "\n".join(body),
                            marker.group(1) if marker else None))
    return blocks


def commands(text):
    """The commands of a shell block: comments dropped, continuations joined, `&&` chains split."""
    joined, pending = [], ""
    for line in text.split("\n"):
        stripped = line.split(" #")[0].rstrip() if not line.lstrip().startswith("#") else ""
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        whole = (pending + stripped).strip()
        pending = ""
        if whole:
            joined += [part.strip() for part in whole.split("&&") if part.strip()]
    return joined


def only_builds_or_tests(block):
    found = commands(block.text)
    return bool(found) and all(BUILD_OR_TEST.match(command) for command in found)


def all_blocks():
    blocks = []
    for path in readme_files():
        blocks += parse_blocks(path, (SOURCE_DIR / path).read_text(encoding="utf-8"))
    return blocks


def example_blocks():
    return [b for b in all_blocks() if b.language in RUN_LANGUAGES]


def example_files():
    return sorted((SOURCE_DIR / "client" / "python" / "examples").glob("*.py"))


def docstring_command(path):
    """The `python3 client/python/examples/NAME.py ...` command in the file's docstring, or None."""
    lines = path.read_text(encoding="utf-8").split("\n")
    wanted = f"python3 client/python/examples/{path.name}"
    for index, line in enumerate(lines):
        if line.strip().startswith(wanted):
            command = line.strip()
            while command.endswith("\\") and index + 1 < len(lines):
                index += 1
                command = command[:-1].rstrip() + " " + lines[index].strip()
            return command
    return None


# ---- the setup a reader has --------------------------------------------------------------------

@pytest.fixture(scope="session")
def workplace(tmp_path_factory):
    """(working directory, environment, server address) for the examples."""
    binaries = {name: os.environ.get(var) for name, var in (
        ("placement_server", "PLACEMENT_SERVER_BINARY"), ("placementctl", "PLACEMENTCTL_BINARY"),
        ("placement_offline", "PLACEMENT_OFFLINE_BINARY"))}
    missing = [name for name, path in binaries.items() if not path or not Path(path).exists()]
    if missing or not BUILD_DIR:
        pytest.skip(f"run through ctest (binaries not given: {missing or 'PLACEMENT_BUILD_DIR'})")
    root = tmp_path_factory.mktemp("readme")
    work = root / "repo"
    work.mkdir()
    for entry in SOURCE_DIR.iterdir():
        if entry.name in SKIPPED_TREES or entry.name.startswith("build"):
            continue
        (work / entry.name).symlink_to(entry)
    (work / "build").symlink_to(Path(BUILD_DIR).resolve())
    home = root / "home"
    home.mkdir()

    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PIP_", "VIRTUAL_ENV"))}
    env.update(HOME=str(home), PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1",
               PYTHONDONTWRITEBYTECODE="1")
    venv = root / "venv"
    made = subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", str(venv)],
                          capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, f"python3 -m venv: {made.stderr} (python3-venv installed?)"
    installed = subprocess.run([str(venv / "bin" / "pip"), "install", str(SOURCE_DIR / "client" / "python")],
                               capture_output=True, text=True, timeout=300, env=env, cwd=root)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    tool_dirs = sorted({str(Path(path).resolve().parent) for path in binaries.values()})
    env["PATH"] = os.pathsep.join([str(venv / "bin"), *tool_dirs, env.get("PATH", "/usr/bin:/bin")])
    env["VIRTUAL_ENV"] = str(venv)

    server = ServerProcess(binaries["placement_server"])
    yield work, env, server.address, venv / "bin" / "python"
    server.stop()


def run(command, work, env, timeout=EXAMPLE_TIMEOUT):
    completed = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True,
                               timeout=timeout, stdin=subprocess.DEVNULL)
    report = (f"exit {completed.returncode}\n--- stdout\n{completed.stdout[-4000:]}\n"
              f"--- stderr\n{completed.stderr[-4000:]}")
    return completed.returncode, report


# ---- the tests ---------------------------------------------------------------------------------

BLOCKS = example_blocks()


def test_every_fence_is_classified():
    """The parser sees every fence of every README (an unclosed fence would swallow the rest)."""
    for path in readme_files():
        text = (SOURCE_DIR / path).read_text(encoding="utf-8")
        fences = sum(1 for line in text.split("\n") if FENCE.match(line))
        assert fences == 2 * len(parse_blocks(path, text)), f"{path}: unbalanced code fences"


def test_there_are_examples_to_run():
    runnable = [b for b in BLOCKS if b.marker is None and not only_builds_or_tests(b)]
    assert len(runnable) >= 5, [b.id for b in runnable]
    assert example_files(), "client/python/examples/*.py"


@pytest.mark.parametrize("block", BLOCKS, ids=[b.id for b in BLOCKS])
def test_readme_example_runs_as_written(block, workplace):
    if block.marker is not None:
        pytest.skip(f"not run: {block.marker}")
    if block.language != "python" and only_builds_or_tests(block):
        pytest.skip("builds or runs the project's own tests/benchmarks (ctest and CI run them)")
    work, env, address, python = workplace
    text = block.text.replace("localhost:50051", address)
    if block.language == "python":
        code, report = run([str(python), "-c", text], work, env)
    else:
        code, report = run(["bash", "-euo", "pipefail", "-c", text], work, env)
    assert code == 0, f"{block.id} ({block.language or 'no language'}):\n{text}\n{report}"


@pytest.mark.parametrize("example", example_files(), ids=[p.name for p in example_files()])
def test_example_file_runs_as_its_docstring_says(example, workplace):
    command = docstring_command(example)
    assert command, (f"{example.name}: its docstring must show how to run it, as a line "
                     f"`python3 client/python/examples/{example.name} ...`")
    work, env, address, _ = workplace
    command = command.replace("localhost:50051", address)
    code, report = run(["bash", "-euo", "pipefail", "-c", command], work, env)
    assert code == 0, f"{command}\n{report}"

"""Checks the Dockerfile's runtime stage against the binaries it ships:

- every shared library `ldd` resolves for each binary belongs (dpkg -S) to a Debian package that the
  runtime stage installs, or that one of those pulls in (Depends/Pre-Depends, recursively, as
  installed on this Debian 12 machine), or that debian:bookworm-slim already has (priority
  `required` packages and apt, with their dependencies);
- the image's shape: bookworm build stage → bookworm-slim runtime, a numeric non-root USER, exec-form
  ENTRYPOINT, STOPSIGNAL SIGTERM, HEALTHCHECK via `placementctl ... health`, and every shipped binary
  copied from the build stage.

Skips (exit 77) when ldd or dpkg-query is missing (not a Debian-like system).

usage: runtime_packages_test.py DOCKERFILE BINARY...
"""
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploy_checks  # noqa: E402


def dockerfile_stages(text):
    """[(from_line, [instructions])] with line continuations joined."""
    joined = re.sub(r"\\\n", " ", text)
    stages = []
    for line in joined.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.upper().startswith("FROM "):
            stages.append((line, []))
        elif stages:
            stages[-1][1].append(line)
    return stages


def installed_packages(instructions):
    """Packages named after `apt-get install` in RUN instructions."""
    packages = set()
    for instruction in instructions:
        if not instruction.upper().startswith("RUN "):
            continue
        for command in re.split(r"&&|;|\|", instruction[4:]):
            words = command.split()
            if len(words) >= 2 and words[0] == "apt-get" and "install" in words:
                after = words[words.index("install") + 1:]
                packages.update(w for w in after if not w.startswith("-"))
    return packages


def path_variants(path):
    """`path`, its real path, and their twins across the /usr merge (dpkg knows only one of them)."""
    variants = []
    for candidate in (path, os.path.realpath(path)):
        twin = candidate[4:] if candidate.startswith("/usr/") else "/usr" + candidate
        variants.extend([candidate, twin])
    return variants


def packages_of(paths):
    """{path: Debian package owning it (or None)}, with one `dpkg -S` run."""
    variants = {path: path_variants(path) for path in paths}
    everything = sorted({v for vs in variants.values() for v in vs})
    result = subprocess.run(["dpkg", "-S"] + everything, capture_output=True, text=True)
    owner = {}
    for line in result.stdout.splitlines():
        packages, _, owned = line.partition(": ")
        owner[owned.strip()] = packages.split(",")[0].split(":")[0].strip()
    return {path: next((owner[v] for v in vs if v in owner), None) for path, vs in variants.items()}


class Dependencies:
    """Depends + Pre-Depends of every installed package, read with one dpkg-query run."""

    def __init__(self):
        result = subprocess.run(
            ["dpkg-query", "-W", "-f=${Package}\t${Priority}\t${Depends}, ${Pre-Depends}\n"],
            capture_output=True, text=True, check=True)
        self.depends = {}
        self.priority = {}
        for line in result.stdout.splitlines():
            package, priority, depends = (line.split("\t") + ["", ""])[:3]
            names = set()
            for clause in depends.split(","):
                for alternative in clause.split("|"):
                    name = alternative.strip().split(" ")[0].split(":")[0]
                    if name:
                        names.add(name)
            self.depends[package] = names
            self.priority[package] = priority

    def closure(self, packages):
        seen, todo = set(), list(packages)
        while todo:
            package = todo.pop()
            if package in seen:
                continue
            seen.add(package)
            todo.extend(self.depends.get(package, set()) - seen)
        return seen

    def base_image(self):
        """What debian:bookworm-slim (debootstrap minbase) holds: priority-required packages and apt."""
        required = {p for p, priority in self.priority.items() if priority == "required"}
        return self.closure(required | {"apt"})


def seconds_of(match, default=None):
    """"1.5s" / "500ms" (group 1 of `match`) in seconds; `default` without a match."""
    if match is None:
        return default
    text = match.group(1).strip('",')
    if text.endswith("ms"):
        return float(text[:-2]) / 1000
    if text.endswith("s"):
        return float(text[:-1])
    return default


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 64
    dockerfile, binaries = sys.argv[1], sys.argv[2:]
    for tool in ("ldd", "dpkg", "dpkg-query"):
        if shutil.which(tool) is None:
            deploy_checks.skip(f"{tool} is not available")
    c = deploy_checks.Checker()
    with open(dockerfile, encoding="utf-8") as file:
        text = file.read()
    stages = dockerfile_stages(text)
    if not c.check(len(stages) >= 2, "Dockerfile: expected a build stage and a runtime stage"):
        c.finish("runtime packages")
    c.check(re.match(r"FROM debian:bookworm(\s|$)", stages[0][0]) is not None,
            f"Dockerfile: build stage is `{stages[0][0]}`, expected debian:bookworm")
    runtime_from, runtime = stages[-1]
    c.check(runtime_from.startswith("FROM debian:bookworm-slim"),
            f"Dockerfile: runtime stage is `{runtime_from}`, expected debian:bookworm-slim")
    user = [i.split()[1] for i in runtime if i.upper().startswith("USER ")]
    c.check(bool(user) and re.fullmatch(r"[1-9][0-9]*(:[0-9]+)?", user[-1]) is not None,
            f"Dockerfile: USER {user} should be a numeric non-root uid")
    entrypoint = [i for i in runtime if i.upper().startswith("ENTRYPOINT ")]
    c.check(bool(entrypoint) and entrypoint[-1].split(None, 1)[1].startswith("["),
            "Dockerfile: ENTRYPOINT must use the exec (JSON) form so SIGTERM reaches the server")
    c.check(any(i.upper() == "STOPSIGNAL SIGTERM" for i in runtime), "Dockerfile: no STOPSIGNAL SIGTERM")
    healthcheck = [i for i in runtime if i.upper().startswith("HEALTHCHECK ")]
    c.check(bool(healthcheck) and "placementctl" in healthcheck[-1] and "health" in healthcheck[-1],
            "Dockerfile: HEALTHCHECK should run `placementctl ... health`")
    if healthcheck:
        # placementctl waits --connect_timeout before --timeout starts: both within HEALTHCHECK --timeout.
        hc = healthcheck[-1]
        limit = seconds_of(re.search(r"--timeout=(\S+)", hc.split("CMD", 1)[0]))
        command = hc.split("CMD", 1)[-1]
        connect = seconds_of(re.search(r"--connect_timeout=([0-9.]+m?s)", command), default=5.0)
        call = seconds_of(re.search(r"--timeout=([0-9.]+m?s)", command), default=600.0)
        c.check(limit is not None and connect + call <= limit,
                f"Dockerfile: HEALTHCHECK --timeout={limit}s but placementctl may take "
                f"--connect_timeout {connect}s + --timeout {call}s")
    cmd = " ".join(i for i in runtime if i.upper().startswith("CMD "))
    grace = seconds_of(re.search(r"--shutdown_grace=([0-9.]+m?s)", cmd), default=10.0)
    drain = seconds_of(re.search(r"--shutdown_drain_delay=([0-9.]+m?s)", cmd), default=0.0)
    # `docker stop` sends SIGKILL after 10 s; the server answers waiting calls 0.5 s after the grace.
    c.check(grace + drain + 0.5 < 10.0,
            f"Dockerfile: CMD's --shutdown_grace {grace}s + drain {drain}s does not end before "
            "docker stop's 10 s SIGKILL")
    copies = " ".join(i for i in runtime if i.upper().startswith("COPY "))
    for binary in binaries:
        c.check(os.path.basename(binary) in copies,
                f"Dockerfile: the runtime stage does not copy {os.path.basename(binary)}")

    listed = installed_packages(runtime)
    deps = Dependencies()
    base = deps.base_image()
    covered = deps.closure(listed) | base
    libraries = []  # (binary, library path)
    for binary in binaries:
        if not os.access(binary, os.X_OK):
            deploy_checks.skip(f"{binary} is not built")
        result = subprocess.run(["ldd", binary], capture_output=True, text=True)
        c.check(result.returncode == 0, f"ldd {binary} failed: {result.stderr}")
        for line in result.stdout.splitlines():
            if "not found" in line:
                c.check(False, f"{os.path.basename(binary)}: {line.strip()}")
                continue
            match = re.search(r"=>\s+(/\S+)", line) or re.match(r"\s*(/\S+)", line)
            if match:  # (linux-vdso has no file)
                libraries.append((os.path.basename(binary), match.group(1)))
    owners = packages_of({path for _, path in libraries})
    needed = set()
    for binary, path in libraries:
        package = owners[path]
        if not c.check(package is not None, f"{path} belongs to no Debian package"):
            continue
        needed.add(package)
        c.check(package in covered,
                f"{binary} needs {os.path.basename(path)} from {package}, which the runtime stage "
                f"does not install")
    unneeded = sorted(p for p in listed - needed - {"ca-certificates"}
                      if not (deps.closure({p}) & needed - base))
    if unneeded:
        print(f"note: runtime packages no shipped binary links: {' '.join(unneeded)}")
    print(f"libraries from: {' '.join(sorted(needed))}")
    c.finish("runtime packages")


if __name__ == "__main__":
    sys.exit(main())

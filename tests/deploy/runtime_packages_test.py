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


def package_of(path):
    """The Debian package owning `path` (tries the /usr-merged twin too), or None."""
    candidates = [path, os.path.realpath(path)]
    for candidate in list(candidates):
        if candidate.startswith("/usr/"):
            candidates.append(candidate[4:])
        else:
            candidates.append("/usr" + candidate)
    for candidate in candidates:
        result = subprocess.run(["dpkg", "-S", candidate], capture_output=True, text=True)
        if result.returncode == 0:
            return result.stdout.split(":", 1)[0].strip()
    return None


class Dependencies:
    def __init__(self):
        self.cache = {}

    def direct(self, package):
        if package not in self.cache:
            result = subprocess.run(
                ["dpkg-query", "-W", "-f=${Depends}, ${Pre-Depends}", package],
                capture_output=True, text=True)
            names = set()
            if result.returncode == 0:
                for clause in result.stdout.split(","):
                    for alternative in clause.split("|"):
                        name = alternative.strip().split(" ")[0].split(":")[0]
                        if name:
                            names.add(name)
            self.cache[package] = names
        return self.cache[package]

    def closure(self, packages):
        seen, todo = set(), list(packages)
        while todo:
            package = todo.pop()
            if package in seen:
                continue
            seen.add(package)
            todo.extend(self.direct(package) - seen)
        return seen


def base_image_packages():
    """What debian:bookworm-slim (debootstrap minbase) holds: priority-required packages and apt."""
    result = subprocess.run(["dpkg-query", "-W", "-f=${Package} ${Priority}\n"], capture_output=True,
                            text=True, check=True)
    required = {line.split()[0] for line in result.stdout.splitlines()
                if len(line.split()) == 2 and line.split()[1] == "required"}
    return required | {"apt"}


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
    copies = " ".join(i for i in runtime if i.upper().startswith("COPY "))
    for binary in binaries:
        c.check(os.path.basename(binary) in copies,
                f"Dockerfile: the runtime stage does not copy {os.path.basename(binary)}")

    listed = installed_packages(runtime)
    deps = Dependencies()
    base = deps.closure(base_image_packages())
    covered = deps.closure(listed) | base
    needed = set()
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
            if not match:
                continue  # linux-vdso
            package = package_of(match.group(1))
            if not c.check(package is not None, f"{match.group(1)} belongs to no Debian package"):
                continue
            needed.add(package)
            c.check(package in covered,
                    f"{os.path.basename(binary)} needs {os.path.basename(match.group(1))} from "
                    f"{package}, which the runtime stage does not install")
    unneeded = sorted(p for p in listed - needed - {"ca-certificates"}
                      if not (deps.closure({p}) & needed - base))
    if unneeded:
        print(f"note: runtime packages no shipped binary links: {' '.join(unneeded)}")
    print(f"libraries from: {' '.join(sorted(needed))}")
    c.finish("runtime packages")


if __name__ == "__main__":
    sys.exit(main())

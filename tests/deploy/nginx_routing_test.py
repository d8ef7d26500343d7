"""Runs the real nginx with deploy/nginx/placement.conf in front of three stub gRPC replicas and checks
which replica each call reaches:

- Place and SubmitPlacement with the same x-placement-digest reach the same replica every time, and
  different digests spread over the replicas (cache affinity);
- GetOperation, WaitOperation, WatchOperation and CancelOperation sent with the digest of their
  SubmitPlacement reach the replica that took the SubmitPlacement (it holds the operation in memory;
  without --redis nobody else knows it);
- calls without the header are spread over every replica (round robin).

The stubs answer every PlacementService method with their own name (raw bytes, no protobuf), so the
test needs nginx and python3-grpcio (Debian's /usr/bin/python3), not the placement binaries. The site
is used as nginx_process.cc (tests/e2e) uses it: `server` lines swapped for the stubs, `listen` for a
free port on 127.0.0.1, wrapped in an nginx.conf whose writable paths are in a temp directory.

usage: nginx_routing_test.py SOURCE_DIR
"""
import concurrent.futures
import os
import shutil
import socket
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploy_checks  # noqa: E402

try:
    import grpc
except ImportError:
    deploy_checks.skip("python3-grpcio is not installed for this interpreter")

SERVICE = "placement.v1.PlacementService"
UNARY_METHODS = ("Place", "SubmitPlacement", "GetOperation", "WaitOperation", "CancelOperation")
OPERATION_METHODS = ("GetOperation", "WaitOperation", "WatchOperation", "CancelOperation")
TIMEOUT_SECONDS = 10


def find_nginx():
    configured = os.environ.get("PLACEMENT_NGINX")
    if configured:
        return configured if os.access(configured, os.X_OK) else None
    if os.access("/usr/sbin/nginx", os.X_OK):
        return "/usr/sbin/nginx"
    return shutil.which("nginx")


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_stub(name):
    """A gRPC server on 127.0.0.1 answering every PlacementService method with `name`."""
    answer = name.encode()

    def unary(request, context):
        return answer

    def streaming(request, context):
        yield answer

    handlers = {method: grpc.unary_unary_rpc_method_handler(unary) for method in UNARY_METHODS}
    handlers["WatchOperation"] = grpc.unary_stream_rpc_method_handler(streaming)
    server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, port


def nginx_config(site, directory, listen_port, stub_ports):
    """The shipped site with its replicas and listen address swapped, inside a root-less nginx.conf."""
    lines, servers_written, listens = [], False, 0
    for line in site.splitlines():
        stripped = line.strip()
        if stripped.startswith("server ") and stripped.endswith(";"):
            if not servers_written:
                lines += [f"    server 127.0.0.1:{port} max_fails=1 fail_timeout=10s;" for port in stub_ports]
                servers_written = True
            continue
        if stripped.startswith("listen "):
            lines.append(f"    listen 127.0.0.1:{listen_port} http2;")
            listens += 1
            continue
        lines.append(line)
    if not servers_written or listens != 1:
        raise RuntimeError("placement.conf: expected `server HOST:PORT ...;` lines and one `listen`")
    temp_paths = "".join(f"  {kind}_temp_path {directory}/{kind};\n"
                         for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    return (f"daemon off;\nmaster_process on;\nworker_processes 1;\npid {directory}/nginx.pid;\n"
            f"error_log {directory}/error.log warn;\nevents {{ worker_connections 512; }}\n"
            f"http {{\n  access_log off;\n{temp_paths}" + "\n".join(lines) + "\n}\n")


class Router:
    """Calls PlacementService methods through nginx and says which stub answered."""

    def __init__(self, port):
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        grpc.channel_ready_future(self.channel).result(timeout=TIMEOUT_SECONDS)

    def call(self, method, digest=None):
        metadata = [("x-placement-digest", digest)] if digest is not None else None
        path = f"/{SERVICE}/{method}"
        if method == "WatchOperation":
            stream = self.channel.unary_stream(path)(b"", metadata=metadata, timeout=TIMEOUT_SECONDS)
            return b"".join(stream).decode()
        return self.channel.unary_unary(path)(b"", metadata=metadata, timeout=TIMEOUT_SECONDS).decode()


def check_routing(router, stub_names, c):
    digests = [f"{i:064x}" for i in range(1, 25)]

    # Cache affinity: one replica per digest, the same for Place and SubmitPlacement, every time.
    home = {}
    for repeat in range(3):
        for digest in digests:
            for method in ("Place", "SubmitPlacement"):
                replica = router.call(method, digest)
                c.check(home.setdefault(digest, replica) == replica,
                        f"{method} with digest {digest[-4:]} reached {replica}, before {home[digest]}")
    c.check(len(set(home.values())) >= 2,
            f"{len(digests)} digests all hashed to {set(home.values())}: the ring does not spread")

    # Operation calls that carry their submission's digest reach the replica holding the operation.
    for digest in digests[:8]:
        for method in OPERATION_METHODS:
            replica = router.call(method, digest)
            c.check(replica == home[digest],
                    f"{method} with digest {digest[-4:]} reached {replica}, not {home[digest]} "
                    "(the replica of its SubmitPlacement)")

    # Without the header: round robin over every replica.
    for method in ("Place",) + OPERATION_METHODS:
        reached = {router.call(method) for _ in range(3 * len(stub_names))}
        c.check(reached == set(stub_names),
                f"{method} without x-placement-digest reached only {sorted(reached)} of {stub_names}")


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 64
    nginx = find_nginx()
    if nginx is None:
        deploy_checks.skip("nginx is not installed (Debian package nginx)")
    with open(os.path.join(sys.argv[1], "deploy", "nginx", "placement.conf"), encoding="utf-8") as file:
        site = file.read()
    c = deploy_checks.Checker()
    stub_names = ["replica-a", "replica-b", "replica-c"]
    stubs = [start_stub(name) for name in stub_names]
    process = None
    with tempfile.TemporaryDirectory(prefix="placement_nginx_routing_") as directory:
        # Root's nginx runs its workers as an unprivileged user, which writes its temp files here.
        os.chmod(directory, 0o755)
        try:
            port = free_port()
            config_path = os.path.join(directory, "nginx.conf")
            with open(config_path, "w", encoding="utf-8") as file:
                file.write(nginx_config(site, directory, port, [p for _, p in stubs]))
            test = subprocess.run([nginx, "-t", "-p", directory, "-e", f"{directory}/error.log",
                                   "-c", config_path], capture_output=True, text=True, timeout=60)
            if not c.check(test.returncode == 0, f"nginx -t:\n{test.stderr}"):
                c.finish("nginx routing")
            process = subprocess.Popen([nginx, "-p", directory, "-e", f"{directory}/error.log",
                                        "-c", config_path], stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL)
            try:
                router = Router(port)
            except grpc.FutureTimeoutError:
                with open(f"{directory}/error.log", encoding="utf-8", errors="replace") as log:
                    c.check(False, f"nginx did not accept gRPC on 127.0.0.1:{port}:\n{log.read()}")
                c.finish("nginx routing")
            check_routing(router, stub_names, c)
            router.channel.close()
        finally:
            if process is not None:
                process.terminate()
                process.wait(timeout=TIMEOUT_SECONDS)
            for server, _ in stubs:
                server.stop(grace=None)
    c.finish("nginx routing")


if __name__ == "__main__":
    sys.exit(main())

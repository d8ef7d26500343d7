"""Checks deploy/docker-compose.yml and the files it mounts, without Docker:

- the YAML parses (and `docker-compose config` accepts it, when installed) and has the services of
  the stack (two replicas, redis, router, prometheus, grafana);
- the replicas' flags are flags placement_server accepts, their ports are the ones they expose, --redis
  names the redis service, and stop_grace_period covers --shutdown_drain_delay + --shutdown_grace;
- the redis service's command, run by the real redis-server (when installed) with the files it
  mounts, keeps nothing on disk and evicts only keys with an expiry (and --redis_ttl is > 0);
- the router's nginx config sends to those replicas on their gRPC port, and listens where the router
  publishes;
- Prometheus scrapes every replica on its metrics port, its rule files exist, and (when promtool is
  installed) `promtool check config` passes;
- every metric named in the alerts and the Grafana dashboard is one the server exports, and the
  Grafana datasource points at the prometheus service;
- the alerts and panels the deploy guide relies on exist: among them the "Shared operations" row with
  a panel for each metric of the shared operations, and alerts on failing lease renewals, jobs taken
  over and the fallback to local operations (each with a severity, a summary and a description).

usage: compose_test.py SOURCE_DIR PLACEMENT_SERVER_BINARY
"""
import json
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploy_checks  # noqa: E402

try:
    import yaml
except ImportError:
    deploy_checks.skip("python3-yaml is not installed")

REPLICAS = ("placement-a", "placement-b")

# Alerts deploy/README.md names → a metric each must watch.
REQUIRED_ALERTS = {
    "PlacementReplicaDown": "up",
    "PlacementHighErrorRate": "placement_requests_total",
    "PlacementPlaceLatencyHigh": "placement_request_duration_seconds_bucket",
    "PlacementQueueSaturated": "placement_queue_depth",
    "PlacementAdmissionRejecting": "placement_admission_rejections_total",
    "PlacementRedisErrors": "placement_redis_errors_total",
    "PlacementRedisUnavailable": "placement_redis_lookups_total",
    "PlacementOperationLeaseRenewalsFailing": "placement_operation_lease_renewals_failed_total",
    "PlacementOperationsTakenOver": "placement_operations_taken_over_total",
    "PlacementSharedOperationsFallback": "placement_shared_operations_fallback_total",
    "PlacementRedisOutOfMemory": "placement_shared_operations_redis_errors_total",
}


def load_yaml(path):
    with open(path, encoding="utf-8") as file:
        return yaml.safe_load(file)


def container_ports(service):
    """Ports a compose service exposes or publishes (container side)."""
    ports = {int(p) for p in service.get("expose", [])}
    for published in service.get("ports", []):
        ports.add(int(str(published).split(":")[-1].split("/")[0]))
    return ports


def mounted(deploy_dir, service, target_prefix):
    """Host paths (resolved) of `service`'s volumes mounted at or under target_prefix."""
    paths = []
    for volume in service.get("volumes", []):
        host, target = volume.split(":")[:2]
        if target.startswith(target_prefix):
            paths.append((os.path.normpath(os.path.join(deploy_dir, host)), target))
    return paths


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 64
    source_dir, server = sys.argv[1], sys.argv[2]
    deploy_dir = os.path.join(source_dir, "deploy")
    c = deploy_checks.Checker()
    flag_names = deploy_checks.server_flags(server)
    exported = deploy_checks.exported_metric_names(source_dir)

    compose_path = os.path.join(deploy_dir, "docker-compose.yml")
    compose = load_yaml(compose_path)
    # docker-compose (Debian package, 1.29) validates the file against the Compose schema offline.
    docker_compose = shutil.which("docker-compose")
    if docker_compose:
        result = subprocess.run([docker_compose, "-f", compose_path, "config", "-q"],
                                capture_output=True, text=True, timeout=120)
        c.check(result.returncode == 0, f"docker-compose config:\n{result.stdout}{result.stderr}")
    else:
        print("note: docker-compose not installed; the Compose schema is not checked")
    services = compose.get("services", {})
    for name in REPLICAS + ("redis", "router", "prometheus", "grafana"):
        c.check(name in services, f"compose: no service {name}")

    # Replicas: flags, ports, shutdown budget, Redis address.
    replica_ports = {}
    for name in REPLICAS:
        service = services.get(name, {})
        flags = deploy_checks.parse_flag_lines("\n".join(service.get("command", [])))
        for flag in flags:
            c.check(flag in flag_names, f"{name}: placement_server has no flag --{flag}")
        ports = container_ports(service)
        grpc_port, metrics_port = int(flags.get("port", 50051)), int(flags.get("metrics_port", 9464))
        c.check(grpc_port in ports and metrics_port in ports,
                f"{name}: exposes {sorted(ports)}, flags say {grpc_port} and {metrics_port}")
        replica_ports[name] = (grpc_port, metrics_port)
        redis_host, _, redis_port = flags.get("redis", "").rpartition(":")
        c.check(redis_host in services and redis_port.isdigit()
                and int(redis_port) in container_ports(services.get(redis_host, {})),
                f"{name}: --redis={flags.get('redis')} is not a compose service and port")
        stop = deploy_checks.duration_seconds(service.get("stop_grace_period", "10s"))
        drain = deploy_checks.duration_seconds(flags.get("shutdown_drain_delay", "0s"))
        grace = deploy_checks.duration_seconds(flags.get("shutdown_grace", "10s"))
        c.check(stop > drain + grace, f"{name}: stop_grace_period {stop}s <= drain {drain}s + grace {grace}s")
        c.check(str(service.get("user", "")).split(":")[0] not in ("", "0", "root"),
                f"{name}: runs as root")

    # Redis: what the real redis-server makes of the service's command and mounted config.
    redis = services.get("redis", {})
    command = redis.get("command", [])
    if c.check(command[:1] == ["redis-server"], "redis: command is not redis-server ..."):
        files = dict((target, host) for host, target in mounted(deploy_dir, redis, "/"))
        arguments = [files.get(a, a) for a in command[1:]]
        try:
            config = deploy_checks.effective_redis_config(
                arguments, ["appendonly", "save", "maxmemory", "maxmemory-policy"])
        except RuntimeError as error:
            config = {}
            c.check(False, f"redis: {error}")
        if config is None:
            print("note: redis-server/redis-cli not installed; the redis service's settings are not checked")
        elif config:
            c.check(config["appendonly"] == "no" and config["save"] == "",
                    f"redis: persists (appendonly {config['appendonly']}, save {config['save']!r})")
            c.check((config["maxmemory-policy"] or "").startswith("volatile-"),
                    f"redis: maxmemory-policy {config['maxmemory-policy']} may evict keys without expiry")
            c.check(int(config["maxmemory"] or 0) > 0, "redis: no maxmemory")
        for name in REPLICAS:
            flags = deploy_checks.parse_flag_lines("\n".join(services.get(name, {}).get("command", [])))
            c.check(deploy_checks.duration_seconds(flags.get("redis_ttl", "24h")) > 0,
                    f"{name}: --redis_ttl=0 stores results without expiry, which Redis then never evicts")

    # Router: the shipped nginx site, its upstreams and its listen port.
    router = services.get("router", {})
    confs = mounted(deploy_dir, router, "/etc/nginx/")
    if c.check(len(confs) == 1 and os.path.isfile(confs[0][0]), "router: mounts no nginx config file"):
        with open(confs[0][0], encoding="utf-8") as file:
            conf = file.read()
        upstreams = re.findall(r"^\s*server\s+([A-Za-z0-9_.-]+):(\d+)", conf, re.MULTILINE)
        c.check({host for host, _ in upstreams} == set(REPLICAS),
                f"router: upstream servers {upstreams} are not the replicas {REPLICAS}")
        for host, port in upstreams:
            c.check(host in replica_ports and int(port) == replica_ports[host][0],
                    f"router: {host}:{port} is not that replica's gRPC port")
        c.check("hash $http_x_placement_digest consistent;" in conf,
                "router: does not hash on x-placement-digest")
        listens = [int(p) for p in re.findall(r"^\s*listen\s+(?:[0-9.]+:)?(\d+)", conf, re.MULTILINE)]
        c.check(bool(listens) and all(p in container_ports(router) for p in listens),
                f"router: listens on {listens}, publishes {sorted(container_ports(router))}")

    # Prometheus: targets, rule files, promtool.
    prometheus = services.get("prometheus", {})
    files = dict((target, host) for host, target in mounted(deploy_dir, prometheus, "/etc/prometheus/"))
    alerts = {}
    config_path = files.get("/etc/prometheus/prometheus.yml")
    if c.check(config_path is not None and os.path.isfile(config_path), "prometheus: no prometheus.yml mounted"):
        config = load_yaml(config_path)
        targets = [t for job in config.get("scrape_configs", []) for sc in job.get("static_configs", [])
                   for t in sc.get("targets", [])]
        for name, (_, metrics_port) in replica_ports.items():
            c.check(f"{name}:{metrics_port}" in targets, f"prometheus: does not scrape {name}:{metrics_port}")
        for rule_file in config.get("rule_files", []):
            in_container = os.path.normpath(os.path.join("/etc/prometheus", rule_file))
            c.check(in_container in files and os.path.isfile(files[in_container]),
                    f"prometheus: rule file {rule_file} is not mounted")
            if in_container in files:
                rules = load_yaml(files[in_container])
                for group in rules.get("groups", []):
                    for rule in group.get("rules", []):
                        for metric in deploy_checks.metric_names_in_expression(rule["expr"]):
                            c.check(metric in exported,
                                    f"alert {rule.get('alert')}: the server exports no {metric}")
                        if "alert" in rule:
                            alerts[rule["alert"]] = rule
        for name, metric in REQUIRED_ALERTS.items():
            rule = alerts.get(name)
            if not c.check(rule is not None, f"alerts: no {name}"):
                continue
            c.check(re.search(rf"\b{metric}\b", rule["expr"]) is not None,
                    f"alert {name}: does not watch {metric}")
            c.check(rule.get("labels", {}).get("severity") in ("page", "warn"),
                    f"alert {name}: no severity")
            for annotation in ("summary", "description"):
                c.check(bool(rule.get("annotations", {}).get(annotation)),
                        f"alert {name}: no {annotation}")
        promtool = shutil.which("promtool")
        if promtool:
            result = subprocess.run([promtool, "check", "config", config_path], capture_output=True,
                                    text=True, timeout=60)
            c.check(result.returncode == 0, f"promtool check config:\n{result.stdout}{result.stderr}")
        else:
            print("note: promtool not installed; prometheus.yml and alerts.yml not checked by promtool")

    # Grafana: datasource and dashboards.
    grafana = services.get("grafana", {})
    mounts = dict((target, host) for host, target in mounted(deploy_dir, grafana, "/"))
    provisioning = mounts.get("/etc/grafana/provisioning")
    dashboards = mounts.get("/var/lib/grafana/dashboards")
    if c.check(provisioning and os.path.isdir(provisioning), "grafana: no provisioning directory"):
        sources = load_yaml(os.path.join(provisioning, "datasources", "prometheus.yml"))
        urls = [s.get("url", "") for s in sources.get("datasources", [])]
        port = next(iter(container_ports(prometheus)), 9090)
        c.check(f"http://prometheus:{port}" in urls, f"grafana: datasource urls {urls}")
        providers = load_yaml(os.path.join(provisioning, "dashboards", "placement.yml"))
        paths = [p["options"]["path"] for p in providers.get("providers", [])]
        c.check("/var/lib/grafana/dashboards" in paths, f"grafana: dashboard provider paths {paths}")
    if c.check(dashboards and os.path.isdir(dashboards), "grafana: no dashboards directory"):
        found = [f for f in os.listdir(dashboards) if f.endswith(".json")]
        c.check(bool(found), "grafana: no dashboard JSON")
        for file_name in found:
            with open(os.path.join(dashboards, file_name), encoding="utf-8") as file:
                dashboard = json.load(file)
            titles = [p.get("title", "") for p in dashboard.get("panels", [])]
            for wanted in ("Requests", "latency", "hit ratio", "Queue depth", "Solves by algorithm"):
                c.check(any(wanted.lower() in t.lower() for t in titles),
                        f"{file_name}: no panel about {wanted!r}")
            # The "Shared operations" row, with a panel below it for every metric of the shared operations.
            rows = [p for p in dashboard.get("panels", []) if p.get("type") == "row"
                    and p.get("title") == "Shared operations"]
            if c.check(len(rows) == 1, f"{file_name}: no row \"Shared operations\""):
                row_y = rows[0]["gridPos"]["y"]
                later_rows = [p["gridPos"]["y"] for p in dashboard["panels"]
                              if p.get("type") == "row" and p["gridPos"]["y"] > row_y]
                end_y = min(later_rows, default=float("inf"))
                in_row = set()
                for panel in dashboard["panels"]:
                    if panel.get("type") != "row" and row_y < panel["gridPos"]["y"] < end_y:
                        for target in panel.get("targets", []):
                            in_row |= deploy_checks.metric_names_in_expression(target.get("expr", ""))
                for metric in sorted(deploy_checks.SHARED_OPERATION_METRICS - in_row):
                    c.check(False, f"{file_name}: no panel of row \"Shared operations\" shows {metric}")
            for panel in dashboard.get("panels", []):
                for target in panel.get("targets", []):
                    c.check(target.get("datasource", {}).get("uid") == "prometheus",
                            f"{file_name}: panel {panel.get('title')} uses another datasource")
                    for metric in deploy_checks.metric_names_in_expression(target.get("expr", "")):
                        c.check(metric in exported,
                                f"{file_name}: panel {panel.get('title')}: the server exports no {metric}")

    c.finish("compose stack")


if __name__ == "__main__":
    sys.exit(main())

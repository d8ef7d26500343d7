"""Renders deploy/k8s/overlays/{dev,prod} with `kubectl kustomize` and checks what a cluster would not:

- the objects every environment needs exist (Deployment, Service + headless Service, HPA, PDB,
  NetworkPolicy, flags ConfigMap);
- every container has readiness and liveness probes and resource requests and limits; the placement
  container's probes are native gRPC probes on its numeric gRPC port;
- terminationGracePeriodSeconds > preStop sleep + --shutdown_drain_delay + --shutdown_grace;
- the ConfigMap's flags are flags placement_server accepts (its --helpfull);
- Services, the HPA and the PDB select/target what exists;
- Redis (both overlays): every placement container gets --redis naming the headless Service of a
  one-pod `placement-redis` StatefulSet; a NetworkPolicy admits only the placement pods to it; its
  redis.conf, run through the real redis-server (when installed), has no persistence, a volatile-*
  eviction policy (so --redis_ttl must be > 0) and a maxmemory below the container's memory limit.

usage: k8s_manifests_test.py SOURCE_DIR PLACEMENT_SERVER_BINARY
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploy_checks  # noqa: E402

try:
    import yaml
except ImportError:
    deploy_checks.skip("python3-yaml is not installed")


def render(kubectl, overlay_dir):
    result = subprocess.run([kubectl, "kustomize", overlay_dir], capture_output=True, text=True,
                            timeout=120)
    if result.returncode != 0:
        raise RuntimeError(f"kubectl kustomize {overlay_dir} failed:\n{result.stderr}")
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def selects(selector, labels):
    return all(labels.get(key) == value for key, value in (selector or {}).items())


def memory_bytes(quantity):
    """A Kubernetes memory quantity ("256Mi", "4Gi", "1G", "512") → bytes."""
    units = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12,
             "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
    match = re.fullmatch(r"([0-9.]+)([A-Za-z]*)", str(quantity))
    if not match or match.group(2) not in units:
        raise ValueError(f"not a memory quantity: {quantity!r}")
    return float(match.group(1)) * units[match.group(2)]


def mounted_file(path, pod, container, config_maps):
    """(ConfigMap name, key, text) of the ConfigMap file a container sees at `path`, or None."""
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    mount = next((m for m in container.get("volumeMounts", [])
                  if path.startswith(m["mountPath"].rstrip("/") + "/")), None)
    if mount is None:
        return None
    name = volumes.get(mount["name"], {}).get("configMap", {}).get("name")
    key = os.path.relpath(path, mount["mountPath"])
    text = config_maps.get(name, {}).get("data", {}).get(key)
    return None if text is None else (name, key, text)


def container_flags(container, pod, config_maps):
    """The flags a placement container starts with: its --flagfile's lines, then its own args.
    None when the flag file is not a mounted ConfigMap key."""
    flags = {}
    for arg in container.get("args", []):
        if arg.startswith("--flagfile="):
            found = mounted_file(arg.split("=", 1)[1], pod, container, config_maps)
            if found is None:
                return None
            flags.update(deploy_checks.parse_flag_lines(found[2]))
    flags.update(deploy_checks.parse_flag_lines("\n".join(
        a for a in container.get("args", []) if not a.startswith("--flagfile="))))
    return flags


def check_redis(where, by_kind, placement, c):
    """The in-cluster Redis of deploy/k8s/components/redis and the placement pods' way to it."""
    statefulsets = {s["metadata"]["name"]: s for s in by_kind.get("StatefulSet", [])}
    services = {s["metadata"]["name"]: s for s in by_kind.get("Service", [])}
    config_maps = {m["metadata"]["name"]: m for m in by_kind.get("ConfigMap", [])}
    redis = statefulsets.get("placement-redis")
    if not c.check(redis is not None, f"{where}: no StatefulSet placement-redis"):
        return
    c.check(redis["spec"].get("replicas", 1) == 1,
            f"{where}: placement-redis must run one pod (replicas would see different data)")
    c.check(not redis["spec"].get("volumeClaimTemplates"),
            f"{where}: placement-redis claims volumes, but it persists nothing (see redis.conf)")
    redis_labels = redis["spec"]["template"]["metadata"]["labels"]
    governing = services.get(redis["spec"].get("serviceName"))
    if c.check(governing is not None,
               f"{where}: placement-redis serviceName {redis['spec'].get('serviceName')} is no Service"):
        c.check(governing["spec"].get("clusterIP") == "None", f"{where}: Redis Service is not headless")
        c.check(selects(governing["spec"].get("selector"), redis_labels),
                f"{where}: Redis Service does not select the Redis pod")

    # Every placement container points at that Service, on a port it serves.
    pod = placement["spec"]["template"]["spec"]
    placement_labels = placement["spec"]["template"]["metadata"]["labels"]
    redis_ttls = []
    for container in pod["containers"]:
        flags = container_flags(container, pod, config_maps)
        what = f"{where}: placement/{container['name']}"
        if not c.check(flags is not None, f"{what}: its --flagfile is no mounted ConfigMap key"):
            continue
        address = flags.get("redis") or ""
        host, _, port = address.rpartition(":")
        # `placement-redis[.NAMESPACE...]` or one pod's name, `placement-redis-0.placement-redis[...]`.
        parts = host.split(".")
        service_name = parts[1] if len(parts) > 1 and re.fullmatch(r"placement-redis-\d+", parts[0]) else parts[0]
        c.check(governing is not None and service_name == governing["metadata"]["name"]
                and port.isdigit() and int(port) in [p["port"] for p in governing["spec"]["ports"]],
                f"{what}: --redis={address!r} is not the Redis Service placement-redis:6379")
        redis_ttls.append(deploy_checks.duration_seconds(flags.get("redis_ttl", "24h")))

    # Only the placement pods may connect (no password, no TLS).
    policies = [p for p in by_kind.get("NetworkPolicy", [])
                if selects(p["spec"]["podSelector"].get("matchLabels"), redis_labels)]
    if c.check(bool(policies), f"{where}: no NetworkPolicy for the Redis pod"):
        for policy in policies:
            c.check("Ingress" in policy["spec"].get("policyTypes", []),
                    f"{where}: NetworkPolicy {policy['metadata']['name']} does not restrict ingress")
            for rule in policy["spec"].get("ingress", []):
                for peer in rule.get("from", [{}]):
                    c.check(set(peer) == {"podSelector"}
                            and peer["podSelector"].get("matchLabels")
                            and selects(peer["podSelector"]["matchLabels"], placement_labels),
                            f"{where}: NetworkPolicy {policy['metadata']['name']} admits {peer} to Redis")

    # redis.conf and the arguments, as the real redis-server reads them.
    container = redis["spec"]["template"]["spec"]["containers"][0]
    args = list(container.get("args", []))
    config_args = [a for a in args if a.endswith(".conf")]
    if not c.check(len(config_args) == 1, f"{where}: placement-redis is not started with a .conf file"):
        return
    found = mounted_file(config_args[0], redis["spec"]["template"]["spec"], container, config_maps)
    if not c.check(found is not None, f"{where}: {config_args[0]} is no mounted ConfigMap key"):
        return
    with tempfile.TemporaryDirectory(prefix="placement_redis_conf_") as directory:
        local_config = os.path.join(directory, "redis.conf")
        with open(local_config, "w", encoding="utf-8") as file:
            file.write(found[2])
        try:
            config = deploy_checks.effective_redis_config(
                [local_config if a == config_args[0] else a for a in args],
                ["appendonly", "save", "maxmemory", "maxmemory-policy"])
        except RuntimeError as error:
            c.check(False, f"{where}: {error}")
            return
    if config is None:
        print(f"note: redis-server/redis-cli not installed; {where}'s redis.conf is not checked by Redis")
        return
    c.check(config["appendonly"] == "no" and config["save"] == "",
            f"{where}: Redis persists (appendonly {config['appendonly']}, save {config['save']!r})")
    policy = config["maxmemory-policy"] or ""
    c.check(policy.startswith("volatile-"),
            f"{where}: maxmemory-policy {policy} may evict keys without expiry (the job stream)")
    c.check(all(ttl > 0 for ttl in redis_ttls),
            f"{where}: --redis_ttl=0 stores results without expiry, which {policy} never evicts")
    limit = memory_bytes(container["resources"]["limits"]["memory"])
    maxmemory = int(config["maxmemory"] or 0)
    c.check(0 < maxmemory <= 0.9 * limit,
            f"{where}: Redis maxmemory {maxmemory} is not below 90 % of its memory limit {limit:.0f}")


def check_overlay(name, objects, flag_names, c):
    by_kind = {}
    for obj in objects:
        by_kind.setdefault(obj["kind"], []).append(obj)
    where = f"overlay {name}"
    for kind in ("Deployment", "Service", "HorizontalPodAutoscaler", "PodDisruptionBudget",
                 "NetworkPolicy", "ConfigMap"):
        c.check(kind in by_kind, f"{where}: no {kind}")
    deployments = {d["metadata"]["name"]: d for d in by_kind.get("Deployment", [])}
    services = by_kind.get("Service", [])
    placement = deployments.get("placement")
    if not c.check(placement is not None, f"{where}: no Deployment `placement`"):
        return

    # Probes and resources, for every container of every Deployment and StatefulSet.
    for workload in by_kind.get("Deployment", []) + by_kind.get("StatefulSet", []):
        for container in workload["spec"]["template"]["spec"]["containers"]:
            what = f"{where}: {workload['metadata']['name']}/{container['name']}"
            for probe in ("readinessProbe", "livenessProbe"):
                c.check(probe in container, f"{what}: no {probe}")
            resources = container.get("resources", {})
            for part in ("requests", "limits"):
                for resource in ("cpu", "memory"):
                    c.check(resource in resources.get(part, {}), f"{what}: no {part}.{resource}")

    pod = placement["spec"]["template"]["spec"]
    container = pod["containers"][0]
    ports = {p.get("name"): p["containerPort"] for p in container.get("ports", [])}
    c.check("grpc" in ports and "metrics" in ports, f"{where}: placement ports must be named grpc/metrics")
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        grpc = container.get(probe, {}).get("grpc")
        if c.check(grpc is not None, f"{where}: placement {probe} is not a native gRPC probe"):
            c.check(isinstance(grpc.get("port"), int) and grpc["port"] == ports.get("grpc"),
                    f"{where}: {probe}.grpc.port must be the numeric gRPC port {ports.get('grpc')}")
    c.check(container.get("securityContext", {}).get("readOnlyRootFilesystem") is True,
            f"{where}: placement root filesystem should be read-only")
    c.check(pod.get("securityContext", {}).get("runAsNonRoot") is True, f"{where}: runAsNonRoot")

    # Flags: from the ConfigMap the Deployment mounts, passed with --flagfile.
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    config_maps = {m["metadata"]["name"]: m for m in by_kind.get("ConfigMap", [])}
    flagfile = next((a.split("=", 1)[1] for a in container.get("args", [])
                     if a.startswith("--flagfile=")), None)
    flags = {}
    if c.check(flagfile is not None, f"{where}: placement is not started with --flagfile"):
        mount = next((m for m in container.get("volumeMounts", [])
                      if flagfile.startswith(m["mountPath"].rstrip("/") + "/")), None)
        if c.check(mount is not None, f"{where}: {flagfile} is on no mounted volume"):
            config_name = volumes[mount["name"]].get("configMap", {}).get("name")
            key = os.path.relpath(flagfile, mount["mountPath"])
            config = config_maps.get(config_name)
            if c.check(config is not None and key in config.get("data", {}),
                       f"{where}: ConfigMap {config_name} has no key {key}"):
                flags = deploy_checks.parse_flag_lines(config["data"][key])
    for flag in flags:
        c.check(flag in flag_names, f"{where}: placement_server has no flag --{flag}")
    # placement_server refuses to start without a transport choice: TLS files or an explicit --insecure.
    tls = "tls_cert" in flags and "tls_key" in flags
    c.check(tls or flags.get("insecure", "false") in (None, "", "true", "1"),
            f"{where}: neither --tls_cert/--tls_key nor --insecure: the server would not start")
    c.check(flags.get("port") == str(ports.get("grpc")), f"{where}: --port is not the gRPC containerPort")
    c.check(flags.get("metrics_port") == str(ports.get("metrics")),
            f"{where}: --metrics_port is not the metrics containerPort")

    # Shutdown budget.
    pre_stop = container.get("lifecycle", {}).get("preStop", {})
    sleep = 0.0
    if "exec" in pre_stop:
        command = pre_stop["exec"]["command"]
        if c.check(command[0].endswith("sleep") and len(command) == 2, f"{where}: preStop is not a sleep"):
            sleep = float(command[1])
    elif "sleep" in pre_stop:
        sleep = float(pre_stop["sleep"]["seconds"])
    c.check(sleep > 0, f"{where}: placement has no preStop drain")
    drain = deploy_checks.duration_seconds(flags.get("shutdown_drain_delay", "0s"))
    grace = deploy_checks.duration_seconds(flags.get("shutdown_grace", "10s"))
    period = pod.get("terminationGracePeriodSeconds", 30)
    c.check(period > sleep + drain + grace,
            f"{where}: terminationGracePeriodSeconds {period} <= preStop {sleep} + drain {drain} + grace {grace}")

    # Services and what they select.
    pod_labels = placement["spec"]["template"]["metadata"]["labels"]
    placement_services = [s for s in services if selects(s["spec"].get("selector"), pod_labels)]
    c.check(any(s["spec"].get("clusterIP") == "None" for s in placement_services),
            f"{where}: no headless Service for the placement pods")
    c.check(any(s["spec"].get("clusterIP") != "None" for s in placement_services),
            f"{where}: no ClusterIP Service for the placement pods")
    for service in placement_services:
        for port in service["spec"]["ports"]:
            target = port.get("targetPort", port["port"])
            c.check(target in ports or target in ports.values(),
                    f"{where}: Service {service['metadata']['name']} targets unknown port {target}")
    for hpa in by_kind.get("HorizontalPodAutoscaler", []):
        ref = hpa["spec"]["scaleTargetRef"]
        c.check(ref["kind"] == "Deployment" and ref["name"] in deployments,
                f"{where}: HPA {hpa['metadata']['name']} scales a missing {ref['kind']} {ref['name']}")
        c.check(hpa["spec"]["minReplicas"] >= 2, f"{where}: HPA minReplicas < 2 (no redundancy)")
        c.check(any(m.get("resource", {}).get("name") == "cpu" for m in hpa["spec"]["metrics"]),
                f"{where}: HPA does not scale on CPU")
    for pdb in by_kind.get("PodDisruptionBudget", []):
        c.check(selects(pdb["spec"]["selector"]["matchLabels"], pod_labels),
                f"{where}: PDB {pdb['metadata']['name']} selects no placement pod")

    check_redis(where, by_kind, placement, c)
    if name == "prod":
        c.check(placement["spec"].get("replicas", 1) >= 3, f"{where}: prod runs fewer than 3 replicas")

def check_envoy(path, c):
    """deploy/envoy/envoy.yaml, the cluster router: hashes on the routing header over a ring of the
    headless Service's pods and health-checks the placement service over gRPC."""
    with open(path, encoding="utf-8") as file:
        config = yaml.safe_load(file)
    resources = config.get("static_resources", {})
    routes = [route
              for listener in resources.get("listeners", [])
              for chain in listener.get("filter_chains", [])
              for f in chain.get("filters", [])
              for host in f.get("typed_config", {}).get("route_config", {}).get("virtual_hosts", [])
              for route in host.get("routes", [])]
    hashed = [policy.get("header", {}).get("header_name")
              for route in routes for policy in route.get("route", {}).get("hash_policy", [])]
    c.check("x-placement-digest" in hashed, "envoy.yaml: no route hashes on x-placement-digest")
    clusters = resources.get("clusters", [])
    c.check(any(cluster.get("lb_policy") in ("RING_HASH", "MAGLEV") for cluster in clusters),
            "envoy.yaml: no ring-hash (or Maglev) cluster")
    checks = [check.get("grpc_health_check", {}).get("service_name")
              for cluster in clusters for check in cluster.get("health_checks", [])]
    c.check("placement.v1.PlacementService" in checks,
            "envoy.yaml: the cluster does not health-check placement.v1.PlacementService over gRPC")
    addresses = json.dumps(clusters)
    c.check("placement-headless" in addresses, "envoy.yaml: the cluster is not the headless Service")


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 64
    source_dir, server = sys.argv[1], sys.argv[2]
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        deploy_checks.skip("kubectl is not installed")
    flag_names = deploy_checks.server_flags(server)
    c = deploy_checks.Checker()
    check_envoy(os.path.join(source_dir, "deploy", "envoy", "envoy.yaml"), c)
    for overlay in ("dev", "prod"):
        objects = render(kubectl, os.path.join(source_dir, "deploy", "k8s", "overlays", overlay))
        check_overlay(overlay, objects, flag_names, c)
    c.finish("k8s manifests")


if __name__ == "__main__":
    sys.exit(main())

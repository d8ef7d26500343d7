"""Renders deploy/k8s/overlays/{dev,prod} with `kubectl kustomize` and checks what a cluster would not:

- the objects every environment needs exist (Deployment, Service + headless Service, HPA, PDB,
  NetworkPolicy, flags ConfigMap), and Redis runs in dev but not in prod (prod points at an external one);
- every container has readiness and liveness probes and resource requests and limits; the placement
  container's probes are native gRPC probes on its numeric gRPC port;
- terminationGracePeriodSeconds > preStop sleep + --shutdown_drain_delay + --shutdown_grace;
- the ConfigMap's flags are flags placement_server accepts (its --helpfull), and --redis names a
  Service that exists (dev);
- Services, the HPA and the PDB select/target what exists.

usage: k8s_manifests_test.py SOURCE_DIR PLACEMENT_SERVER_BINARY
"""
import os
import shutil
import subprocess
import sys

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

    # Probes and resources, for every container of every Deployment.
    for deployment in deployments.values():
        for container in deployment["spec"]["template"]["spec"]["containers"]:
            what = f"{where}: {deployment['metadata']['name']}/{container['name']}"
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

    # Redis: in-cluster in dev, external in prod.
    redis = flags.get("redis", "")
    c.check(bool(redis), f"{where}: no --redis (the shared cache tier)")
    redis_host = redis.rsplit(":", 1)[0]
    in_cluster = [s for s in services if s["metadata"]["name"] == redis_host]
    if name == "dev":
        c.check(bool(in_cluster), f"{where}: --redis={redis} names no Service")
        c.check("placement-redis" in deployments, f"{where}: no Redis Deployment")
    else:
        c.check(not in_cluster and "placement-redis" not in deployments,
                f"{where}: prod should use an external Redis, not one in the namespace")
        c.check(placement["spec"].get("replicas", 1) >= 3, f"{where}: prod runs fewer than 3 replicas")


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
    for overlay in ("dev", "prod"):
        objects = render(kubectl, os.path.join(source_dir, "deploy", "k8s", "overlays", overlay))
        check_overlay(overlay, objects, flag_names, c)
    c.finish("k8s manifests")


if __name__ == "__main__":
    sys.exit(main())

"""kind for users with Docker: a two-zone cluster, 25 ms between zones, the app and a Prometheus.

`KindPlan` writes the kind config (a control plane plus one worker per node of the app's topology,
labelled with ``topology.kubernetes.io/zone`` and ``sremarathon.io/node``) and lists the command
lines `up` runs: ``kind create cluster``, then, once the node IPs and pod CIDRs are known, ``tc``
netem through ``docker exec`` on every worker so that packets to the *other* zone's nodes and pods
wait half the app's inter-zone latency on each side (25 ms round trip for the bundled apps), then
``kubectl apply`` of the app's manifests and of a small Prometheus. Nothing runs on import; the
build machines have no Docker, so tests check the generated files and command lines.

>>> plan = KindPlan(name="sre", workdir="/tmp/sre-kind-doc")
>>> cfg = plan.config()
>>> [n["role"] for n in cfg["nodes"]].count("worker"), sorted({n.get("labels", {}).get("topology.kubernetes.io/zone") for n in cfg["nodes"][1:]})
(5, ['zone-a', 'zone-b'])
>>> plan.create_command()[:3]
['kind', 'create', 'cluster']
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from apps.manifests import NODE_LABEL, manifests, to_yaml

ZONE_LABEL = "topology.kubernetes.io/zone"
PROMETHEUS_IMAGE = "quay.io/prometheus/prometheus:v2.53.0"


@dataclass
class KindPlan:
    name: str = "sre"
    workdir: str = "."
    app_name: str = "online-boutique"
    kind_bin: str = "kind"
    kubectl_bin: str = "kubectl"
    docker_bin: str = "docker"

    def __post_init__(self) -> None:
        from apps import load_app
        self.app = load_app(self.app_name)
        self.root = Path(self.workdir)
        self.config_path = self.root / "kind-config.yaml"
        self.kubeconfig_path = self.root / "kubeconfig.yaml"
        self.manifest_path = self.root / "app.yaml"
        self.prometheus_path = self.root / "prometheus.yaml"

    # ------------------------------------------------------------------ files
    def config(self) -> dict[str, Any]:
        nodes: list[dict[str, Any]] = [{"role": "control-plane"}]
        for n in self.app.topology.nodes:
            nodes.append({"role": "worker", "labels": {ZONE_LABEL: n.zone, NODE_LABEL: n.name}})
        return {"kind": "Cluster", "apiVersion": "kind.x-k8s.io/v1alpha4", "name": self.name, "nodes": nodes,
                "networking": {"podSubnet": "10.244.0.0/16", "serviceSubnet": "10.96.0.0/16"}}

    def write_files(self) -> list[Path]:
        import yaml
        self.root.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(yaml.safe_dump(self.config(), sort_keys=False))
        ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.app.namespace}}
        self.manifest_path.write_text(to_yaml([ns, *manifests(self.app)]))
        self.prometheus_path.write_text(to_yaml(prometheus_manifests(self.app.namespace)))
        return [self.config_path, self.manifest_path, self.prometheus_path]

    # ------------------------------------------------------------------ command lines
    def create_command(self) -> list[str]:
        return [self.kind_bin, "create", "cluster", "--name", self.name, "--config", str(self.config_path),
                "--kubeconfig", str(self.kubeconfig_path), "--wait", "180s"]

    def delete_command(self) -> list[str]:
        return [self.kind_bin, "delete", "cluster", "--name", self.name, "--kubeconfig", str(self.kubeconfig_path)]

    def nodes_command(self) -> list[str]:
        return [self.kubectl_bin, "--kubeconfig", str(self.kubeconfig_path), "get", "nodes", "-o", "json"]

    def apply_commands(self) -> list[list[str]]:
        kc = ["--kubeconfig", str(self.kubeconfig_path)]
        return [[self.kubectl_bin, *kc, "apply", "-f", str(self.manifest_path)],
                [self.kubectl_bin, *kc, "apply", "-f", str(self.prometheus_path)],
                [self.kubectl_bin, *kc, "-n", self.app.namespace, "wait", "--for=condition=Available",
                 "deployment", "--all", "--timeout=600s"]]

    def netem_commands(self, nodes_json: dict[str, Any]) -> list[list[str]]:
        """``tc`` commands for the workers of ``kubectl get nodes -o json``: traffic to the other zone's
        node IPs and pod CIDRs goes through a netem band delaying it half the inter-zone latency."""
        delay_ms = self.app.topology.inter_zone_latency_ms / 2.0
        workers = []
        for item in nodes_json.get("items", []):
            md, spec, status = item["metadata"], item.get("spec", {}), item.get("status", {})
            zone = md.get("labels", {}).get(ZONE_LABEL)
            if zone is None:
                continue
            ip = next((a["address"] for a in status.get("addresses", []) if a["type"] == "InternalIP"), None)
            cidrs = spec.get("podCIDRs") or ([spec["podCIDR"]] if spec.get("podCIDR") else [])
            workers.append((md["name"], zone, ip, cidrs))
        cmds: list[list[str]] = []
        for name, zone, _, _ in sorted(workers):
            ex = [self.docker_bin, "exec", name, "tc"]
            cmds.append([*ex, "qdisc", "replace", "dev", "eth0", "root", "handle", "1:", "prio", "bands", "3",
                         "priomap", *(["0"] * 16)])
            cmds.append([*ex, "qdisc", "replace", "dev", "eth0", "parent", "1:3", "handle", "30:", "netem", "delay",
                         f"{delay_ms:g}ms"])
            for oname, ozone, oip, ocidrs in sorted(workers):
                if ozone == zone:
                    continue
                for dst in ([f"{oip}/32"] if oip else []) + list(ocidrs):
                    cmds.append([*ex, "filter", "add", "dev", "eth0", "parent", "1:", "protocol", "ip", "prio", "1",
                                 "u32", "match", "ip", "dst", dst, "flowid", "1:3"])
        return cmds

    # ------------------------------------------------------------------ running it
    def available(self) -> tuple[bool, str]:
        for b in (self.kind_bin, self.docker_bin, self.kubectl_bin):
            if shutil.which(b) is None:
                return False, f"{b} is not installed (the kind provider needs kind, Docker and kubectl)"
        return True, ""

    def up(self, run=subprocess.run) -> list[list[str]]:
        """Create the cluster, add the inter-zone delay, install the app and Prometheus; returns the
        commands run. ``run`` is injectable for tests."""
        import json
        self.write_files()
        done = []
        for cmd in [self.create_command()]:
            run(cmd, check=True)
            done.append(cmd)
        out = run(self.nodes_command(), check=True, capture_output=True, text=True)
        done.append(self.nodes_command())
        for cmd in self.netem_commands(json.loads(out.stdout)) + self.apply_commands():
            run(cmd, check=True)
            done.append(cmd)
        return done

    def down(self, run=subprocess.run) -> list[list[str]]:
        run(self.delete_command(), check=True)
        return [self.delete_command()]


def prometheus_manifests(app_namespace: str, namespace: str = "monitoring") -> list[dict[str, Any]]:
    """A one-replica Prometheus that scrapes the app's pods (kubernetes_sd) and cAdvisor via the API."""
    import yaml
    scrape = {
        "global": {"scrape_interval": "15s", "evaluation_interval": "15s"},
        "scrape_configs": [
            {"job_name": "app-pods", "kubernetes_sd_configs": [{"role": "pod", "namespaces": {"names": [app_namespace]}}],
             "relabel_configs": [
                 {"source_labels": ["__meta_kubernetes_pod_label_app"], "target_label": "service"},
                 {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
                 {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"}]},
            {"job_name": "cadvisor", "scheme": "https", "metrics_path": "/metrics/cadvisor",
             "kubernetes_sd_configs": [{"role": "node"}],
             "tls_config": {"ca_file": "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt",
                            "insecure_skip_verify": True},
             "bearer_token_file": "/var/run/secrets/kubernetes.io/serviceaccount/token"},
        ],
    }
    labels = {"app": "prometheus"}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "prometheus", "namespace": namespace}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "sremarathon-prometheus"},
         "rules": [{"apiGroups": [""], "resources": ["nodes", "nodes/metrics", "pods", "services", "endpoints"],
                    "verbs": ["get", "list", "watch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": "sremarathon-prometheus"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "sremarathon-prometheus"},
         "subjects": [{"kind": "ServiceAccount", "name": "prometheus", "namespace": namespace}]},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "prometheus", "namespace": namespace},
         "data": {"prometheus.yml": yaml.safe_dump(scrape, sort_keys=False)}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "prometheus", "namespace": namespace, "labels": labels},
         "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                  "template": {"metadata": {"labels": labels},
                               "spec": {"serviceAccountName": "prometheus",
                                        "containers": [{"name": "prometheus", "image": PROMETHEUS_IMAGE,
                                                        "args": ["--config.file=/etc/prometheus/prometheus.yml",
                                                                 "--storage.tsdb.retention.time=6h"],
                                                        "ports": [{"containerPort": 9090, "name": "web"}],
                                                        "volumeMounts": [{"name": "config", "mountPath": "/etc/prometheus"}]}],
                                        "volumes": [{"name": "config", "configMap": {"name": "prometheus"}}]}}}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "prometheus", "namespace": namespace, "labels": labels},
         "spec": {"selector": labels, "ports": [{"name": "web", "port": 9090, "targetPort": 9090}]}},
    ]

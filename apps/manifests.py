"""Kubernetes manifests of an app, generated from its `AppSpec`: ConfigMaps, Services, Deployments.

What the live backend applies to a cluster (kwok or kind) and what ``kubectl apply -f`` takes: real
image names and tags, the spec's env, resources, probes and ports. Each Deployment prefers (does not
require) the node its first replica sits on in the twin, through the node label
``sremarathon.io/node``, so that placement over zones matches the twin while a drained or failed node
can still be left. Order is deterministic: config maps, services, deployments, each in the app's
declaration order.

>>> from apps import load_app
>>> docs = manifests(load_app("online-boutique"))
>>> [d["kind"] for d in docs].count("Deployment"), docs[-1]["metadata"]["namespace"]
(11, 'online-boutique')
>>> dep = next(d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == "frontend")
>>> dep["spec"]["template"]["spec"]["containers"][0]["image"].rsplit("/", 1)[1]
'frontend:v0.10.6'
>>> to_yaml(docs[:1]).startswith("apiVersion: v1")
True
"""

from __future__ import annotations

from typing import Any

from apps.spec import AppSpec, ProbeSpec, Resources, ServiceSpec

NODE_LABEL = "sremarathon.io/node"
PART_OF = "app.kubernetes.io/part-of"


def resources_json(r: Resources | dict[str, Any]) -> dict[str, dict[str, str]]:
    """Container ``resources`` from millicores/MiB (unset fields are left out)."""
    d = r.model_dump() if isinstance(r, Resources) else dict(r)
    out: dict[str, dict[str, str]] = {}
    for field, group, key, unit in (("cpu_request_m", "requests", "cpu", "m"), ("mem_request_mi", "requests", "memory", "Mi"),
                                    ("cpu_limit_m", "limits", "cpu", "m"), ("mem_limit_mi", "limits", "memory", "Mi")):
        if d.get(field):
            out.setdefault(group, {})[key] = f"{int(d[field])}{unit}"
    return out


def probe_json(p: ProbeSpec | None) -> dict[str, Any] | None:
    if p is None:
        return None
    d: dict[str, Any] = {"initialDelaySeconds": int(p.initial_delay_s), "periodSeconds": max(1, int(p.period_s)),
                         "failureThreshold": p.failure_threshold, "timeoutSeconds": 1, "successThreshold": 1}
    if p.type == "http":
        d["httpGet"] = {"path": p.path or "/", "port": p.port, "scheme": "HTTP"}
    elif p.type == "grpc":
        d["grpc"] = {"port": p.port, "service": ""}
    else:
        d["tcpSocket"] = {"port": p.port}
    return d


def container_json(s: ServiceSpec, *, tag: str | None = None, env: dict[str, str] | None = None,
                   resources: Resources | dict[str, Any] | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {
        "name": s.name, "image": f"{s.image}:{tag or s.tag}", "imagePullPolicy": "IfNotPresent",
        "ports": [{"containerPort": p.target_port, "name": p.name[:15], "protocol": "TCP"} for p in s.ports],
        "env": [{"name": k, "value": v} for k, v in sorted((s.env if env is None else env).items())],
        "resources": resources_json(s.resources if resources is None else resources),
    }
    for key, p in (("readinessProbe", s.readiness_probe), ("livenessProbe", s.liveness_probe)):
        if p is not None:
            c[key] = probe_json(p)
    return c


def _labels(app: AppSpec, name: str) -> dict[str, str]:
    return {"app": name, "app.kubernetes.io/name": name, PART_OF: app.name}


def config_maps(app: AppSpec, namespace: str) -> list[dict[str, Any]]:
    data: dict[str, dict[str, str]] = {}
    if app.flags_config_map:
        data[app.flags_config_map] = {f.name: f.default_variant for f in app.flags}
    for s in app.services:
        for k in s.knobs:
            if k.config_map:
                data.setdefault(k.config_map, {})[k.key] = k.default
    return [{"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": name, "namespace": namespace, "labels": {PART_OF: app.name}},
             "data": dict(sorted(vals.items()))} for name, vals in data.items()]


def service_json(app: AppSpec, s: ServiceSpec, namespace: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": s.name, "namespace": namespace, "labels": _labels(app, s.name)},
            "spec": {"type": "ClusterIP", "selector": {"app": s.name},
                     "ports": [{"name": p.name[:15], "port": p.port, "targetPort": p.target_port, "protocol": "TCP"}
                               for p in s.ports]}}


def deployment_json(app: AppSpec, s: ServiceSpec, namespace: str) -> dict[str, Any]:
    labels = _labels(app, s.name)
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": s.name, "namespace": namespace, "labels": labels},
        "spec": {
            "replicas": s.replicas, "selector": {"matchLabels": {"app": s.name}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
            "progressDeadlineSeconds": 600, "revisionHistoryLimit": 10,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [container_json(s)],
                    "terminationGracePeriodSeconds": 5,
                    "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 100, "preference": {"matchExpressions": [
                            {"key": NODE_LABEL, "operator": "In", "values": [s.node]}]}}]}},
                },
            },
        },
    }


def manifests(app: AppSpec, *, namespace: str | None = None) -> list[dict[str, Any]]:
    """Every object of the app, namespaced to ``namespace`` (default: the app's own)."""
    ns = namespace or app.namespace
    return [*config_maps(app, ns), *(service_json(app, s, ns) for s in app.services),
            *(deployment_json(app, s, ns) for s in app.services)]


def to_yaml(docs: list[dict[str, Any]]) -> str:
    import yaml
    return yaml.safe_dump_all(docs, sort_keys=False, width=10_000)

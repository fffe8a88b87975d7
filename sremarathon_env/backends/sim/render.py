"""Kubernetes API-shaped JSON for the twin's objects (``kubectl get -o json`` items) and events.

Timestamps are sim seconds rendered from a fixed epoch (2026-01-01T00:00:00Z = sim time 0).
Unknown kinds get a ``Status`` object like the API server's answer; an unknown name gives ``[]``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from apps.manifests import probe_json, resources_json
from sremarathon_env.backends.arguments import KIND_PLURALS
from sremarathon_env.backends.sim.util import iso, suffix

if TYPE_CHECKING:  # pragma: no cover
    from sremarathon_env.backends.sim.backend import SimBackend

KINDS = KIND_PLURALS


def _uid(sim: "SimBackend", *keys: object) -> str:
    s = suffix(sim.seed, "uid", *keys, n=32).encode().hex()[:32]
    return f"{s[:8]}-{s[8:12]}-{s[12:16]}-{s[16:20]}-{s[20:32]}"


def get(sim: "SimBackend", kind: str, name: str | None) -> list[dict[str, Any]]:
    k = KINDS.get(str(kind).lower())
    if k is None:
        return [{"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404,
                 "message": f'the server doesn\'t have a resource type "{kind}"'}]
    fn = globals()[f"_{k}"]
    # kinds whose renderer takes the name render only that object (the same item: rendering is per object)
    items = fn(sim, name) if k in _BY_NAME else fn(sim)
    if name is not None:
        items = [i for i in items if i["metadata"]["name"] == name]
    return items


def _meta(sim: "SimBackend", name: str, t: float, labels: dict | None = None, **extra) -> dict[str, Any]:
    md = {"name": name, "namespace": sim.app.namespace, "uid": _uid(sim, name, t), "creationTimestamp": iso(t)}
    if labels:
        md["labels"] = labels
    md.update(extra)
    return md


def _container(sim: "SimBackend", svc_i: int, tpl: dict) -> dict[str, Any]:
    spec = sim.app.services[svc_i]
    c = {"name": spec.name, "image": f"{tpl['image']}:{tpl['tag']}", "imagePullPolicy": "IfNotPresent",
         "ports": [{"containerPort": p.target_port, "name": p.name, "protocol": "TCP"} for p in spec.ports],
         "env": [{"name": k, "value": v} for k, v in sorted(tpl["env"].items())],
         "resources": resources_json(tpl["resources"])}
    if spec.readiness_probe:
        c["readinessProbe"] = probe_json(spec.readiness_probe)
    if spec.liveness_probe:
        c["livenessProbe"] = probe_json(spec.liveness_probe)
    return c


def _template(sim: "SimBackend", dep, rs) -> dict[str, Any]:
    md: dict[str, Any] = {"labels": {"app": dep.name, "pod-template-hash": rs.hash}}
    if rs.template.get("restarted_at") is not None:
        md["annotations"] = {"kubectl.kubernetes.io/restartedAt": iso(rs.template["restarted_at"])}
    return {"metadata": md, "spec": {"containers": [_container(sim, dep.svc, rs.template)],
                                     "serviceAccountName": "default" if dep.name else "default",
                                     "terminationGracePeriodSeconds": 5}}


def _pods(sim: "SimBackend", name: str | None = None) -> list[dict[str, Any]]:
    c = sim.cluster
    out = []
    for p in sorted(c.active_pods(), key=lambda p: p.name):
        if name is not None and p.name != name:
            continue
        svc = c.svc_names[p.svc]
        dep = c.deployments[svc]
        ready = bool(sim.pod_ready_eff[p.slot])
        if p.cstate == "running":
            state = {"running": {"startedAt": iso(p.started_t)}}
        else:
            msg = {"CrashLoopBackOff": f"back-off {int(p.backoff_s)}s restarting failed container={svc} pod={p.name}_{sim.app.namespace}",
                   "ImagePullBackOff": f'Back-off pulling image "{p.rs.template["image"]}:{p.rs.template["tag"]}"',
                   "ErrImagePull": f'rpc error: code = NotFound desc = failed to pull and unpack image "{p.rs.template["image"]}:{p.rs.template["tag"]}": not found'}.get(p.reason)
            state = {"waiting": {"reason": p.reason or "ContainerCreating", **({"message": msg} if msg else {})}}
        cs: dict[str, Any] = {"name": svc, "image": f"{p.rs.template['image']}:{p.rs.template['tag']}",
                              "ready": ready, "started": p.cstate == "running", "restartCount": p.restarts,
                              "state": state}
        if p.last_reason:
            cs["lastState"] = {"terminated": {"exitCode": p.last_exit, "reason": p.last_reason,
                                              "startedAt": iso(p.last_started_t), "finishedAt": iso(p.last_finished_t)}}
        else:
            cs["lastState"] = {}
        conds = [{"type": "PodScheduled", "status": "True" if p.node >= 0 else "False",
                  "lastTransitionTime": iso(p.created_t)}]
        if p.node >= 0:
            rstat = "Unknown" if p.node_lost else ("True" if ready else "False")
            conds += [{"type": "Initialized", "status": "True", "lastTransitionTime": iso(p.created_t)},
                      {"type": "ContainersReady", "status": rstat, "lastTransitionTime": iso(p.ready_t if ready else p.created_t)},
                      {"type": "Ready", "status": rstat, "lastTransitionTime": iso(p.ready_t if ready else p.created_t)}]
        else:
            conds[0].update({"reason": "Unschedulable", "message": "0 nodes are available"})
        item = {"apiVersion": "v1", "kind": "Pod",
                "metadata": _meta(sim, p.name, p.created_t, {"app": svc, "pod-template-hash": p.rs.hash},
                                  ownerReferences=[{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": p.rs.name,
                                                    "controller": True}]),
                "spec": {"nodeName": c.nodes[p.node].name if p.node >= 0 else None,
                         "containers": [_container(sim, p.svc, p.rs.template)]},
                "status": {"phase": p.phase, "conditions": conds, "containerStatuses": [cs],
                           "hostIP": sim.node_ip(p.node) if p.node >= 0 else None,
                           "podIP": sim.pod_ip(p) if p.node >= 0 else None, "startTime": iso(p.created_t),
                           "qosClass": "Burstable"}}
        del dep
        out.append(item)
    return out


def _deployments(sim: "SimBackend", name: str | None = None) -> list[dict[str, Any]]:
    c = sim.cluster
    out = []
    for dep in sorted(c.deployments.values(), key=lambda d: d.name):
        if name is not None and dep.name != name:
            continue
        live = dep.live_pods()
        avail = sum(1 for p in live if sim.pod_ready_eff[p.slot])
        conds = sim.deployment_conditions(dep)
        out.append({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": _meta(sim, dep.name, -3600.0, {"app": dep.name}, generation=dep.generation,
                              annotations={"deployment.kubernetes.io/revision": str(dep.current.revision)}),
            "spec": {"replicas": dep.replicas, "selector": {"matchLabels": {"app": dep.name}},
                     "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
                     "progressDeadlineSeconds": 600, "revisionHistoryLimit": 10,
                     "template": _template(sim, dep, dep.current)},
            "status": {"observedGeneration": dep.observed_generation, "replicas": len(live),
                       "updatedReplicas": len(dep.current.pods), "readyReplicas": avail, "availableReplicas": avail,
                       "unavailableReplicas": max(0, dep.replicas - avail),
                       "conditions": [{"type": k, "status": v[0], "reason": v[1], "message": v[2]} for k, v in conds.items()]},
        })
    return out


def _replicasets(sim: "SimBackend", name: str | None = None) -> list[dict[str, Any]]:
    out = []
    for dep in sorted(sim.cluster.deployments.values(), key=lambda d: d.name):
        for rs in dep.rss:
            if name is not None and rs.name != name:
                continue
            ready = sum(1 for p in rs.pods if sim.pod_ready_eff[p.slot])
            out.append({"apiVersion": "apps/v1", "kind": "ReplicaSet",
                        "metadata": _meta(sim, rs.name, rs.created_t, {"app": dep.name, "pod-template-hash": rs.hash},
                                          annotations={"deployment.kubernetes.io/revision": str(rs.revision)},
                                          ownerReferences=[{"apiVersion": "apps/v1", "kind": "Deployment", "name": dep.name,
                                                            "controller": True}]),
                        "spec": {"replicas": rs.replicas, "template": _template(sim, dep, rs)},
                        "status": {"replicas": len(rs.pods), "readyReplicas": ready, "availableReplicas": ready}})
    return out


def _services(sim: "SimBackend") -> list[dict[str, Any]]:
    out = []
    for i, s in enumerate(sim.app.services):
        out.append({"apiVersion": "v1", "kind": "Service",
                    "metadata": _meta(sim, s.name, -3600.0, {"app": s.name}),
                    "spec": {"type": "ClusterIP", "clusterIP": f"10.96.{i // 200}.{10 + i % 200}",
                             "selector": {"app": s.name},
                             "ports": [{"name": p.name, "port": p.port, "targetPort": p.target_port, "protocol": "TCP"}
                                       for p in s.ports]}})
    return out


def _endpoints(sim: "SimBackend") -> list[dict[str, Any]]:
    out = []
    for i, s in enumerate(sim.app.services):
        ready, not_ready = sim.endpoints_of(i)
        subset: dict[str, Any] = {}
        if ready:
            subset["addresses"] = [{"ip": sim.pod_ip(p), "nodeName": sim.cluster.nodes[p.node].name,
                                    "targetRef": {"kind": "Pod", "name": p.name}} for p in ready]
        if not_ready:
            subset["notReadyAddresses"] = [{"ip": sim.pod_ip(p), "nodeName": sim.cluster.nodes[p.node].name,
                                            "targetRef": {"kind": "Pod", "name": p.name}} for p in not_ready]
        if subset:
            subset["ports"] = [{"name": p.name, "port": p.target_port, "protocol": "TCP"} for p in s.ports]
        out.append({"apiVersion": "v1", "kind": "Endpoints", "metadata": _meta(sim, s.name, -3600.0, {"app": s.name}),
                    "subsets": [subset] if subset else []})
    return out


def _nodes(sim: "SimBackend") -> list[dict[str, Any]]:
    out = []
    for n in sim.cluster.nodes:
        st = "True" if n.ready else "Unknown"
        conds = [{"type": "Ready", "status": st, "reason": "KubeletReady" if n.ready else "NodeStatusUnknown",
                  "message": "kubelet is posting ready status" if n.ready else "Kubelet stopped posting node status."}]
        for cond in ("MemoryPressure", "DiskPressure", "PIDPressure"):
            conds.append({"type": cond, "status": "False" if n.ready else "Unknown"})
        item = {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": n.name, "uid": _uid(sim, n.name), "creationTimestamp": iso(-86400.0),
                             "labels": {"kubernetes.io/hostname": n.name, "topology.kubernetes.io/zone": n.zone}},
                "spec": {"unschedulable": True} if n.cordoned else {},
                "status": {"conditions": conds, "addresses": [{"type": "InternalIP", "address": sim.node_ip(n.index)}],
                           "allocatable": {"cpu": f"{n.cpu_m}m", "memory": f"{n.mem_mi}Mi", "pods": "110"},
                           "capacity": {"cpu": f"{n.cpu_m}m", "memory": f"{n.mem_mi}Mi", "pods": "110"}}}
        if n.cordoned:
            item["spec"]["taints"] = [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]
        if not n.ready:
            item["spec"].setdefault("taints", []).append({"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"})
        out.append(item)
    return out


def _configmaps(sim: "SimBackend", name: str | None = None) -> list[dict[str, Any]]:
    return [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(sim, cm, -3600.0),
             "data": dict(sorted(vals.items()))} for cm, vals in sorted(sim.config_maps.items())
            if name is None or cm == name]


#: kinds rendered for one name without rendering the others (``get``)
_BY_NAME = frozenset(("pods", "deployments", "replicasets", "configmaps"))


def _resourcequotas(sim: "SimBackend") -> list[dict[str, Any]]:
    used = sim.quota_used()
    hard = sim.cluster.quota_hard

    def fmt(k: str, v: float) -> str:
        if k == "pods":
            return str(int(v))
        if k.endswith("cpu"):
            return f"{int(round(v * 1000))}m"
        return f"{int(round(v / 2**20))}Mi"

    name = f"{sim.app.namespace}-quota"
    return [{"apiVersion": "v1", "kind": "ResourceQuota", "metadata": _meta(sim, name, -3600.0),
             "spec": {"hard": {k: fmt(k, v) for k, v in hard.items()}},
             "status": {"hard": {k: fmt(k, v) for k, v in hard.items()}, "used": {k: fmt(k, used[k]) for k in hard}}}]


def event_json(sim: "SimBackend", i: int, ev: list) -> dict[str, Any]:
    first, last, count, etype, reason, kind, name, message, component = ev
    ns = sim.app.namespace
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{name}.{suffix(sim.seed, 'event', i, n=16)}", "namespace": ns,
                         "creationTimestamp": iso(first)},
            "involvedObject": {"kind": kind, "name": name, "namespace": ns if kind != "Node" else ""},
            "reason": reason, "message": message, "type": etype, "count": count,
            "firstTimestamp": iso(first), "lastTimestamp": iso(last), "source": {"component": component},
            "t": last}


def events(sim: "SimBackend", since: float, until: float) -> list[dict[str, Any]]:
    out = [event_json(sim, i, ev) for i, ev in enumerate(sim.cluster.events) if ev[1] >= since and ev[0] <= until]
    out.sort(key=lambda e: (e["t"], e["metadata"]["name"]))
    return out


def _events(sim: "SimBackend") -> list[dict[str, Any]]:
    return events(sim, -1e18, sim.now)

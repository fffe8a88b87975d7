"""Cluster-state metrics (the kube-state-metrics families of the twin's catalogue) from API objects.

On a live cluster these are real: they are read from the Deployments, Pods and Nodes the API
serves, and written into the backend's `MetricStore` at each tick, so the alert rules over
``kube_*`` series (crash loops, stuck rollouts, unavailable replicas, NotReady nodes) work on the live
backend as on the twin. Request-level families are not written (kwok runs no application).

>>> from sremarathon_env.telemetry.store import MetricStore
>>> st = MetricStore(step_s=15.0, capacity=4)
>>> dep = {"metadata": {"name": "a", "generation": 1}, "spec": {"replicas": 1},
...        "status": {"replicas": 1, "availableReplicas": 1, "updatedReplicas": 1, "observedGeneration": 1}}
>>> write_state(st, 0, "ns", [dep], [], [])
>>> st.families("kube_deployment_status_replicas_available")[0].values(1).tolist()
[[1.0]]
"""

from __future__ import annotations

import numpy as np

_DEP = {"kube_deployment_spec_replicas": lambda d: d["spec"].get("replicas", 1),
        "kube_deployment_status_replicas": lambda d: d.get("status", {}).get("replicas", 0),
        "kube_deployment_status_replicas_available": lambda d: d.get("status", {}).get("availableReplicas", 0),
        "kube_deployment_status_replicas_unavailable": lambda d: d.get("status", {}).get("unavailableReplicas", 0),
        "kube_deployment_status_replicas_updated": lambda d: d.get("status", {}).get("updatedReplicas", 0),
        "kube_deployment_metadata_generation": lambda d: d["metadata"].get("generation", 0),
        "kube_deployment_status_observed_generation": lambda d: d.get("status", {}).get("observedGeneration", 0)}
_WAITING = ("ContainerCreating", "CrashLoopBackOff", "ErrImagePull", "ImagePullBackOff", "CreateContainerConfigError")
_TERMINATED = ("OOMKilled", "Error", "Completed")


def _put(store, name: str, labels: tuple[str, ...], rows: list[tuple[tuple[str, ...], float]], tick: int) -> None:
    if not rows:
        return
    fam = store.family(name, labels)
    idx = fam.rows([r[0] for r in rows])
    store.write(fam, idx, tick=tick, values=np.array([r[1] for r in rows], dtype=float))


def write_state(store, tick: int, namespace: str, deployments: list[dict], pods: list[dict], nodes: list[dict]) -> None:
    """Write one sample of every cluster-state family at ``tick``."""
    store.set_n_ticks(max(store.n_ticks, tick + 1))
    deps = sorted(deployments, key=lambda d: d["metadata"]["name"])
    for name, f in _DEP.items():
        _put(store, name, ("namespace", "deployment"), [((namespace, d["metadata"]["name"]), float(f(d))) for d in deps], tick)
    conds = []
    for d in deps:
        for c in d.get("status", {}).get("conditions", []):
            for s in ("true", "false", "unknown"):
                conds.append(((namespace, d["metadata"]["name"], c["type"], s), float(c.get("status", "").lower() == s)))
    _put(store, "kube_deployment_status_condition", ("namespace", "deployment", "condition", "status"), conds, tick)
    ready, waiting, restarts, last = [], [], [], []
    ctr = ("namespace", "pod", "container")
    for p in sorted(pods, key=lambda p: p["metadata"]["name"]):
        if p["metadata"].get("deletionTimestamp"):
            continue
        pod = p["metadata"]["name"]
        status = p.get("status", {})
        r = next((c.get("status", "Unknown").lower() for c in status.get("conditions", []) if c.get("type") == "Ready"), "false")
        ready.extend(((namespace, pod, s), float(r == s)) for s in ("true", "false", "unknown"))
        for cs in status.get("containerStatuses", []):
            key = (namespace, pod, cs["name"])
            reason = (cs.get("state", {}).get("waiting") or {}).get("reason")
            waiting.extend(((*key, w), float(reason == w)) for w in _WAITING)
            restarts.append((key, float(cs.get("restartCount", 0))))
            term = ((cs.get("lastState") or {}).get("terminated") or {}).get("reason")
            if term:
                last.extend(((*key, t), float(term == t)) for t in _TERMINATED)
    _put(store, "kube_pod_status_ready", ("namespace", "pod", "condition"), ready, tick)
    _put(store, "kube_pod_container_status_waiting_reason", ctr + ("reason",), waiting, tick)
    _put(store, "kube_pod_container_status_restarts_total", ctr, restarts, tick)
    _put(store, "kube_pod_container_status_last_terminated_reason", ctr + ("reason",), last, tick)
    ncond, unsched = [], []
    for n in sorted(nodes, key=lambda n: n["metadata"]["name"]):
        name = n["metadata"]["name"]
        for c in n.get("status", {}).get("conditions", []):
            ncond.extend(((name, c["type"], s), float(c.get("status", "").lower() == s)) for s in ("true", "false", "unknown"))
        unsched.append(((name,), float(bool(n.get("spec", {}).get("unschedulable")))))
    _put(store, "kube_node_status_condition", ("node", "condition", "status"), ncond, tick)
    _put(store, "kube_node_spec_unschedulable", ("node",), unsched, tick)

"""Cluster-state metrics from API objects (what the live backend scrapes each tick)."""

from __future__ import annotations

from sremarathon_env.backends.kubernetes.state_metrics import write_state
from sremarathon_env.telemetry.catalogue import CATALOGUE
from sremarathon_env.telemetry.store import MetricStore


def _pod(name, ready, reason=None, restarts=0, last=None, deleting=False):
    cs = {"name": "c", "restartCount": restarts, "state": {"waiting": {"reason": reason}} if reason else {"running": {}}}
    if last:
        cs["lastState"] = {"terminated": {"reason": last}}
    md = {"name": name}
    if deleting:
        md["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": md, "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
                                       "containerStatuses": [cs]}}


def _value(store, name, **labels):
    for fam in store.families(name):
        vals = fam.values(store.n_ticks)
        for r in range(len(fam)):
            if all(fam.labels(r).get(k) == v for k, v in labels.items()):
                return vals[r, -1]
    raise KeyError((name, labels))


def test_pods_nodes_and_deployments():
    st = MetricStore(step_s=15.0, capacity=4)
    dep = {"metadata": {"name": "cart", "generation": 3}, "spec": {"replicas": 2},
           "status": {"replicas": 2, "availableReplicas": 1, "unavailableReplicas": 1, "updatedReplicas": 1,
                      "observedGeneration": 3, "conditions": [{"type": "Available", "status": "False"}]}}
    pods = [_pod("cart-1", True), _pod("cart-2", False, "CrashLoopBackOff", 4, "OOMKilled"),
            _pod("cart-0", False, deleting=True)]
    nodes = [{"metadata": {"name": "n1"}, "spec": {"unschedulable": True},
              "status": {"conditions": [{"type": "Ready", "status": "False"}]}}]
    write_state(st, 2, "ns", [dep], pods, nodes)
    assert st.n_ticks == 3
    assert _value(st, "kube_deployment_status_replicas_unavailable", deployment="cart") == 1.0
    assert _value(st, "kube_deployment_status_condition", deployment="cart", condition="Available", status="false") == 1.0
    assert _value(st, "kube_pod_status_ready", pod="cart-2", condition="false") == 1.0
    assert _value(st, "kube_pod_container_status_waiting_reason", pod="cart-2", reason="CrashLoopBackOff") == 1.0
    assert _value(st, "kube_pod_container_status_restarts_total", pod="cart-2") == 4.0
    assert _value(st, "kube_pod_container_status_last_terminated_reason", pod="cart-2", reason="OOMKilled") == 1.0
    assert _value(st, "kube_node_status_condition", node="n1", condition="Ready", status="false") == 1.0
    assert _value(st, "kube_node_spec_unschedulable", node="n1") == 1.0
    names = {f.name for n in st.names() for f in st.families(n)}
    assert all(n in CATALOGUE for n in names)          # only families the twin's catalogue defines
    for n in names:                                     # ... with the catalogue's label names
        assert all(f.label_names == CATALOGUE[n].labels for f in st.families(n)), n
    assert all("cart-0" != f.labels(r).get("pod") for f in st.families("kube_pod_status_ready") for r in range(len(f)))

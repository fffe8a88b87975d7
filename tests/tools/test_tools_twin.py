"""Every tool's happy path and main error paths against the real twin (`SimBackend`), its alert
engine and its PromQL engine."""

import pytest
from conftest import advance, twin_runtime

from apps.sources import config_path
from faults.effects import Effect
from sremarathon_env.pipeline import make_diff


@pytest.fixture(scope="module")
def faulty():
    """Twin at t=600 s with 60 % of cartservice's calls failing since t=0 (read-only tests share it)."""
    return twin_runtime(600.0, [Effect(kind="error_rate", service="cartservice", rate=0.6)])


@pytest.fixture
def rt(faulty):
    faulty.begin_invocation(600.0)
    return faulty


def _cart_alert(rt):
    alerts = rt.call("get_alerts", {"service": "cartservice", "state": "firing"}).result["alerts"]
    assert alerts, "the cartservice error-rate fault raises firing alerts by t=600"
    return alerts[0]


def test_get_alerts_real_history(rt):
    r = rt.call("get_alerts")
    assert r.ok and r.result["total_in_history"] == len(rt.ctx.alerts.history()) > 0
    a = _cart_alert(rt)
    assert a["state"] == "firing" and a["labels"]["namespace"] == "online-boutique"
    assert a["first_firing_at"] <= 600.0 and len(a["fingerprint"]) == 16
    crit = rt.call("get_alerts", {"severity": "critical"}).result["alerts"]
    assert crit and all(x["labels"]["severity"] == "critical" for x in crit)
    assert rt.call("get_alerts", {"alertname": "NoSuchAlert"}).result["alerts"] == []


def test_query_metrics_instant_range_and_errors(rt):
    q = 'sum by (destination_workload) (rate(istio_requests_total{reporter="destination",response_code=~"5.."}[5m]))'
    r = rt.call("query_metrics", {"query": q})
    assert r.ok and r.result["resultType"] == "vector" and r.cost_s == 3.0
    by = {s["metric"].get("destination_workload"): float(s["value"][1]) for s in r.result["result"]}
    assert by.get("cartservice", 0) > 0
    r = rt.call("query_metrics", {"query": "sum(rate(istio_requests_total[5m]))", "start_s": 60, "step_s": 60})
    assert r.ok and r.result["resultType"] == "matrix" and len(r.result["result"][0]["values"]) == 10
    assert r.cost_s == 6.0
    r = rt.call("query_metrics", {"query": "sum(rate(istio_requests_total[5m]"})
    assert not r.ok and r.error.type == "query_error" and r.error.details["kind"]
    r = rt.call("query_metrics", {"query": "up", "start_s": 0, "step_s": 15, "end_s": 700})
    assert r.error.type == "validation_error" and "future" in r.error.message


def test_kubectl_get_tables_and_json(rt):
    r = rt.call("kubectl_get", {"kind": "pods"})
    assert r.ok and r.result["columns"] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "NODE"]
    assert len(r.result["rows"]) >= len(rt.ctx.app.services)
    assert all(row["STATUS"] == "Running" and row["READY"] == "1/1" for row in r.result["rows"])
    assert {row["NODE"] for row in r.result["rows"]} <= {n.name for n in rt.ctx.app.topology.nodes}
    assert all(row["AGE"].endswith("m") or row["AGE"].endswith("h") for row in r.result["rows"])
    r = rt.call("kubectl_get", {"kind": "deploy", "name": "cartservice", "output": "json"})
    assert r.ok and r.result["items"][0]["kind"] == "Deployment" and r.result["count"] == 1
    r = rt.call("kubectl_get", {"kind": "nodes"})
    assert {row["ZONE"] for row in r.result["rows"]} == {"zone-a", "zone-b"}
    assert all(row["STATUS"] == "Ready" for row in r.result["rows"])
    assert rt.call("kubectl_get", {"kind": "svc", "namespace": "online-boutique"}).ok
    assert rt.call("kubectl_get", {"kind": "widgets"}).error.type == "not_found"
    assert rt.call("kubectl_get", {"kind": "pods", "name": "nope-123"}).error.type == "not_found"


def test_deploy_history_and_source(rt):
    r = rt.call("get_deploy_history", {"service": "frontend"})
    assert r.ok and r.result["revisions"][-1]["current"] and "diff" in r.result["revisions"][-1]
    r = rt.call("get_deploy_history", {"service": "frontend", "include_diffs": False})
    assert all("diff" not in rev for rev in r.result["revisions"])
    files = rt.call("read_source", {"service": "frontend"}).result["files"]
    assert files == rt.ctx.backend.source_files("frontend") and files
    r = rt.call("read_source", {"service": "frontend", "path": files[0]})
    assert r.ok and r.result["content"] == rt.ctx.backend.read_source("frontend", files[0])
    assert rt.call("read_source", {"service": "frontend", "path": "nope.go"}).error.type == "not_found"
    assert rt.call("read_source", {"service": "ghost"}).error.type == "not_found"
    assert rt.call("get_deploy_history", {"service": "ghost"}).error.type == "not_found"


def test_logs_and_traces(rt):
    r = rt.call("get_logs", {"service": "cartservice", "limit": 20})
    assert r.ok and 0 < r.result["count"] <= 20 and all(isinstance(x, str) for x in r.result["lines"])
    r = rt.call("get_traces", {"service": "cartservice", "errors_only": True, "limit": 5})
    assert r.ok and 0 < r.result["count"] <= 5


def test_report_with_real_fingerprints_and_scope_from_alert_labels(rt):
    a = _cart_alert(rt)
    r = rt.call("report_incident", {"title": "cart errors", "alert_fingerprints": [a["fingerprint"]]})
    assert r.ok
    iid = r.cited_incident
    # no culprit named: the cited alert's service label decides the scope
    r = rt.call("restart", {"service": "adservice", "incident_id": iid})
    assert r.ok and r.policy.decision == "out_of_scope"
    rt.call("resolve_incident", {"incident_id": iid})


def test_interventions_change_the_twin():
    rt = twin_runtime(300.0)
    iid = rt.call("report_incident", {"title": "cart", "culprit_services": ["cartservice"],
                                      "artifact": "cartservice"}).cited_incident
    r = rt.call("scale", {"service": "cartservice", "replicas": 2, "incident_id": iid})
    assert r.ok and r.policy.decision == "allowed", r.error
    r = rt.call("set_resources", {"service": "cartservice", "mem_limit_mi": 256, "incident_id": iid})
    assert r.ok, r.error
    r = rt.call("set_config", {"target": "cartservice", "key": "REDIS_ADDR", "value": "redis-cart:6379",
                               "incident_id": iid})
    assert r.ok, r.error
    advance(rt, 600.0)
    dep = rt.call("kubectl_get", {"kind": "deployment", "name": "cartservice", "output": "json"}).result["items"][0]
    assert dep["spec"]["replicas"] == 2
    assert dep["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"] == "256Mi"
    pods = [row for row in rt.call("kubectl_get", {"kind": "pods"}).result["rows"]
            if row["NAME"].startswith("cartservice-") and row["STATUS"] == "Running"]
    assert len(pods) == 2
    hist = rt.call("get_deploy_history", {"service": "cartservice"}).result["revisions"]
    assert len(hist) >= 2
    r = rt.call("rollback", {"service": "cartservice", "to_revision": 1, "incident_id": iid})
    assert r.ok, r.error
    r = rt.call("rollback", {"service": "cartservice", "to_revision": 999, "incident_id": iid})
    assert not r.ok and r.error.type == "backend_error"
    r = rt.call("restart", {"service": "cartservice", "incident_id": iid})
    assert r.ok
    advance(rt, 720.0)
    ev = rt.call("get_events", {"involved": "cartservice", "lookback_s": 600})
    assert ev.ok and ev.result["count"] > 0


def test_node_drain_uncordon_and_zone_failover():
    rt = twin_runtime(120.0)
    iid = rt.call("report_incident", {"title": "node", "culprit_services": ["frontend"]}).cited_incident
    node = rt.ctx.app.service("cartservice").node
    r = rt.call("drain_node", {"node": node, "incident_id": iid})
    assert r.ok and "cartservice" in r.target_services, r.error
    advance(rt, 300.0)
    rows = {row["NAME"]: row for row in rt.call("kubectl_get", {"kind": "nodes"}).result["rows"]}
    assert "SchedulingDisabled" in rows[node]["STATUS"]
    pods = rt.call("kubectl_get", {"kind": "pods"}).result["rows"]
    assert not [p for p in pods if p["NODE"] == node and p["STATUS"] == "Running"]
    assert rt.call("uncordon_node", {"node": node, "incident_id": iid}).ok
    r = rt.call("failover_zone", {"zone": "zone-b", "incident_id": iid})
    assert r.ok and len(r.result["nodes"]) == 2, r.error
    assert rt.call("drain_node", {"node": "node-q", "incident_id": iid}).error.type == "not_found"


def test_patch_source_through_the_pipeline():
    rt = twin_runtime(120.0)
    app, svc = rt.ctx.app, "frontend"
    iid = rt.call("report_incident", {"title": "slow", "culprit_services": [svc]}).cited_incident
    tree = {p: rt.ctx.backend.read_source(svc, p) for p in rt.ctx.backend.source_files(svc)}
    path = config_path(app, svc)
    good = make_diff(tree, {**tree, path: tree[path].replace("timeout_ms: 100", "timeout_ms: 150", 1)})
    bad_tests = make_diff(tree, {**tree, path: tree[path].replace("timeout_ms: 100", "timeout_ms: -1", 1)})
    go = next(p for p in sorted(tree) if p.endswith(".go"))
    bad_lint = make_diff(tree, {**tree, go: tree[go] + "\nfunc broken( {\n"})
    for diff, stage in [(bad_tests, "unit_tests"), (bad_lint, "lint"), ("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n", "apply")]:
        r = rt.call("patch_source", {"service": svc, "diff": diff, "incident_id": iid})
        assert not r.ok and r.error.type == "build_failed" and r.error.details["stage_failed"] == stage
        assert r.error.details["log"].startswith("build online-boutique/frontend")
    n_before = len(rt.ctx.backend.deploy_history(svc))
    r = rt.call("patch_source", {"service": svc, "diff": good, "message": "raise ad timeout", "incident_id": iid})
    assert r.ok, r.error
    assert r.result["build"]["ok"] and r.result["build"]["changed"] == [path]
    hist = rt.ctx.backend.deploy_history(svc)
    assert len(hist) == n_before + 1 and hist[-1]["author"] == "agent" and hist[-1]["message"] == "raise ad timeout"
    assert "timeout_ms: 150" in rt.ctx.backend.read_source(svc, path)
    advance(rt, 300.0)
    assert rt.call("read_source", {"service": svc, "path": path}).result["content"].count("timeout_ms: 150") == 1


def test_services_on_nodes_fast_path_equals_the_rendered_pods():
    """The twin answers `services_on_nodes` itself; it must say what the rendered pod list says (the path a
    backend without the method takes), through node loss, a drain and pods rescheduling."""
    from types import SimpleNamespace

    from sremarathon_env.tools.actions import services_on_nodes

    rt = twin_runtime(300.0, [Effect(kind="node_down", node="node-b1")])
    sim = rt.ctx.backend
    pods_only = SimpleNamespace(k8s_get=sim.k8s_get)   # no services_on_nodes: falls back to k8s_get("Pod")
    nodes = [n.name for n in rt.ctx.app.topology.nodes]
    checked = 0
    for t, act in ((300.0, None), (420.0, "drain"), (900.0, None)):
        if act == "drain":
            sim.drain_node(nodes[0])
        advance(rt, t)
        for sel in [[n] for n in nodes] + [nodes[:2], nodes, ["no-such-node"]]:
            fast = services_on_nodes(SimpleNamespace(backend=sim, app=rt.ctx.app), sel)
            slow = services_on_nodes(SimpleNamespace(backend=pods_only, app=rt.ctx.app), sel)
            assert fast == slow, (t, sel)
            checked += bool(fast)
    assert checked > 5

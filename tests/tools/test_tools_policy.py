"""Policy layer: budget, citation, scope, forbidden operations, malformed calls, path safety."""

import json

import pytest

from sremarathon_env.tools import TOOL_NAMES, TOOLS, Limits, ToolContext, ToolRuntime, affected_services, tool_schemas
from sremarathon_env.tools.results import fit

from tool_doubles import ALERTS, OB, History, Recorder


def _incident(rt, **kw):
    args = {"title": "cart down", "alert_fingerprints": ["fp-cart"], "culprit_services": ["cartservice"],
            "artifact": "REDIS_ADDR", **kw}
    r = rt.call("report_incident", args)
    assert r.ok, r.error
    return r.cited_incident


# -- citation ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("tool,args", [
    ("rollback", {"service": "cartservice"}), ("scale", {"service": "cartservice", "replicas": 2}),
    ("restart", {"service": "cartservice"}), ("set_config", {"target": "cartservice", "key": "REDIS_ADDR", "value": "x:1"}),
    ("set_resources", {"service": "cartservice", "mem_limit_mi": 256}),
    ("patch_source", {"service": "cartservice", "diff": "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n"}),
    ("drain_node", {"node": "node-a1"}), ("uncordon_node", {"node": "node-a1"}), ("failover_zone", {"zone": "zone-a"}),
])
def test_every_intervention_requires_an_open_incident(rt, rec, tool, args):
    r = rt.call(tool, args)
    assert not r.ok and r.error.type == "policy_refused" and r.policy.decision == "refused"
    assert "cite an open incident" in r.error.message
    r = rt.call(tool, {**args, "incident_id": "INC-0042"})
    assert r.error.type == "policy_refused" and "does not exist" in r.error.message
    assert r.cited_incident == "INC-0042"
    iid = _incident(rt)
    rt.call("resolve_incident", {"incident_id": iid})
    r = rt.call(tool, {**args, "incident_id": iid})
    assert r.error.type == "policy_refused" and "resolved" in r.error.message
    assert rec.ops == []  # nothing reached the backend


def test_cited_in_scope_intervention_runs(rt, rec):
    iid = _incident(rt)
    r = rt.call("restart", {"service": "cartservice", "incident_id": iid})
    assert r.ok and r.policy.decision == "allowed" and r.cited_incident == iid
    assert r.target_services == ["cartservice"] and r.category == "intervention"
    assert rec.ops == [("restart", "cartservice")]
    assert r.cost_s == TOOLS["restart"].COST_S


# -- scope ------------------------------------------------------------------------------------------
def test_affected_services_rule():
    # cartservice: itself, transitive callers (frontend, checkoutservice), callees (redis-cart)
    assert affected_services(OB, ["cartservice"], []) == ["frontend", "cartservice", "checkoutservice", "redis-cart"]
    # from alert labels only: a pod label maps to its service, destination_workload is a service
    assert set(affected_services(OB, [], [{"destination_workload": "paymentservice"}])) == \
        {"paymentservice", "checkoutservice", "frontend"}
    assert affected_services(OB, ["no-such"], [{"service": "nope"}]) == []


def test_out_of_scope_intervention_runs_but_is_flagged(rt, rec):
    iid = _incident(rt)
    r = rt.call("restart", {"service": "productcatalogservice", "incident_id": iid})
    assert r.ok and r.policy.decision == "out_of_scope"
    assert "productcatalogservice" in r.policy.reason and iid in r.policy.reason
    assert rec.ops == [("restart", "productcatalogservice")]


def test_scope_includes_cited_alert_services(rt):
    iid = _incident(rt, alert_fingerprints=["fp-pay"], culprit_services=[])
    assert rt.call("restart", {"service": "paymentservice", "incident_id": iid}).policy.decision == "allowed"
    assert rt.call("restart", {"service": "cartservice", "incident_id": iid}).policy.decision == "out_of_scope"


def test_multi_target_scope_node_and_config_map(rt):
    iid = _incident(rt)
    cart_node = OB.service("cartservice").node
    r = rt.call("drain_node", {"node": cart_node, "incident_id": iid})
    assert r.ok and "cartservice" in r.target_services and r.policy.decision == "allowed"
    other = next(n.name for n in OB.topology.nodes
                 if not {s.name for s in OB.services if s.node == n.name} & set(affected_services(OB, ["cartservice"], [])))
    r = rt.call("drain_node", {"node": other, "incident_id": iid})
    assert r.ok and r.policy.decision == "out_of_scope"
    zone = OB.zone_of("cartservice")
    r = rt.call("failover_zone", {"zone": zone, "incident_id": iid})
    assert r.policy.decision == "allowed" and "cartservice" in r.target_services


def test_unknown_targets_are_not_found(rt, rec):
    iid = _incident(rt)
    for tool, args in [("restart", {"service": "ghost"}), ("drain_node", {"node": "node-z9"}),
                       ("failover_zone", {"zone": "zone-q"}), ("set_config", {"target": "nope", "key": "K", "value": "v"})]:
        r = rt.call(tool, {**args, "incident_id": iid})
        assert not r.ok and r.error.type == "not_found", (tool, r.error)
    assert rec.ops == []


def test_backend_refusal_is_a_structured_error():
    rt = ToolRuntime(ToolContext(backend=Recorder(fail=True), app=OB, alerts=History(ALERTS), now=360.0))
    iid = _incident(rt)
    r = rt.call("scale", {"service": "cartservice", "replicas": 3, "incident_id": iid})
    assert not r.ok and r.error.type == "backend_error" and "refused by test double" in r.error.message


# -- forbidden --------------------------------------------------------------------------------------
FORBIDDEN = [
    ("read_secret", {"name": "redis-password"}),
    ("read_secret", {"name": "x", "namespace": "online-boutique"}),
    ("delete_namespace", {"namespace": "online-boutique"}),
    ("delete_namespace", {"namespace": "default"}),
    ("edit_alert_rules", {"alertname": "KubePodCrashLooping", "action": "silence"}),
    ("kubectl_get", {"kind": "secrets"}),
    ("kubectl_get", {"kind": "Secret/db-creds"}),
    ("kubectl_get", {"kind": "pods", "namespace": "kube-system"}),
    ("get_events", {"namespace": "kube-system"}),
    ("get_logs", {"service": "frontend", "namespace": "monitoring"}),
    ("restart", {"service": "coredns", "namespace": "kube-system", "incident_id": "INC-0001"}),
    ("scale", {"service": "cartservice", "replicas": 0, "namespace": "default", "incident_id": "INC-0001"}),
]


@pytest.mark.parametrize("tool,args", FORBIDDEN)
def test_forbidden_operations_refused_and_recorded(rt, rec, tool, args):
    _incident(rt)
    before = rt.forbidden_attempts
    r = rt.call(tool, args)
    assert not r.ok and r.error.type == "forbidden" and r.policy.decision == "forbidden"
    assert r.args is not None and r.tool == tool  # recorded with its validated arguments
    assert rt.forbidden_attempts == before + 1
    assert rec.ops == [] and r.cost_s == Limits().invalid_call_cost_s
    assert r in rt.results


def test_forbidden_tools_are_in_the_catalogue():
    for t in ("read_secret", "delete_namespace", "edit_alert_rules"):
        assert t in TOOL_NAMES and TOOLS[t].CATEGORY == "forbidden"


# -- budget -----------------------------------------------------------------------------------------
def test_budget_spent_per_call_and_refused_past_it(rt):
    spent = 0.0
    while True:
        r = rt.call("get_topology", {})
        if not r.ok:
            break
        spent += r.cost_s
        assert r.budget_left_s == pytest.approx(110.0 - spent)
    assert r.error.type == "budget_exhausted" and r.cost_s == 0.0 and spent == pytest.approx(110.0)
    assert rt.call("list_workspace").error.type == "budget_exhausted"
    rt.begin_invocation(480.0)
    r = rt.call("get_topology")
    assert r.ok and r.t == 480.0 and r.index == 0 and r.budget_left_s == 108.0


def test_call_costing_more_than_left_is_refused_without_charge(rt):
    rt.ctx.budget_s = 5.0
    r = rt.call("get_logs", {"service": "frontend"})  # 5 s: fits exactly
    assert r.ok and rt.ctx.budget_s == 0.0
    rt.ctx.budget_s = 4.0
    r = rt.call("get_traces", {})  # 6 s
    assert r.error.type == "budget_exhausted" and r.cost_s == 0 and rt.ctx.budget_s == 4.0


def test_range_query_cost_grows_with_points():
    q = TOOLS["query_metrics"]
    assert q(query="up").cost(600) == 3.0
    assert q(query="up", start_s=0).cost(600) == 6.0
    assert q(query="up", start_s=0, step_s=15).cost(5400) == 7.0
    assert q(query="up", start_s=0, end_s=200_000, step_s=15).cost(0) == 20.0


# -- malformed calls --------------------------------------------------------------------------------
@pytest.mark.parametrize("name,args,etype", [
    ("get_logs", "{not json", "validation_error"),
    ("get_logs", "[1, 2]", "validation_error"),
    ("get_logs", [1, 2], "validation_error"),
    ("get_logs", 42, "validation_error"),
    ("get_logs", {"service": 5}, "validation_error"),
    ("get_logs", {"service": "frontend", "limit": 10**9}, "validation_error"),
    ("get_logs", {"service": "frontend", "bogus": 1}, "validation_error"),
    ("get_logs", {}, "validation_error"),
    ("get_logs", "x" * 2_000_000, "validation_error"),
    ("get_logs", {"service": "frontend", "pattern": "(unclosed"}, "validation_error"),
    ("get_logs", {"service": "ghost"}, "not_found"),
    ("set_resources", {"service": "cartservice", "incident_id": "INC-0001"}, "validation_error"),
    ("query_metrics", {"query": "up", "end_s": 10}, "validation_error"),
    ("query_metrics", {"query": "up", "time_s": 10**6}, "validation_error"),
    ("no_such_tool", {}, "unknown_tool"),
    (None, None, "unknown_tool"),
    (12, {}, "unknown_tool"),
])
def test_malformed_calls_get_structured_errors(rt, name, args, etype):
    r = rt.call(name, args)
    assert not r.ok and r.error.type == etype, r.error
    json.dumps(r.to_json())
    assert r.raw_args is None or len(r.raw_args) <= Limits().raw_args_chars


def test_none_and_empty_string_mean_no_arguments(rt):
    assert rt.call("get_topology", None).ok and rt.call("get_topology", "").ok and rt.call("get_topology", " ").ok


def test_openai_tool_call_shape(rt):
    r = rt.call_openai({"type": "function", "function": {"name": "get_alerts", "arguments": '{"state": "firing"}'}})
    assert r.ok and [a["fingerprint"] for a in r.result["alerts"]] == ["fp-cart"]
    assert rt.call_openai("garbage").error.type == "unknown_tool"


# -- results ----------------------------------------------------------------------------------------
def test_fit_truncates_lists_and_strings():
    big = {"lines": [f"line {i} " * 10 for i in range(1000)], "service": "x"}
    out, cut = fit(big, 2000)
    assert cut and 0 < len(out["lines"]) < 1000 and out["omitted"] == 1000 - len(out["lines"])
    assert len(json.dumps(out, separators=(",", ":"))) <= 2000
    out, cut = fit({"content": "y" * 10_000}, 1000)
    assert cut and "characters truncated" in out["content"]
    assert fit({"a": 1}, 1000) == ({"a": 1}, False)
    out, cut = fit([{"k": "v" * 50}] * 100, 500)
    assert cut and len(out) < 100


# -- schemas ----------------------------------------------------------------------------------------
def test_schemas_cover_every_tool_and_match():
    oa, mcp = tool_schemas("openai"), tool_schemas("mcp")
    assert [s["function"]["name"] for s in oa] == list(TOOL_NAMES) == [s["name"] for s in mcp]
    for o, m in zip(oa, mcp):
        assert o["function"]["parameters"] == m["inputSchema"]
        assert o["function"]["parameters"]["additionalProperties"] is False
        assert "Cost:" in o["function"]["description"] and len(o["function"]["description"]) > 40
        json.dumps(o)
    by = {s["name"]: s for s in mcp}
    assert "incident_id" in by["restart"]["inputSchema"]["required"]
    assert by["get_logs"]["annotations"]["readOnlyHint"] and by["restart"]["annotations"]["destructiveHint"]
    assert 19 <= len(TOOL_NAMES) <= 30
    with pytest.raises(ValueError):
        tool_schemas("yaml")


# -- recorder views ---------------------------------------------------------------------------------
def test_recorder_views_fit_the_bundle_schema(rt):
    from sremarathon_env.bundle.schema import ActionRecord, IncidentRecord, ToolCall

    rep = rt.call("report_incident", {"title": "cart", "culprit_services": ["cartservice"], "artifact": "REDIS_ADDR"})
    iid = rep.cited_incident
    calls = [rep, rt.call("restart", {"service": "cartservice", "incident_id": iid}),
             rt.call("restart", {"service": "adservice", "incident_id": iid}),
             rt.call("restart", {"service": "cartservice"}),
             rt.call("kubectl_get", {"kind": "pods", "namespace": "kube-system"}),
             rt.call("read_secret", {"name": "x"}), rt.call("get_topology"), rt.call("nope", "{"),
             rt.call("resolve_incident", {"incident_id": iid})]
    for r in calls:
        ToolCall.model_validate(r.as_tool_call())
    acts = [(r.tool, r.as_action()) for r in calls if r.as_action() is not None]
    assert [t for t, _ in acts] == ["restart", "restart", "restart", "kubectl_get", "read_secret"]
    for _, a in acts:
        ActionRecord.model_validate({"t": 360.0, "invocation": 0, **a})
    (_, ok), (_, oos), (_, uncited), (_, ns), (_, sec) = acts
    assert ok["in_scope"] and ok["ok"] and ok["refused"] is None and ok["targets"] == ["cartservice"]
    assert not oos["in_scope"] and oos["ok"]
    assert not uncited["ok"] and "cite" in uncited["refused"] and not uncited["forbidden"]
    assert ns["forbidden"] and sec["forbidden"] and not sec["ok"]
    ops = [r.as_incident_op() for r in calls if r.as_incident_op() is not None]
    assert [o["op"] for o in ops] == ["report", "resolve"] and ops[1]["status"] == "resolved"
    for o in ops:
        IncidentRecord.model_validate({"t": 360.0, "invocation": 0, **o})


def test_node_action_in_scope_when_the_incident_names_the_node_even_with_no_pods_left():
    """A drained node has no pods, so no service names it; citing its NodeNotReady alert (label node)
    or naming it as artifact keeps uncordon_node in scope."""
    from apps import load_app
    from sremarathon_env.backends.sim import SimBackend
    from sremarathon_env.tools import ToolContext, ToolRuntime

    app = load_app("online-boutique")
    backend = SimBackend(app, 0)
    rt = ToolRuntime(ToolContext(backend=backend, app=app))
    rt.begin_invocation(120.0)
    inc = rt.call("report_incident", {"title": "node down", "alert_fingerprints": [],
                                      "culprit_services": ["frontend", "adservice"], "artifact": "node-a1",
                                      "summary": "node-a1 not ready"}).result["incident"]["id"]
    assert rt.call("drain_node", {"node": "node-a1", "incident_id": inc}).policy.decision == "allowed"
    backend.advance_to(240.0)
    rt.begin_invocation(240.0)
    r = rt.call("uncordon_node", {"node": "node-a1", "incident_id": inc})
    assert r.ok and r.policy.decision == "allowed", r
    other = rt.call("report_incident", {"title": "cart", "alert_fingerprints": [], "culprit_services": ["cartservice"],
                                        "artifact": "cartservice:image", "summary": "x"}).result["incident"]["id"]
    r = rt.call("uncordon_node", {"node": "node-b2", "incident_id": other})
    assert r.policy.decision == "out_of_scope"

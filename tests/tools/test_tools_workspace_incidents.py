"""Workspace and incident tools: happy paths, caps, path traversal, incident lifecycle."""

import pytest

from sremarathon_env.tools import Limits, ToolContext, ToolRuntime, Workspace, WorkspaceError
from tool_doubles import ALERTS, OB, History, Recorder

TRAVERSAL = ["../secrets.txt", "notes/../../etc/passwd", "/etc/passwd", "a\x00b", "a\\..\\b", "..", ".", "",
             "./../x"]


def test_workspace_roundtrip_and_persistence_across_invocations(rt):
    assert rt.call("write_workspace", {"path": "notes/plan.md", "content": "step 1"}).ok
    assert rt.call("write_workspace", {"path": "notes/plan.md", "content": "\nstep 2", "mode": "append"}).ok
    rt.begin_invocation(480.0)
    r = rt.call("read_workspace", {"path": "./notes/plan.md"})
    assert r.ok and r.result["content"] == "step 1\nstep 2"
    r = rt.call("list_workspace")
    assert r.result["files"] == [{"path": "notes/plan.md", "bytes": 13}] and r.result["total_bytes"] == 13
    assert rt.call("write_workspace", {"path": "notes/plan.md", "mode": "delete"}).ok
    assert rt.call("read_workspace", {"path": "notes/plan.md"}).error.type == "not_found"
    assert rt.call("write_workspace", {"path": "notes/plan.md", "mode": "delete"}).error.type == "not_found"


@pytest.mark.parametrize("path", TRAVERSAL)
def test_workspace_path_traversal_refused(rt, path):
    for tool, args in [("write_workspace", {"path": path, "content": "x"}), ("read_workspace", {"path": path})]:
        r = rt.call(tool, args)
        assert not r.ok and r.error.type in ("policy_refused", "validation_error"), (path, r.error)
    assert rt.ctx.workspace.list() == []


@pytest.mark.parametrize("path", TRAVERSAL)
def test_read_source_path_traversal_refused(rt, path):
    r = rt.call("read_source", {"service": "frontend", "path": path})
    assert not r.ok and r.error.type in ("policy_refused", "validation_error"), (path, r.error)


def test_workspace_caps():
    lim = Limits(workspace_file_bytes=10, workspace_total_bytes=25, workspace_files=3)
    ws = Workspace(lim)
    ws.write("a", "x" * 10)
    with pytest.raises(WorkspaceError, match="per-file cap"):
        ws.write("b", "x" * 11)
    with pytest.raises(WorkspaceError, match="per-file cap"):
        ws.write("a", "y", mode="append")
    ws.write("b", "x" * 10)
    with pytest.raises(WorkspaceError, match="over the cap"):
        ws.write("c", "x" * 6)
    ws.write("c", "é" * 2)  # 4 bytes in UTF-8
    assert ws.total_bytes == 24
    with pytest.raises(WorkspaceError, match="maximum of 3 files"):
        ws.write("d", "")
    rt = ToolRuntime(ToolContext(backend=Recorder(), app=OB, workspace=ws, limits=lim))
    r = rt.call("write_workspace", {"path": "e", "content": "1"})
    assert r.error.type == "policy_refused" and r.error.details == {"reason": "too_large"}
    assert ws.snapshot() == {"a": "x" * 10, "b": "x" * 10, "c": "éé"}


def test_incident_lifecycle(rt):
    r = rt.call("report_incident", {"title": "cart crash loop", "alert_fingerprints": ["fp-cart"],
                                    "culprit_services": ["cartservice"], "artifact": "cartservice: REDIS_ADDR",
                                    "summary": "redis address wrong"})
    assert r.ok and r.category == "report" and r.cited_incident == "INC-0001"
    inc = r.result["incident"]
    assert inc["status"] == "open" and inc["opened_at"] == 360.0 and inc["revision"] == 1
    r2 = rt.call("report_incident", {"title": "payments"})
    assert r2.cited_incident == "INC-0002"
    r = rt.call("update_incident", {"incident_id": "INC-0002", "add_alert_fingerprints": ["fp-pay"],
                                    "culprit_services": ["paymentservice"]})
    assert r.ok and r.result["incident"]["alert_fingerprints"] == ["fp-pay"] and r.result["incident"]["revision"] == 2
    r = rt.call("resolve_incident", {"incident_id": "INC-0002", "summary": "fixed"})
    assert r.ok and r.result["incident"]["status"] == "resolved" and r.result["incident"]["resolved_at"] == 360.0
    assert rt.ctx.incidents.open_ids() == ["INC-0001"]
    assert rt.call("update_incident", {"incident_id": "INC-0002", "title": "x"}).error.type == "policy_refused"
    assert rt.call("resolve_incident", {"incident_id": "INC-0002"}).error.type == "policy_refused"
    assert rt.call("resolve_incident", {"incident_id": "INC-0099"}).error.type == "not_found"
    assert [i.revision for i in rt.ctx.incidents.history] == [1, 1, 2, 3]


def test_incident_validation(rt):
    r = rt.call("report_incident", {"title": "x", "culprit_services": ["ghost"]})
    assert r.error.type == "not_found" and r.error.details["unknown"] == ["ghost"]
    r = rt.call("report_incident", {"title": "x", "alert_fingerprints": ["nope"]})
    assert r.error.type == "not_found" and "nope" in r.error.message
    assert rt.call("report_incident", {"title": ""}).error.type == "validation_error"
    assert len(rt.ctx.incidents) == 0


def test_get_alerts_filters(rt):
    r = rt.call("get_alerts", {})
    assert [a["fingerprint"] for a in r.result["alerts"]] == ["fp-cart", "fp-pay"]
    assert [a["fingerprint"] for a in rt.call("get_alerts", {"state": "resolved"}).result["alerts"]] == ["fp-pay"]
    assert [a["fingerprint"] for a in rt.call("get_alerts", {"service": "cartservice"}).result["alerts"]] == ["fp-cart"]
    assert [a["fingerprint"] for a in rt.call("get_alerts", {"severity": "critical"}).result["alerts"]] == ["fp-pay"]
    assert [a["fingerprint"] for a in rt.call("get_alerts", {"since_s": 250}).result["alerts"]] == ["fp-cart"]
    r = rt.call("get_alerts", {"limit": 1})
    assert [a["fingerprint"] for a in r.result["alerts"]] == ["fp-pay"] and r.result["matched"] == 2


def test_topology(rt):
    r = rt.call("get_topology")
    names = [s["name"] for s in r.result["services"]]
    assert names == OB.service_names and r.result["zones"] == ["zone-a", "zone-b"]
    edges = [dict(zip(r.result["edge_columns"], e)) for e in r.result["edges"]]
    assert {(e["caller"], e["callee"]) for e in edges} == {(e.caller, e.callee) for e in OB.edges}
    assert next(e for e in edges if e["callee"] == "cartservice" and e["caller"] == "frontend")["protocol"] == "grpc"
    assert not r.truncated


def test_topology_of_the_largest_app_fits_uncut():
    from apps import load_app

    tt = load_app("train-ticket")
    rt = ToolRuntime(ToolContext(backend=Recorder(tt), app=tt))
    r = rt.call("get_topology")
    assert r.ok and not r.truncated and len(r.result["edges"]) == len(tt.edges)

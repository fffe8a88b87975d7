"""Handlers of the free read tools. Each takes the `ToolContext` and validated arguments and returns
a JSON-able dict, or raises `ToolFailure` (not_found, query_error, policy_refused...).

>>> from apps import load_app
>>> kind_of("po"), kind_of("Deployments"), kind_of("svc")
('Pod', 'Deployment', 'Service')
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sremarathon_env.pipeline.diff import safe_relpath
from sremarathon_env.tools import specs as S
from sremarathon_env.tools.alertview import AlertView
from sremarathon_env.tools.policy import services_in_labels
from sremarathon_env.tools.results import ToolFailure
from sremarathon_env.tools.workspace import WorkspaceError

if TYPE_CHECKING:
    from sremarathon_env.tools.runtime import ToolContext

_KINDS = {
    "Pod": ("po", "pod", "pods"),
    "Deployment": ("deploy", "deployment", "deployments"),
    "ReplicaSet": ("rs", "replicaset", "replicasets"),
    "Service": ("svc", "service", "services"),
    "Endpoints": ("ep", "endpoint", "endpoints"),
    "Node": ("no", "node", "nodes"),
    "ConfigMap": ("cm", "configmap", "configmaps"),
    "Event": ("ev", "event", "events"),
    "StatefulSet": ("sts", "statefulset", "statefulsets"),
    "HorizontalPodAutoscaler": ("hpa", "horizontalpodautoscaler", "horizontalpodautoscalers"),
    "ResourceQuota": ("quota", "resourcequota", "resourcequotas"),
    "Namespace": ("ns", "namespace", "namespaces"),
}
_KIND_ALIASES = {a: k for k, aliases in _KINDS.items() for a in aliases}


def kind_of(kind: str) -> str | None:
    k = kind.strip().lower().split("/")[0].split(".")[0]
    return _KIND_ALIASES.get(k)


def require_service(ctx: "ToolContext", service: str) -> None:
    if service not in ctx.app.service_names:
        raise ToolFailure("not_found", f"unknown service {service!r}",
                          {"known_services": ctx.app.service_names})


def alert_dict(a: Any) -> dict[str, Any]:
    """A JSON-able dict of one alert of `AlertEngine.history()` (a copy when it already is a dict)."""
    if isinstance(a, dict):
        return dict(a)
    if hasattr(a, "model_dump"):
        return a.model_dump(mode="json")
    if hasattr(a, "to_json"):
        return a.to_json()
    if hasattr(a, "__dataclass_fields__"):
        import dataclasses

        return dataclasses.asdict(a)
    return dict(vars(a))


def alert_history(ctx: "ToolContext") -> list[dict[str, Any]]:
    if ctx.alerts is None:
        return []
    return [alert_dict(a) for a in ctx.alerts.history()]


def alert_entries(ctx: "ToolContext") -> list[dict[str, Any]]:
    """`alert_history`'s alerts without copying: SHARED dicts, read-only (from the engine's `AlertView`
    when it has one)."""
    if ctx.alerts is None:
        return []
    view = AlertView.of(ctx.alerts)
    return view.history() if view is not None else alert_history(ctx)


def alert_labels(ctx: "ToolContext", fingerprints: set[str]) -> list[dict[str, Any]]:
    """Labels of the history's alerts with one of ``fingerprints``, in history order (read-only)."""
    view = AlertView.of(ctx.alerts)
    if view is not None:
        return view.labels_of(fingerprints)
    return [a.get("labels") or {} for a in alert_history(ctx) if str(a.get("fingerprint")) in fingerprints]


def known_fingerprints(ctx: "ToolContext") -> set[str]:
    """Fingerprints of every alert of the history (read-only)."""
    view = AlertView.of(ctx.alerts)
    if view is not None:
        return view.fingerprints()
    return {str(a.get("fingerprint")) for a in alert_history(ctx)}


def _times(a: dict[str, Any]) -> list[float]:
    out = []
    for k, v in a.items():
        if (k.endswith("_at") or k.endswith("_t") or k.startswith("first_") or k.startswith("last_")) \
                and isinstance(v, (int, float)) and not isinstance(v, bool):
            out.append(float(v))
    return out


def get_alerts(ctx: "ToolContext", a: S.GetAlerts) -> dict:
    hist = alert_entries(ctx)
    out = []
    for al in hist:
        labels = al.get("labels") or {}
        if a.state != "any" and al.get("state") != a.state:
            continue
        if a.alertname is not None and al.get("alertname", labels.get("alertname")) != a.alertname:
            continue
        if a.severity is not None and labels.get("severity") != a.severity:
            continue
        if a.service is not None and a.service not in services_in_labels(ctx.app, labels):
            continue
        if a.since_s is not None:
            still_active = al.get("state") in ("pending", "firing")
            if not still_active and not any(t >= a.since_s for t in _times(al)):
                continue
        out.append(al)
    shown = [alert_dict(al) for al in out[-a.limit:]]
    return {"alerts": shown, "count": len(shown), "matched": len(out), "total_in_history": len(hist)}


def query_metrics(ctx: "ToolContext", a: S.QueryMetrics) -> dict:
    now = ctx.now
    for name in ("time_s", "start_s", "end_s"):
        v = getattr(a, name)
        if v is not None and v > now:
            raise ToolFailure("validation_error", f"{name}={v:g} is in the future (now is {now:g})")
    if a.start_s is not None and a.points(now) > 11_000:
        raise ToolFailure("validation_error", "range query exceeds 11,000 points per series; "
                          "raise step_s or shorten the range")
    if ctx.promql is None:
        raise ToolFailure("backend_error", "no PromQL engine is attached to this run")
    try:
        if a.start_s is None:
            t = now if a.time_s is None else a.time_s
            return ctx.promql.instant(a.query, t)
        end = now if a.end_s is None else a.end_s
        return ctx.promql.range(a.query, a.start_s, end, a.step_s)
    except ToolFailure:
        raise
    except Exception as exc:  # noqa: BLE001
        kind = getattr(exc, "kind", None)
        if type(exc).__name__ == "QueryError" or kind is not None:
            raise ToolFailure("query_error", str(getattr(exc, "message", exc)), {"kind": kind}) from None
        raise


def get_logs(ctx: "ToolContext", a: S.GetLogs) -> dict:
    require_service(ctx, a.service)
    if a.pattern is not None:
        try:
            re.compile(a.pattern)
        except re.error as exc:
            raise ToolFailure("validation_error", f"pattern is not a valid regular expression: {exc}") from None
    since = max(0.0, ctx.now - a.lookback_s)
    lines = ctx.backend.logs(a.service, since, ctx.now, a.pattern, a.limit)
    return {"service": a.service, "since_s": since, "until_s": ctx.now, "lines": list(lines)[: a.limit],
            "count": min(len(lines), a.limit)}


def get_traces(ctx: "ToolContext", a: S.GetTraces) -> dict:
    if a.service is not None:
        require_service(ctx, a.service)
    since = max(0.0, ctx.now - a.lookback_s)
    traces = ctx.backend.traces(a.service, a.endpoint, since, ctx.now, a.errors_only, a.limit)
    return {"traces": list(traces)[: a.limit], "count": min(len(traces), a.limit)}


def get_topology(ctx: "ToolContext", a: S.GetTopology) -> dict:
    app = ctx.app
    zone = {n.name: n.zone for n in app.topology.nodes}
    return {
        "app": app.name, "namespace": ctx.namespace, "entry_service": app.entry_service,
        "services": [{"name": s.name, "role": s.role, "language": s.language, "protocol": s.protocol,
                      "replicas": s.replicas, "node": s.node, "zone": zone[s.node],
                      "ports": [p.port for p in s.ports]} for s in app.services],
        "edge_columns": ["caller", "callee", "protocol", "on_error", "asynchronous"],
        "edges": [[e.caller, e.callee, e.protocol, e.on_error, e.asynchronous] for e in app.edges],
        "request_paths": [{"name": p.name, "method": p.method, "route": p.route, "weight": p.weight}
                          for p in app.load.paths],
        "nodes": [{"name": n.name, "zone": n.zone, "cpu_m": n.cpu_m, "mem_mi": n.mem_mi}
                  for n in app.topology.nodes],
        "zones": sorted({n.zone for n in app.topology.nodes}),
        "feature_flags": [f.name for f in app.flags],
        "flags_config_map": app.flags_config_map,
    }


# -- kubectl ----------------------------------------------------------------------------------------
def _g(obj: Any, *path: str, default: Any = None) -> Any:
    for p in path:
        if not isinstance(obj, dict):
            return default
        obj = obj.get(p)
    return default if obj is None else obj


def _sim_seconds(ctx: "ToolContext", ts: Any) -> float | None:
    """A Kubernetes timestamp (ISO-8601, or sim seconds) as sim seconds (`ToolContext.epoch` = 0)."""
    if isinstance(ts, (int, float)) and not isinstance(ts, bool):
        return float(ts)
    if isinstance(ts, str):
        try:
            return (datetime.fromisoformat(ts.replace("Z", "+00:00")) - ctx.epoch).total_seconds()
        except (ValueError, TypeError):
            return None
    return None


def _age(ctx: "ToolContext", obj: dict) -> str:
    t = _sim_seconds(ctx, _g(obj, "metadata", "creationTimestamp"))
    if t is None:
        return "-"
    d = max(0, int(ctx.now - t))
    return f"{d}s" if d < 120 else (f"{d // 60}m" if d < 7200 else f"{d // 3600}h")


def _row(ctx: "ToolContext", kind: str, o: dict) -> dict[str, Any]:
    name = _g(o, "metadata", "name", default="?")
    if kind == "Pod":
        cs = _g(o, "status", "containerStatuses", default=[]) or []
        ready = sum(1 for c in cs if isinstance(c, dict) and c.get("ready"))
        status = _g(o, "status", "phase", default="Unknown")
        for c in cs:
            if not isinstance(c, dict):
                continue
            reason = _g(c, "state", "waiting", "reason") or _g(c, "state", "terminated", "reason")
            if reason:
                status = reason
        if _g(o, "metadata", "deletionTimestamp") is not None:
            status = "Terminating"
        restarts = sum(int(c.get("restartCount", 0)) for c in cs if isinstance(c, dict))
        return {"NAME": name, "READY": f"{ready}/{max(len(cs), 1)}", "STATUS": status, "RESTARTS": restarts,
                "AGE": _age(ctx, o), "NODE": _g(o, "spec", "nodeName", default="<none>")}
    if kind in ("Deployment", "StatefulSet"):
        want = _g(o, "spec", "replicas", default=0)
        return {"NAME": name, "READY": f"{_g(o, 'status', 'readyReplicas', default=0)}/{want}",
                "UP-TO-DATE": _g(o, "status", "updatedReplicas", default=0),
                "AVAILABLE": _g(o, "status", "availableReplicas", default=0), "AGE": _age(ctx, o)}
    if kind == "ReplicaSet":
        return {"NAME": name, "DESIRED": _g(o, "spec", "replicas", default=0),
                "CURRENT": _g(o, "status", "replicas", default=0),
                "READY": _g(o, "status", "readyReplicas", default=0), "AGE": _age(ctx, o)}
    if kind == "Node":
        conds = _g(o, "status", "conditions", default=[]) or []
        ready = next((c.get("status") for c in conds if isinstance(c, dict) and c.get("type") == "Ready"), "Unknown")
        status = "Ready" if ready == "True" else "NotReady"
        if _g(o, "spec", "unschedulable"):
            status += ",SchedulingDisabled"
        return {"NAME": name, "STATUS": status,
                "ZONE": _g(o, "metadata", "labels", "topology.kubernetes.io/zone", default="-"), "AGE": _age(ctx, o)}
    if kind == "Service":
        ports = _g(o, "spec", "ports", default=[]) or []
        return {"NAME": name, "TYPE": _g(o, "spec", "type", default="ClusterIP"),
                "CLUSTER-IP": _g(o, "spec", "clusterIP", default="-"),
                "PORT(S)": ",".join(f"{p.get('port')}/{p.get('protocol', 'TCP')}" for p in ports if isinstance(p, dict)),
                "AGE": _age(ctx, o)}
    if kind == "Endpoints":
        addrs = []
        for sub in _g(o, "subsets", default=[]) or []:
            for ad in (sub.get("addresses") or []) if isinstance(sub, dict) else []:
                for p in sub.get("ports") or [{}]:
                    addrs.append(f"{ad.get('ip', '?')}:{p.get('port', '?')}")
        return {"NAME": name, "ENDPOINTS": ",".join(addrs[:3]) + (f" + {len(addrs) - 3} more" if len(addrs) > 3 else "")
                or "<none>", "AGE": _age(ctx, o)}
    if kind == "ConfigMap":
        return {"NAME": name, "DATA": len(_g(o, "data", default={}) or {}), "AGE": _age(ctx, o)}
    return {"NAME": name, "AGE": _age(ctx, o)}


def kubectl_get(ctx: "ToolContext", a: S.KubectlGet) -> dict:
    kind = kind_of(a.kind)
    if kind is None:
        raise ToolFailure("not_found", f"the server doesn't have a resource type {a.kind!r}",
                          {"known_kinds": sorted(_KINDS)})
    objs = ctx.backend.k8s_get(kind, a.name)
    status = next((o for o in objs if isinstance(o, dict) and o.get("kind") == "Status"), None)
    if status is not None:
        raise ToolFailure("not_found", str(status.get("message") or f"cannot list {a.kind!r}"))
    if a.name is not None and not objs:
        raise ToolFailure("not_found", f'{kind.lower()}s "{a.name}" not found')
    objs = [o for o in objs if isinstance(o, dict)]
    if a.output == "json":
        return {"kind": kind, "items": objs, "count": len(objs)}
    rows = [_row(ctx, kind, o) for o in objs]
    return {"kind": kind, "columns": list(rows[0]) if rows else [], "rows": rows, "count": len(rows)}


def _event_name(ev: dict) -> str:
    return str(_g(ev, "involvedObject", "name") or ev.get("name") or "")


def get_events(ctx: "ToolContext", a: S.GetEvents) -> dict:
    since = ctx.now - a.lookback_s
    evs = [e for e in ctx.backend.events(since, ctx.now) if isinstance(e, dict)]
    if a.type is not None:
        evs = [e for e in evs if e.get("type") == a.type]
    if a.involved is not None:
        evs = [e for e in evs if a.involved in _event_name(e)]
    shown = evs[-a.limit:]
    return {"events": shown, "count": len(shown), "matched": len(evs)}


def get_deploy_history(ctx: "ToolContext", a: S.GetDeployHistory) -> dict:
    require_service(ctx, a.service)
    hist = [dict(h) for h in ctx.backend.deploy_history(a.service)]
    if not a.include_diffs:
        for h in hist:
            for k in ("diff", "diffs", "source_diff"):
                h.pop(k, None)
    shown = hist[-a.limit:]
    return {"service": a.service, "revisions": shown, "count": len(shown), "total": len(hist)}


def read_source(ctx: "ToolContext", a: S.ReadSource) -> dict:
    require_service(ctx, a.service)
    if a.path is None:
        files = sorted(ctx.backend.source_files(a.service))
        return {"service": a.service, "files": files, "count": len(files)}
    path = safe_relpath(a.path)
    if path is None:
        raise ToolFailure("policy_refused", f"unsafe path {a.path!r}: paths are relative to the service's "
                          "source tree, without '..', '\\' or NUL")
    text = ctx.backend.read_source(a.service, path)
    if text is None:
        raise ToolFailure("not_found", f"{a.service}: no file {path!r}",
                          {"files": sorted(ctx.backend.source_files(a.service))})
    return {"service": a.service, "path": path, "content": text, "lines": text.count("\n") + (not text.endswith("\n"))}


# -- workspace -----------------------------------------------------------------------------------
def _ws_fail(exc: WorkspaceError) -> ToolFailure:
    t = {"unsafe_path": "policy_refused", "not_found": "not_found", "too_large": "policy_refused"}[exc.kind]
    return ToolFailure(t, exc.message, {"reason": exc.kind})


def list_workspace(ctx: "ToolContext", a: S.ListWorkspace) -> dict:
    ws = ctx.workspace
    return {"files": ws.list(), "total_bytes": ws.total_bytes, "cap_bytes": ws.limits.workspace_total_bytes,
            "cap_files": ws.limits.workspace_files}


def read_workspace(ctx: "ToolContext", a: S.ReadWorkspace) -> dict:
    try:
        return {"path": a.path, "content": ctx.workspace.read(a.path)}
    except WorkspaceError as exc:
        raise _ws_fail(exc) from None


def write_workspace(ctx: "ToolContext", a: S.WriteWorkspace) -> dict:
    try:
        if a.mode == "delete":
            ctx.workspace.delete(a.path)
            return {"path": a.path, "deleted": True, "total_bytes": ctx.workspace.total_bytes}
        size = ctx.workspace.write(a.path, a.content, mode=a.mode)
        return {"path": a.path, "bytes": size, "total_bytes": ctx.workspace.total_bytes}
    except WorkspaceError as exc:
        raise _ws_fail(exc) from None


HANDLERS = {
    "get_alerts": get_alerts, "query_metrics": query_metrics, "get_logs": get_logs, "get_traces": get_traces,
    "get_topology": get_topology, "kubectl_get": kubectl_get, "get_events": get_events,
    "get_deploy_history": get_deploy_history, "read_source": read_source, "list_workspace": list_workspace,
    "read_workspace": read_workspace, "write_workspace": write_workspace,
}

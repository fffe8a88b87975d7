"""Handlers of the scored reporting tools and of the interventions.

Interventions have two parts: ``targets`` (the services the action touches, for the scope rule; raises
``not_found`` for an unknown target) and ``execute`` (carries it out on the backend). A backend that
refuses an operation (``OpResult.ok`` False) gives a ``backend_error`` result with its message.

>>> from sremarathon_env.backends.sim import SimBackend
>>> from sremarathon_env.tools.runtime import ToolContext
>>> sim = SimBackend("online-boutique", seed=0)
>>> ctx = ToolContext(backend=sim, app=sim.app)
>>> config_targets(ctx, "cartservice", "REDIS_ADDR")
['cartservice']
>>> "cartservice" in services_on_nodes(ctx, [sim.app.service("cartservice").node])
True
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from sremarathon_env.tools import specs as S
from sremarathon_env.tools.policy import service_of_pod
from sremarathon_env.tools.reads import _g, known_fingerprints, require_service
from sremarathon_env.tools.results import ToolFailure

if TYPE_CHECKING:
    from sremarathon_env.tools.runtime import ToolContext


# -- reporting ------------------------------------------------------------------------------------
def _check_services(ctx: "ToolContext", services: list[str] | None) -> None:
    if not services:
        return
    unknown = [s for s in services if s not in ctx.app.service_names]
    if unknown:
        raise ToolFailure("not_found", f"unknown culprit service(s): {', '.join(unknown)}",
                          {"unknown": unknown, "known_services": ctx.app.service_names})


def _check_fingerprints(ctx: "ToolContext", fps: list[str] | None) -> None:
    if not fps:
        return
    known = known_fingerprints(ctx)
    unknown = [f for f in fps if f not in known]
    if unknown:
        raise ToolFailure("not_found", f"no alert with fingerprint(s) {', '.join(unknown[:10])} in the alert history",
                          {"unknown": unknown})


def _open_incident(ctx: "ToolContext", incident_id: str):
    inc = ctx.incidents.get(incident_id)
    if inc is None:
        raise ToolFailure("not_found", f"no incident {incident_id!r}", {"open_incidents": ctx.incidents.open_ids()})
    if inc.status != "open":
        raise ToolFailure("policy_refused", f"{incident_id} is resolved and can no longer be changed")
    return inc


def report_incident(ctx: "ToolContext", a: S.ReportIncident) -> dict:
    _check_services(ctx, a.culprit_services)
    _check_fingerprints(ctx, a.alert_fingerprints)
    inc = ctx.incidents.report(title=a.title, alert_fingerprints=list(a.alert_fingerprints),
                               culprit_services=list(a.culprit_services), artifact=a.artifact,
                               summary=a.summary, now=ctx.now)
    return {"incident": inc.model_dump(mode="json")}


def update_incident(ctx: "ToolContext", a: S.UpdateIncident) -> dict:
    _open_incident(ctx, a.incident_id)
    _check_services(ctx, a.culprit_services)
    _check_fingerprints(ctx, list(a.alert_fingerprints or []) + list(a.add_alert_fingerprints))
    inc = ctx.incidents.update(a.incident_id, now=ctx.now, title=a.title, alert_fingerprints=a.alert_fingerprints,
                               add_alert_fingerprints=list(a.add_alert_fingerprints),
                               culprit_services=a.culprit_services, artifact=a.artifact, summary=a.summary)
    return {"incident": inc.model_dump(mode="json")}


def resolve_incident(ctx: "ToolContext", a: S.ResolveIncident) -> dict:
    _open_incident(ctx, a.incident_id)
    inc = ctx.incidents.resolve(a.incident_id, now=ctx.now, summary=a.summary)
    return {"incident": inc.model_dump(mode="json")}


REPORT_HANDLERS = {"report_incident": report_incident, "update_incident": update_incident,
                   "resolve_incident": resolve_incident}


# -- intervention targets --------------------------------------------------------------------------
def _node_names(ctx: "ToolContext") -> list[str]:
    return [n.name for n in ctx.app.topology.nodes]


def _require_node(ctx: "ToolContext", node: str) -> None:
    if node not in _node_names(ctx):
        raise ToolFailure("not_found", f"unknown node {node!r}", {"known_nodes": _node_names(ctx)})


def services_on_nodes(ctx: "ToolContext", nodes: list[str]) -> list[str]:
    """Services with a (non-terminated) pod on one of ``nodes``: the backend's own answer where it has one
    (the twin: without rendering every pod), else from its pod list."""
    fast = getattr(ctx.backend, "services_on_nodes", None)
    if fast is not None:
        return list(fast(list(nodes)))
    found = set()
    for pod in ctx.backend.k8s_get("Pod", None):
        if not isinstance(pod, dict) or _g(pod, "spec", "nodeName") not in nodes:
            continue
        if _g(pod, "status", "phase") in ("Succeeded", "Failed"):
            continue
        svc = _g(pod, "metadata", "labels", "app")
        if svc not in ctx.app.service_names:
            svc = service_of_pod(ctx.app, str(_g(pod, "metadata", "name", default="")))
        if svc:
            found.add(svc)
    return [s for s in ctx.app.service_names if s in found]


def config_targets(ctx: "ToolContext", target: str, key: str) -> list[str]:
    app = ctx.app
    if target in app.service_names:
        return [target]
    if app.flags_config_map and target == app.flags_config_map:
        for f in app.flags:
            if key == f.name or key in f.aliases:
                return list(f.consumers)
        raise ToolFailure("not_found", f"no feature flag {key!r} in {target}",
                          {"flags": [f.name for f in app.flags]})
    consumers = [s.name for s in app.services if any(k.config_map == target for k in s.knobs)]
    if consumers:
        return consumers
    maps = sorted({k.config_map for s in app.services for k in s.knobs if k.config_map}
                  | ({app.flags_config_map} if app.flags_config_map else set()))
    raise ToolFailure("not_found", f"{target!r} is neither a service nor a config map of the app",
                      {"config_maps": maps, "services": app.service_names})


def _service_target(ctx: "ToolContext", a: Any) -> list[str]:
    require_service(ctx, a.service)
    return [a.service]


def _zone_nodes(ctx: "ToolContext", zone: str) -> list[str]:
    nodes = [n.name for n in ctx.app.topology.nodes if n.zone == zone]
    if not nodes:
        raise ToolFailure("not_found", f"unknown zone {zone!r}",
                          {"zones": sorted({n.zone for n in ctx.app.topology.nodes})})
    return nodes


def _drain_targets(ctx: "ToolContext", a: S.DrainNode | S.UncordonNode) -> list[str]:
    _require_node(ctx, a.node)
    return services_on_nodes(ctx, [a.node])


TARGETS: dict[str, Callable[["ToolContext", Any], list[str]]] = {
    "rollback": _service_target, "scale": _service_target, "restart": _service_target,
    "set_resources": _service_target, "patch_source": _service_target,
    "set_config": lambda ctx, a: config_targets(ctx, a.target, a.key),
    "drain_node": _drain_targets, "uncordon_node": _drain_targets,
    "failover_zone": lambda ctx, a: services_on_nodes(ctx, _zone_nodes(ctx, a.zone)),
}


# -- intervention execution ------------------------------------------------------------------------
def _op(res: Any) -> dict:
    if not res.ok:
        raise ToolFailure("backend_error", res.message, dict(res.data) if res.data else None)
    return {"message": res.message, **({"data": dict(res.data)} if res.data else {})}


def patch_source(ctx: "ToolContext", a: S.PatchSource) -> dict:
    be = ctx.backend
    build = ctx.pipeline.build(a.service, ctx.pipeline.current_tree(be, a.service), a.diff)
    if not build.ok:
        raise ToolFailure("build_failed", f"build rejected at stage {build.stage_failed}", build.to_json())
    res = be.deploy(a.service, files=build.files, message=a.message, author="agent")
    out = _op(res)
    out["build"] = build.to_json()
    return out


def failover_zone(ctx: "ToolContext", a: S.FailoverZone) -> dict:
    nodes = _zone_nodes(ctx, a.zone)
    others = [n.name for n in ctx.app.topology.nodes if n.zone != a.zone]
    if not others:
        raise ToolFailure("backend_error", f"{a.zone} is the only zone: there is nowhere to fail over to")
    results = []
    for n in nodes:
        r = ctx.backend.drain_node(n)
        results.append({"node": n, "ok": r.ok, "message": r.message})
    if not all(r["ok"] for r in results):
        raise ToolFailure("backend_error", f"fail-over of {a.zone} incomplete", {"nodes": results})
    return {"message": f"drained {len(nodes)} node(s) of {a.zone}", "nodes": results}


def _resources(ctx: "ToolContext", a: S.SetResources) -> dict:
    kw = {k: getattr(a, k) for k in ("cpu_request_m", "cpu_limit_m", "mem_request_mi", "mem_limit_mi")
          if getattr(a, k) is not None}
    return _op(ctx.backend.set_resources(a.service, **kw))


EXECUTE: dict[str, Callable[["ToolContext", Any], dict]] = {
    "rollback": lambda ctx, a: _op(ctx.backend.rollback(a.service, a.to_revision)),
    "scale": lambda ctx, a: _op(ctx.backend.scale(a.service, a.replicas)),
    "restart": lambda ctx, a: _op(ctx.backend.restart(a.service)),
    "set_config": lambda ctx, a: _op(ctx.backend.set_config(a.target, a.key, a.value)),
    "set_resources": _resources,
    "patch_source": patch_source,
    "drain_node": lambda ctx, a: _op(ctx.backend.drain_node(a.node)),
    "uncordon_node": lambda ctx, a: _op(ctx.backend.uncordon_node(a.node)),
    "failover_zone": failover_zone,
}

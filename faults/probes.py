"""Evaluate a fault's symptom `Probe` against any `Backend` from its health reads.

A probe is *healthy* when its condition holds. Missing traffic (no requests on a path or edge in the
current tick, reported as NaN or a zero rate) is no evidence of failure and counts as healthy, except
for readiness and rollout probes, which read the cluster state directly.

Edge and service probes read the *own* part of the health reads when the backend has it
(``own_error_ratio``, ``own_p95_ms``: failures and latency arising at that hop, not propagated from
the callee's downstream, see `sremarathon_env.backends.sim.traffic`), so that a fault further down
the call graph, or a saturated tier, does not keep the probe of an already repaired fault failing.
Backends without the decomposition answer with the whole-hop reads.

>>> from faults.model import Probe
>>> class Fake:
...     def path_health(self, path): return {"rate": 10.0, "error_ratio": 0.4, "p95_ms": 80.0}
>>> probe_ok(Probe(kind="path_error_ratio_max", path=None, threshold=0.05), Fake())
False
>>> probe_ok(Probe(kind="path_p95_ms_max", path="index", threshold=500), Fake())
True
>>> class Edge:   # 30 % of the calls fail, but only 1 % at this hop (the rest come from downstream)
...     def edge_health(self, c, e): return {"rate": 5.0, "error_ratio": 0.3, "own_error_ratio": 0.01}
>>> probe_ok(Probe(kind="edge_error_ratio_max", caller="a", callee="b", threshold=0.05), Edge())
True
"""

from __future__ import annotations

import math
from typing import Any

from faults.model import Probe


def _num(d: dict[str, Any], *keys: str, default: float = math.nan) -> float:
    for k in keys:
        if k in d and d[k] is not None:
            try:
                return float(d[k])
            except (TypeError, ValueError):
                continue
    return default


def _own(d: dict[str, Any], key: str) -> float:
    """The hop's own part of ``key`` (``own_<key>``) where the backend reports it, else ``key``."""
    return _num(d, f"own_{key}", key)


def _le(value: float, threshold: float) -> bool:
    return math.isnan(value) or value <= threshold


def probe_ok(probe: Probe, backend: Any, memo: dict[str, Any] | None = None, artifact_ok: Any = None,
             rollout_rev: tuple | None = None) -> bool:
    """True when the probe's condition holds now.

    ``memo`` keeps state between evaluations (``restarts_stable`` compares the restart count with
    the previous call). ``artifact_ok`` is a zero-argument callable used by ``artifact`` probes.
    ``rollout_rev``: ``(revision,)``, `rollout_revision` of the probe taken earlier (for a ``rollout_ok`` probe
    read against a past tick after the live state moved on); None: read it now."""
    k = probe.kind
    if k in ("path_error_ratio_max", "path_p95_ms_max", "degraded_ratio_max"):
        h = backend.path_health(probe.path)
        if _num(h, "rate", "total", default=1.0) <= 0:
            return True
        if k == "path_error_ratio_max":
            return _le(_num(h, "error_ratio"), probe.threshold)
        if k == "path_p95_ms_max":
            return _le(_num(h, "p95_ms"), probe.threshold)
        return _le(_num(h, "degraded_ratio"), probe.threshold)
    if k in ("edge_error_ratio_max", "edge_p95_ms_max"):
        h = backend.edge_health(probe.caller, probe.callee)
        if _num(h, "rate", default=1.0) <= 0:
            return True
        return _le(_own(h, "error_ratio" if k == "edge_error_ratio_max" else "p95_ms"), probe.threshold)
    if k == "service_ready_min":
        return _num(backend.service_health(probe.service), "ready", default=0.0) >= probe.threshold
    if k in ("service_error_ratio_max", "service_p95_ms_max"):
        h = backend.service_health(probe.service)
        if _num(h, "rate", default=1.0) <= 0:
            return True
        return _le(_own(h, "error_ratio" if k == "service_error_ratio_max" else "p95_ms"), probe.threshold)
    if k == "memory_util_max":
        return _le(_num(backend.service_health(probe.service), "mem_util", "memory_util"), probe.threshold)
    if k == "cpu_util_max":
        return _le(_num(backend.service_health(probe.service), "cpu_util"), probe.threshold)
    if k == "queue_lag_max":
        return _le(_num(backend.service_health(probe.service), "lag", "queue_lag", "consumer_lag"), probe.threshold)
    if k == "restarts_stable":
        h = backend.service_health(probe.service)
        restarts = _num(h, "restarts", default=0.0)
        key = f"restarts:{probe.service}"
        prev = None if memo is None else memo.get(key)
        if memo is not None:
            memo[key] = restarts
        ready_ok = _num(h, "ready", default=0.0) >= max(1.0, probe.threshold)
        return ready_ok and (prev is None or restarts <= prev)
    if k == "rollout_ok":
        desired = _num(backend.service_health(probe.service), "desired", default=1.0)
        rev = rollout_revision(probe, backend) if rollout_rev is None else rollout_rev[0]
        if rev is None:
            return True
        ready = backend.serving_revisions(probe.service).get(int(rev), 0)
        return ready >= desired
    if k == "artifact":
        return bool(artifact_ok()) if artifact_ok is not None else True
    raise ValueError(f"unknown probe kind {k!r}")


def rollout_revision(probe: Probe, backend: Any) -> Any:
    """The revision a ``rollout_ok`` probe waits for: the current template's (the live state), None if unknown."""
    spec = backend.deployment_spec(probe.service) if hasattr(backend, "deployment_spec") else None
    if spec is not None:
        return spec.get("revision")
    hist = [h for h in (backend.deploy_history(probe.service) or []) if isinstance(h, dict)]
    cur = [h for h in hist if h.get("current")] or hist[-1:]
    return cur[-1].get("revision") if cur else None

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


def _f(d: dict[str, Any], key: str, *more: str, default: float = math.nan) -> float:
    """`_num` with a fast path: a plain float under ``key`` is the answer (`_num` gives the same: ``float(x)`` of a
    float is its value); anything else goes through `_num`."""
    v = d.get(key)
    if v.__class__ is float:
        return v
    return _num(d, key, *more, default=default)


def _ratio_reader(read: Any, args: tuple, key: str, threshold: float) -> Any:
    """A per-request probe (edge, service): healthy without traffic, else ``key`` (the hop's own part where given)
    at most ``threshold`` (NaN: healthy)."""
    own = f"own_{key}"

    def ok(backend: Any, memo: Any, art: Any, rev: Any) -> bool:
        h = getattr(backend, read)(*args)
        if _f(h, "rate", default=1.0) <= 0:
            return True
        v = _f(h, own, key)
        return v != v or v <= threshold
    return ok


def _service_reader(key: str, more: tuple, default: float, threshold: float, service: str, at_least: bool) -> Any:
    """A probe on one service-health number: at least ``threshold`` (``at_least``) or at most it (NaN: healthy)."""
    def ok(backend: Any, memo: Any, art: Any, rev: Any) -> bool:
        v = _f(backend.service_health(service), key, *more, default=default)
        if at_least:
            return v >= threshold
        return v != v or v <= threshold
    return ok


def _rollout_reader(probe: Probe) -> Any:
    """``rollout_ok`` with its revision given (``rollout_rev``, a 1-tuple); without it, through `probe_ok`."""
    service = probe.service

    def ok(backend: Any, memo: Any, art: Any, rev: Any) -> bool:
        if rev is None:
            return probe_ok(probe, backend, memo, rollout_rev=None)
        desired = _f(backend.service_health(service), "desired", default=1.0)
        if rev[0] is None:
            return True
        return backend.serving_revisions(service).get(int(rev[0]), 0) >= desired
    return ok


def probe_reader(probe: Probe) -> Any:
    """``ok(backend, memo, artifact, rollout_rev)``, specialised to ``probe`` (frozen): what ``probe_ok(probe, backend,
    memo, artifact_ok=lambda: artifact, rollout_rev=rollout_rev)`` gives, with the kind dispatched once and plain
    float reads taken directly (`_f`). Kinds without a specialised reader answer through `probe_ok`.
    (tests/faults/test_probe_reader.py holds it to `probe_ok` on random health reads.)

    >>> class Edge:
    ...     def edge_health(self, c, e): return {"rate": 5.0, "error_ratio": 0.3, "own_error_ratio": 0.01}
    >>> p = Probe(kind="edge_error_ratio_max", caller="a", callee="b", threshold=0.05)
    >>> probe_reader(p)(Edge(), {}, None, None) == probe_ok(p, Edge()) == True
    True
    """
    k, thr = probe.kind, probe.threshold
    if k == "edge_error_ratio_max" or k == "edge_p95_ms_max":
        return _ratio_reader("edge_health", (probe.caller, probe.callee),
                             "error_ratio" if k == "edge_error_ratio_max" else "p95_ms", thr)
    if k == "service_error_ratio_max" or k == "service_p95_ms_max":
        return _ratio_reader("service_health", (probe.service,),
                             "error_ratio" if k == "service_error_ratio_max" else "p95_ms", thr)
    if k == "service_ready_min":
        return _service_reader("ready", (), 0.0, thr, probe.service, True)
    if k == "cpu_util_max":
        return _service_reader("cpu_util", (), math.nan, thr, probe.service, False)
    if k == "memory_util_max":
        return _service_reader("mem_util", ("memory_util",), math.nan, thr, probe.service, False)
    if k == "artifact":
        return lambda backend, memo, art, rev: bool(art)
    if k == "rollout_ok":
        return _rollout_reader(probe)
    return lambda backend, memo, art, rev: probe_ok(probe, backend, memo, artifact_ok=lambda: art, rollout_rev=rev)

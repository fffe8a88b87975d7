"""Sampled distributed traces, synthesised lazily and deterministically per (seed, tick).

Each sampled request follows its request path's call tree: a span per call (a call with count
``c`` gives ``c`` spans on average), durations drawn around the tick's per-call latency, and errors
drawn from the tick's unreachable / timeout / application shares of each call; a failed ``fail``
child fails its parent, a failed ``degrade`` or ``ignore`` child does not. What a trace shows is
therefore consistent with the metrics of the same tick.

>>> from sremarathon_env.backends.sim import SimBackend
>>> sim = SimBackend("online-boutique", seed=1)
>>> _ = sim.advance_to(60.0)
>>> tr = sim.traces("frontend", None, 0, 60, False, 3)
>>> len(tr), tr[0]["spans"][0]["service"]
(3, 'frontend')
"""

from __future__ import annotations

import hashlib
import math
from typing import TYPE_CHECKING, Any

import numpy as np

from sremarathon_env.backends.sim.util import child_rng, iso_ms

if TYPE_CHECKING:  # pragma: no cover
    from sremarathon_env.backends.sim.backend import SimBackend

SAMPLED_PER_TICK = 4.0      # mean traces kept per tick (head sampling of the entry traffic)
MAX_SPANS = 400
_STATUS = {"unreach": "UNAVAILABLE", "timeout": "DEADLINE_EXCEEDED", "app": "INTERNAL"}


def _hex(*keys: object, n: int = 32) -> str:
    return hashlib.sha256("\x1f".join(map(str, keys)).encode()).hexdigest()[:n]


def _tick_traces(sim: "SimBackend", k: int) -> list[dict[str, Any]]:
    m = sim.m
    h = sim.history
    rng = child_rng(sim.seed, "traces", k)
    rate = h.node[0, k, : m.P]
    total = float(rate.sum())
    if total <= 0:
        return []
    n = int(rng.poisson(SAMPLED_PER_TICK))
    paths = rng.choice(m.P, size=n, p=rate / total) if n else []
    lat = h.node[1, k]
    unreach = h.node[3, k]
    tout = h.node[4, k]
    e_app = h.node[6, k]
    sigma = h.node[5, k]
    T = k * sim.tick_s
    out = []
    for i, p in enumerate(paths):
        p = int(p)
        tid = _hex(sim.seed, "trace", k, i)
        start = T - sim.tick_s + float(rng.uniform(0, sim.tick_s))
        spans: list[dict[str, Any]] = []

        def span(node: int, parent_id: str, t_start: float) -> tuple[float, bool]:
            sid = _hex(tid, len(spans), n=16)
            rec: dict[str, Any] = {"spanID": sid, "parentSpanID": parent_id, "service": m.svc_names[m.node_svc[node]],
                                   "operation": m.node_op[node] if node >= m.P else f"{m.path_methods[p]} {m.app.load.paths[p].route}",
                                   "startMs": round((t_start - start) * 1000.0, 3)}
            if m.node_edge[node] > 0:
                rec["peer.service"] = rec["service"]
                rec["caller"] = m.svc_names[m.edges[m.node_edge[node]][0]]
            spans.append(rec)
            mean = float(lat[node])
            s = float(sigma[node]) or 0.45
            dur = float(np.exp(np.log(max(mean, 1e-3)) - 0.5 * s * s + s * rng.standard_normal()))
            u = rng.random()
            cat = None
            if u < unreach[node]:
                cat, dur = "unreach", min(dur, float(rng.uniform(0.5, 3.0)))
            elif u < unreach[node] + tout[node]:
                cat, dur = "timeout", float(m.node_deadline[node])
            elif rng.random() < e_app[node]:
                cat = "app"
            failed = cat is not None
            if cat != "unreach" and len(spans) < MAX_SPANS:
                t = t_start + 0.0002
                for c in m.children[node]:
                    cnt = m.node_count[c]
                    reps = int(cnt) + (1 if rng.random() < cnt - int(cnt) else 0)
                    for _ in range(min(reps, 12)):
                        if len(spans) >= MAX_SPANS:
                            break
                        d, f = span(c, sid, t)
                        if not m.node_async[c] or m.node_async[node]:
                            t += d / 1000.0
                        if f and m.node_on_error[c] == 0 and not m.node_async[c]:
                            failed = True
                            cat = cat or "app"
                dur = max(dur, (t - t_start) * 1000.0)
            rec["durationMs"] = round(dur, 3)
            rec["status"] = "ERROR" if failed else "OK"
            if failed:
                rec["statusCode"] = _STATUS[cat]
            return dur, failed

        dur, failed = span(p, "", start)
        out.append({"traceID": tid, "rootService": m.svc_names[m.entry], "endpoint": m.path_names[p],
                    "route": f"{m.path_methods[p]} {m.app.load.paths[p].route}", "start": iso_ms(start), "t": start,
                    "durationMs": round(dur, 3), "error": failed, "spans": spans})
    return out


def traces(sim: "SimBackend", service: str | None, endpoint: str | None, since: float, until: float,
           errors_only: bool, limit: int) -> list[dict[str, Any]]:
    if limit is None or limit <= 0:
        return []
    if service is not None and service not in sim.m.svc_index:
        return []
    k_lo = max(0, int(math.ceil(since / sim.tick_s - 1e-9)))
    k_hi = min(sim.history.n - 1, int(math.floor(until / sim.tick_s + 1e-9)))
    found: list[dict[str, Any]] = []
    for k in range(k_hi, k_lo - 1, -1):
        for tr in _tick_traces(sim, k):
            if errors_only and not tr["error"]:
                continue
            if service is not None and all(s["service"] != service for s in tr["spans"]):
                continue
            if endpoint is not None and endpoint not in (tr["endpoint"], tr["route"]) and all(
                    s["operation"] != endpoint for s in tr["spans"]):
                continue
            found.append(tr)
        if len(found) >= limit:
            break
    found.sort(key=lambda tr: (tr["t"], tr["traceID"]))
    return found[-limit:]

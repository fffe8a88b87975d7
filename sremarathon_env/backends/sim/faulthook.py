"""The fault hook: registered effects, their bindings, and their resolution into the tick's arrays.

`EffectBook` keeps every effect by handle. `resolve` turns the effects that are active *now* into
the arrays the traffic model reads, weighting revision-bound effects (and config faults carried by
a revision's env) by the share of the service's ready pods that run such a revision:

- ``direct``: active from `apply` until `remove`;
- ``revision``: carried by ReplicaSets; a new build inherits an effect only while its `Marker` holds
  (``source_contains`` in the new files, ``env_equals`` in the new env); rollback to a revision
  without it drops it;
- ``flag``: active while the flags config map has the effect's flag at the effect's variant.

Config faults need no effect: `config_faults` reads a revision's env against the service's knobs
(a missing or unknown dependency address, a wrong port, an invalid duration, an extra latency).

>>> from faults.effects import Effect
>>> b = EffectBook()
>>> h = b.add(Effect(kind="latency", service="adservice", ms=200), t=0.0)
>>> h, b.effects[h].kind
('eff-0001', 'latency')
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from apps.spec import AppSpec
from faults.effects import Effect, Marker
from sremarathon_env.backends.sim.cluster import CrashPlan
from sremarathon_env.backends.sim.util import parse_go_duration

if TYPE_CHECKING:  # pragma: no cover
    from sremarathon_env.backends.sim.backend import SimBackend

#: why calls on an edge cannot reach the callee (for logs and response flags)
REASON_NONE, REASON_REFUSED, REASON_NOHOST, REASON_NETWORK, REASON_WRONG_TARGET, REASON_NO_ENDPOINTS = range(6)
CRASH_LANGUAGES = {"go", "java", "kotlin", "csharp", "rust", "cpp"}


@dataclass
class EffectBook:
    effects: dict[str, Effect] = field(default_factory=dict)
    since: dict[str, float] = field(default_factory=dict)     # when each handle became active
    removed: set[str] = field(default_factory=set)
    counter: int = 0
    #: bumps whenever ``effects`` changes (an effect added or removed: the only ways it does)
    version: int = 0

    def add(self, effect: Effect, t: float) -> str:
        self.counter += 1
        self.version += 1
        h = f"eff-{self.counter:04d}"
        self.effects[h] = effect
        self.since[h] = t
        return h

    def remove(self, handle: str) -> Effect | None:
        e = self.effects.pop(handle, None)
        if e is not None:
            self.removed.add(handle)
            self.version += 1
        return e


def marker_holds(marker: Marker | None, files: dict[str, str], env: dict[str, str]) -> bool:
    if marker is None:
        return True
    if marker.source_contains is not None:
        path, snippet = marker.source_contains
        return snippet in files.get(path, "")
    key, value = marker.env_equals
    return env.get(key) == value


@dataclass
class ConfigFault:
    kind: str                  # crash | edge_unreach | edge_app | latency | liveness
    callee: str | None = None
    reason: int = REASON_NONE
    ms: float = 0.0
    crash: CrashPlan | None = None
    log: str = ""


def _parse_address(value: str) -> tuple[str, int | None]:
    v = value.strip()
    if "://" in v:
        v = v.split("://", 1)[1]
    v = v.split("/", 1)[0]
    host, _, port = v.rpartition(":")
    if not host:
        host, port = v, ""
    try:
        p = int(port) if port else None
    except ValueError:
        p = -1
    return host.split(".")[0], p


def config_faults(app: AppSpec, service: str, env: dict[str, str], cm_values: dict[str, str]) -> list[ConfigFault]:
    """Faults implied by a revision's env (and the service's config-map keys) against its knobs."""
    svc = app.service(service)
    names = {s.name: s for s in app.services}
    out: list[ConfigFault] = []
    for knob in svc.knobs:
        if knob.config_map:
            value = cm_values.get(knob.key)
            present = value is not None
        else:
            present = knob.key in env
            value = env.get(knob.key)
        required = knob.key in svc.env
        if knob.kind == "address":
            default_host, _ = _parse_address(knob.default)
            if default_host not in names:
                continue
            if not present:
                if not required:
                    continue
                if svc.language in CRASH_LANGUAGES:
                    log = f'panic: environment variable "{knob.key}" not set'
                    out.append(ConfigFault("crash", crash=CrashPlan("Error", 2, 1.0, log)))
                else:
                    out.append(ConfigFault("edge_unreach", default_host, REASON_NOHOST,
                                           log=f"{knob.key} is empty: cannot connect to {default_host}"))
                continue
            if value == knob.default:
                continue
            host, port = _parse_address(value)
            target = names.get(host)
            if target is None:
                out.append(ConfigFault("edge_unreach", default_host, REASON_NOHOST, log=value))
            elif host == default_host and (port is None or port in {p.port for p in target.ports}):
                continue
            elif host == default_host:
                out.append(ConfigFault("edge_unreach", default_host, REASON_REFUSED, log=value))
            elif port is not None and port not in {p.port for p in target.ports}:
                out.append(ConfigFault("edge_unreach", default_host, REASON_REFUSED, log=value))
            else:
                out.append(ConfigFault("edge_app", default_host, REASON_WRONG_TARGET, log=value))
        elif knob.kind == "duration" and present:
            ms = parse_go_duration(value or "")
            if ms is None:
                log = f'panic: time: invalid duration "{value}"'
                out.append(ConfigFault("crash", crash=CrashPlan("Error", 2, 0.5, log)))
            elif ms > 0:
                out.append(ConfigFault("latency", ms=ms, log=f"{knob.key}={value}"))
        elif knob.kind == "port" and present and value != knob.default:
            probe = svc.liveness_probe or svc.readiness_probe
            if probe is None:
                out.append(ConfigFault("edge_unreach_all", reason=REASON_REFUSED, log=value))
                continue
            after = probe.initial_delay_s + probe.period_s * probe.failure_threshold
            log = f"listening on port {value}"
            out.append(ConfigFault("liveness", crash=CrashPlan("Error", 137 if svc.language != "go" else 2, after, log, liveness=True)))
    return out


@dataclass
class Resolution:
    """The active effects, as arrays and lists the tick and the readers use."""

    lat_add: np.ndarray
    e_app: np.ndarray
    e_unreach: np.ndarray
    net_add: np.ndarray
    edge_reason: np.ndarray            # (E,) int8
    burn_per_pod: np.ndarray           # (S,) cores per pod (weighted)
    no_endpoints: np.ndarray           # (S,) bool
    path_factor: np.ndarray            # (P,)
    consumer_slow: np.ndarray          # (S,)
    signatures: dict[int, list[str]]   # svc -> log lines of active effects
    active: list[tuple[str, Any, float]]   # (handle or config key, effect or config fault, weight) in force
    pod_leak: dict[int, tuple[float, float]]   # slot -> (MiB/min, since)
    pod_hog: dict[int, float]                  # slot -> MiB
    pod_burn: dict[int, float]                 # slot -> cores
    pod_not_ready: set[int]


def _mask_nodes(sim: "SimBackend", svc: int, op: str | None) -> np.ndarray:
    """Call nodes into ``svc`` (of operation ``op``), cached per compiled app (read-only)."""
    m = sim.m
    cache = m.__dict__.setdefault("_mask_cache", {})
    mask = cache.get((svc, op))
    if mask is None:
        mask = m.node_svc == svc
        if op:
            mask &= np.array([o == op for o in m.node_op])
        mask.flags.writeable = False
        cache[(svc, op)] = mask
    return mask


def _mask_edge(sim: "SimBackend", edge: int) -> np.ndarray:
    """Call nodes over edge ``edge`` (``m.node_edge == edge``), cached per compiled app (read-only)."""
    cache = sim.m.__dict__.setdefault("_edge_mask_cache", {})
    mask = cache.get(edge)
    if mask is None:
        mask = sim.m.node_edge == edge
        mask.flags.writeable = False
        cache[edge] = mask
    return mask


def resolve(sim: "SimBackend", t: float, up: np.ndarray | None = None) -> Resolution:
    """The effects and config faults in force at ``t`` on the current cluster state. ``up`` (optional): the pods'
    lifecycle readiness ``p_active & p_ready & ~p_lost`` over the slots in use, when the caller has it."""
    m = sim.m
    c = sim.cluster
    N, E, S = m.N, m.E, m.S
    ones = m.__dict__.get("_res_ones")
    if ones is None:   # (path factors, consumer slowness: fresh copies of ones per resolution; read-only)
        ones = m.__dict__["_res_ones"] = (np.ones(m.P), np.ones(S))
        for a in ones:
            a.flags.writeable = False
    r = Resolution(np.zeros(N), np.zeros(N), np.zeros(N), np.zeros(N), np.zeros(E, dtype=np.int8),
                   np.zeros(S), np.zeros(S, dtype=bool), ones[0].copy(), ones[1].copy(), {}, [], {}, {}, {}, set())
    book = sim.book
    active: list[tuple[str, Effect, float, Any]] = []   # (handle, effect, weight, rs or None)
    for h, e in book.effects.items():
        if e.bind == "direct":
            active.append((h, e, 1.0, None))
        elif e.bind == "flag" and sim.flag_variant(e.flag) == e.variant:
            active.append((h, e, 1.0, None))
    # revision-bound effects and config faults, weighted by their revisions' shares of ready pods
    cfg_active: list[tuple[int, ConfigFault, float, Any]] = []
    for svc, rs, w in _weights(sim, up):
        for h in rs.effects:
            e = book.effects.get(h)
            if e is not None:
                active.append((h, e, w, rs))
        for f in sim.config_faults_of(rs):
            cfg_active.append((svc, f, w, rs))
    for h, e, w, rs in active:
        k = e.kind
        svc = m.svc_index.get(e.service) if e.service else None
        if e.log_signature:
            targets = [svc] if svc is not None else ([m.svc_index[e.caller]] if e.caller in m.svc_index else [])
            if k == "node_down":
                targets = sorted({p.svc for p in c.active_pods() if p.node >= 0 and c.nodes[p.node].name == e.node})
            for s in targets:
                r.signatures.setdefault(s, []).append(e.log_signature)
        r.active.append((h, e, w))
        if k == "error_rate" and svc is not None:
            mask = _mask_nodes(sim, svc, e.operation)
            r.e_app[mask] = 1.0 - (1.0 - r.e_app[mask]) * (1.0 - e.rate * w)
        elif k == "latency" and svc is not None:
            r.lat_add[_mask_nodes(sim, svc, e.operation)] += e.ms * w
        elif k in ("edge_error", "edge_latency"):
            ei = m.edge_index.get((e.caller, e.callee))
            if ei is None:
                continue
            mask = _mask_edge(sim, ei)
            if k == "edge_error":
                r.e_unreach[mask] = 1.0 - (1.0 - r.e_unreach[mask]) * (1.0 - e.rate * w)
                r.edge_reason[ei] = REASON_NETWORK
            else:
                r.net_add[mask] += e.ms * w
        elif k == "cpu_burn" and svc is not None:
            for p in _pods(c, svc, rs):
                r.pod_burn[p.slot] = r.pod_burn.get(p.slot, 0.0) + e.millicores / 1000.0
            r.burn_per_pod[svc] += e.millicores / 1000.0 * w
        elif k == "memory_leak" and svc is not None:
            since = book.since.get(h, t)
            for p in _pods(c, svc, rs):
                rate0, s0 = r.pod_leak.get(p.slot, (0.0, since))
                r.pod_leak[p.slot] = (rate0 + e.mi_per_min, min(s0, since))
        elif k == "memory_hog" and svc is not None:
            for p in _pods(c, svc, rs):
                r.pod_hog[p.slot] = r.pod_hog.get(p.slot, 0.0) + e.mi
        elif k == "not_ready" and svc is not None:
            for p in _pods(c, svc, rs):
                r.pod_not_ready.add(p.slot)
        elif k == "no_endpoints" and svc is not None:
            r.no_endpoints[svc] = True
        elif k == "load_factor":
            if e.path is None:
                r.path_factor *= e.factor
            elif e.path in m.path_names:
                r.path_factor[m.path_names.index(e.path)] *= e.factor
        elif k == "consumer_slow" and svc is not None:
            r.consumer_slow[svc] *= e.factor
    # load paths gated by a flag: the variant's value multiplies the path's requests (0/false: none)
    gated = m.__dict__.get("_gated_paths")
    if gated is None:   # (path index, flag) of the paths gated by a flag, per compiled app (read-only)
        gated = m.__dict__["_gated_paths"] = [(i, path.gated_by_flag) for i, path in enumerate(m.app.load.paths)
                                              if getattr(path, "gated_by_flag", None)]
    for i, gate in gated:
        flag = sim._flag(gate)
        variant = sim.flag_variant(gate)
        value = flag.variants.get(variant, 0) if flag is not None else 0
        if isinstance(value, bool):
            factor = 1.0 if value else 0.0
        elif isinstance(value, (int, float)):
            factor = float(value)
        else:
            factor = 0.0 if str(value).lower() in ("", "off", "false", "0") else 1.0
        r.path_factor[i] *= factor
    for svc, f, w, rs in cfg_active:
        r.active.append((f"config:{m.svc_names[svc]}", f, w))
        if f.kind in ("edge_unreach", "edge_app") and f.callee in m.svc_index:
            ei = m.edge_index.get((m.svc_names[svc], f.callee))
            if ei is None:
                continue
            mask = _mask_edge(sim, ei)
            if f.kind == "edge_unreach":
                r.e_unreach[mask] = 1.0 - (1.0 - r.e_unreach[mask]) * (1.0 - w)
            else:
                r.e_app[mask] = 1.0 - (1.0 - r.e_app[mask]) * (1.0 - w)
            r.edge_reason[ei] = f.reason
            if f.log:
                r.signatures.setdefault(svc, []).append(f"\x00addr:{f.callee}:{f.log}")
        elif f.kind == "latency":
            r.lat_add[_mask_nodes(sim, svc, None)] += f.ms * w
    return r


def _weights(sim: "SimBackend", up: np.ndarray | None = None) -> list[tuple[int, Any, float]]:
    """(service, ReplicaSet, weight) of the revisions that carry effects or config faults (the others add
    nothing to a resolution), by Deployment and each one's ReplicaSets in order: a revision's weight is its
    share of its service's ready pods (lifecycle readiness, before effect-driven not-ready); a service without
    any weighs its current revision 1. Only the revisions with ready pods are visited (not every revision a
    Deployment ever had); tests/backends/sim/test_twin_resolve.py holds this to the loop over every revision."""
    c = sim.cluster
    S = sim.m.S
    n = len(c.pods)
    if up is None:
        up = c.p_active[:n] & c.p_ready[:n] & ~c.p_lost[:n]   # the pods' mirrored ready / node_lost
    per_svc = np.bincount(c.p_svc[:n][up], minlength=S).tolist()
    per_rs = np.bincount(c.p_rs[:n][up], minlength=len(c.rs_by_id))
    by_id = c.rs_by_id
    cfg_cache = sim._cfg_cache
    deps = c.deployments
    boring = sim._rs_boring   # ReplicaSets known to carry neither (skipped: they add nothing)
    if len(boring) < len(per_rs):
        grown = np.zeros(max(2 * len(boring), len(per_rs), 16), dtype=bool)
        grown[: len(boring)] = boring
        sim._rs_boring = boring = grown
    out = []   # (service, position in its Deployment's ReplicaSets, ReplicaSet, weight)
    for i in np.flatnonzero((per_rs > 0) & ~boring[: len(per_rs)]).tolist():
        rs = by_id[i]
        cfg = cfg_cache.get(i)
        if cfg is None:
            cfg = sim.config_faults_of(rs)
        if rs.effects or cfg:
            dep = deps[rs.deployment]
            out.append((dep.svc, dep.rss.index(rs), rs, int(per_rs[i]) / per_svc[dep.svc]))
        else:
            boring[i] = True
    if 0 in per_svc:
        names = c.svc_names
        for svc, live in enumerate(per_svc):
            if not live:
                rs = deps[names[svc]].current
                if rs.effects or sim.config_faults_of(rs):
                    out.append((svc, 0, rs, 1.0))
    if len(out) > 1:
        out.sort(key=lambda x: x[:2])
    return [(svc, rs, w) for svc, _, rs, w in out]


def _pods(c, svc: int, rs) -> list:
    dep = c.deployments[c.svc_names[svc]]
    if rs is not None:
        return list(rs.pods)
    return dep.live_pods()

"""The RL view's observation and mask computed from scratch, as first written (no caches: a fresh `ClusterView`,
each deployment's features, each alert's services and family read anew, one Python pass per service). The tests
compare `RLView._observe` with it bit for bit."""

from __future__ import annotations

import numpy as np

from sremarathon_env.tools.policy import services_in_labels
from wrappers.cluster_view import ClusterView
from wrappers.rl import (GLOBAL_FEATURES, HEALTH_FIELDS, MAX_ACTIONS, MAX_FLAGS, MAX_INCIDENT_SLOTS, MAX_NODES,
                         MAX_SERVICES, N_FAM, OBS_DIM, SCALE_OUT_MAX, SERVICE_KINDS, SVC_FEATURES, _active_alerts,
                         _last_entry, family_of)


def deployment_features(view, cv: ClusterView, s: str) -> tuple:
    spec = view._spec[s]
    env_d, cpu_d, mem_d = bool(cv.env_drift(s)), cv.resource_drift(s, "cpu"), cv.resource_drift(s, "memory")
    replicas = cv.desired_replicas(s)
    rep_d = replicas != spec.replicas
    change = cv.last_change_kind(s)
    revs = cv.revisions(s)
    n_new = sum(1 for _, meta, _ in revs if float(meta.get("t", -1.0)) >= 0)
    change_t = None
    if change is not None:
        for rev, meta, _ in revs:
            if rev == change[0]:
                change_t = float(meta.get("t", 0.0))
    return env_d, cpu_d, mem_d, rep_d, change, n_new, change_t, (lambda: cv.latest_diff(s)), replicas


def observe_reference(view) -> dict[str, np.ndarray]:
    core = view.env.unwrapped
    m = core.marathon
    cv = ClusterView(m.backend, view.app)
    now = float(m.now)
    x = np.zeros(OBS_DIM, dtype=np.float32)
    mask = np.zeros(MAX_ACTIONS, dtype=np.float32)
    mask[0] = 1.0
    n_inv = max(core.n_invocations, 1)
    x[0:4] = (now / view.horizon, m.invocation_index / n_inv, float(now <= view.injection),
              max(view.horizon - now, 0.0) / view.horizon)
    x[4:7] = _last_entry(m)
    incs = m.ctx.incidents.all()
    open_incs = [i for i in incs if i.status == "open"]
    x[7] = min(len(open_incs) / 20.0, 1.0)
    j = 8
    for i in open_incs[-MAX_INCIDENT_SLOTS:]:
        x[j:j + 4] = (1.0, min((now - i.opened_at) / 3600.0, 1.0), min(len(i.alert_fingerprints) / 20.0, 1.0),
                      min(len(i.culprit_services) / 10.0, 1.0))
        j += 4
    j = 8 + 4 * MAX_INCIDENT_SLOTS
    g0 = j
    j += 2 * N_FAM
    per_fam: dict[str, list[float]] = {}
    glob = [0.0] * (2 * N_FAM)
    firing: dict[str, list[str]] = {}
    for name, fp, state, active_at, labels in _active_alerts(m.alert_engine):
        f = family_of(name)
        val = 1.0 if state == "firing" else 0.5
        age = min(max(now - float(active_at or now), 0.0) / 3600.0, 1.0)
        svcs = services_in_labels(view.app, labels or {})
        if state == "firing":
            for s in svcs:
                firing.setdefault(s, []).append(fp)
        for arr in ([per_fam.setdefault(s, [0.0] * (2 * N_FAM)) for s in svcs] or (glob,)):
            if val > arr[f]:
                arr[f] = val
            if age > arr[f + N_FAM]:
                arr[f + N_FAM] = age
    x[g0:g0 + 2 * N_FAM] = glob
    base = 1 + MAX_SERVICES * len(SERVICE_KINDS)
    for i, fl in enumerate(view.flags):
        d = cv.flag_drift(fl)
        x[j + i] = float(d)
        mask[base + i] = float(d)
    j += MAX_FLAGS
    nbase = base + MAX_FLAGS
    on_node = cv.services_by_node()
    for i, n in enumerate(view.nodes):
        cord, ready = cv.cordoned(n), cv.node_ready(n)
        fire = not cord and any(s in firing for s in on_node.get(n, ()))
        x[j + 3 * i: j + 3 * i + 3] = (float(cord), float(not ready), float(fire))
        mask[nbase + i] = float(fire and not cord)
        mask[nbase + MAX_NODES + i] = float(cord)
    j += 3 * MAX_NODES
    zbase = nbase + 2 * MAX_NODES
    for i, z in enumerate(view.zones):
        zn = cv.zone_nodes(z)
        mask[zbase + i] = float(any(not cv.node_ready(n) for n in zn) and not all(cv.cordoned(n) for n in zn))
    assert j == GLOBAL_FEATURES
    open_culprits = {c for i in open_incs for c in i.culprit_services}
    K = len(SERVICE_KINDS)
    for si, s in enumerate(view.services):
        o = GLOBAL_FEATURES + si * SVC_FEATURES
        x[o] = 1.0
        if s in per_fam:
            x[o + 1:o + 1 + 2 * N_FAM] = per_fam[s]
        h = m.backend.service_health(s) or {}
        desired = float(h.get("desired", 0.0))
        spec = view._spec[s]
        env_d, cpu_d, mem_d, rep_d, change, n_new, change_t, diff, replicas = deployment_features(view, cv, s)
        change_age = 1.0 if change_t is None else min(max(now - change_t, 0.0) / 3600.0, 1.0)
        vals = [h.get("error_ratio", 0.0), h.get("p95_ms", 0.0) / 2000.0, h.get("cpu_util", 0.0) / 2.0,
                h.get("mem_util", 0.0), h.get("ready", 0.0) / desired if desired > 0 else 0.0, desired / 4.0,
                h.get("restarts", 0.0) / 10.0, float(env_d), float(cpu_d), float(mem_d), float(rep_d), n_new / 5.0,
                change_age, float(s in open_culprits)]
        row = np.array(vals, dtype=np.float64)
        # every entry but the change age: +inf -> 1, -inf and NaN -> 0, then into [0, 1]
        row = np.clip(np.nan_to_num(row, nan=0.0, posinf=1.0, neginf=0.0), 0.0, 1.0)
        row[12] = change_age
        x[o + 1 + 2 * N_FAM:o + 1 + 2 * N_FAM + 14] = row
        fire = s in firing
        ab = 1 + si * K
        if fire:
            mask[ab + 0] = 1.0
            mask[ab + 1] = float(any(c in firing for c in view.app.callees(s)))
            mask[ab + 2] = float(change is not None)
            mask[ab + 3] = float(change is not None and change[2] == "build" and bool(diff()))
            mask[ab + 5] = float(replicas < SCALE_OUT_MAX)
            mask[ab + 6] = float(cpu_d)
            mask[ab + 7] = float(mem_d)
            mask[ab + 8] = float(env_d)
        mask[ab + 4] = float(rep_d and spec.replicas >= 1)
    np.clip(x, -1.0, 1.0, out=x)
    return {"observations": x, "action_mask": mask}


def firing_reference(view) -> dict[str, list[str]]:
    """`RLView._firing`'s fingerprints of firing alerts per service, from scratch."""
    per: dict[str, list[str]] = {}
    for name, fp, state, _, labels in _active_alerts(view.env.unwrapped.marathon.alert_engine):
        if state == "firing":
            for s in services_in_labels(view.app, labels or {}):
                per.setdefault(s, []).append(fp)
    return per


__all__ = ["HEALTH_FIELDS", "deployment_features", "firing_reference", "observe_reference"]

"""RL view: fixed-shape Box observations, an action mask and a Discrete catalogue of labelled actions.

Observation (RLlib's action-masking convention): ``Dict({"observations": Box(float32, (OBS_DIM,)),
"action_mask": Box(0, 1, (MAX_ACTIONS,), float32)})``; action: ``Discrete(MAX_ACTIONS)``. Shapes are
padded to declared maxima (`MAX_SERVICES`, `MAX_FLAGS`, `MAX_NODES`, `MAX_ZONES`) so they are the same
for every app id; padded entries are zero and masked.

>>> import gymnasium as gym, sremarathon_env
>>> from wrappers.rl import RLView, MAX_ACTIONS
>>> env = RLView(gym.make("SREMarathon/OnlineBoutique-v0", injection_s=600, observation_s=240))
>>> obs, info = env.reset(seed=1)
>>> obs["observations"].shape == env.observation_space["observations"].shape, int(env.action_space.n) == MAX_ACTIONS
(True, True)
>>> env.action_labels[0], env.action_labels[1]
('noop', 'restart(frontend)')
>>> obs, r, term, trunc, info = env.step(0)

**Action catalogue** (index = ``1 + service_slot * 9 + kind`` for the service actions; labels in
``env.action_labels``). Every action except ``noop`` is one invocation of two to three tool calls: a
free read that shows the evidence (deploy history or ``kubectl get``), ``report_incident`` grouping
every alert now firing on the action's services under the root cause named below, then the
intervention citing that new incident. Service actions (for service ``s``):

====================  ==================================  ==========================================
kind                  incident (culprits; artifact)       intervention
====================  ==================================  ==========================================
restart               [s]; ``s``                           ``restart(s)``
restart_edge          [s, c]; ``s->c``                     ``restart(s)`` (c: the callee of s with the
                                                           most firing alerts)
rollback              [s]; what the last change changed    ``rollback(s, to_revision=<before it>)``
                      (``s:<file>``, ``s:<ENV>``,
                      ``s:image``, ``s:limits.cpu``...)
revert_patch          [s]; same                            ``patch_source(s, <reverse of its diff>)``
scale_restore         [s]; ``s:replicas``                  ``scale(s, <model replicas>)``
scale_out             [s]; ``load``                        ``scale(s, min(max(4, desired + 2), 10))``
restore_cpu           [s]; ``s:limits.cpu``                ``set_resources`` cpu back to the model's
                                                           (2 x current where the model sets none)
restore_memory        [s]; ``s:limits.memory``             ``set_resources`` memory, likewise
restore_config        [s]; ``s:<KEY>``                     ``set_config(s, KEY, <model value>)`` for
                                                           the first drifted env key
====================  ==================================  ==========================================

Then per flag ``flag_off(f)`` (culprits: the flag's consumers; artifact ``flag:<f>``;
``set_config(<flag config map>, f, <default variant>)``), per node ``drain(n)`` (culprits: services
with pods on n; ``node/<n>``; ``drain_node``) and ``uncordon(n)``, per zone ``failover(z)``.

**Mask**: ``noop`` always; a service action needs an alert firing on ``s`` (for ``restart_edge``
also on its callee) plus its precondition: a change revision during the marathon (rollback; a source
change for revert_patch), replicas differing from the model (scale_restore), cpu/memory/env differing
from the model (restore_*); ``flag_off`` a flag away from its default variant; ``drain`` an alert
firing on a service of an uncordoned node; ``uncordon`` a cordoned node; ``failover`` a zone with a
node not ready. The mask reads what ``kubectl get`` and the deploy history show (`ClusterView`).

**Observation** (all in [0, 1] except where noted; ``env.feature_names`` labels every entry): time
(4), entry traffic of the last interval (3), open incidents (1) and incident slots (8 x 4), alert
families without a service (12 x 2), flags drifted (16), nodes cordoned / not ready / firing (8 x 3),
then per service slot (64 x 38): present, alert family state (firing 1, pending 0.5) and age
(hours, clipped at 1) for 12 families, health (error ratio, p95/2 s, cpu util/2, memory util,
ready/desired, desired/4 (clipped), restarts/10), drift (env, cpu, memory, replicas), revisions
during the marathon /5, age of the last change (hours), open incident naming it.
"""

from __future__ import annotations

import math
from itertools import chain
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from sremarathon_env.tools.alertview import AlertView
from sremarathon_env.tools.policy import SERVICE_LABELS
from wrappers.cluster_view import ClusterView, reverse_diff

MAX_SERVICES = 64
MAX_FLAGS = 16
MAX_NODES = 8
MAX_ZONES = 4
MAX_INCIDENT_SLOTS = 8
SCALE_OUT_MAX = 10   #: scale_out never goes above this many replicas (masked at it)
SERVICE_KINDS = ("restart", "restart_edge", "rollback", "revert_patch", "scale_restore", "scale_out",
                 "restore_cpu", "restore_memory", "restore_config")
MAX_ACTIONS = 1 + MAX_SERVICES * len(SERVICE_KINDS) + MAX_FLAGS + 2 * MAX_NODES + MAX_ZONES

#: alert families: (name, substrings of the alert name), first match wins
FAMILIES = (
    ("node", ("Node",)),
    ("capacity", ("Overcommit", "Quota")),
    ("crash", ("CrashLoop", "Restart")),
    ("not_ready", ("NotReady", "NotRunning")),
    ("deployment", ("Deployment",)),
    ("image_config", ("Waiting", "ImagePull", "ConfigError")),
    ("memory", ("OOM", "Memory")),
    ("cpu", ("CPU",)),
    ("endpoints", ("NoEndpoints", "TargetDown", "TrafficStopped")),
    ("errors", ("Error", "Failure")),
    ("latency", ("Latency", "Slow", "Lag")),
    ("other", ("",)),
)
N_FAM = len(FAMILIES)
#: the service-health fields the observation reads (``services_health(services, HEALTH_FIELDS)`` when the backend
#: has that bulk read: row i, column j equals ``service_health(services[i]).get(HEALTH_FIELDS[j], 0.0)``)
HEALTH_FIELDS = ("error_ratio", "p95_ms", "cpu_util", "mem_util", "ready", "desired", "restarts")
SVC_FEATURES = 1 + 2 * N_FAM + 7 + 4 + 3
GLOBAL_FEATURES = 4 + 3 + 1 + MAX_INCIDENT_SLOTS * 4 + 2 * N_FAM + MAX_FLAGS + MAX_NODES * 3
OBS_DIM = GLOBAL_FEATURES + MAX_SERVICES * SVC_FEATURES


def family_of(alertname: str) -> int:
    for i, (_, keys) in enumerate(FAMILIES):
        if any(k in alertname for k in keys):
            return i
    return N_FAM - 1


class RLView(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Wrap a core `SREMarathonEnv` (or a `gym.make` of one). See the module docstring."""

    def __init__(self, env: gym.Env):
        gym.utils.RecordConstructorArgs.__init__(self)
        gym.Wrapper.__init__(self, env)
        core = env.unwrapped
        from apps import load_app

        self.app = load_app(core.config.app)
        svcs = self.app.service_names
        if len(svcs) > MAX_SERVICES or len(self.app.flags) > MAX_FLAGS or len(self.app.topology.nodes) > MAX_NODES:
            raise ValueError(f"app {self.app.name} exceeds the RL view's maxima")
        self.services = list(svcs)
        self.flags = [f.name for f in self.app.flags]
        self.nodes = [n.name for n in self.app.topology.nodes]
        self.zones = sorted({n.zone for n in self.app.topology.nodes})[:MAX_ZONES]
        self.horizon = float(core.config.horizon_s)
        self.injection = float(core.config.injection_s)
        self.observation_space = spaces.Dict({
            "observations": spaces.Box(-1.0, 1.0, shape=(OBS_DIM,), dtype=np.float32),
            "action_mask": spaces.Box(0.0, 1.0, shape=(MAX_ACTIONS,), dtype=np.float32),
        })
        self.action_space = spaces.Discrete(MAX_ACTIONS)
        self.action_labels = self._labels()
        self.feature_names = self._feature_names()
        self._spec = {sp.name: sp for sp in self.app.services}
        self._callees = {n: list(self.app.callees(n)) for n in self.services}
        self._fam_of: dict[str, int] = {}
        self._svc_index = {s: i for i, s in enumerate(self.services)}
        #: per service, the indices of its callees (`_observe`'s restart_edge mask)
        self._callee_idx = [tuple(self._svc_index[c] for c in self._callees[s] if c in self._svc_index)
                            for s in self.services]
        #: the current marathon's observation state (`_episode`)
        self._ep: _Episode | None = None
        self._last_mask = np.zeros(MAX_ACTIONS, dtype=np.float32)
        self._last_mask[0] = 1.0

    # -- catalogue ----------------------------------------------------------------------------------
    def _labels(self) -> list[str]:
        labels = ["noop"]
        for i in range(MAX_SERVICES):
            s = self.services[i] if i < len(self.services) else None
            labels += [f"{k}({s})" if s else f"pad(service{i}.{k})" for k in SERVICE_KINDS]
        labels += [f"flag_off({self.flags[i]})" if i < len(self.flags) else f"pad(flag{i})" for i in range(MAX_FLAGS)]
        labels += [f"drain({self.nodes[i]})" if i < len(self.nodes) else f"pad(drain{i})" for i in range(MAX_NODES)]
        labels += [f"uncordon({self.nodes[i]})" if i < len(self.nodes) else f"pad(uncordon{i})"
                   for i in range(MAX_NODES)]
        labels += [f"failover({self.zones[i]})" if i < len(self.zones) else f"pad(zone{i})" for i in range(MAX_ZONES)]
        assert len(labels) == MAX_ACTIONS
        return labels

    def _feature_names(self) -> list[str]:
        fam = [f for f, _ in FAMILIES]
        names = ["t_frac", "invocation_frac", "injection_phase", "time_left_frac", "entry_failed", "entry_slow",
                 "entry_degraded", "open_incidents"]
        for k in range(MAX_INCIDENT_SLOTS):
            names += [f"incident{k}.{x}" for x in ("open", "age_h", "alerts", "culprits")]
        names += [f"global.{f}.state" for f in fam] + [f"global.{f}.age_h" for f in fam]
        names += [f"flag{k}.drift" for k in range(MAX_FLAGS)]
        for k in range(MAX_NODES):
            names += [f"node{k}.{x}" for x in ("cordoned", "not_ready", "firing")]
        for i in range(MAX_SERVICES):
            p = f"svc{i}."
            names += [p + "present"] + [p + f + ".state" for f in fam] + [p + f + ".age_h" for f in fam]
            names += [p + x for x in ("error_ratio", "p95", "cpu_util", "mem_util", "ready_frac", "desired",
                                      "restarts", "env_drift", "cpu_drift", "mem_drift", "replica_drift",
                                      "revisions", "change_age_h", "incident")]
        assert len(names) == OBS_DIM
        return names

    # -- Gymnasium API ------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        core = self.env.unwrapped
        self._ep = None   # (first: the dropped marathon's twin goes with the env's reference to it)
        if self.env is core:   # the core itself: its observation is not built (this view observes the marathon)
            _, info = core.reset(seed=seed, options=options, observe=False)
        else:                  # through the wrappers between (their reset bookkeeping and checks)
            _, info = self.env.reset(seed=seed, options=options)
        obs = self._observe()
        return obs, info

    def close(self) -> None:
        self._ep = None   # the observation state of the dropped marathon (it holds its twin)
        super().close()

    def step(self, action: Any):
        a = int(np.asarray(action).item()) if not isinstance(action, (int, np.integer)) else int(action)
        calls = self.calls_for(a)
        core = self.env.unwrapped
        # the core observation is never built here: this view observes the marathon itself
        if calls is None:
            _, reward, term, trunc, info = core.end_invocation(observe=False)
        else:
            # reads first, then report_incident; the intervention cites the incident just opened
            reads, report, intervention = calls
            for c in reads:
                core.call(c["tool"], c["args"])
            res = core.call("report_incident", report)
            if intervention is not None:
                iid = res.result["incident"]["id"] if res.ok and isinstance(res.result, dict) else None
                core.call(intervention["tool"], {**intervention["args"], "incident_id": iid})
            _, reward, term, trunc, info = core.end_invocation(observe=False)
        info = dict(info)
        info["action_label"] = self.action_labels[a] if 0 <= a < MAX_ACTIONS else f"invalid({a})"
        info["action_valid"] = bool(0 <= a < MAX_ACTIONS and self._last_mask[a] > 0)
        obs = self._observe() if not trunc else self._final_obs()
        return obs, reward, term, trunc, info

    # -- actions ------------------------------------------------------------------------------------
    def _firing(self) -> tuple[dict[str, list[str]], list[tuple]]:
        """fingerprints of firing alerts per service, and the active alerts (`_active_alerts` tuples)."""
        m = self.env.unwrapped.marathon
        ep = self._episode(m.backend)
        info = ep.alert_info
        svcs = self.services
        n_svc = len(svcs)
        per: dict[str, list[str]] = {}
        active = _active_alerts(m.alert_engine)
        for name, fp, state, _, labels in active:
            if state != "firing":
                continue
            hit = info.get(fp)
            if hit is None or hit[0] != name:
                hit = self._alert_info(ep, name, fp, labels)
            for i in hit[2]:
                if i < n_svc:   # (row n_svc: an alert naming no service)
                    fs = per.get(svcs[i])
                    if fs is None:
                        per[svcs[i]] = [fp]
                    else:
                        fs.append(fp)
        return per, active

    def _service_rows(self, labels: dict) -> list[int]:
        """The indices of `services_in_labels` (``self.services`` is the app's service list, in its order): the
        services a service label names, and the longest service ``s`` with ``pod`` starting ``s + "-"`` (found
        among the pod name's prefixes before a "-", longest last), sorted.

        >>> import gymnasium as gym, sremarathon_env
        >>> v = RLView(gym.make("SREMarathon/OnlineBoutique-v0"))
        >>> [v.services[i] for i in v._service_rows({"service": "cartservice", "pod": "frontend-5d9c-x2"})]
        ['frontend', 'cartservice']
        """
        idx = self._svc_index
        found = set()
        for k in SERVICE_LABELS:
            v = labels.get(k)
            if isinstance(v, str):
                i = idx.get(v)
                if i is not None:
                    found.add(i)
        pod = labels.get("pod")
        if isinstance(pod, str):
            best = None
            p = pod.find("-")
            while p >= 0:
                i = idx.get(pod[:p])
                if i is not None:
                    best = i
                p = pod.find("-", p + 1)
            if best is not None:
                found.add(best)
        return sorted(found)

    def calls_for(self, a: int) -> tuple[list[dict], dict, dict | None] | None:
        """The (reads, report_incident args, intervention) of action ``a`` in the current state; None
        for ``noop``, a padded, out-of-range or currently invalid action (which run as ``noop``)."""
        if not 0 < a < MAX_ACTIONS or self._last_mask[a] <= 0:
            return None
        core = self.env.unwrapped
        m = core.marathon
        cv = self._episode(m.backend).cv
        per, _ = self._firing()
        label = self.action_labels[a]
        k = a - 1
        n_svc = MAX_SERVICES * len(SERVICE_KINDS)
        if k < n_svc:
            s = self.services[k // len(SERVICE_KINDS)]
            kind = SERVICE_KINDS[k % len(SERVICE_KINDS)]
            return self._service_calls(cv, per, s, kind, label)
        k -= n_svc
        if k < MAX_FLAGS:
            flag = next(f for f in self.app.flags if f.name == self.flags[k])
            culprits = [c for c in flag.consumers if c in self.services]
            return ([{"tool": "kubectl_get", "args": {"kind": "configmap", "name": self.app.flags_config_map}}],
                    self._report(per, culprits, f"flag:{flag.name}", label),
                    {"tool": "set_config", "args": {"target": self.app.flags_config_map, "key": flag.name,
                                                    "value": flag.default_variant}})
        k -= MAX_FLAGS
        if k < 2 * MAX_NODES:
            node = self.nodes[k % MAX_NODES]
            culprits = cv.services_on_nodes([node])
            reads = [{"tool": "kubectl_get", "args": {"kind": "nodes"}}]
            if k < MAX_NODES:
                return reads, self._report(per, culprits, f"node/{node}", label), \
                    {"tool": "drain_node", "args": {"node": node}}
            return reads, self._report(per, culprits, f"node/{node}", label), \
                {"tool": "uncordon_node", "args": {"node": node}}
        k -= 2 * MAX_NODES
        zone = self.zones[k]
        culprits = cv.services_on_nodes(cv.zone_nodes(zone))
        return ([{"tool": "kubectl_get", "args": {"kind": "nodes"}}], self._report(per, culprits, f"zone/{zone}", label),
                {"tool": "failover_zone", "args": {"zone": zone}})

    def _report(self, per: dict[str, list[str]], culprits: list[str], artifact: str, label: str) -> dict:
        fps: list[str] = []
        for s in culprits:
            for fp in per.get(s, ()):
                if fp not in fps:
                    fps.append(fp)
        return {"title": f"rl: {label}"[:200], "alert_fingerprints": fps[:200], "culprit_services": culprits[:50],
                "artifact": artifact, "summary": f"RL view action {label}"}

    def _service_calls(self, cv: ClusterView, per: dict, s: str, kind: str, label: str):
        spec = self._spec[s]
        dep_read = {"tool": "kubectl_get", "args": {"kind": "deployment", "name": s, "output": "json"}}
        hist_read = {"tool": "get_deploy_history", "args": {"service": s, "include_diffs": True, "limit": 5}}
        if kind == "restart":
            return [], self._report(per, [s], s, label), {"tool": "restart", "args": {"service": s}}
        if kind == "restart_edge":
            c = self._edge_callee(per, s)
            return [], self._report(per, [s, c], f"{s}->{c}", label), {"tool": "restart", "args": {"service": s}}
        if kind in ("rollback", "revert_patch"):
            rev, prev, _, artifact = cv.last_change(s)
            if kind == "rollback":
                return [hist_read], self._report(per, [s], artifact, label), \
                    {"tool": "rollback", "args": {"service": s, "to_revision": prev}}
            return [hist_read], self._report(per, [s], artifact, label), \
                {"tool": "patch_source", "args": {"service": s, "diff": reverse_diff(cv.latest_diff(s)),
                                                  "message": f"revert revision {rev}"}}
        if kind == "scale_restore":
            return [dep_read], self._report(per, [s], f"{s}:replicas", label), \
                {"tool": "scale", "args": {"service": s, "replicas": max(int(spec.replicas), 1)}}
        if kind == "scale_out":
            n = min(max(4, cv.desired_replicas(s) + 2), SCALE_OUT_MAX)
            return [dep_read], self._report(per, [s], "load", label), {"tool": "scale", "args": {"service": s, "replicas": n}}
        if kind in ("restore_cpu", "restore_memory"):
            cur = cv.resources(s)
            res = spec.resources
            keys = ("cpu_request_m", "cpu_limit_m") if kind == "restore_cpu" else ("mem_request_mi", "mem_limit_mi")
            args: dict[str, Any] = {"service": s}
            for key in keys:
                want = getattr(res, key)
                if want is None and cur.get(key) is not None:
                    want = min(int(cur[key]) * 2, 64000)
                if want is not None and want != cur.get(key):
                    args[key] = int(want)
            req, lim = keys
            if req in args or lim in args:  # keep request <= limit
                r = args.get(req, cur.get(req))
                li = args.get(lim, cur.get(lim))
                if r is not None and li is not None and r > li:
                    args[req] = int(li)
            if len(args) == 1:
                args[lim] = int(cur.get(lim) or getattr(res, lim) or (1000 if kind == "restore_cpu" else 512))
            artifact = f"{s}:limits.cpu" if kind == "restore_cpu" else f"{s}:limits.memory"
            return [dep_read], self._report(per, [s], artifact, label), {"tool": "set_resources", "args": args}
        # restore_config
        key = cv.env_drift(s)[0]
        return [dep_read], self._report(per, [s], f"{s}:{key}", label), \
            {"tool": "set_config", "args": {"target": s, "key": key, "value": spec.env.get(key)}}

    def _deployment_features(self, cv: ClusterView, s: str) -> tuple:
        """(env drift, cpu drift, memory drift, replica drift, last change (`ClusterView.last_change_kind`), revisions
        during the marathon, time of the last change or None, thunk: whether its diff changed a source file
        (`ClusterView.source_changed`, for the mask), desired replicas) of service ``s``, computed from the cluster
        (`_update_deployments` keeps them per deployment spec)."""
        env_d, cpu_d, mem_d, replicas, n_new, change, change_t = cv.summary(s)
        rep_d = replicas != self._spec[s].replicas
        memo: list[bool] = []

        def diff() -> bool:
            if not memo:
                memo.append(cv.source_changed(s))
            return memo[0]

        return env_d, cpu_d, mem_d, rep_d, change, n_new, change_t, diff, replicas

    def _edge_callee(self, per: dict, s: str) -> str:
        best, n = None, 0
        callees = self._callees[s]
        for c in callees:
            k = len(per.get(c, ()))
            if k > n:
                best, n = c, k
        return best or (callees[0] if callees else s)

    # -- observation and mask -----------------------------------------------------------------------
    def _final_obs(self) -> dict[str, np.ndarray]:
        return self._observe()

    def _episode(self, backend: Any) -> "_Episode":
        """What `_observe` keeps between the observations of one marathon (one backend)."""
        ep = self._ep
        if ep is None or ep.backend is not backend:
            ep = self._ep = _Episode(backend, self)
        return ep

    def _alert_families(self, ep: "_Episode", alerts: list[tuple], now: float) -> tuple[np.ndarray, np.ndarray]:
        """(F, fire) of the active alerts: ``F[i]`` the family states (firing 1, pending 0.5) and ages (hours, at
        most 1) of service ``i``'s alerts, their maxima (0 where none), row ``n_svc`` those of the alerts naming no
        service; ``fire[i]`` whether an alert naming service ``i`` fires (row ``n_svc``: unused)."""
        n_svc = len(self.services)
        F = np.zeros((n_svc + 1, 2 * N_FAM))
        fire = np.zeros(n_svc + 1, dtype=bool)
        if not alerts:
            return F, fire
        info = ep.alert_info
        hits = [info.get(fp) for _, fp, _, _, _ in alerts]
        for k, hit in enumerate(hits):
            name, fp, _, _, labels = alerts[k]
            if hit is None or hit[0] != name:
                hits[k] = self._alert_info(ep, name, fp, labels)
        n = len(alerts)
        rows = np.fromiter(chain.from_iterable(h[2] for h in hits), np.intp)
        counts = np.fromiter((len(h[2]) for h in hits), np.intp, n)
        fam = np.fromiter((h[1] for h in hits), np.intp, n)
        firing = np.fromiter((a[2] == "firing" for a in alerts), bool, n)
        at = np.fromiter((a[3] or now for a in alerts), np.float64, n)   # float(active_at or now)
        val = np.where(firing, 1.0, 0.5)
        # min(max(now - at, 0) / 3600, 1) per alert (NaN stays NaN, as with Python's min/max)
        age = np.minimum(np.maximum(now - at, 0.0) / 3600.0, 1.0)
        of = np.repeat(np.arange(n), counts)
        flat = rows * (2 * N_FAM) + fam[of]
        # the maxima from 0 (``if v > current: current = v``): fmax leaves a NaN age out as that comparison does;
        # no value is -0.0 (now - at is -0.0 only for now = -0.0, at = +0.0, and an active_at of 0 reads as now)
        np.fmax.at(F.reshape(-1), flat, val[of])
        np.fmax.at(F.reshape(-1), flat + N_FAM, age[of])
        fire[rows[firing[of]]] = True
        return F, fire

    def _alert_info(self, ep: "_Episode", name: str, fp: str, labels: dict) -> tuple[str, int, tuple[int, ...]]:
        """(alertname, family, rows): the service indices the alert names, ``(n_svc,)`` when none (the global
        row); kept per fingerprint for the episode (the fingerprint is the label set's)."""
        f = self._fam_of.get(name)
        if f is None:
            f = self._fam_of[name] = family_of(name)
        rows = tuple(self._service_rows(labels or {})) or (len(self.services),)
        hit = ep.alert_info[fp] = (name, f, rows)
        return hit

    def _update_deployments(self, ep: "_Episode", cv: ClusterView) -> None:
        """Bring ``ep``'s per-deployment features (`_deployment_features`) up to date: recomputed for a service
        whose deployment spec changed since they were taken. The key is the Deployment object, its
        ``metadata.generation`` (Kubernetes bumps it at every spec change: each new template - a new revision,
        a rollback, which also renumbers revisions - and each replica count), its replica count, current
        ReplicaSet and number of ReplicaSets; everything the features read (templates, revisions, revision
        metadata, replicas) changes only with a spec change."""
        deps = cv.b.cluster.deployments
        keys = [None if d is None else (d, d.generation, d.replicas, d.current, len(d.rss))
                for d in map(deps.get, self.services)]
        old = ep.dep_keys
        if keys == old:
            return
        for i, s in enumerate(self.services):
            k = keys[i]
            if old is not None and k == old[i]:
                continue
            env_d, cpu_d, mem_d, rep_d, change, n_new, change_t, diff, replicas = self._deployment_features(cv, s)
            ep.dep_rows[i] = (float(env_d), float(cpu_d), float(mem_d), float(rep_d), n_new / 5.0)
            ep.dep_bits[i] = (env_d, cpu_d, mem_d, rep_d and self._spec[s].replicas >= 1, replicas < SCALE_OUT_MAX)
            if change is None:
                ep.changed.pop(i, None)
            else:
                ep.changed[i] = (change, change_t, diff)
        ep.dep_keys = keys

    def _observe(self) -> dict[str, np.ndarray]:
        core = self.env.unwrapped
        m = core.marathon
        ep = self._episode(m.backend)
        cv = ep.cv
        now = float(m.now)
        x = np.zeros(OBS_DIM, dtype=np.float32)
        mask = np.zeros(MAX_ACTIONS, dtype=np.float32)
        mask[0] = 1.0
        n_inv = max(core.n_invocations, 1)
        x[0:4] = (now / self.horizon, m.invocation_index / n_inv, float(now <= self.injection),
                  max(self.horizon - now, 0.0) / self.horizon)
        ev = _last_entry(m)
        x[4:7] = ev
        incs = m.ctx.incidents.all()
        open_incs = [i for i in incs if i.status == "open"]
        x[7] = min(len(open_incs) / 20.0, 1.0)
        j = 8
        for i in open_incs[-MAX_INCIDENT_SLOTS:]:
            x[j:j + 4] = (1.0, min((now - i.opened_at) / 3600.0, 1.0), min(len(i.alert_fingerprints) / 20.0, 1.0),
                          min(len(i.culprit_services) / 10.0, 1.0))
            j += 4
        j = 8 + 4 * MAX_INCIDENT_SLOTS
        n_svc = len(self.services)
        # family state/age per service (or global), as float64 maxima: float32 rounding is monotonic, so rounding
        # the maximum once equals taking the maximum of rounded values
        F, fire = self._alert_families(ep, _active_alerts(m.alert_engine), now)
        x[j:j + 2 * N_FAM] = F[n_svc]
        j += 2 * N_FAM
        # flags
        base = 1 + MAX_SERVICES * len(SERVICE_KINDS)
        for i, fl in enumerate(self.flags):
            d = cv.flag_drift(fl)
            x[j + i] = float(d)
            mask[base + i] = float(d)
        j += MAX_FLAGS
        # nodes: a node "fires" when a service with a firing alert has a live pod on it
        nbase = base + MAX_FLAGS
        fire_idx = np.flatnonzero(fire[:n_svc]).tolist()
        fire_nodes = cv.nodes_of([self.services[i] for i in fire_idx])
        nx = []
        for i, n in enumerate(self.nodes):
            cord, ready = cv.cordoned(n), cv.node_ready(n)
            fire_n = not cord and n in fire_nodes
            nx += (float(cord), float(not ready), float(fire_n))
            mask[nbase + i] = float(fire_n and not cord)
            mask[nbase + MAX_NODES + i] = float(cord)
        x[j:j + len(nx)] = nx
        j += 3 * MAX_NODES
        zbase = nbase + 2 * MAX_NODES
        for i, z in enumerate(self.zones):
            zn = cv.zone_nodes(z)
            mask[zbase + i] = float(any(not cv.node_ready(n) for n in zn) and not all(cv.cordoned(n) for n in zn))
        assert j == GLOBAL_FEATURES
        if n_svc:
            self._update_deployments(ep, cv)
            X = x[GLOBAL_FEATURES:].reshape(MAX_SERVICES, SVC_FEATURES)[:n_svc]   # a view: one row per service
            X[:, 0] = 1.0
            X[:, 1:1 + 2 * N_FAM] = F[:n_svc]
            # one row of 14 health/deployment features per service, clipped together
            rows = np.empty((n_svc, 14))
            H = self._health(m.backend)
            desired = H[:, 5]
            # error ratio, p95 / 2 s, cpu util / 2, memory util, ready / desired (0 where none is desired),
            # desired / 4, restarts / 10
            rows[:, :7] = H
            rows[:, 1:3] /= (2000.0, 2.0)
            rows[:, 4] = 0.0
            np.divide(H[:, 4], desired, out=rows[:, 4], where=desired > 0)
            rows[:, 5:7] /= (4.0, 10.0)
            rows[:, 7:12] = ep.dep_rows
            rows[:, 12] = 1.0
            for i, (change, change_t, _) in ep.changed.items():
                if change_t is not None:
                    rows[i, 12] = min(max(now - change_t, 0.0) / 3600.0, 1.0)
            rows[:, 13] = 0.0
            idx = self._svc_index
            for i in open_incs:
                for c in i.culprit_services:
                    k = idx.get(c)
                    if k is not None:
                        rows[k, 13] = 1.0
            # `_clip` on every entry but the change age (already in [0, 1]): +inf -> 1, -inf and NaN -> 0
            # (clip first, then NaN -> 0: the same values and signs as np.nan_to_num followed by the clip)
            age = rows[:, 12].copy()
            np.clip(rows, 0.0, 1.0, out=rows)
            rows[np.isnan(rows)] = 0.0
            rows[:, 12] = age
            X[:, 1 + 2 * N_FAM:] = rows
            # the service actions' mask (see the module docstring)
            K = len(SERVICE_KINDS)
            M = mask[1:1 + MAX_SERVICES * K].reshape(MAX_SERVICES, K)[:n_svc]
            fs = fire[:n_svc]
            bits = ep.dep_bits
            M[:, 0] = fs
            M[:, 4] = bits[:, 3]
            M[:, 5] = fs & bits[:, 4]
            M[:, 6] = fs & bits[:, 1]
            M[:, 7] = fs & bits[:, 2]
            M[:, 8] = fs & bits[:, 0]
            callees = self._callee_idx
            fl = fire.tolist()
            for i in fire_idx:
                M[i, 1] = float(any(fl[c] for c in callees[i]))
                ch = ep.changed.get(i)
                if ch is not None:
                    change, _, diff = ch
                    M[i, 2] = 1.0
                    M[i, 3] = float(change[2] == "build" and bool(diff()))
        np.clip(x, -1.0, 1.0, out=x)
        self._last_mask = mask
        return {"observations": x, "action_mask": mask.copy()}

    def _health(self, backend: Any) -> np.ndarray:
        """The services' `HEALTH_FIELDS` (float64, one row per service): the backend's bulk read where it has
        one, else its per-service reads (a missing field reads 0.0)."""
        bulk = getattr(backend, "services_health", None)
        if bulk is not None:
            return np.asarray(bulk(self.services, HEALTH_FIELDS), dtype=np.float64)
        out = np.zeros((len(self.services), len(HEALTH_FIELDS)))
        for i, s in enumerate(self.services):
            h = backend.service_health(s) or {}
            out[i] = [h.get(f, 0.0) for f in HEALTH_FIELDS]
        return out


class _Episode:
    """`RLView._observe`'s state for one marathon's backend: its `ClusterView`, per-fingerprint alert info
    (`RLView._alert_info`) and per-deployment features (`RLView._update_deployments`: ``dep_rows`` env, cpu,
    memory and replica drift and revisions / 5; ``dep_bits`` env, cpu and memory drift, the scale_restore
    precondition and room to scale out; ``changed`` service index -> (last change, its time, source-change thunk))."""

    __slots__ = ("backend", "cv", "alert_info", "dep_keys", "dep_rows", "dep_bits", "changed")

    def __init__(self, backend: Any, view: RLView):
        self.backend = backend
        self.cv = ClusterView(backend, view.app)
        self.alert_info: dict[str, tuple[str, int, tuple[int, ...]]] = {}
        self.dep_keys: list | None = None
        n = len(view.services)
        self.dep_rows = np.zeros((n, 5))
        self.dep_bits = np.zeros((n, 5), dtype=bool)
        self.changed: dict[int, tuple] = {}


def _active_alerts(engine) -> list[tuple[str, str, str, float, dict]]:
    """(alertname, fingerprint, state, active_at, labels) of the engine's active alerts, in `AlertEngine.active`
    order: from its incremental `AlertView` when it has a change log (labels shared, read-only)."""
    view = AlertView.of(engine)
    if view is not None:
        return view.active_brief()
    return [(a["alertname"], a["fingerprint"], a["state"], a.get("active_at"), a.get("labels") or {})
            for a in engine.active()]


def _clip(v: float) -> float:
    v = float(v)
    if not math.isfinite(v):
        return 1.0 if v > 0 else 0.0
    return min(max(v, 0.0), 1.0)


def _last_entry(m) -> tuple[float, float, float]:
    """Failed, slow and degraded fractions of entry traffic over the last invocation interval."""
    tot = fail = slow = deg = 0.0
    recs = m.recorder.records
    for r in reversed(recs):
        if r.kind == "tick":
            if r.t < m.now - m.config.cadence_s + 1e-9:
                break
            e = r.data["entry"]
            tot += e["total"]
            fail += e["failed"]
            slow += e["slow"]
            deg += e["degraded"]
        elif r.kind in ("run", "schedule"):
            break
    if tot <= 0:
        return 0.0, 0.0, 0.0
    return _clip(fail / tot), _clip(slow / tot), _clip(deg / tot)

"""The keep policy: rule-based alert grouping into a persistent incident store, a diagnosis from
telemetry and deploy history, and its repair.

Grouping: every firing alert joins at most one incident. A new alert is mapped to its workload
(service or node), then the call graph is followed from that symptom downwards to the deepest failing
dependency: among the services it calls (transitively) that also have firing alerts, one whose own
dependencies have none. Alerts with the same root join that root's open incident when it was opened
within the grouping window; otherwise a new incident opens for the root.

Diagnosis of a root (first match wins):

- a node alert: the node is the artifact and the services placed on it the culprits; drain it;
- a change to the root within the lookback (deploy history): a source build names its changed file,
  an env push its key, an image change its tag, a resources change the limit; roll back to the
  revision before the change (a lowered limit is restored instead);
- OOM kills / CPU throttling with the spec's limits intact: the pods themselves (restart);
- a Service with no endpoints and zero desired replicas: restore the replicas;
- a datastore: ``down`` when it restarts, ``slow-io`` on latency, ``auth-revoked`` on errors; restart;
- otherwise the root service itself; restart it.

The incident is reported with the root as culprit and the diagnosed artifact, the repair cites it,
and the incident is resolved once none of its alerts fires.

>>> deepest_failing(["frontend", "checkoutservice", "cartservice"], {"frontend": ["checkoutservice"],
...                  "checkoutservice": ["cartservice"], "cartservice": []}, "frontend")
'cartservice'
>>> changed_paths("--- a/src/app.py\\n+++ b/src/app.py\\n@@ -1 +1 @@\\n-x\\n+y\\n")
['src/app.py']
"""

from __future__ import annotations

import re
from typing import Any

from baselines.base import Policy, alertname, fingerprint, firing, incident_id_of
from baselines.runbook import workload_of


def deepest_failing(failing: list[str], callees: dict[str, list[str]], start: str) -> str:
    """From ``start``, follow calls into services that are failing; the first failing service (BFS)
    none of whose transitive callees fail is the root (``start`` when nothing below it fails)."""
    failing_set = set(failing)
    seen, frontier, order = {start}, [start], [start]
    while frontier:
        nxt = []
        for s in frontier:
            for c in callees.get(s, []):
                if c not in seen:
                    seen.add(c)
                    nxt.append(c)
                    order.append(c)
        frontier = nxt

    def below(s: str) -> set[str]:
        out, fr = set(), [s]
        while fr:
            n = []
            for x in fr:
                for c in callees.get(x, []):
                    if c not in out and c != s:
                        out.add(c)
                        n.append(c)
            fr = n
        return out

    for s in order:
        if s in failing_set and not (below(s) & failing_set):
            return s
    return start


def changed_paths(diff: str) -> list[str]:
    """Source files a unified diff changes (deployment pseudo-files excluded)."""
    out = []
    for m in re.finditer(r"^\+\+\+ b/(\S+)", diff or "", flags=re.M):
        p = m.group(1)
        if not p.startswith("deployment.yaml") and p not in out:
            out.append(p)
    return out


def changed_env_keys(diff: str) -> list[str]:
    out = []
    for m in re.finditer(r"^[-+]  ([A-Za-z_][A-Za-z0-9_]*): ", diff or "", flags=re.M):
        if m.group(1) not in out:
            out.append(m.group(1))
    return out


class KeepPolicy(Policy):
    name = "keep"

    def __init__(self, window_s: float = 240.0, lookback_s: float = 900.0, max_history_reads: int = 16):
        self.window_s = float(window_s)
        self.lookback_s = float(lookback_s)
        self.max_history_reads = int(max_history_reads)
        self.options = {"window_s": self.window_s, "lookback_s": self.lookback_s,
                        "max_history_reads": self.max_history_reads}

    def reset(self, app: Any, seed: int) -> None:
        super().reset(app, seed)
        self.assigned: dict[str, str] = {}          # fingerprint -> incident id
        self.members: dict[str, set[str]] = {}      # incident id -> fingerprints
        self.root_open: dict[str, tuple[str, float]] = {}  # root -> (open incident id, opened at)
        self.blamed: set[tuple[str, int]] = set()   # (service, revision) already reported as a cause
        self.drained: set[str] = set()              # nodes this policy drained
        self.callees = {s: app.callees(s) for s in app.service_names}
        self.upstream = {s: set(app.upstream_closure(s)) for s in app.service_names}
        self.roles = {s.name: s.role for s in app.services}
        self.nodes = {n.name: [s.name for s in app.services if s.node == n.name] for n in app.topology.nodes}

    # -- per invocation ---------------------------------------------------------------------------
    def act(self, session: Any) -> None:
        obs = session.observation()
        now = float(obs["t"])
        fire = firing(obs)
        firing_fps = {fingerprint(a) for a in fire}
        for root, (inc, _) in sorted(self.root_open.items()):
            if not (self.members.get(inc, set()) & firing_fps):
                session.call("resolve_incident", {"incident_id": inc, "summary": "all alerts cleared"})
                del self.root_open[root]
        by_workload: dict[str, list[dict]] = {}
        for a in fire:
            w = workload_of(self.app, a)
            if w:
                by_workload.setdefault(w, []).append(a)
        failing = [s for s in self.app.service_names if s in by_workload]
        self._history: dict[str, list[dict]] = {}
        # 1. what changed? a recent revision of a failing service explains the alerts that started after it
        order = sorted(failing, key=lambda s: (-len(by_workload[s]), s))[:self.max_history_reads]
        for s in order:
            cur, prev = self._recent_change(session, s, now)
            if cur is None or (s, int(cur.get("revision") or 0)) in self.blamed:
                continue
            tc = float(cur.get("t") or 0.0)
            radius = self.upstream.get(s, {s})
            fps = sorted({fingerprint(a) for w in sorted(by_workload) if w in radius for a in by_workload[w]
                          if fingerprint(a) not in self.assigned and _since(a) is not None and _since(a) >= tc})
            if not fps:
                continue
            artifact, repair, why = self._change_diagnosis(s, cur, prev)
            self.blamed.add((s, int(cur.get("revision") or 0)))
            r = session.call("report_incident", {
                "title": f"{s}: revision {cur.get('revision')} ({cur.get('change')}) broke its callers"[:200],
                "alert_fingerprints": fps, "culprit_services": [s], "artifact": artifact, "summary": why[:1000]})
            inc = incident_id_of(r)
            if inc is None:
                continue
            self._assign(inc, fps)
            self.root_open[s] = (inc, now)
            if repair is not None:
                tool, args = repair
                session.call(tool, {**args, "incident_id": inc})
        # 2. the rest: the deepest failing dependency (a node that is not ready explains its services)
        down_nodes = sorted(w for w in by_workload if w in self.nodes and w not in self.drained)
        on_down = {s: n for n in down_nodes for s in self.nodes[n]}
        new_by_root: dict[str, list[dict]] = {}
        for w in sorted(by_workload):
            new = [a for a in by_workload[w] if fingerprint(a) not in self.assigned]
            if not new:
                continue
            if w not in self.callees:
                root = w
            elif w in on_down:
                root = on_down[w]
            else:
                root = deepest_failing(failing, self.callees, w)
                root = on_down.get(root, root)
            new_by_root.setdefault(root, []).extend(new)
        for root in sorted(new_by_root, key=lambda r: (r not in self.callees, r)):
            alerts = new_by_root[root]
            fps = sorted({fingerprint(a) for a in alerts})
            cur = self.root_open.get(root)
            if cur is not None and now - cur[1] <= self.window_s:
                r = session.call("update_incident", {"incident_id": cur[0], "add_alert_fingerprints": fps})
                if r.ok:
                    self._assign(cur[0], fps)
                    continue
            root_alerts = by_workload.get(root, alerts)
            artifact, repair, why = self._diagnose(session, root, root_alerts, now)
            culprits = self.nodes[root] if root in self.nodes else [root]
            r = session.call("report_incident", {
                "title": f"{root}: {', '.join(sorted({alertname(a) for a in root_alerts}))[:150]}",
                "alert_fingerprints": fps, "culprit_services": culprits, "artifact": artifact, "summary": why})
            inc = incident_id_of(r)
            if inc is None:
                continue
            self._assign(inc, fps)
            self.root_open[root] = (inc, now)
            if repair is not None:
                tool, args = repair
                res = session.call(tool, {**args, "incident_id": inc})
                if tool == "drain_node" and getattr(res, "ok", False):
                    self.drained.add(root)
        return None

    def _assign(self, inc: str, fps: list[str]) -> None:
        self.members.setdefault(inc, set()).update(fps)
        for f in fps:
            self.assigned[f] = inc

    # -- deploy history ---------------------------------------------------------------------------
    def _revisions(self, session: Any, service: str) -> list[dict]:
        if service not in self._history:
            hist = session.call("get_deploy_history", {"service": service, "include_diffs": True, "limit": 5})
            self._history[service] = hist.result.get("revisions", []) if hist.ok and isinstance(hist.result, dict) else []
        return self._history[service]

    def _recent_change(self, session: Any, service: str, now: float):
        """The current revision when it is a change made within the lookback, and the one before it."""
        revs = self._revisions(session, service)
        cur = next((r for r in reversed(revs) if r.get("current")), None)
        if cur is None or cur.get("change") not in ("build", "config", "image", "resources"):
            return None, None
        if float(cur.get("t") or -1e18) < now - self.lookback_s:
            return None, None
        i = revs.index(cur)
        return cur, (revs[i - 1] if i >= 1 else None)

    def _change_diagnosis(self, s: str, cur: dict, prev: dict | None):
        """(artifact, repair, why) for a change ``cur`` of service ``s``."""
        spec = self.app.service(s)
        diff = cur.get("diff") or ""
        kind = cur.get("change")
        back = ("rollback", {"service": s, **({"to_revision": int(prev["revision"])} if prev else {})})
        msg = str(cur.get("message") or "")
        if kind == "build":
            paths = changed_paths(diff)
            sha = str(cur.get("sha") or "")
            art = sha if len(sha) >= 7 else (f"{s}:{paths[0]}" if paths else s)
            return art, back, f"build {sha[:12]} ({msg}) changed {paths}; rolled back"
        if kind == "config":
            keys = changed_env_keys(diff)
            if keys:
                k = keys[0]
                want = spec.env.get(k)
                if want is None:
                    want = next((kn.default for kn in spec.knobs if kn.key == k), None)
                fix = ("set_config", {"target": s, "key": k, "value": want}) if want is not None else back
                return f"{s}:{k}", fix, f"config push changed {keys}"
            return f"{s}:config", back, f"config push: {msg}"
        if kind == "image":
            return f"{s}:image", back, f"image changed to {cur.get('image')}"
        res = spec.resources
        text = msg + "\n" + diff
        if "mem" in text and res.mem_limit_mi:
            return (f"{s}:resources.limits.memory", ("set_resources", {"service": s, "mem_limit_mi": res.mem_limit_mi}),
                    f"resources change: {msg}")
        if "cpu" in text and res.cpu_limit_m:
            return (f"{s}:resources.limits.cpu", ("set_resources", {"service": s, "cpu_limit_m": res.cpu_limit_m}),
                    f"resources change: {msg}")
        return f"{s}:resources", back, f"resources change: {msg}"

    # -- diagnosis without a recent change ---------------------------------------------------------
    def _diagnose(self, session: Any, root: str, alerts: list[dict], now: float):
        names = {alertname(a) for a in alerts}
        if root not in self.callees:  # a node
            return root, ("drain_node", {"node": root}), "node not ready"
        spec = self.app.service(root)
        res = spec.resources
        if names & {"ServiceHasNoEndpoints", "DeploymentUnavailable", "KubeDeploymentReplicasMismatch"}:
            dep = session.call("kubectl_get", {"kind": "deployment", "name": root, "output": "json"})
            desired = _desired_replicas(dep.result) if dep.ok else None
            if desired == 0:
                return f"{root}:replicas", ("scale", {"service": root, "replicas": max(1, spec.replicas)}), \
                    "deployment scaled to zero"
        if any("OOM" in n or "Memory" in n for n in names) and res.mem_limit_mi:
            return root, ("set_resources", {"service": root, "mem_limit_mi": int(res.mem_limit_mi * 3)}), \
                "memory hog in the pods: OOM kills with the limit as specified; raise the limit"
        if self.roles.get(root) in ("datastore", "broker", "cache", "database"):
            if names & {"KubePodCrashLooping", "PodRestartingFrequently"}:
                what = "down"
            elif any("Latency" in n for n in names) and not any("Error" in n or "Failure" in n for n in names):
                what = "slow-io"   # slow, not failing (the pack's latency rules, no error-ratio rule)
            else:
                what = "auth-revoked"
            return f"{root}:{what}", ("restart", {"service": root}), f"datastore {what}"
        return root, ("restart", {"service": root}), "pods of the deepest failing service"


def _since(a: dict[str, Any]) -> float | None:
    v = a.get("firing_since")
    return None if v is None else float(v)


def _desired_replicas(result: Any) -> int | None:
    try:
        items = result.get("items") if isinstance(result, dict) else None
        obj = items[0] if items else result.get("object", result)
        return int(obj["spec"]["replicas"])
    except Exception:  # noqa: BLE001
        return None

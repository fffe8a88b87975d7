"""The runbook policy: a fixed table from alert rule to action, applied per workload.

Firing alerts are grouped by workload (the service or node their labels name) and, within it, by the
runbook entry their rule maps to. For each group without an open incident, the rule of highest rank
picks the row of `RUNBOOK`: a rule that names a broken object (an OOM kill, an image pull failure, a node that is not
ready, a Service without endpoints) outranks a symptom rule (error rate, latency). The policy reports
one incident for the group with the workload as culprit and the row's fault category as the root
cause (``<workload>:<artifact>``), then runs the row's action once, citing it. Later alerts of the
same workload and runbook entry join that entry's open incident (a different entry firing on the workload
opens its own ticket and runs its own action); a node entry's ticket also lists the alerts of the
workloads placed on the node. An incident is resolved once none of its alerts fires.

>>> RUNBOOK["PodOOMKilled"].rank > RUNBOOK["ServiceErrorRateHigh"].rank
True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from baselines.base import Policy, alert_services, alertname, fingerprint, firing, incident_id_of


@dataclass(frozen=True)
class Row:
    rank: int              # higher wins; >= 50: the rule names a broken object
    category: str          # the fault category the runbook reports
    artifact: str          # appended to the workload: "<workload>:<artifact>" ("" = the workload itself)
    action: Callable[[Any, str], tuple[str, dict] | None]   # (app, workload) -> (tool, args)


def _mem_up(app, s):
    lim = app.service(s).resources.mem_limit_mi or 256
    return "set_resources", {"service": s, "mem_limit_mi": int(lim * 2)}


def _cpu_up(app, s):
    lim = app.service(s).resources.cpu_limit_m or 500
    return "set_resources", {"service": s, "cpu_limit_m": int(lim * 2)}


def _scale_up(app, s):
    return "scale", {"service": s, "replicas": max(2, app.service(s).replicas + 1)}


def _restore_replicas(app, s):
    return "scale", {"service": s, "replicas": max(1, app.service(s).replicas)}


def _restart(app, s):
    return "restart", {"service": s}


def _rollback(app, s):
    return "rollback", {"service": s}


def _drain(app, node):
    return "drain_node", {"node": node}


RUNBOOK: dict[str, Row] = {
    # object rules: the alert names the broken thing
    "NodeNotReady": Row(90, "node", "", _drain),
    "KubeNodeNotReady": Row(90, "node", "", _drain),
    "ImagePullFailing": Row(85, "deployment", "image", _rollback),
    "ContainerConfigError": Row(84, "config", "config", _rollback),
    "DeploymentRolloutStuck": Row(80, "deployment", "rollout", _rollback),
    "KubeDeploymentRolloutStuck": Row(80, "deployment", "rollout", _rollback),
    "PodOOMKilled": Row(75, "resource", "resources.limits.memory", _mem_up),
    "ContainerOOMEvents": Row(75, "resource", "resources.limits.memory", _mem_up),
    "ContainerMemoryAtLimit": Row(74, "resource", "resources.limits.memory", _mem_up),
    "ContainerMemoryNearLimit": Row(73, "resource", "resources.limits.memory", _mem_up),
    "ServiceHasNoEndpoints": Row(70, "deployment", "replicas", _restore_replicas),
    "DeploymentUnavailable": Row(68, "deployment", "replicas", _restore_replicas),
    "PodCrashLooping": Row(65, "deployment", "crashloop", _rollback),
    "KubePodCrashLooping": Row(65, "deployment", "crashloop", _rollback),
    "CPUThrottlingSevere": Row(61, "resource", "resources.limits.cpu", _cpu_up),
    "CPUThrottlingHigh": Row(60, "resource", "resources.limits.cpu", _cpu_up),
    "PodNotReady": Row(55, "deployment", "", _restart),
    "KubePodNotReady": Row(55, "deployment", "", _restart),
    "PodNotRunning": Row(54, "deployment", "", _restart),
    "DeploymentReplicasUnavailable": Row(52, "deployment", "replicas", _restart),
    "KubeDeploymentReplicasMismatch": Row(52, "deployment", "replicas", _restart),
    # symptom rules: something is wrong somewhere
    "PodRestartingFrequently": Row(40, "resource", "", _restart),
    "ContainerRestarted": Row(39, "resource", "", _restart),
    "ServiceErrorRateCritical": Row(31, "dependency", "", _restart),
    "ServiceErrorRateHigh": Row(30, "dependency", "", _restart),
    "ServiceCallFailuresHigh": Row(29, "network", "", _restart),
    "ServiceCallErrorsHigh": Row(29, "network", "", _restart),
    "ServiceCallLatencyHigh": Row(28, "network", "", _restart),
    "ServiceTrafficStopped": Row(27, "network", "", _restart),
    "MessagingSpanErrorsHigh": Row(30, "dependency", "", _restart),
    "KafkaConsumerLagHigh": Row(22, "load", "lag", _scale_up),
    "KafkaConsumerLagGrowing": Row(22, "load", "lag", _scale_up),
    "ServiceLatencyP99Critical": Row(21, "load", "latency", _scale_up),
    "ServiceLatencyP99High": Row(20, "load", "latency", _scale_up),
    "ServiceLatencyP50High": Row(19, "load", "latency", _scale_up),
    "MessagingSpanLatencyHigh": Row(19, "load", "latency", _scale_up),
}
DEFAULT = Row(0, "unknown", "unknown", _restart)


def workload_of(app: Any, a: dict[str, Any]) -> str | None:
    """The workload an alert is about: a node for node rules, else the first service its labels name."""
    labels = a.get("labels") or {}
    if labels.get("node") and not alert_services(app, a):
        return str(labels["node"])
    svcs = alert_services(app, a)
    if svcs:
        return svcs[0]
    return labels.get("node") or labels.get("entry_service") or None


class RunbookPolicy(Policy):
    name = "runbook"

    def reset(self, app: Any, seed: int) -> None:
        super().reset(app, seed)
        self.open: dict[tuple[str, str], str] = {}   # (workload, row key) -> open incident id
        self.members: dict[str, set[str]] = {}       # incident id -> fingerprints
        self.placed = {n.name: [s.name for s in app.services if s.node == n.name] for n in app.topology.nodes}

    def act(self, session: Any) -> None:
        obs = session.observation()
        fire = firing(obs)
        firing_fps = {fingerprint(a) for a in fire}
        # resolve incidents whose alerts all stopped firing
        for key, inc in sorted(self.open.items()):
            if not (self.members.get(inc, set()) & firing_fps):
                session.call("resolve_incident", {"incident_id": inc, "summary": "alerts cleared"})
                del self.open[key]
        groups: dict[str, list[dict]] = {}
        for a in fire:
            w = workload_of(self.app, a)
            if w:
                groups.setdefault(w, []).append(a)
        for w in sorted(groups):
            # one ticket per (workload, runbook entry): each entry's alerts join its ticket
            by_row: dict[tuple[str, str], list[dict]] = {}
            for a in groups[w]:
                row = RUNBOOK.get(alertname(a), DEFAULT)
                by_row.setdefault((row.category, row.artifact), []).append(a)
            for rk in sorted(by_row, key=lambda k: -max(RUNBOOK.get(alertname(a), DEFAULT).rank for a in by_row[k])):
                self._handle(session, w, rk, by_row[rk], groups)
        return None

    def _handle(self, session: Any, w: str, rk: tuple[str, str], alerts: list[dict], groups: dict) -> None:
        fps = sorted({fingerprint(a) for a in alerts})
        inc = self.open.get((w, *rk))
        if inc is not None:
            new = [f for f in fps if f not in self.members[inc]]
            if new:
                r = session.call("update_incident", {"incident_id": inc, "add_alert_fingerprints": new})
                if r.ok:
                    self.members[inc].update(new)
            return
        row = max((RUNBOOK.get(alertname(a), DEFAULT) for a in alerts), key=lambda r: r.rank)
        top = max(alerts, key=lambda a: RUNBOOK.get(alertname(a), DEFAULT).rank)
        if w in self.placed:
            # a node entry: the ticket lists the node's workloads and their alerts too
            culprits = list(self.placed[w])
            fps = sorted(set(fps) | {fingerprint(a) for s in culprits for a in groups.get(s, [])})
        else:
            culprits = [w]
        r = session.call("report_incident", {
            "title": f"{alertname(top)} on {w}", "alert_fingerprints": fps[:200], "culprit_services": culprits,
            "artifact": f"{w}:{row.artifact}" if row.artifact else w,
            "summary": f"runbook: {alertname(top)} -> {row.category}"})
        inc = incident_id_of(r)
        if inc is None:
            return
        self.open[(w, *rk)] = inc
        self.members[inc] = set(fps)
        try:
            act = row.action(self.app, w)
        except KeyError:  # a node or unknown workload where the row wants a service
            act = None
        if act is not None:
            tool, args = act
            session.call(tool, {**args, "incident_id": inc})

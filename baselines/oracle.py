"""The oracle: reads the sealed ground truth through the Marathon's test-only door and does the right
thing at the right time.

It exists to validate the benchmark, not to compete: every fault must be reachable through the tools
(an attributable alert fires, the catalogue's repair option heals it in the twin) and the scorer must
credit correct work. Per invocation, for each injected fault that is still live and not yet handled:

1. wait until an alert attributable to it has fired (labels inside the fault's scope; it started firing
   at or after the fault's start, or it names a culprit and fired since the start);
2. report one incident citing those alerts with the exact culprit services and the canonical artifact;
3. apply the fault's first repair option citing that incident (a rollback goes to the revision that was
   current before the fault, a scale back to the replica count before it); when an option is refused or
   fails, the next one is tried next time. A load fault whose options are all ``scale`` (the tiers of one
   scale-out) gets all of them at once; a tier this policy already scaled out for an earlier load fault
   gets the new fault's increment on top.

Repairs of one invocation run in an order where none undoes another on the same service: rollbacks first
(the latest fault's first), then template edits (config, resources), then restarts; a rollback of a
service to a revision older than an edit or restart done on it earlier for a fault that is still live is
followed by that edit or restart again (the old template lacks it, or the old ReplicaSet still runs the
pods the fault was injected into). A restart is put off while a restart this policy made at an earlier
invocation of the same service is still rolling out (for at most `RESTART_WAIT_S`): a second restart would
replace the rollout's new pods and set back every fault that rollout is repairing, and the first one may
repair this fault as well. A fault that ended before it could be handled is still reported when
alerts inside the scorer's grace attribute it. A node drained for a node fault is uncordoned once that
fault has ended.

>>> OraclePolicy().name
'oracle'
"""

from __future__ import annotations

from typing import Any

from baselines.base import Policy, alert_scope_labels, fingerprint, incident_id_of


def _scope(fault: Any) -> set[str]:
    from scoring.matching import norm

    return {norm(s) for s in [*fault.scope, *fault.culprits]}


def attributable_alerts(alerts: list[dict[str, Any]], fault: Any, start_s: float,
                        until_s: float = float("inf")) -> list[dict[str, Any]]:
    """Alerts of the history that the scorer would attribute to ``fault`` (started at ``start_s``): in
    scope, and their latest firing interval started at or after the start, or they name a culprit and
    fired at some time since the start (scoring/README.md section 1); for a fault that has ended, only
    intervals that started by ``until_s`` (its end plus the attribution grace)."""
    from scoring.matching import norm

    sigma = _scope(fault)
    culprits = {norm(c) for c in fault.culprits}
    out = []
    for a in alerts:
        labels = alert_scope_labels(a)
        if not fingerprint(a) or not (labels & sigma):
            continue
        since = _num(a, "firing_since")
        if since is None or a.get("state") not in ("firing", "resolved"):
            continue
        ended = _num(a, "resolved_at") if a.get("state") == "resolved" else None
        if since > until_s:
            continue
        if since >= start_s or (labels & culprits and (ended is None or ended > start_s)):
            out.append(a)
    return out


def _num(a: dict[str, Any], *keys: str) -> float | None:
    for k in keys:
        v = a.get(k)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return float(v)
    return None


class OraclePolicy(Policy):
    name = "oracle"

    def reset(self, app: Any, seed: int) -> None:
        super().reset(app, seed)
        self.incident: dict[str, str] = {}      # instance id -> incident id
        self.next_option: dict[str, int] = {}   # instance id -> index of the repair option to try
        self.repaired: set[str] = set()
        self.scaled: dict[str, int] = {}        # service -> replicas this policy last set for load faults
        self.drained: dict[str, str] = {}       # node -> instance id of the node fault it was drained for
        #: service -> (instance id, tool, args, revision it rolled out) of the edits and restarts done on it
        #: for faults still live
        self.applied: dict[str, list[tuple[str, str, dict[str, Any], int | None]]] = {}
        self.restarted_at: dict[str, float] = {}   # service -> sim time of this policy's last restart of it

    def _replicas(self, args: dict[str, Any]) -> int:
        s, want = args["service"], int(args["replicas"])
        prev = self.scaled.get(s)
        if prev is None:
            return want
        base = max(1, self.app.service(s).replicas)
        return max(want, min(prev + max(0, want - base), 50))

    def _report(self, session: Any, iid: str, fault: Any, evidence: list[dict[str, Any]]) -> str | None:
        r = session.call("report_incident", {
            "title": f"{fault.category}: {fault.target}",
            "alert_fingerprints": sorted({fingerprint(a) for a in evidence}),
            "culprit_services": list(fault.culprits),
            "artifact": fault.artifact.canonical,
            "summary": fault.description or fault.id})
        inc = incident_id_of(r)
        if inc is not None:
            self.incident[iid] = inc
        return inc

    def act(self, session: Any) -> None:
        truth = session.oracle_ground_truth_TEST_ONLY()
        alerts = session.observation()["alerts"]
        ended = {g["instance_id"] for g in truth if g["ended"]}
        for node, iid in sorted(self.drained.items()):
            if iid in ended:  # the node is back: make it schedulable again, or later faults find no room
                r = session.call("uncordon_node", {"node": node, "incident_id": self.incident[iid]})
                if r.ok:
                    del self.drained[node]
        for svc in list(self.applied):
            self.applied[svc] = [x for x in self.applied[svc] if x[0] not in ended]
        plan: list[tuple[str, str, dict[str, Any], int]] = []   # (instance id, tool, args, option index)
        for g in sorted(truth, key=lambda g: (g["start_s"], g["instance_id"])):
            iid, fault = g["instance_id"], g["fault"]
            if not g["injected_ok"] or iid in self.repaired:
                continue
            if g["ended"]:
                # it ended before it could be handled: a correct report still earns the stages the scorer
                # grants after the end (alerts attributable within the grace)
                if iid not in self.incident:
                    grace = float(getattr(getattr(session, "config", None), "grace_s", _GRACE_S))
                    evidence = attributable_alerts(alerts, fault, g["start_s"], g["end_s"] + grace)
                    if evidence:
                        self._report(session, iid, fault, evidence)
                continue
            inc = self.incident.get(iid)
            if inc is None:
                evidence = attributable_alerts(alerts, fault, g["start_s"])
                if not evidence or self._report(session, iid, fault, evidence) is None:
                    continue
                inc = self.incident[iid]
            if all(o.tool == "scale" for o in fault.repairs) and len(fault.repairs) > 1:
                # a load fault: its scale options are the tiers of one scale-out, applied together
                # overlapping load faults on one tier add up: each adds its own increment over the model
                results = [session.call("scale", {**o.args, "replicas": self._replicas(o.args), "incident_id": inc})
                           for o in fault.repairs]
                for o, r in zip(fault.repairs, results):
                    if r.ok:
                        self.scaled[o.args["service"]] = int(self._replicas(o.args))
                if any(r.error is not None and r.error.type == "budget_exhausted" for r in results):
                    return None
                self.repaired.add(iid)
                continue
            k = self.next_option.get(iid, 0)
            if k >= len(fault.repairs):
                continue
            opt = fault.repairs[k]
            args = dict(opt.args)
            prior = g.get("prior") or {}
            if opt.tool == "rollback" and args.get("to_revision") is None and prior.get("revision"):
                args["to_revision"] = int(prior["revision"])
            if opt.tool == "restart" and self._rolling_out(session, args["service"]):
                continue   # the rollout of an earlier restart may repair it too; restart after it (same option)
            if opt.tool == "scale" and prior.get("replicas"):
                # back to what ran before the fault (more than the model's count when it had been scaled out)
                args["replicas"] = max(int(args["replicas"]), int(prior["replicas"]))
            plan.append((iid, opt.tool, args, k))
        for iid, tool, args, k in self._ordered(plan):
            if not self._apply(session, iid, tool, args, k):
                return None
        return None

    def _rolling_out(self, session: Any, service: str) -> bool:
        """Whether this policy restarted ``service`` at an earlier invocation, less than `RESTART_WAIT_S` ago,
        and that rollout has not finished (pods of an older ReplicaSet are still there, or not every replica
        runs the new template): kubectl's view of the Deployment."""
        at = self.restarted_at.get(service)
        now = float(session.now)
        if at is None or not at < now < at + RESTART_WAIT_S:
            return False
        r = session.call("kubectl_get", {"kind": "deployment", "name": service, "output": "json"})
        items = (r.result or {}).get("items") if r.ok and isinstance(r.result, dict) else None
        if not items:
            return False
        spec, st = items[0].get("spec") or {}, items[0].get("status") or {}
        want, updated = int(spec.get("replicas") or 0), int(st.get("updatedReplicas") or 0)
        return updated < want or int(st.get("replicas") or 0) > updated

    def _ordered(self, plan: list[tuple[str, str, dict[str, Any], int]]) -> list[tuple[str, str, dict[str, Any], int]]:
        """The invocation's repairs in an order where none undoes another on the same service: rollbacks and
        source patches first (the latest fault's first: an earlier fault's rollback goes further back), then
        edits of the pod template, then restarts (which replace the pods a fault was injected into). A
        rollback to a revision older than an edit or restart done earlier for a fault that is still live
        loses it (the old template lacks the edit; the old ReplicaSet may still run the pods the fault was
        injected into): that edit or restart is applied again after it (index -1)."""
        first = [x for x in plan if x[1] in _REWINDS]
        back_to: dict[str, float] = {}   # service -> the oldest revision a rollback of it goes back to
        for _, tool, args, _ in first:
            if tool == "rollback":
                to = args.get("to_revision")
                back_to[args["service"]] = min(back_to.get(args["service"], float("inf")),
                                               float(to) if to is not None else float("-inf"))
        again = [(iid, tool, args, -1) for svc in sorted(back_to) for iid, tool, args, rev in self.applied.get(svc, [])
                 if (rev is None or rev > back_to[svc]) and all(p[0] != iid for p in plan)]
        edits = [x for x in plan + again if x[1] not in _REWINDS and x[1] != "restart"]
        restarts = [x for x in plan + again if x[1] == "restart"]
        fresh = {x[2]["service"] for x in restarts if x[3] >= 0}
        restarts = [x for x in restarts if x[3] >= 0 or x[2]["service"] not in fresh]
        return first[::-1] + edits + restarts

    def _apply(self, session: Any, iid: str, tool: str, args: dict[str, Any], k: int) -> bool:
        """Run one repair option citing the fault's incident; False when the invocation's budget is spent.
        ``k`` is the option's index (-1: a repair applied again, which only records its new revision)."""
        res = session.call(tool, {**args, "incident_id": self.incident[iid]})
        if res.ok:
            svc = args.get("service") or args.get("target")
            if tool in _REAPPLY and svc in self.app.service_names:
                data = (res.result or {}).get("data") if isinstance(res.result, dict) else None
                rev = data.get("revision") if isinstance(data, dict) else None
                done = [x for x in self.applied.get(svc, []) if x[0] != iid or x[1] != tool]
                self.applied[svc] = done + [(iid, tool, args, int(rev) if rev is not None else None)]
            if tool == "restart":
                self.restarted_at[args["service"]] = float(session.now)
            if k < 0:
                return True
            self.repaired.add(iid)
            if tool == "drain_node":
                self.drained[args["node"]] = iid
        elif res.error is not None and res.error.type == "budget_exhausted":
            return False
        elif k >= 0:
            self.next_option[iid] = k + 1
        return True


#: repairs that roll a service's pod template back to an earlier revision (its own or a rebuilt one)
_REWINDS = ("rollback", "patch_source")
#: repairs that a rollback of their service would undo while their fault is live
_REAPPLY = ("set_config", "set_resources", "restart")
#: how long a restart waits for an earlier restart's rollout of the same service (a rollout that has not finished by
#: then is stuck: crash-looping new pods, no room), in seconds
RESTART_WAIT_S = 360.0
#: the scorer's default attribution grace after a fault's end (the run's `grace_s` when the session has one)
_GRACE_S = 60.0

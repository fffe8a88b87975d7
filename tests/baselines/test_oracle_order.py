"""The oracle's order of repairs on one service: a restart (which replaces pods a fault was injected
into) runs after the other repairs of that service, and again after a later rollout of that service
while its fault is live; each fault's repair cites its own incident."""

from types import SimpleNamespace

from apps import load_app
from baselines.oracle import OraclePolicy
from sremarathon_env.marathon import _faults_by_id

POD_FAILURE = "ob-deployment-checkoutservice-pod-failure"   # repair: restart checkoutservice
SKIPS_CHARGE = "ob-code-checkout-skips-charge"                # repair: rollback checkoutservice


class FakeSession:
    """Truth and alerts as the Marathon gives them; every call succeeds and is recorded."""

    def __init__(self, truth, alerts):
        self.truth, self.alerts, self.calls, self.now = truth, alerts, [], 0.0
        self.n_inc = 0
        self.revision = 4   # the service's latest revision; every rollout adds one

    def oracle_ground_truth_TEST_ONLY(self):
        return self.truth

    def observation(self):
        return {"alerts": self.alerts}

    def call(self, tool, args):
        self.calls.append((tool, dict(args)))
        result = {}
        if tool == "report_incident":
            self.n_inc += 1
            result = {"incident": {"id": f"INC-{self.n_inc:04d}"}}
        elif tool in ("rollback", "restart", "set_resources", "set_config"):
            self.revision += 1
            result = {"data": {"revision": self.revision}}
        return SimpleNamespace(ok=True, error=None, result=result)


def _truth(iid, fault_id, start, prior=None, ended=False):
    f = _faults_by_id("online-boutique")[fault_id]
    return {"instance_id": iid, "fault": f, "start_s": start, "end_s": start + 600, "injected_ok": True,
            "ended": ended, "revision": None, "sha": None, "prior": prior or {}}


def _alert(fp, since):
    return {"fingerprint": fp, "state": "firing", "firing_since": since, "alertname": "X",
            "labels": {"alertname": "X", "service": "checkoutservice"}}


def _actions(calls):
    return [(t, a.get("incident_id")) for t, a in calls if t not in ("report_incident",)]


def test_restart_runs_after_the_rollback_of_the_same_service_in_one_invocation():
    # the pod-failure fault started first, so it comes first in the oracle's walk; its restart must still run last
    truth = [_truth("F1", POD_FAILURE, 100.0), _truth("F2", SKIPS_CHARGE, 110.0, prior={"revision": 3})]
    s = FakeSession(truth, [_alert("a1", 120.0)])
    p = OraclePolicy()
    p.reset(load_app("online-boutique"), 0)
    p.act(s)
    assert _actions(s.calls) == [("rollback", "INC-0002"), ("restart", "INC-0001")]
    rollback = next(a for t, a in s.calls if t == "rollback")
    assert rollback["to_revision"] == 3 and rollback["service"] == "checkoutservice"


def test_a_rollback_to_a_revision_older_than_the_restart_is_followed_by_the_restart_again():
    s = FakeSession([_truth("F1", POD_FAILURE, 100.0)], [_alert("a1", 120.0)])
    p = OraclePolicy()
    p.reset(load_app("online-boutique"), 0)
    p.act(s)
    assert _actions(s.calls) == [("restart", "INC-0001")]          # rolled out as revision 5
    # next invocation: a fault on the same service rolled back to revision 3, whose ReplicaSet may still run
    # the pods the pod failure was injected into: the restart is repeated after it
    s.truth = [_truth("F1", POD_FAILURE, 100.0), _truth("F2", SKIPS_CHARGE, 200.0, prior={"revision": 3})]
    s.alerts = [_alert("a1", 120.0), _alert("a2", 215.0)]
    s.calls = []
    p.act(s)
    assert _actions(s.calls) == [("rollback", "INC-0002"), ("restart", "INC-0001")]   # revisions 6, 7
    # a rollback to a revision at or after the (repeated) restart keeps its pods: nothing is repeated
    s.truth.append(_truth("F3", "ob-code-checkout-timeout-units", 300.0, prior={"revision": 7}))
    s.alerts.append(_alert("a3", 315.0))
    s.calls = []
    p.act(s)
    assert _actions(s.calls) == [("rollback", "INC-0003")]
    # once the pod-failure fault has ended, a rollback of the service is not followed by a restart
    s.truth = [_truth("F1", POD_FAILURE, 100.0, ended=True), _truth("F2", SKIPS_CHARGE, 200.0, ended=True),
               _truth("F3", "ob-code-checkout-timeout-units", 300.0, ended=True),
               _truth("F4", "ob-code-checkoutservice-call-cartservice-getcart", 400.0, prior={"revision": 2})]
    s.alerts.append(_alert("a4", 415.0))
    s.calls = []
    p.act(s)
    assert _actions(s.calls) == [("rollback", "INC-0004")]
    assert p.applied == {"checkoutservice": []}


def test_two_faults_repaired_by_restarting_one_service_each_cite_their_own_incident():
    truth = [_truth("F1", POD_FAILURE, 100.0), _truth("F2", POD_FAILURE, 105.0)]
    s = FakeSession(truth, [_alert("a1", 120.0)])
    p = OraclePolicy()
    p.reset(load_app("online-boutique"), 0)
    p.act(s)
    assert _actions(s.calls) == [("restart", "INC-0001"), ("restart", "INC-0002")]


LOW_MEMORY = "ob-resource-checkoutservice-low-memory-limit"   # repair: set_resources checkoutservice
SCALE_ZERO = "ob-deployment-checkoutservice-scale-zero"        # repair: scale checkoutservice to 1


def test_a_rollback_is_followed_by_the_resource_edit_it_undid_and_rollbacks_go_latest_first():
    s = FakeSession([_truth("F1", LOW_MEMORY, 100.0)], [_alert("a1", 120.0)])
    p = OraclePolicy()
    p.reset(load_app("online-boutique"), 0)
    p.act(s)
    assert _actions(s.calls) == [("set_resources", "INC-0001")]
    # two code faults on the service, each rolled back to the revision before it: the later one first, so
    # that the earlier fault's rollback (further back) is the last word; then the limit is raised again
    s.truth = [_truth("F1", LOW_MEMORY, 100.0), _truth("F2", SKIPS_CHARGE, 200.0, prior={"revision": 3}),
               _truth("F3", "ob-code-checkout-timeout-units", 210.0, prior={"revision": 4})]
    s.alerts = [_alert("a1", 120.0), _alert("a2", 215.0)]
    s.calls = []
    p.act(s)
    assert _actions(s.calls) == [("rollback", "INC-0003"), ("rollback", "INC-0002"), ("set_resources", "INC-0001")]
    assert [a["to_revision"] for t, a in s.calls if t == "rollback"] == [4, 3]
    edit = [a for t, a in s.calls if t == "set_resources"][0]
    assert edit["mem_limit_mi"] == 128 and edit["service"] == "checkoutservice"


def test_scale_goes_back_to_the_replicas_before_the_fault():
    s = FakeSession([_truth("F1", SCALE_ZERO, 100.0, prior={"replicas": 4})], [_alert("a1", 120.0)])
    p = OraclePolicy()
    p.reset(load_app("online-boutique"), 0)
    p.act(s)
    assert [(t, a["replicas"]) for t, a in s.calls if t == "scale"] == [("scale", 4)]


def test_a_fault_that_ended_unhandled_is_reported_only_with_alerts_inside_the_grace():
    late = _truth("F1", SKIPS_CHARGE, 100.0, ended=True)          # ended at 700
    s = FakeSession([late], [_alert("a1", 790.0)])                 # fired after 700 + 60 s grace
    p = OraclePolicy()
    p.reset(load_app("online-boutique"), 0)
    p.act(s)
    assert s.calls == []
    s.alerts = [_alert("a1", 740.0)]                               # fired inside the grace
    p.act(s)
    assert [t for t, _ in s.calls] == ["report_incident"]          # reported, no intervention after the end
    assert s.calls[0][1]["culprit_services"] == ["checkoutservice"]


class RollingSession(FakeSession):
    """A FakeSession whose checkoutservice Deployment shows a rollout in progress until ``done_at``."""

    def __init__(self, truth, alerts, done_at):
        super().__init__(truth, alerts)
        self.done_at = done_at

    def call(self, tool, args):
        if tool == "kubectl_get":
            self.calls.append((tool, dict(args)))
            rolling = self.now < self.done_at
            status = {"replicas": 2 if rolling else 1, "updatedReplicas": 1, "readyReplicas": 1}
            return SimpleNamespace(ok=True, error=None, result={"kind": "Deployment", "count": 1, "items": [
                {"metadata": {"name": args["name"]}, "spec": {"replicas": 1}, "status": status}]})
        return super().call(tool, args)


def test_a_restart_waits_for_the_rollout_of_an_earlier_restart_of_the_same_service():
    # F1's restart at 120 s rolls out until 330 s; F2, on the same service, shows at 240 s: restarting again then
    # would replace the rollout's new pods (and set F1's repair back); it restarts once that rollout is done
    s = RollingSession([_truth("F1", POD_FAILURE, 100.0)], [_alert("a1", 110.0)], done_at=330.0)
    p = OraclePolicy()
    p.reset(load_app("online-boutique"), 0)
    s.now = 120.0
    p.act(s)
    assert _actions(s.calls) == [("restart", "INC-0001")]
    s.truth.append(_truth("F2", POD_FAILURE, 200.0))
    s.alerts.append(_alert("a2", 215.0))
    s.now, s.calls = 240.0, []
    p.act(s)
    assert [t for t, _ in s.calls] == ["report_incident", "kubectl_get"]   # reported, restart put off
    s.now, s.calls = 360.0, []
    p.act(s)
    assert _actions(s.calls) == [("kubectl_get", None), ("restart", "INC-0002")]
    # a rollout that never finishes (crash-looping new pods) holds a restart back for RESTART_WAIT_S at most
    from baselines.oracle import RESTART_WAIT_S

    s.truth.append(_truth("F3", POD_FAILURE, 400.0))
    s.alerts.append(_alert("a3", 410.0))
    s.done_at = float("inf")
    s.now, s.calls = 480.0, []
    p.act(s)
    assert _actions(s.calls) == [("kubectl_get", None)]
    s.now, s.calls = 360.0 + RESTART_WAIT_S, []
    p.act(s)
    assert _actions(s.calls) == [("restart", "INC-0003")]

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


def test_a_later_rollout_of_the_service_is_followed_by_the_live_faults_restart_again():
    s = FakeSession([_truth("F1", POD_FAILURE, 100.0)], [_alert("a1", 120.0)])
    p = OraclePolicy()
    p.reset(load_app("online-boutique"), 0)
    p.act(s)
    assert _actions(s.calls) == [("restart", "INC-0001")]
    # next invocation: a code fault on the same service; its rollback would bring back the failing pods
    s.truth = [_truth("F1", POD_FAILURE, 100.0), _truth("F2", SKIPS_CHARGE, 200.0, prior={"revision": 3})]
    s.alerts = [_alert("a1", 120.0), _alert("a2", 215.0)]
    s.calls = []
    p.act(s)
    assert _actions(s.calls) == [("rollback", "INC-0002"), ("restart", "INC-0001")]
    # once the pod-failure fault has ended, a rollout of the service is not followed by a restart
    s.truth = [_truth("F1", POD_FAILURE, 100.0, ended=True), _truth("F2", SKIPS_CHARGE, 200.0, ended=True)]
    s.calls = []
    p.act(s)
    assert s.calls == []
    assert p.applied == {"checkoutservice": []}


def test_two_faults_repaired_by_restarting_one_service_each_cite_their_own_incident():
    truth = [_truth("F1", POD_FAILURE, 100.0), _truth("F2", POD_FAILURE, 105.0)]
    s = FakeSession(truth, [_alert("a1", 120.0)])
    p = OraclePolicy()
    p.reset(load_app("online-boutique"), 0)
    p.act(s)
    assert _actions(s.calls) == [("restart", "INC-0001"), ("restart", "INC-0002")]

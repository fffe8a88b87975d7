"""One test per worked example of scoring/README.md; every expected number is computed by hand there.

Each example is scored by the batch scorer and by the IncrementalScorer, which must agree."""

from __future__ import annotations

import pytest

from scoring import IncrementalScorer, ScoreReport, score
from scoring_builders import B, fault


def both(b: B) -> ScoreReport:
    r = score(b.records)
    inc = IncrementalScorer().feed_all(b.records)
    assert inc.report().model_dump() == r.model_dump()
    assert inc.score == r.marathon_score
    return r


# -- 1. attributable alerts -------------------------------------------------------------------------
@pytest.mark.parametrize("fp,expected", [("A", True), ("B", True), ("C", False), ("D", False), ("E", False),
                                         ("F", False), ("G", False), ("H", True)])
def test_example_1_attributable_alerts(fp, expected):
    b = B([fault("f", 300, 900, culprits=["cartservice"], scope=["cartservice", "frontend"])])
    b.alert(200, "E", service="cartservice").alert(250, "G", service="frontend").alert(260, "H", service="cartservice")
    b.alert(290, "E", "resolved", service="cartservice")
    b.alert(315, "A", service="cartservice").alert(330, "F", "pending", service="cartservice")
    b.alert(400, "D", service="checkoutservice").alert(600, "A", "resolved", service="cartservice")
    b.alert(930, "B", service="frontend").alert(990, "C", service="cartservice")
    b.invocation(1080).incident(1080, "i1", [fp], ["x"], "nothing")
    r = both(b)
    assert (r.faults[0].correlated_t == 1080.0) is expected
    assert r.faults[0].outcome == ("correlated_only" if expected else "missed")


def test_example_1_incident_cannot_cite_an_alert_before_it_fires():
    b = B([fault("f", 300, 900)])
    b.invocation(360).incident(360, "i1", ["A"], ["cartservice"], "3f9a2c1")
    b.alert(375, "A", service="cartservice")
    assert both(b).faults[0].correlated_t is None
    b.invocation(480).incident(480, "i1", ["A"], ["cartservice"], "3f9a2c1", op="update")
    r = both(b)
    assert (r.faults[0].correlated_t, r.faults[0].localised_t) == (480.0, 480.0)


# -- 2. localisation ----------------------------------------------------------------------------------
@pytest.mark.parametrize("culprits,artifact,localised", [
    (["cartservice"], "3f9a2c1", False),
    (["cartservice", "redis-cart", "frontend"], "3f9a2c1", False),
    (["CartService", "redis-cart"], "3F9A2C1", True),
    (["cartservice", "redis-cart"], "3f9a2c", False),
    (["redis-cart", "cartservice"], " CartService@3f9a2c1 ", True),
])
def test_example_2_localisation(culprits, artifact, localised):
    b = B([fault("f", 300, 900, culprits=["cartservice", "redis-cart"], scope=["cartservice", "redis-cart"],
                 artifact=("commit", "3f9a2c1d8e7b", ["cartservice@3f9a2c1"]))])
    b.alert(315, "A", service="redis-cart").invocation(360).incident(360, "i1", ["A"], culprits, artifact)
    r = both(b)
    assert r.faults[0].correlated_t == 360.0
    assert (r.faults[0].localised_t == 360.0) is localised
    assert r.faults[0].stages == (2 if localised else 1)


def test_example_2_alias_received_at_injection():
    b = B([fault("f", 300, 900, culprits=["cartservice", "redis-cart"], scope=["cartservice", "redis-cart"],
                 artifact=("commit", "3f9a2c1d8e7b", ["cartservice@3f9a2c1"]))])
    b.rec.append("tick", 300.0, {"t": 300.0, "entry": {"total": 1, "failed": 0, "slow": 0, "degraded": 0},
                                 "events": [{"instance_id": "f", "event": "injected", "aliases": ["cartservice@7"]}]})
    b.alert(315, "A", service="redis-cart").invocation(360)
    b.incident(360, "i1", ["A"], ["cartservice", "redis-cart"], "cartservice@7")
    r = both(b)
    assert (r.faults[0].correlated_t, r.faults[0].localised_t) == (360.0, 360.0)


# -- 3-6. repair ---------------------------------------------------------------------------------------
def _localised_until(b: B, t_inc: float) -> B:
    """Report an incident localising f at t_inc, citing alert A (fired at 300, see the callers)."""
    b.invocation(t_inc).incident(t_inc, "i1", ["A"], ["cartservice"], "3f9a2c1")
    return b


def test_example_3_repair_hold():
    b = B([fault("f", 300, 1500)])
    b.ticks(300, 300, "f", True, False)  # the tick at 300 precedes the first probe failure
    for t in range(315, 481, 15):
        b.tick(float(t), {"f": (False, False)})
        if t == 315:
            b.alert(315, "A", service="cartservice")
    b.invocation(480).incident(480, "i1", ["A"], ["cartservice"], "3f9a2c1").action(480, ["cartservice"], "i1")
    b.ticks(495, 585, "f", True, True)
    assert both(b).faults[0].repaired_t is None  # 7 healthy ticks: not yet
    b.ticks(600, 600, "f", True, True)
    r = both(b)
    f = r.faults[0]
    assert (f.correlated_t, f.localised_t, f.repaired_t, f.stages, f.outcome) == (480.0, 480.0, 600.0, 3, "handled")
    assert r.marathon_score == 100.0 and r.mttr_s == 300.0


def test_example_4_restart_that_hides_the_symptom_does_not_count():
    b = B([fault("f", 300, 1500)])
    for t in range(315, 481, 15):
        b.tick(float(t), {"f": (False, False)})
        if t == 315:
            b.alert(315, "A", service="cartservice")
    b.invocation(480).incident(480, "i1", ["A"], ["cartservice"], "3f9a2c1")
    b.action(480, ["cartservice"], "i1", tool="restart")
    b.ticks(495, 570, "f", True, False)   # 6 ticks look healthy
    b.ticks(585, 585, "f", False, False)  # the leak is back
    b.ticks(600, 705, "f", True, False)   # 8 healthy probes, but the artifact is still wrong
    f = both(b).faults[0]
    assert f.repaired_t is None and f.stages == 2 and f.outcome == "acted_without_repair"


def test_example_5_silent_fault_needs_the_artifact_fixed():
    b = B([fault("f", 300, 1500, silent=True)])
    b.alert(300, "A", service="cartservice")
    _localised_until(b.ticks(300, 600, "f", True, False), 600)
    b.action(600, ["cartservice"], "i1")
    b.ticks(615, 705, "f", True, True)
    assert both(b).faults[0].repaired_t is None
    b.ticks(720, 735, "f", True, True)
    r = both(b)
    assert r.faults[0].repaired_t == 720.0 and r.faults[0].outcome == "handled"
    assert r.mttr_s == 720.0 - 300.0


def test_example_6_hold_must_end_before_the_revert():
    b = B([fault("f", 300, 660)])
    b.ticks(300, 300, "f", False, False).alert(300, "A", service="cartservice")
    _localised_until(b.ticks(315, 600, "f", False, False), 600)
    b.action(600, ["cartservice"], "i1")
    b.ticks(615, 645, "f", True, True)
    b.ticks(660, 735, "f", True, True)  # after the scheduled end: does not count
    f = both(b).faults[0]
    assert f.repaired_t is None and f.stages == 2 and f.outcome == "acted_without_repair"


# -- 7-8. credit and Marathon-Score -------------------------------------------------------------------
def _three_faults(policies) -> B:
    b = B([fault("f1", 120, 2000), fault("f2", 120, 2000, culprits=["emailservice"], scope=["emailservice"]),
           fault("f3", 120, 2000, culprits=["adservice"], scope=["adservice"])])
    b.tick(120, {"f1": (False, False)}).alert(120, "A", service="cartservice").alert(120, "M", service="emailservice")
    b.invocation(240, policies).incident(240, "i1", ["A"], ["cartservice"], "3f9a2c1d")
    b.incident(240, "i2", ["M"], ["paymentservice"], "3f9a2c1").action(240, ["cartservice"], "i1")
    b.ticks(255, 360, "f1", True, True)
    return b


def test_example_7_credit_and_score():
    r = both(_three_faults(("allowed",)))
    assert [f.stages for f in r.faults] == [3, 1, 0]
    assert r.marathon_score == pytest.approx(100 * 4 / 9)
    assert (r.stage_shares.correlated, r.stage_shares.localised, r.stage_shares.repaired) == \
        pytest.approx((2 / 3, 1 / 3, 1 / 3))
    r2 = both(_three_faults(("forbidden", "allowed", "forbidden")))
    assert r2.n_forbidden == 2 and r2.penalty == 2.0
    assert r2.marathon_score == pytest.approx(100 * 4 / 9 - 2)


def test_example_8_score_is_floored_at_zero():
    b = B([fault("f", 300, 900)], penalty_per_forbidden=1.0)
    b.invocation(120, ("forbidden", "forbidden", "forbidden"))
    r = both(b)
    assert r.n_forbidden == 3 and r.marathon_score == 0.0


# -- 9. lifecycle outcomes -----------------------------------------------------------------------------
def test_example_9_outcomes():
    f1 = fault("f1", 120, 3000)
    f2 = fault("f2", 120, 3000, culprits=["emailservice"], scope=["emailservice"])
    f3 = fault("f3", 120, 3000, culprits=["adservice"], scope=["adservice"], artifact=("config_key", "adservice:X", []))
    f4 = fault("f4", 120, 3000, culprits=["shippingservice"], scope=["shippingservice"])
    b = B([f1, f2, f3, f4])
    b.tick(120, {"f1": (False, False), "f2": (False, False), "f4": (False, False)})
    b.alert(120, "A", service="cartservice").alert(120, "C", service="adservice").alert(120, "D", service="shippingservice")
    b.invocation(240)
    b.incident(240, "i1", ["A"], ["cartservice"], "3f9a2c1").incident(240, "i3", ["C"], ["adservice"], "ADSERVICE:x")
    b.incident(240, "i4", ["D"], ["checkoutservice"], None)
    b.action(240, ["cartservice"], "i1").action(240, ["emailservice"], "i1").action(240, ["shippingservice"], "i4")
    for t in range(255, 361, 15):
        b.tick(float(t), {"f1": (True, True), "f2": (True, True), "f4": (False, False)})
    r = both(b)
    assert [f.outcome for f in r.faults] == ["handled", "repaired_without_handling", "located_without_action",
                                             "acted_without_repair"]
    assert [f.stages for f in r.faults] == [3, 0, 2, 1]
    assert r.outcomes == {"handled": 1, "repaired_without_handling": 1, "acted_without_repair": 1,
                          "located_without_action": 1, "correlated_only": 0, "missed": 0}


# -- 10. intervention risk -----------------------------------------------------------------------------
def test_example_10_intervention_risk():
    b = B([fault("f", 300, 900)])
    b.invocation(120)
    b.action(120, ["frontend"], "i9", in_scope=False).action(120, ["cartservice"], "i9", ok=False, refused="no incident")
    b.action(120, ["cartservice"], "i9").action(120, ["cartservice"], "i9", tool="scale")
    r = both(b)
    assert (r.n_actions, r.n_risky_actions, r.intervention_risk) == (4, 2, 0.5)
    assert both(B([fault("f", 300, 900)])).intervention_risk is None


# -- 11. degradation -----------------------------------------------------------------------------------
def test_example_11_degradation():
    ref = {"t": [15.0, 30.0, 45.0, 60.0], "total": [100.0, 100.0, 200.0, 500.0],
           "failed": [10.0, 20.0, 20.0, 0.0], "slow": [10.0, 0.0, 20.0, 0.0], "degraded": [0.0, 0.0, 0.0, 0.0]}
    b = B([fault("f", 300, 900)], reference=ref)
    b.tick(15, entry=(100.0, 5.0, 5.0, 0.0)).tick(30, entry=(100.0, 0.0, 0.0, 0.0))
    b.tick(45, entry=(200.0, 10.0, 5.0, 5.0))
    d = both(b).degradation
    assert (d.agent, d.reference, d.ticks) == (30 / 400, 80 / 400, 3)
    assert d.ratio == pytest.approx(0.375)


# -- 12. MTTD / MTTL / MTTR ----------------------------------------------------------------------------
def test_example_12_medians_at_invocation_resolution():
    fs = [fault("f1", 300, 1500), fault("f2", 600, 1500, culprits=["adservice"], scope=["adservice"]),
          fault("f3", 900, 1500, culprits=["emailservice"], scope=["emailservice"])]
    b = B(fs)
    b.ticks(300, 300, "f1", False, False)
    b.alert(300, "A", service="cartservice").ticks(315, 480, "f1", False, False)
    b.invocation(480).incident(480, "i1", ["A"], ["cartservice"], "3f9a2c1").action(480, ["cartservice"], "i1")
    b.ticks(495, 615, "f1", True, True)  # hold complete at 495 + 7 * 15 = 600
    b.alert(615, "B", service="adservice")
    b.invocation(720).incident(720, "i2", ["B"], ["adservice"], "wrong")
    r = both(b)
    assert [f.correlated_t for f in r.faults] == [480.0, 720.0, None]
    assert r.mttd_s == 150.0 and r.mttl_s == 180.0
    assert r.faults[0].repaired_t == 600.0 and r.mttr_s == 300.0
    # a repair completing between invocations is reported at the next invocation
    b2 = B([fault("f1", 300, 1500)])
    b2.ticks(300, 300, "f1", False, False)
    b2.alert(300, "A", service="cartservice").ticks(315, 480, "f1", False, False)
    b2.invocation(480).incident(480, "i1", ["A"], ["cartservice"], "3f9a2c1").action(480, ["cartservice"], "i1")
    b2.ticks(495, 495, "f1", False, False).ticks(510, 600, "f1", True, True)
    assert both(b2).faults[0].repaired_t is None
    b2.ticks(615, 630, "f1", True, True)  # the 8th healthy tick is 615
    r2 = both(b2)
    assert r2.faults[0].repaired_t == 615.0 and r2.mttr_s == 420.0  # resolve(615) = 720


def test_usage_sums():
    b = B([fault("f", 300, 900)])
    b.invocation(120).usage(120, calls=2, prompt=1000, completion=50, cost=0.25)
    b.invocation(240).usage(240, calls=1, prompt=500, completion=25, cost=0.125)
    u = both(b).usage
    assert (u.model_calls, u.prompt_tokens, u.completion_tokens, u.cost_usd) == (3, 1500, 75, 0.375)

"""The failing-edge rule (`ServiceCallErrorsHigh`, pack 1.3.0) over a faulted Train Ticket twin, checked by promtool:
a partition and packet loss on low-traffic routes fire it for the caller (the callee-wide ratio is diluted by the
callee's other callers: `ServiceCallFailuresHigh` comes later or not at all), and a callee failing alike for every
caller fires `ServiceCallFailuresHigh` alone, not one edge alert per caller."""

from __future__ import annotations

import pytest

from faults.effects import Effect
from sremarathon_env.alerts import AlertEngine
from sremarathon_env.alerts.conformance import classify_expr_failures, promtool_path, run_promtool, write_test_file

from .twin import promtool_setup

pytestmark = [pytest.mark.promtool, pytest.mark.slow,
              pytest.mark.skipif(promtool_path() is None, reason="promtool not installed (Debian package 'prometheus')")]

RULES = ("ServiceCallErrorsHigh", "ServiceCallFailuresHigh")
EXPR_TIMES = [300.0 + 75.0 * i for i in range(17)]   # 300 .. 1500 s
ALERT_TIMES = [420.0, 600.0, 800.0, 1000.0, 1200.0, 1500.0]


def _run():
    from sremarathon_env.backends.sim import SimBackend

    sim = SimBackend("train-ticket", seed=2)
    sim.advance_to(240)
    # a partition of one low-traffic route, then 35 % loss on another
    h1 = sim.apply_effect(Effect(kind="edge_error", caller="ts-preserve-service", callee="ts-food-service", rate=1.0))
    sim.advance_to(600)
    sim.remove_effect(h1)
    h2 = sim.apply_effect(Effect(kind="edge_error", caller="ts-preserve-service", callee="ts-assurance-service",
                                 rate=0.35))
    sim.advance_to(900)
    sim.remove_effect(h2)
    # a callee failing every call of every caller: the callee-wide rule, and no edge alert
    h3 = sim.apply_effect(Effect(kind="error_rate", service="ts-station-service", rate=0.6))
    sim.advance_to(1200)
    sim.remove_effect(h3)
    sim.advance_to(1500)
    return sim


def test_failing_edge_rule_agrees_with_promtool(tmp_path):
    sim = _run()
    store = sim.store
    pack, rules_path, test_pack, eng, batch = promtool_setup(store, tmp_path)
    mine = [r for r in pack.rules if r.name in RULES]
    assert sorted(r.name for r in mine) == sorted(RULES)
    for rule in mine:
        for t in EXPR_TIMES:
            batch.add_expr(rule.expr, t, eng.instant(rule.expr, t))
    alerts = AlertEngine(test_pack, store)
    fired = set()
    for t in ALERT_TIMES:
        alerts.evaluate_until(t)
        firing = alerts.firing()
        for name in RULES:
            got = [(a["labels"], a["annotations"]) for a in firing if a["alertname"] == name]
            fired |= {(name, labels["service"], labels.get("destination_workload")) for labels, _ in got}
            batch.add_alerts(name, t, got)
    edges = {(s, d) for n, s, d in fired if n == "ServiceCallErrorsHigh"}
    assert {("ts-preserve-service", "ts-food-service"), ("ts-preserve-service", "ts-assurance-service")} <= edges
    assert not {d for _, d in edges} & {"ts-station-service"}   # no edge alert where the callee-wide one fires
    assert ("ServiceCallFailuresHigh", "ts-station-service", "ts-station-service") in fired
    assert batch.n_cases >= 40
    path = tmp_path / "edges.yml"
    write_test_file(path, batch, [rules_path.name])
    report = run_promtool(path, batch.n_cases, timeout_s=300)
    reorder, real = classify_expr_failures(report.output)
    alert_fail = [f for f in report.failures if f.strip().startswith("alertname")]
    assert not real and not alert_fail, report.output[-6000:]

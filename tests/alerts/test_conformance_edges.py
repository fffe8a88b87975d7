"""The failing-edge rule (`ServiceCallErrorsHigh`, pack 1.3.0) over a faulted Train Ticket twin, checked by promtool:
a partition and packet loss on low-traffic routes fire it for the caller (the callee-wide ratio is diluted by the
callee's other callers: `ServiceCallFailuresHigh` comes later or not at all), and a callee failing alike for every
caller fires `ServiceCallFailuresHigh` alone, not one edge alert per caller."""

from __future__ import annotations

import pytest

from faults.effects import Effect
from sremarathon_env.alerts.conformance import promtool_path

from .twin import promtool_check_rules

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
    fired = {(name, labels["service"], labels.get("destination_workload"))
             for name, _, labels in promtool_check_rules(_run().store, tmp_path, RULES, EXPR_TIMES, ALERT_TIMES).fired}
    edges = {(s, d) for n, s, d in fired if n == "ServiceCallErrorsHigh"}
    assert {("ts-preserve-service", "ts-food-service"), ("ts-preserve-service", "ts-assurance-service")} <= edges
    assert not {d for _, d in edges} & {"ts-station-service"}   # no edge alert where the callee-wide one fires
    assert ("ServiceCallFailuresHigh", "ts-station-service", "ts-station-service") in fired

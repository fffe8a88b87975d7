"""Every rule of the pack over series from a faulted twin run, checked by promtool.

promql_expr_test: each rule's expression at several times; alert_rule_test: the firing alerts of
each rule (labels and annotations) at several times, with our AlertEngine's state as expected.
"""

from __future__ import annotations

import pytest

from sremarathon_env.alerts.conformance import promtool_path

from .twin import faulted_run, promtool_check_rules

pytestmark = [pytest.mark.promtool, pytest.mark.slow,
              pytest.mark.skipif(promtool_path() is None, reason="promtool not installed (Debian package 'prometheus')")]

EXPR_TIMES = [450.0, 600.0, 780.0, 900.0, 1050.0, 1200.0, 1380.0, 1500.0]
ALERT_TIMES = [600.0, 900.0, 1200.0, 1500.0, 2400.0]


def test_rule_pack_agrees_with_promtool_on_twin_series(tmp_path):
    from sremarathon_env.alerts import load_rule_pack

    names = [r.name for r in load_rule_pack().rules]
    c = promtool_check_rules(faulted_run().store, tmp_path, list(dict.fromkeys(names)), EXPR_TIMES, ALERT_TIMES,
                             min_cases=800, timeout_s=600)
    n_firing, batch = len(c.fired), c.batch
    assert n_firing >= 20
    print(f"twin conformance: {batch.n_cases} cases ({len(batch.expr_cases)} expr, {len(batch.alert_cases)} alert, "
          f"{n_firing} firing alerts expected); promtool exact disagreements: {len(c.report.failures)}, "
          f"of which reordering-only: {len(c.reorder)}")
    assert len(c.reorder) <= batch.n_cases // 10

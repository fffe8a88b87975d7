"""Conformance with Prometheus: our engine's results become promtool's expected values.

One promtool run per batch file; promtool 2.42 compares values exactly, so agreement is bit for bit.
"""

from __future__ import annotations

import pytest

from sremarathon_env.alerts import Limits, PromQLEngine
from sremarathon_env.alerts.conformance import Batch, promtool_path, run_promtool, write_test_file

from .synthetic import EVAL_TIMES_S, EXPRESSIONS, build_store

pytestmark = [pytest.mark.promtool, pytest.mark.skipif(promtool_path() is None, reason="promtool not installed (Debian package 'prometheus')")]


def _batch(gaps: bool) -> Batch:
    store = build_store(gaps=gaps)
    eng = PromQLEngine(store, Limits(stale_on_gap=not gaps), default_step_s=60)
    batch = Batch(store, stale_on_gap=not gaps, evaluation_interval_ms=60000)
    for expr in EXPRESSIONS:
        for t in EVAL_TIMES_S:
            batch.add_expr(expr, t, eng.instant(expr, t))
    return batch


@pytest.mark.parametrize("gaps", [False, True], ids=["staleness", "gaps"])
def test_expressions_agree_with_promtool(tmp_path, gaps):
    batch = _batch(gaps)
    assert batch.n_cases >= 200
    path = tmp_path / "exprs.yml"
    write_test_file(path, batch, [])
    report = run_promtool(path, batch.n_cases)
    print(f"synthetic conformance ({'gaps' if gaps else 'staleness'}): {batch.n_cases} cases, promtool ok={report.ok}")
    assert report.ok, f"{len(report.failures)} of {batch.n_cases} cases disagree:\n" + report.output[-6000:]

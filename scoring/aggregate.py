"""Formulas shared by the batch and the incremental scorer: the Marathon-Score, outcomes, medians.

>>> marathon_score(stages_total=5, n_faults=3, n_forbidden=2, penalty_per_forbidden=1.0)
53.55555555555556
>>> outcome(handled=False, repaired_unhandled=False, acted=True, localised=True, correlated=True)
'acted_without_repair'
"""

from __future__ import annotations

import statistics
from typing import Any

from .params import Params
from .report import OUTCOMES, Degradation, FaultScore, ScoreReport, StageShares, Usage


def marathon_score(stages_total: int, n_faults: int, n_forbidden: int, penalty_per_forbidden: float) -> float:
    """100 x mean credit (credit = stages / 3) less the penalty per forbidden attempt, floored at 0."""
    base = 100.0 * stages_total / (3 * n_faults) if n_faults else 0.0
    return max(0.0, base - penalty_per_forbidden * n_forbidden)


def outcome(*, handled: bool, repaired_unhandled: bool, acted: bool, localised: bool, correlated: bool) -> str:
    if handled:
        return "handled"
    if repaired_unhandled:
        return "repaired_without_handling"
    if acted:
        return "acted_without_repair"
    if localised:
        return "located_without_action"
    if correlated:
        return "correlated_only"
    return "missed"


def median_delay(params: Params, pairs: list[tuple[float, float]]) -> float | None:
    """Median over (stage time, fault start) of resolve(stage time) - start; None when empty."""
    if not pairs:
        return None
    return float(statistics.median([params.resolve(t) - s for t, s in pairs]))


def build_report(params: Params, faults: list[FaultScore], *, n_forbidden: int, n_actions: int, n_risky: int,
                 bad: float, total: float, ref_bad: float, ref_total: float, n_ticks: int, usage: dict[str, Any],
                 n_invocations: int, final_t: float, complete: bool) -> ScoreReport:
    n = len(faults)
    stages_total = sum(f.stages for f in faults)
    outcomes = {o: 0 for o in OUTCOMES}
    for f in faults:
        outcomes[f.outcome] += 1
    agent = bad / total if total > 0 else None
    reference = ref_bad / ref_total if ref_total > 0 else None
    ratio = agent / reference if agent is not None and reference else None
    return ScoreReport(
        marathon_score=marathon_score(stages_total, n, n_forbidden, params.penalty_per_forbidden),
        n_faults=n,
        stages_total=stages_total,
        credit_mean=stages_total / (3 * n) if n else 0.0,
        stage_shares=StageShares(
            correlated=sum(f.stages >= 1 for f in faults) / n if n else 0.0,
            localised=sum(f.stages >= 2 for f in faults) / n if n else 0.0,
            repaired=sum(f.stages >= 3 for f in faults) / n if n else 0.0),
        n_forbidden=n_forbidden,
        penalty=params.penalty_per_forbidden * n_forbidden,
        n_actions=n_actions,
        n_risky_actions=n_risky,
        intervention_risk=n_risky / n_actions if n_actions else None,
        degradation=Degradation(agent=agent, reference=reference, ratio=ratio, ticks=n_ticks),
        mttd_s=median_delay(params, [(f.correlated_t, f.start_s) for f in faults if f.correlated_t is not None]),
        mttl_s=median_delay(params, [(f.localised_t, f.start_s) for f in faults if f.localised_t is not None]),
        mttr_s=median_delay(params, [(f.repaired_t, f.start_s) for f in faults if f.repaired_t is not None]),
        usage=Usage(**usage),
        outcomes=outcomes,
        faults=faults,
        n_invocations=n_invocations,
        final_t=final_t,
        complete=complete,
    )

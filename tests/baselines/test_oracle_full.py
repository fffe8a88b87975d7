"""The oracle's claim of issue 7 on full-length marathons (60 min injection + 30 min observation): it
scores >= 95 on every app, here on seed 4 (the seed on which Online Boutique and Train Ticket were below
95 before the rollout fix and the oracle's repair order), with every fault localised and no risky action.
A full marathon costs 3-4 s of CPU per app."""

import pytest

from baselines.runner import run_marathon


@pytest.mark.slow
@pytest.mark.parametrize("app", ["online-boutique", "train-ticket", "astronomy-shop"])
def test_oracle_scores_95_on_a_full_marathon(app):
    rep, _ = run_marathon(app, 4, "oracle")
    assert rep.n_faults >= 40
    assert rep.marathon_score >= 95.0, [(f.instance_id, f.fault_id, f.stages) for f in rep.faults if f.stages < 3]
    assert rep.stage_shares.correlated == 1.0 and rep.stage_shares.localised == 1.0
    assert rep.intervention_risk == 0.0 and rep.n_forbidden == 0

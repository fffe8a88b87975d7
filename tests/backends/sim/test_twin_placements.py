"""The scheduler's placements a twin finds in a taped run (`Cluster._placed`) are the ones it would choose
itself (`Cluster._pick_node`, the definition): checked at every pod scheduled in run loops whose scored twin
follows its no-action reference run (all its placements found there), and in runs whose policy acts, where
the scored twin leaves the reference run's history (nothing found from then on: its calls differ)."""

import pytest

from baselines.runner import run_marathon
from sremarathon_env.backends.sim import SimBackend
from sremarathon_env.backends.sim.cluster import Cluster


@pytest.fixture
def checked(monkeypatch):
    """Every placement also chosen by `_pick_node` and compared; counts of placements found and made."""
    seen = {"found": 0, "chosen": 0}
    placed, pick = Cluster._placed, Cluster._pick_node
    picks = [0]

    def counted_pick(self, pod):
        picks[0] += 1
        return pick(self, pod)

    def both(self, pod, t):
        before = picks[0]
        got = placed(self, pod, t)
        seen["found" if picks[0] == before else "chosen"] += 1
        assert got == pick(self, pod)   # (the definition, on the same state)
        return got

    monkeypatch.setattr(Cluster, "_pick_node", counted_pick)
    monkeypatch.setattr(Cluster, "_placed", both)
    return seen


@pytest.mark.parametrize("app", ["online-boutique", "train-ticket"])
def test_a_no_action_run_finds_every_placement_of_its_reference_run(checked, app):
    run_marathon(app, 3, "noop")
    # the reference run chose them (and kept them), the scored twin found every one
    assert checked["found"] > 30 and checked["found"] == checked["chosen"]


@pytest.mark.parametrize("policy", ["random", "runbook"])
def test_acting_runs_find_only_placements_of_their_own_history(checked, policy):
    run_marathon("online-boutique", 1, policy)
    assert checked["found"] > 0 and checked["chosen"] > checked["found"]


def test_twins_without_a_taped_run_keep_and_find_nothing(checked):
    sim = SimBackend("astronomy-shop", seed=12345)
    sim.advance_to(60)
    sim.scale(sim.app.services[0].name, 3)
    sim.restart(sim.app.services[1].name)
    sim.advance_to(300)
    assert sim._placements() is None and checked["found"] == 0 and checked["chosen"] >= 3

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
    assert sim._taped() is None and checked["found"] == 0 and checked["chosen"] >= 3


@pytest.fixture
def deploys_checked(monkeypatch):
    """Every deploy's commit sha and template hash also computed (the definition) and compared with the
    revision it made; counts of deploys whose hashes were found in a taped run and of the others."""
    import hashlib

    from sremarathon_env.backends.arguments import patched
    from sremarathon_env.backends.sim import backend as backend_mod
    from sremarathon_env.backends.sim.util import canonical, template_hash

    seen = {"found": 0, "made": 0}
    deploy = SimBackend.deploy

    def both(self, service, *, message, author, files=None, env=None, image_tag=None, effects=(), noise=False):
        dep = self.cluster.deployments.get(service)
        before = None
        if dep is not None:   # the definition's inputs, before the call
            cur = dep.current
            new_files = patched(self.files_of(cur), files)
            new_env = patched(cur.template["env"], env, text=True)
            body = canonical([self.meta_of(cur)["sha"], author, message, self._now, new_files, new_env, image_tag])
            before = hashlib.sha1(body.encode()).hexdigest()
        made = [0]
        real = backend_mod.canonical

        def counted(obj):
            made[0] += 1
            return real(obj)

        monkeypatch.setattr(backend_mod, "canonical", counted)
        try:
            out = deploy(self, service, message=message, author=author, files=files, env=env, image_tag=image_tag,
                         effects=effects, noise=noise)
        finally:
            monkeypatch.setattr(backend_mod, "canonical", real)
        if before is not None and out.ok and out.data.get("sha"):
            assert out.data["sha"] == before
            rs = dep.current
            assert rs.hash == template_hash(rs.template)
            seen["made" if made[0] else "found"] += 1
        return out

    monkeypatch.setattr(SimBackend, "deploy", both)
    return seen


@pytest.mark.parametrize("app", ["online-boutique", "train-ticket"])
def test_a_no_action_run_finds_its_reference_runs_commit_hashes(deploys_checked, app):
    run_marathon(app, 4, "noop")
    assert deploys_checked["found"] > 10 and deploys_checked["found"] == deploys_checked["made"]


def test_acting_runs_find_commit_hashes_of_their_own_history_only(deploys_checked):
    run_marathon("online-boutique", 2, "random")
    assert deploys_checked["made"] > deploys_checked["found"] > 0

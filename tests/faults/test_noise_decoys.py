"""Decoy deploys: every change-driven fault has an innocent deploy to the same service next to it."""

from __future__ import annotations

import pytest

from faults.catalogue import load_catalogue
from faults.orchestrator import build_schedule


@pytest.mark.parametrize("app", ["online-boutique", "train-ticket", "astronomy-shop"])
def test_every_change_driven_fault_has_a_decoy_and_the_fault_schedule_is_unchanged(app):
    by_id = {f.id: f for f in load_catalogue(app)}
    for seed in (0, 1):
        sched = build_schedule(app, seed)
        assert sched.faults == build_schedule(app, seed, noise=False).faults
        changes = [sf for sf in sched.faults
                   if by_id[sf.fault_id].realisation.kind == "deploy" and by_id[sf.fault_id].realisation.files]
        assert changes, "a marathon has change-driven faults"
        decoys = {e.params["decoy_for"]: e for e in sched.noise if "decoy_for" in e.params}
        assert set(decoys) == {sf.instance_id for sf in changes}
        for sf in changes:
            d = decoys[sf.instance_id]
            assert d.kind == "benign_deploy"
            assert d.service == by_id[sf.fault_id].realisation.service
            assert 60 <= abs(d.start_s - sf.start_s) <= 240 or d.start_s in (15, sched.horizon_s - 15)
        assert sched == build_schedule(app, seed)  # deterministic

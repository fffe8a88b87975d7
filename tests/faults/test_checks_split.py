"""`faults.realise.check_live` + `check_at` (a fault's checks in two parts: the live state's, taken after a block, and
the tick's reads, once the twin has the tick's numbers) give what `artifact_ok` and `probe_ok` give, at every tick of
marathons with faults of every realisation kind, block by block (where the live state is the tick's)."""

import collections

import numpy as np
import pytest

from faults.realise import artifact_ok, check_at, check_live, probe_ok
from sremarathon_env import marathon as M


def _run(app, seed, monkeypatch, intervene):
    monkeypatch.setattr(M, "SPANS", False)   # the checks block by block, each against its tick's view
    seen = collections.Counter()
    orig = M._Driver._checks

    def checks(self, view):
        out = orig(self, view)
        memo_def: dict = {}
        memo: dict = {}
        for lf in self._active:
            art = bool(artifact_ok(lf.fault, lf.handle, view))
            ok = bool(probe_ok(lf.fault, view, memo_def, lf.handle, artifact=art))
            live = check_live(lf.fault, lf.handle, self.backend)
            assert check_at(lf.fault, lf.handle, live, view, memo) == (art, ok), (lf.instance_id, lf.fault.id)
            assert (art, ok) == (out[lf.instance_id]["artifact_ok"], out[lf.instance_id]["probe_ok"])
            seen[(lf.fault.realisation.kind, lf.fault.probe.kind, art, ok)] += 1
        return out

    monkeypatch.setattr(M._Driver, "_checks", checks)
    m = M.Marathon(M.MarathonConfig(app=app, seed=seed, reference_run=False, injection_s=1800, observation_s=600))
    m.start(observe=False)
    rng = np.random.default_rng(seed)
    while True:
        if intervene:
            s = m.app.service_names[int(rng.integers(len(m.app.service_names)))]
            inc = m.call("report_incident", {"title": "t", "alert_fingerprints": [], "culprit_services": [s],
                                             "artifact": s, "summary": "s"})
            tool = ["restart", "scale", "rollback"][int(rng.integers(3))]
            args = {"service": s, "incident_id": inc.result["incident"]["id"]}
            if tool == "scale":
                args["replicas"] = int(rng.integers(0, 4))
            if tool == "rollback":
                args["to_revision"] = 1
            m.call(tool, args)
        m.end_invocation()
        if not m.advance_to_next_invocation():
            break
    return seen


@pytest.mark.parametrize("app, seed", [("online-boutique", 1), ("astronomy-shop", 0), ("train-ticket", 3)])
def test_split_checks_match_the_definitions(app, seed, monkeypatch):
    seen = _run(app, seed, monkeypatch, intervene=seed % 2 == 1)
    kinds = {k[0] for k in seen}
    assert {"effects", "deploy"} <= kinds
    assert sum(seen.values()) > 300
    assert {k[2] for k in seen} == {True, False} and {k[3] for k in seen} == {True, False}


def test_split_checks_cover_every_realisation_kind(monkeypatch):
    seen = collections.Counter()
    for app, seed in (("online-boutique", 1), ("astronomy-shop", 0), ("online-boutique", 5)):
        seen.update(_run(app, seed, monkeypatch, intervene=True))
    assert {k[0] for k in seen} >= {"effects", "deploy", "scale", "config", "resources"}

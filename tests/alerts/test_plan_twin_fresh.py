"""The alert engine's long-lived plan (rebuilt incrementally as pods come and go, rows left out and taken back) gives,
at every call of real no-op marathons with faults (all three apps, two seeds each), what a fresh ``PackPlan`` built
for that call's store gives: every rule's present samples (label sets, presence, values bit for bit) or the same error.
The fresh plan has its own ``PromQLEngine`` (no per-engine caches shared with the maintained plan)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import sremarathon_env  # noqa: F401 - registers the environments
from sremarathon_env.alerts import plan as P
from sremarathon_env.alerts.engine import PromQLEngine

from sremarathon_env.registration import IDS as _IDS

from .test_plan import _present

pytestmark = pytest.mark.slow

IDS = dict(_IDS)


def _same(a, b) -> bool:
    if isinstance(a, Exception) or isinstance(b, Exception):
        return type(a) is type(b) and str(a) == str(b)
    return _present(a) == _present(b)


@pytest.mark.parametrize("app", sorted(IDS))
@pytest.mark.parametrize("seed", [1, 2])
def test_maintained_plan_equals_fresh_plan_at_every_call(app, seed, monkeypatch):
    env = gym.make(IDS[app]).unwrapped
    env.reset(seed=seed)
    eng = env.marathon.alert_engine
    main = eng._plan
    seen = {"calls": 0, "builds_before": main.builds}
    orig = P.PackPlan.evaluate

    def checked(self, times):
        out = orig(self, times)
        if self is main:
            src = self.promql
            fresh_engine = PromQLEngine(src.store, src.limits, default_step_s=src.default_step_ms / 1000)
            fresh = orig(P.PackPlan(fresh_engine, self.rules), times)
            for rule, a, b in zip(self.rules, out, fresh):
                assert _same(a, b), (app, seed, seen["calls"], rule.name)
            seen["calls"] += 1
        return out

    monkeypatch.setattr(P.PackPlan, "evaluate", checked)
    done = False
    while not done:
        _, _, term, trunc, _ = env.step("[]")
        done = term or trunc
    assert seen["calls"] >= 20
    assert main.builds - seen["builds_before"] >= 3   # (the plan was rebuilt along the way, not only built once)
    assert np.isfinite(main.build_cpu_s)

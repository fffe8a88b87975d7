"""The alert engine's long-lived plan (rebuilt incrementally as pods come and go, rows left out and taken back) gives,
at every call of real no-op marathons with faults (all three apps, two seeds each), what a fresh ``PackPlan`` built
for that call's store gives: every rule's present samples (label sets, presence, values bit for bit) or the same error.
The fresh plan has its own ``PromQLEngine`` (no per-engine caches shared with the maintained plan)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import sremarathon_env  # noqa: F401 - registers the environments
from sremarathon_env.registration import IDS as _IDS

from .twin import noop_marathon_checked

pytestmark = pytest.mark.slow

IDS = dict(_IDS)


@pytest.mark.parametrize("app", sorted(IDS))
@pytest.mark.parametrize("seed", [1, 2])
def test_maintained_plan_equals_fresh_plan_at_every_call(app, seed, monkeypatch):
    env = gym.make(IDS[app]).unwrapped
    env.reset(seed=seed)
    main = env.marathon.alert_engine._plan
    builds_before = main.builds
    assert noop_marathon_checked(env, monkeypatch, label=(app, seed)) >= 20
    assert main.builds - builds_before >= 3   # (the plan was rebuilt along the way, not only built once)
    assert np.isfinite(main.build_cpu_s)

"""The RL view's caches never change an observation: at every step of an episode with interventions
(rollbacks, scales, restarts... chosen from the mask), the observation and mask equal those recomputed
with empty caches (see also test_rl_fast_observation.py: against the from-scratch definition)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import sremarathon_env  # noqa: F401
from sremarathon_env.registration import IDS
from wrappers.rl import RLView


def test_cached_observation_equals_fresh_each_step():
    env = RLView(gym.make(IDS["online-boutique"], injection_s=1800, observation_s=240, reference_run=False))
    obs, _ = env.reset(seed=2)
    k, acted, hits = 0, 0, 0
    while True:
        ep = env._ep
        hits += ep is not None and ep.dep_keys is not None and len(ep.alert_info) > 0
        env._ep, env._fam_of = None, {}
        fresh = env._observe()
        assert np.array_equal(obs["observations"], fresh["observations"], equal_nan=True)
        assert np.array_equal(obs["action_mask"], fresh["action_mask"])
        valid = np.flatnonzero(obs["action_mask"])
        a = int(valid[(7 * k) % len(valid)]) if len(valid) > 1 else 0
        acted += a != 0
        obs, _, _, trunc, _ = env.step(a)
        k += 1
        if trunc:
            break
    assert acted >= 3 and hits > 0, "no intervention or no cache use: the test checks nothing"


def test_bulk_health_read_equals_per_service_reads():
    from wrappers.rl import HEALTH_FIELDS

    env = RLView(gym.make(IDS["online-boutique"], injection_s=600, observation_s=240, reference_run=False))
    env.reset(seed=2)
    backend = env.unwrapped.marathon.backend
    if not hasattr(backend, "services_health"):
        pytest.skip("the backend has no bulk health read (the view reads per service)")
    for _ in range(3):
        env.step(0)
        bulk = backend.services_health(env.services, HEALTH_FIELDS)
        per = np.array([[float((backend.service_health(s) or {}).get(f, 0.0)) for f in HEALTH_FIELDS]
                        for s in env.services])
        assert np.array_equal(bulk, per, equal_nan=True)


def test_view_with_a_bulk_health_read_observes_the_same():
    from wrappers.rl import HEALTH_FIELDS

    def run(shim: bool) -> list[np.ndarray]:
        env = RLView(gym.make(IDS["online-boutique"], injection_s=600, observation_s=240, reference_run=False))
        obs, _ = env.reset(seed=4)
        backend = env.unwrapped.marathon.backend
        if shim:
            calls = []

            def services_health(services, fields):
                calls.append(1)
                return np.array([[float((backend.service_health(s) or {}).get(f, 0.0)) for f in fields]
                                 for s in services])
            backend.services_health = services_health
            assert fields_ok(HEALTH_FIELDS)
        out = [obs["observations"]]
        while True:
            obs, _, _, trunc, _ = env.step(0)
            out.append(obs["observations"])
            if trunc:
                break
        if shim:
            assert calls, "the view never used the bulk read"
        return out

    def fields_ok(fields):
        return set(fields) <= {"error_ratio", "p95_ms", "cpu_util", "mem_util", "ready", "desired", "restarts"}

    a, b = run(False), run(True)
    assert all(np.array_equal(x, y) for x, y in zip(a, b)) and len(a) == len(b)

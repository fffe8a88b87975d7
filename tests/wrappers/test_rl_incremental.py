"""The RL view's per-deployment feature cache never changes an observation: at every step of an
episode with interventions (rollbacks, scales, restarts... chosen from the mask), the observation
and mask equal those recomputed with empty caches."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

import sremarathon_env  # noqa: F401
from sremarathon_env.registration import IDS
from wrappers.rl import RLView


def test_cached_observation_equals_fresh_each_step():
    env = RLView(gym.make(IDS["online-boutique"], injection_s=1800, observation_s=240, reference_run=False))
    obs, _ = env.reset(seed=2)
    k, acted, hits = 0, 0, 0
    while True:
        cached = env._dep_cache
        hits += len(cached)
        env._dep_cache, env._fam_of = {}, {}
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

"""Rollout GC thresholds: fewer collections, and the same observations, masks, rewards and bundle digest."""

from __future__ import annotations

import gc

import gymnasium as gym
import numpy as np

import sremarathon_env  # noqa: F401
from sremarathon_env.registration import IDS
from wrappers.gc_policy import ROLLOUT_THRESHOLDS, tune_gc
from wrappers.rl import RLView


def _episode() -> tuple[list, str, int]:
    env = RLView(gym.make(IDS["online-boutique"], injection_s=1200, observation_s=240, reference_run=False))
    rng = np.random.default_rng(3)
    before = sum(s["collections"] for s in gc.get_stats())
    obs, _ = env.reset(seed=4)
    out = []
    while True:
        out.append((obs["observations"].tobytes(), obs["action_mask"].tobytes()))
        a = int(rng.choice(np.flatnonzero(obs["action_mask"])))
        obs, r, _, trunc, info = env.step(a)
        out.append(r)
        if trunc:
            return out, info["bundle_digest"], sum(s["collections"] for s in gc.get_stats()) - before


def test_tuned_gc_changes_nothing_but_the_number_of_collections():
    default = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        ref, ref_digest, ref_n = _episode()
        assert tune_gc() == (700, 10, 10) and gc.get_threshold() == ROLLOUT_THRESHOLDS
        got, digest, n = _episode()
    finally:
        gc.set_threshold(*default)
    assert got == ref and digest == ref_digest
    assert n * 4 < ref_n, (n, ref_n)

"""At reset the env hands the dropped marathon's alert-tape buffers to the next episode (`Marathon.release`): the
episodes' bundles and rewards are the same as with every tape on fresh memory, and the buffers are really reused."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

import sremarathon_env  # noqa: F401
import sremarathon_env.alerts.tape as tape_mod
from sremarathon_env.registration import IDS
from wrappers.rl import RLView


def _episodes(n: int) -> list[tuple]:
    env = RLView(gym.make(IDS["online-boutique"], injection_s=600, observation_s=240, reference_run=False))
    rng = np.random.default_rng(0)
    out, reused, before = [], 0, []
    for k in range(n):
        obs, _ = env.reset(seed=k)
        core = env.env.unwrapped
        rewards = []
        while True:
            obs, r, term, trunc, info = env.step(int(rng.choice(np.flatnonzero(obs["action_mask"]))))
            rewards.append(r)
            if term or trunc:
                break
        tape = core.marathon.alert_engine._plan.tape
        reused += any(b is p for b in tape._bufs for p in before)   # the previous episode's tape's buffers
        before = list(tape._bufs)
        out.append((info["bundle_digest"], rewards, obs["observations"].tobytes()))
    env.close()
    return out, reused


def test_pooled_tape_buffers_change_no_episode(monkeypatch):
    monkeypatch.setattr(tape_mod, "_POOL", [])
    pooled, reused = _episodes(4)
    assert reused >= 3   # every episode after the first ran on the previous one's buffers
    monkeypatch.setattr(tape_mod, "_POOL", [])
    monkeypatch.setattr(tape_mod, "POOL_MAX", 0)   # nothing kept: every tape on fresh memory
    fresh, reused = _episodes(4)
    assert reused == 0 and not tape_mod._POOL
    assert pooled == fresh

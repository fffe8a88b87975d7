"""The core env under gymnasium.make_vec (sync and async, with autoreset drawing fresh scenarios)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import sremarathon_env  # noqa: F401

KW = dict(injection_s=240, observation_s=120)   # 3 invocations


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_make_vec_runs_episodes_and_autoresets(mode):
    envs = gym.make_vec("SREMarathon/OnlineBoutique-v0", num_envs=2, vectorization_mode=mode, **KW)
    try:
        obs, info = envs.reset(seed=100)
        assert obs["t"].shape == (2, 1) and list(obs["invocation"]) == [1, 1]
        first = list(info["scenario_seed"])
        assert first[0] != first[1]
        trunc_seen = 0
        seeds = set(first)
        for _ in range(5):   # 3 steps to the end, one autoreset step, one more
            obs, rew, term, trunc, info = envs.step(["[]", '[{"tool": "get_topology", "args": {}}]'])
            assert rew.dtype == np.float64 and not term.any()
            trunc_seen += int(trunc.sum())
            seeds.update(int(s) for s in info["scenario_seed"])
        assert trunc_seen == 2
        assert len(seeds) == 4       # the autoreset drew a new scenario in each sub-env
    finally:
        envs.close()


def test_make_vec_seeded_runs_repeat():
    def run():
        envs = gym.make_vec("SREMarathon/OnlineBoutique-v0", num_envs=2, vectorization_mode="sync", **KW)
        obs, info = envs.reset(seed=7)
        out = [info["schedule_digest"].tolist()]
        for _ in range(3):
            obs, rew, term, trunc, info = envs.step(["[]", "[]"])
            out.append((obs["alerts_json"], rew.tolist()))
        envs.close()
        return out

    assert run() == run()

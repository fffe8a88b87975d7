"""The RLlib env factory without Ray: streams, seeding, infra failures, the trivial twin env."""

from __future__ import annotations

import os

import gymnasium as gym
import numpy as np
import pytest

from baselines import rllib_env
from baselines.rllib_env import (RLlibEnv, TrivialMaskedEnv, episode_steps, is_infra_failure, make_env, split_config,
                                 stream_seed)
from sremarathon_env.cli_train import parse_seeds

SHORT = {"injection_s": 240, "observation_s": 240, "app": "online-boutique"}


class _Ctx(dict):
    """What RLlib passes: the config dict plus worker_index."""

    def __init__(self, cfg, worker_index):
        super().__init__(cfg)
        self.worker_index = worker_index


def scenarios(env, n):
    out = []
    for k in range(n):
        _, info = env.reset()
        out.append(info["scenario_seed"])
    return out


def test_stream_seeds_distinct_and_stable():
    seeds = {stream_seed(0, w, i, g) for w in range(3) for i in range(3) for g in range(2)}
    assert len(seeds) == 18
    assert stream_seed(5, 1, 2) == stream_seed(5, 1, 2)
    assert stream_seed(5, 1, 2) != stream_seed(6, 1, 2)
    assert all(0 <= s < 2**63 for s in seeds)


def test_split_config_defaults_and_validation():
    ours, kw = split_config({"app": "train-ticket", "seed": 4, "noise": False})
    assert ours["seed"] == 4 and ours["on_infra_failure"] == "recreate"
    assert kw["app"] == "train-ticket" and kw["noise"] is False and kw["reference_run"] is False
    assert "seed" not in kw
    with pytest.raises(ValueError):
        split_config({"on_infra_failure": "ignore"})


def test_each_worker_and_sub_env_draws_its_own_reproducible_scenarios(monkeypatch):
    monkeypatch.setattr(rllib_env, "_built", {})
    envs = [make_env(_Ctx(SHORT, w)) for w in (1, 1, 2)]
    assert [e.stream for e in envs] == [(1, 0, 0), (1, 1, 0), (2, 0, 0)]
    runs = [scenarios(e, 2) for e in envs]
    flat = [s for r in runs for s in r]
    assert len(set(flat)) == len(flat)  # every rollout a different scenario
    again = make_env({**SHORT, "sub_index": 1})
    again.set_stream(1, 1)
    assert scenarios(again, 2) == runs[1]  # same stream, same scenarios
    again.set_stream(1, 1, generation=1)
    assert scenarios(again, 1)[0] not in flat
    for e in envs + [again]:
        e.close()


def test_rllib_seed_is_mixed_in_and_later_resets_continue_the_stream():
    a, b = make_env({**SHORT, "sub_index": 0}), make_env({**SHORT, "sub_index": 0})
    _, ia = a.reset(seed=11)
    _, ib = b.reset(seed=12)
    assert ia["scenario_seed"] != ib["scenario_seed"]
    _, ia2 = a.reset()
    c = make_env({**SHORT, "sub_index": 0})
    c.reset(seed=11)
    assert c.reset()[1]["scenario_seed"] == ia2["scenario_seed"]


class _Flaky(gym.Env):
    observation_space = gym.spaces.Discrete(2)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, exc):
        self.exc = exc

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return 0, {"scenario_seed": 1}

    def step(self, action):
        if action == 1:
            raise self.exc
        return 0, 1.0, False, False, {}


def test_infra_failure_flagged_not_scored():
    env = RLlibEnv(_Flaky(ConnectionError("apiserver gone")), on_infra_failure="flag")
    env.reset()
    assert env.step(0)[1] == 1.0
    obs, r, term, trunc, info = env.step(1)
    assert (r, term, trunc) == (0.0, False, True)
    assert info["episode_valid"] is False and info["infra_failure"]["type"] == "ConnectionError"
    assert env.infra_failures == 1


def test_agent_bugs_are_not_infra_failures():
    env = RLlibEnv(_Flaky(KeyError("bug")), on_infra_failure="flag")
    env.reset()
    with pytest.raises(KeyError):
        env.step(1)
    assert is_infra_failure(TimeoutError()) and is_infra_failure(rllib_env.InfrastructureError("x"))
    assert not is_infra_failure(ValueError("x"))


def test_infra_failure_raises_rllibs_recreate_error():
    pytest.importorskip("ray.rllib")
    from ray.rllib.env.env_errors import StepFailedRecreateEnvError

    env = RLlibEnv(_Flaky(TimeoutError("live step timed out")), on_infra_failure="recreate")
    env.reset()
    with pytest.raises(StepFailedRecreateEnvError, match="not scored"):
        env.step(1)


def test_trivial_env_has_the_rl_views_spaces_and_length():
    real = make_env({**SHORT, "sub_index": 0})
    triv = TrivialMaskedEnv(SHORT)
    assert triv.observation_space == real.observation_space and triv.action_space == real.action_space
    assert triv.steps == episode_steps(SHORT) == 4
    obs, _ = triv.reset(seed=0)
    n = 0
    while True:
        obs, r, term, trunc, _ = triv.step(0)
        n += 1
        if term or trunc:
            break
    assert n == triv.steps
    obs_r, _ = real.reset()
    assert real.observation_space.contains(obs_r)
    real.close()


def test_parse_seeds():
    assert parse_seeds("0-2,7,1") == [0, 1, 2, 7]
    assert parse_seeds(None) == []
    with pytest.raises(SystemExit):
        parse_seeds("a-b")


def test_no_ray_at_import():
    import subprocess
    import sys

    code = ("import sys, baselines, baselines.ppo, baselines.rllib_env, sremarathon_env.cli as c; c.build_parser(); "
            "print(any(m == 'ray' or m.startswith('ray.') or m == 'torch' for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_stream_callback_places_vector_sub_envs():
    pytest.importorskip("ray.rllib")
    from baselines.rllib_env import stream_callbacks_class

    vec = gym.vector.SyncVectorEnv([lambda: make_env({**SHORT, "sub_index": 0}) for _ in range(2)])
    runner = type("R", (), {})()
    cb = stream_callbacks_class()()
    cb.on_environment_created(env_runner=runner, env=vec, env_context=_Ctx(SHORT, 3))
    assert [e.stream for e in vec.envs] == [(3, 0, 0), (3, 1, 0)]
    _, infos = vec.reset()
    assert len(set(np.asarray(infos["scenario_seed"]).tolist())) == 2
    cb.on_environment_created(env_runner=runner, env=vec, env_context=_Ctx(SHORT, 3))
    assert [e.stream for e in vec.envs] == [(3, 0, 1), (3, 1, 1)]
    vec.close()


class _LosesClusterOnce(gym.Env):
    """RL-view spaces; the first episode ever (marker file absent) loses its cluster at step 3."""

    def __init__(self, marker: str):
        from wrappers.rl import MAX_ACTIONS, OBS_DIM

        self.marker = marker
        self.observation_space = gym.spaces.Dict({
            "observations": gym.spaces.Box(-1.0, 1.0, (OBS_DIM,), np.float32),
            "action_mask": gym.spaces.Box(0.0, 1.0, (MAX_ACTIONS,), np.float32)})
        self.action_space = gym.spaces.Discrete(MAX_ACTIONS)
        mask = np.zeros(MAX_ACTIONS, np.float32)
        mask[0] = 1.0
        self.obs = {"observations": np.zeros(OBS_DIM, np.float32), "action_mask": mask}
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.obs, {}

    def step(self, action):
        self.t += 1
        if self.t == 3 and not os.path.exists(self.marker):
            open(self.marker, "w").close()
            raise ConnectionError("lost the cluster")
        return self.obs, 1.0, False, self.t >= 5, {}


def test_rllib_drops_the_infra_failed_episode_and_recreates_the_env(tmp_path):
    pytest.importorskip("ray.rllib")
    pytest.importorskip("torch")
    from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner
    from ray.tune.registry import register_env

    from baselines.ppo import ppo_config

    marker = str(tmp_path / "failed")
    register_env("sremarathon-test-flaky", lambda c: RLlibEnv(_LosesClusterOnce(marker), on_infra_failure="recreate"))
    cfg = ppo_config(SHORT, env_runners=0, env="sremarathon-test-flaky")
    runner = SingleAgentEnvRunner(config=cfg)
    try:
        episodes = runner.sample(num_episodes=3)
        metrics = runner.get_metrics()
    finally:
        runner.stop()
    assert os.path.exists(marker)
    # the broken episode (2 steps) is not among the results; every returned episode is whole
    assert [(len(e), float(e.get_return()), bool(e.is_done)) for e in episodes] == [(5, 5.0, True)] * 3
    assert float(metrics["num_env_step_failures"].peek()) == 1.0


def test_make_env_sets_rollout_gc_thresholds_unless_told_not_to():
    import gc

    from wrappers.gc_policy import ROLLOUT_THRESHOLDS

    old = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        make_env({"tune_gc": False, "injection_s": 240, "observation_s": 240, "sub_index": 0}).close()
        assert gc.get_threshold() == (700, 10, 10)
        make_env({"injection_s": 240, "observation_s": 240, "sub_index": 0}).close()
        assert gc.get_threshold() == ROLLOUT_THRESHOLDS
    finally:
        gc.set_threshold(*old)
    # a rollout process also runs the alert tape's compiled kernels from its first episode, where numba is installed
    import importlib.util
    import os

    from sremarathon_env.alerts import compiled

    if importlib.util.find_spec("numba") is not None and os.environ.get("SREMARATHON_NUMBA") != "0":
        assert compiled.kernels() is not None and compiled.status().startswith("compiled kernels: on")

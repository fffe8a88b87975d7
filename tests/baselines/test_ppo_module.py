"""The factored PPO head: its action-kind layout matches the RL view, and its shared terms act on logits."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ray")
torch = pytest.importorskip("torch")

import gymnasium as gym  # noqa: E402

import sremarathon_env  # noqa: E402,F401
from wrappers.rl import SERVICE_KINDS, RLView  # noqa: E402

KIND_NAMES = ["noop", *SERVICE_KINDS, "flag_off", "drain", "uncordon", "failover"]


@pytest.fixture(scope="module")
def env_obs():
    env = RLView(gym.make("SREMarathon/OnlineBoutique-v0", injection_s=1200, observation_s=480))
    obs, _ = env.reset(seed=1)
    for _ in range(6):  # let faults fire so that several action kinds are valid
        obs, *_ = env.step(0)
    return env, obs


def _module(env):
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    from baselines.ppo_module import FactoredMaskingTorchRLModule

    torch.manual_seed(0)
    return RLModuleSpec(module_class=FactoredMaskingTorchRLModule, observation_space=env.observation_space,
                        action_space=env.action_space,
                        model_config={"fcnet_hiddens": [16], "fcnet_activation": "tanh", "head_fcnet_hiddens": [],
                                      "vf_share_layers": False}).build()


def _logits(module, obs):
    batch = {"obs": {k: torch.from_numpy(np.asarray(v)[None]) for k, v in obs.items()}}
    with torch.no_grad():
        return module.forward_inference(batch)["action_dist_inputs"][0].numpy()


def test_action_kinds_match_the_rl_view_labels(env_obs):
    from baselines.ppo_module import action_kinds

    env, _ = env_obs
    kinds = action_kinds()
    assert len(kinds) == env.action_space.n
    named = [(i, lab) for i, lab in enumerate(env.action_labels) if not lab.startswith("pad")]
    assert len(named) > 50
    for i, lab in named:
        assert lab.split("(")[0] == KIND_NAMES[kinds[i]], (i, lab)


def test_kind_bias_and_mask_shape_the_logits(env_obs):
    env, obs = env_obs
    m = _module(env)
    valid = np.flatnonzero(obs["action_mask"] > 0)
    base = _logits(m, obs)
    assert np.all(base[obs["action_mask"] == 0] < -1e30)           # masked out
    kinds_valid = {env.action_labels[i].split("(")[0] for i in valid} - {"noop"}
    target = sorted(kinds_valid)[0]
    with torch.no_grad():
        m.kind_bias[KIND_NAMES.index(target)] = 1.0
    moved = _logits(m, obs) - base
    for i in valid:
        is_target = env.action_labels[i].split("(")[0] == target
        assert moved[i] == pytest.approx(10.0 if is_target else 0.0, abs=1e-4)
    best = valid[np.argmax(_logits(m, obs)[valid])]
    assert env.action_labels[best].startswith(target + "(")


def test_service_weights_read_the_actions_own_service_slot(env_obs):
    from baselines.ppo_module import N_GLOBAL, N_SVC_FEAT

    env, obs = env_obs
    m = _module(env)
    base = _logits(m, obs)
    with torch.no_grad():
        m.kind_w[2, 0] = 1.0    # rollback x "present" feature of the slot
    moved = _logits(m, obs) - base
    x = obs["observations"]
    for slot in range(3):
        a = 1 + slot * len(SERVICE_KINDS) + 2
        if obs["action_mask"][a] > 0:
            assert moved[a] == pytest.approx(3.0 * x[N_GLOBAL + slot * N_SVC_FEAT], abs=1e-4)
    other = 1 + 0 * len(SERVICE_KINDS) + 0   # restart(slot 0): untouched
    if obs["action_mask"][other] > 0:
        assert moved[other] == pytest.approx(0.0, abs=1e-5)

"""The RL, text and per-tool-call views: checker, fixed shapes, masks, determinism, reward accounting."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import sremarathon_env  # noqa: F401
from sremarathon_env.env import SREMarathonEnv
from sremarathon_env.registration import IDS
from wrappers.cluster_view import reverse_diff
from wrappers.rl import MAX_ACTIONS, OBS_DIM, SERVICE_KINDS, RLView
from wrappers.text import TextView
from wrappers.toolcall import ToolCallEnv

SHORT = dict(injection_s=480, observation_s=240)


@pytest.mark.parametrize("view", [RLView, TextView, ToolCallEnv])
@pytest.mark.filterwarnings("ignore:.*is different from the unwrapped version")
def test_check_env_every_view(view):
    env = view(gym.make("SREMarathon/OnlineBoutique-v0", injection_s=240, observation_s=120,
                        disable_env_checker=True))
    check_env(env)


def test_rl_shapes_identical_across_apps_and_labels_aligned():
    views = [RLView(gym.make(i, **SHORT)) for i in sorted(IDS.values())]
    for v in views:
        assert v.observation_space == views[0].observation_space
        assert v.action_space == gym.spaces.Discrete(MAX_ACTIONS)
        assert len(v.action_labels) == MAX_ACTIONS and len(v.feature_names) == OBS_DIM
        assert len(set(v.action_labels)) == MAX_ACTIONS
        for i, s in enumerate(v.services):
            assert v.action_labels[1 + i * len(SERVICE_KINDS)] == f"restart({s})"
    ob = next(v for v in views if v.app.name == "online-boutique")
    assert "flag_off(" not in " ".join(a for a in ob.action_labels if not a.startswith("pad("))


@pytest.mark.parametrize("env_id", sorted(IDS.values()))
def test_random_masked_actions_full_episode(env_id):
    env = RLView(gym.make(env_id, **SHORT))
    obs, _ = env.reset(seed=12)
    rng = np.random.default_rng(0)
    ret, acted = 0.0, 0
    while True:
        mask = obs["action_mask"]
        assert mask[0] == 1.0 and mask.shape == (MAX_ACTIONS,)
        assert not mask[[k for k, lab in enumerate(env.action_labels) if lab.startswith("pad(")]].any()
        valid = np.flatnonzero(mask)
        a = int(rng.choice(valid[1:])) if len(valid) > 1 else 0
        obs, r, term, trunc, info = env.step(np.int64(a))
        assert env.observation_space.contains(obs) and info["action_valid"]
        acted += a != 0
        ret += r
        if trunc:
            break
    assert ret == info["score_report"]["marathon_score"]
    assert acted > 0
    actions = [rec.data for rec in env.unwrapped.marathon.recorder.records if rec.kind == "action"]
    assert len(actions) >= acted and all(a["incident_id"] for a in actions)   # every intervention cites
    assert not any(a["forbidden"] for a in actions)


def test_rl_invalid_and_masked_actions_are_noops():
    env = RLView(SREMarathonEnv(**SHORT))
    obs, _ = env.reset(seed=1)
    masked = int(np.flatnonzero(obs["action_mask"] == 0)[0])
    for a in (masked, MAX_ACTIONS + 5, -1):
        obs, r, term, trunc, info = env.step(a)
        assert info["action_valid"] is False
    inv = [rec.data for rec in env.unwrapped.marathon.recorder.records if rec.kind == "invocation"]
    assert all(i["calls"] == [] for i in inv)


def test_rl_same_seed_same_actions_identical():
    def run():
        env = RLView(SREMarathonEnv(**SHORT))
        obs, _ = env.reset(seed=33)
        rng = np.random.default_rng(4)
        out = []
        while True:
            valid = np.flatnonzero(obs["action_mask"])
            obs, r, _, trunc, info = env.step(int(rng.choice(valid)))
            out.append((obs["observations"].tobytes(), obs["action_mask"].tobytes(), r))
            if trunc:
                return out, info["bundle_digest"]

    assert run() == run()


def test_rl_rollback_macro_localises_a_bad_deploy():
    """A config push that breaks a service: the rollback action names the culprit and the changed key,
    and rolls back to the revision before the change."""
    from wrappers.cluster_view import ClusterView

    env = RLView(SREMarathonEnv(**SHORT))
    env.reset(seed=2)
    m = env.unwrapped.marathon
    cv = ClusterView(m.backend, m.app)
    assert cv.last_change("cartservice") is None
    assert m.backend.set_config("cartservice", "REDIS_ADDR", "redis-cart:1234").ok
    assert cv.last_change("cartservice") == (2, 1, "config", "cartservice:REDIS_ADDR")
    assert cv.env_drift("cartservice") == ["REDIS_ADDR"]
    k = env.action_labels.index("rollback(cartservice)")
    for _ in range(5):
        obs, *_ = env.step(0)
        if obs["action_mask"][k]:
            break
    else:
        pytest.fail("no alert fired on cartservice after breaking its redis address")
    want = cv.last_change("cartservice")
    env.step(k)
    inc = m.ctx.incidents.all()[-1]
    assert inc.culprit_services == ["cartservice"] and inc.artifact == want[3]
    act = [rec.data for rec in m.recorder.records if rec.kind == "action"][-1]
    assert act["tool"] == "rollback" and act["ok"] and act["args"]["to_revision"] == want[1]
    assert act["incident_id"] == inc.id


def test_reverse_diff_undoes_a_patch():
    from sremarathon_env.pipeline.diff import apply_diff

    tree = {"src/a.py": "one\ntwo\nthree\nfour\n"}
    diff = "--- a/src/a.py\n+++ b/src/a.py\n@@ -1,4 +1,4 @@\n one\n-two\n+TWO\n three\n four\n" \
           "--- a/deployment.yaml (image)\n+++ b/deployment.yaml (image)\n-  image: x:1\n+  image: x:2\n"
    changed = apply_diff(tree, diff.split("--- a/deployment.yaml")[0])
    assert changed["src/a.py"] == "one\nTWO\nthree\nfour\n"
    assert apply_diff(changed, reverse_diff(diff)) == tree


def test_text_view():
    env = TextView(SREMarathonEnv(**SHORT), max_chars=4000)
    obs, _ = env.reset(seed=6)
    assert env.observation_space.contains(obs) and obs.startswith("# SRE marathon - t=120s")
    names = [s["function"]["name"] for s in env.tool_schemas]
    assert "report_incident" in names and "restart" in names and "incident_id" in env.system_prompt + env.tools_json()
    obs, r, term, trunc, info = env.step('[{"tool": "write_workspace", "args": {"path": "notes.md", "content": "x1"}}]')
    assert "### notes.md\nx1" in obs and len(obs) <= 4000


def test_toolcall_rewards_arrive_at_invocation_ends():
    env = ToolCallEnv(SREMarathonEnv(**SHORT))
    obs, _ = env.reset(seed=8)
    ret, ends, steps = 0.0, 0, 0
    while True:
        steps += 1
        if steps % 3 == 0:
            act = '{"tool": "end_invocation"}'
        elif steps % 3 == 1:
            act = json.dumps({"tool": "get_alerts", "args": {"state": "firing"}})
        else:
            act = "garbage"
        obs, r, term, trunc, info = env.step(act)
        assert env.observation_space.contains(obs)
        if not info["invocation_ended"]:
            assert r == 0.0 and not trunc
        ends += info["invocation_ended"]
        ret += r
        if trunc:
            break
    assert ends == env.unwrapped.n_invocations
    assert ret == info["score_report"]["marathon_score"]
    inv = [rec.data for rec in env.unwrapped.marathon.recorder.records if rec.kind == "invocation"]
    assert [c["tool"] for c in inv[0]["calls"]][0] == "get_alerts" and inv[0]["calls"][1]["ok"] is False


def test_toolcall_budget_exhaustion_ends_the_invocation():
    env = ToolCallEnv(SREMarathonEnv(**SHORT))
    env.reset(seed=8)
    ended_after = None
    for k in range(1, 200):
        _, _, _, _, info = env.step('{"tool": "get_traces", "args": {}}')   # 6 s each
        if info["invocation_ended"]:
            ended_after = k
            break
    assert ended_after is not None and ended_after >= 110 // 6
    assert info["t"] == 240.0

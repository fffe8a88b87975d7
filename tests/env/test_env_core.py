"""The core Gymnasium env: contract, seeding, determinism, rewards = score, bad actions, pickling."""

from __future__ import annotations

import contextlib
import io
import json
import pickle

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import sremarathon_env
from sremarathon_env.env import SREMarathonEnv, exact_final_reward, parse_action
from sremarathon_env.observation import bounded_json_list
from sremarathon_env.registration import IDS

SHORT = dict(injection_s=480, observation_s=240)       # 6 invocations
ACTIONS = [
    '[{"tool": "get_alerts", "args": {"state": "firing"}}]',
    [{"tool": "get_topology", "args": {}}, {"tool": "write_workspace", "args": {"path": "n.md", "content": "hi"}}],
    "this is not json",
    '[{"tool": "report_incident", "args": {"title": "t", "culprit_services": ["frontend"], "artifact": "x"}}]',
    '[{"tool": "restart", "args": {"service": "frontend", "incident_id": "INC-0001"}}]',
    42,
    "",
]


def run_episode(env: gym.Env, seed: int, actions=ACTIONS) -> tuple[list, list[float], list[dict]]:
    obs, info = env.reset(seed=seed)
    observations, rewards, infos = [obs], [], [info]
    k = 0
    while True:
        obs, r, term, trunc, info = env.step(actions[k % len(actions)])
        k += 1
        observations.append(obs)
        rewards.append(r)
        infos.append(info)
        assert term is False
        if trunc:
            return observations, rewards, infos


def same_obs(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) if isinstance(a[k], np.ndarray) else a[k] == b[k]
                                        for k in a)


def test_ids_registered_on_import():
    gym.register_envs(sremarathon_env)
    for app, env_id in IDS.items():
        spec = gym.spec(env_id)
        assert spec.entry_point == "sremarathon_env.env:SREMarathonEnv" and spec.kwargs == {"app": app}
        assert spec.max_episode_steps is None


@pytest.mark.parametrize("env_id", sorted(IDS.values()))
def test_check_env_every_id(env_id):
    env = gym.make(env_id, injection_s=240, observation_s=120)
    check_env(env.unwrapped)
    assert env.unwrapped.n_invocations == 3


def test_episode_shape_flags_and_types():
    env = gym.make("SREMarathon/OnlineBoutique-v0", **SHORT)
    obs, info = env.reset(seed=3)
    assert float(obs["t"][0]) == 120.0 and obs["invocation"] == 1
    assert set(info) >= {"scenario_seed", "schedule_digest", "bundle", "env_version", "backend", "score"}
    assert info["bundle"] is None and len(info["schedule_digest"]) == 64
    text = json.dumps(info) + json.dumps({k: v for k, v in obs.items() if isinstance(v, str)})
    assert not any(f.fault_id in text for f in env.unwrapped.marathon.schedule.faults)   # never the schedule
    n = 0
    while True:
        obs, r, term, trunc, info = env.step("[]")
        n += 1
        assert type(r) is float and type(term) is bool and type(trunc) is bool
        assert env.observation_space.contains(obs)
        if trunc:
            break
        assert float(obs["t"][0]) == 120.0 * (n + 1)
    assert n == env.unwrapped.n_invocations == 6
    assert "score_report" in info and info["bundle_digest"]
    with pytest.raises(gym.error.ResetNeeded):
        env.unwrapped.step("[]")
    env.close()
    env.close()


def test_unseeded_reset_draws_a_new_scenario_and_options_pick_one():
    env = SREMarathonEnv(**SHORT)
    _, i1 = env.reset(seed=11)
    _, i2 = env.reset()
    _, i3 = env.reset(seed=11)
    assert i1["scenario_seed"] == i3["scenario_seed"] != i2["scenario_seed"]
    assert i1["schedule_digest"] == i3["schedule_digest"] != i2["schedule_digest"]
    _, i4 = env.reset(options={"scenario_seed": 5})
    assert i4["scenario_seed"] == 5
    from sremarathon_env.marathon import Marathon, MarathonConfig
    m = Marathon(MarathonConfig(seed=5, **SHORT))
    m.start()
    assert m.schedule.digest() == i4["schedule_digest"]
    with pytest.raises(ValueError):
        env.reset(options={"scenario_seed": -1})


def test_same_seed_same_actions_identical_episode():
    a, b = SREMarathonEnv(**SHORT), SREMarathonEnv(**SHORT)
    oa, ra, ia = run_episode(a, 21)
    ob, rb, ib = run_episode(b, 21)
    assert all(same_obs(x, y) for x, y in zip(oa, ob)) and len(oa) == len(ob)
    assert ra == rb
    assert ia == ib
    assert ia[-1]["bundle_digest"] == ib[-1]["bundle_digest"]
    oc, rc, ic = run_episode(a, 22)
    assert ic[-1]["bundle_digest"] != ia[-1]["bundle_digest"]


def test_return_equals_final_score_and_cli_score(tmp_path):
    from sremarathon_env.cli import main

    env = SREMarathonEnv(bundle_dir=str(tmp_path), **SHORT)
    _, rewards, infos = run_episode(env, 4)
    ret = 0.0
    for r in rewards:
        ret += r
    final = infos[-1]["score_report"]["marathon_score"]
    assert ret == final
    assert infos[-1]["score"] == final
    path = infos[-1]["bundle"]
    assert path is not None and path.startswith(str(tmp_path))
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["score", path, "--json"]) == 0
    rep = json.loads(buf.getvalue())
    assert rep["marathon_score"] == final == ret
    assert rep["digest"] == infos[-1]["bundle_digest"]
    # the same episode in memory has the same digest
    _, _, infos_mem = run_episode(SREMarathonEnv(**SHORT), 4)
    assert infos_mem[-1]["bundle_digest"] == infos[-1]["bundle_digest"]


def test_reward_is_score_delta_with_reporting_agent():
    """An agent that reports incidents for firing alerts earns correlation credit: positive rewards that
    sum to the final score."""
    env = SREMarathonEnv(**SHORT)
    obs, _ = env.reset(seed=8)
    rewards = []
    while True:
        alerts = [a for a in json.loads(obs["alerts_json"]) if a.get("state") == "firing"]
        calls = [{"tool": "report_incident", "args": {"title": "auto", "alert_fingerprints": [a["fingerprint"]],
                                                       "culprit_services": [a["labels"].get("service", "frontend")]}}
                 for a in alerts[:5]]
        obs, r, _, trunc, info = env.step(calls)
        rewards.append(r)
        if trunc:
            break
    total = 0.0
    for r in rewards:
        total += r
    assert total == info["score_report"]["marathon_score"]
    assert any(r > 0 for r in rewards)


def test_bad_actions_are_recorded_never_raised():
    env = SREMarathonEnv(injection_s=720, observation_s=240)
    env.reset(seed=2)
    for bad in ["{not json", 3.5, [1, 2], '{"tool": "no_such_tool"}', b"\xff\xfe", {"calls": "x"},
                [{"tool": "restart", "args": {"service": "nope"}}]]:
        obs, r, term, trunc, info = env.step(bad)
        assert env.observation_space.contains(obs)
        res = json.loads(obs["last_results_json"])
        assert res["error"] is not None or any(not x["ok"] for x in res["results"]), bad
    inv = [rec.data for rec in env.marathon.recorder.records if rec.kind == "invocation"]
    assert inv[0]["error"].startswith("action is not valid JSON")
    assert inv[2]["calls"][0]["ok"] is False


def test_pickle_round_trip_continues_identically():
    env = SREMarathonEnv(**SHORT)
    env.reset(seed=9)
    env.step(ACTIONS[0])
    clone = pickle.loads(pickle.dumps(env))
    for act in ACTIONS[1:4]:
        o1, r1, _, t1, i1 = env.step(act)
        o2, r2, _, t2, i2 = clone.step(act)
        assert same_obs(o1, o2) and r1 == r2 and t1 == t2 and i1 == i2
    assert np.array_equal(env.np_random.bit_generator.state["state"]["state"],
                          clone.np_random.bit_generator.state["state"]["state"])


def test_render_ansi_and_alert_history_bounds():
    big = SREMarathonEnv(max_alert_chars=400_000, injection_s=720, observation_s=240)
    big.reset(seed=1)
    for _ in range(6):
        obs_big, *_ = big.step("[]")
    hist = big.marathon.alert_engine.history()
    assert json.loads(obs_big["alerts_json"]) == hist           # with room, the whole history verbatim
    # a cap between what the pending/firing alerts need and the whole history: the oldest resolved ones go
    need = len(json.dumps([a for a in hist if a["state"] in ("pending", "firing")]))
    cap = (need + len(obs_big["alerts_json"])) // 2
    assert need + 200 < cap < len(obs_big["alerts_json"])
    env = SREMarathonEnv(render_mode="ansi", max_alert_chars=cap, injection_s=720, observation_s=240)
    env.reset(seed=1)
    for _ in range(6):
        obs, *_ = env.step("[]")
    text = env.render()
    assert isinstance(text, str) and text.startswith("# SRE marathon")
    assert env.marathon.alert_engine.history() == hist
    alerts = json.loads(obs["alerts_json"])
    assert len(obs["alerts_json"]) <= cap
    marker = alerts[0] if "omitted_resolved" in alerts[0] else None
    shown = alerts[1:] if marker else alerts
    active = [a for a in hist if a["state"] in ("pending", "firing")]
    assert all(a in shown for a in active)                      # active alerts are never left out
    assert shown == [a for a in hist if a in shown]             # oldest first, as in the history
    assert len(shown) < len(hist) and marker["omitted_resolved"] == len(hist) - len(shown)
    assert SREMarathonEnv(**SHORT).render() is None


def test_helpers():
    items = [json.dumps({"i": i, "pad": "x" * 20}) for i in range(50)]
    text = bounded_json_list(items, 300)
    out = json.loads(text)
    assert len(text) <= 300 and out[0]["omitted_oldest"] == 50 - (len(out) - 1) and out[-1]["i"] == 49
    assert json.loads(bounded_json_list(items[:2], 10_000)) == [json.loads(s) for s in items[:2]]
    rng = np.random.default_rng(0)
    for _ in range(500):   # score paths like the env's: stage credits of n faults, less penalties
        n = int(rng.integers(1, 80))
        stages = np.cumsum(rng.integers(0, 3, size=45))
        pen = np.cumsum(rng.random(45) < 0.05)
        scores = [max(100.0 * min(int(k), 3 * n) / (3 * n) - float(p), 0.0) for k, p in zip(stages, pen)]
        running, prev = 0.0, 0.0
        for sc in scores[:-1]:
            running += sc - prev
            prev = sc
        running += exact_final_reward(running, scores[-1])
        assert running == scores[-1]
    assert parse_action('{"name": "get_topology", "arguments": {}}')[0] == [{"name": "get_topology", "arguments": {}}]
    assert parse_action({"calls": [{"tool": "x"}], "usage": {"calls": 2}})[1] == {"calls": 2}
    assert parse_action(7)[2] == "action is not a list of tool calls: int"

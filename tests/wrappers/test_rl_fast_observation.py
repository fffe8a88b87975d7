"""`RLView._observe` (alert families as arrays, per-deployment features kept per spec generation, vectorised
service rows and mask) equals the observation and mask computed from scratch (`rl_reference.observe_reference`)
bit for bit, and `RLView._firing` (the fingerprints ``calls_for`` cites) its definition, at every step of whole
episodes with random masked actions, for every app."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import sremarathon_env  # noqa: F401
from sremarathon_env.registration import IDS
from wrappers.rl import SERVICE_KINDS, RLView

from tests.wrappers.rl_reference import firing_reference, observe_reference

K = len(SERVICE_KINDS)


def _same(a: dict, b: dict) -> bool:
    return (a["observations"].dtype == b["observations"].dtype and a["action_mask"].dtype == b["action_mask"].dtype
            and a["observations"].tobytes() == b["observations"].tobytes()
            and a["action_mask"].tobytes() == b["action_mask"].tobytes())


def _run(app: str, seeds: list[int], prefer_act: float) -> dict[str, int]:
    """Episodes of ``app`` (the RLlib factory's settings); the observation after reset and after every step
    compared with the reference. Returns how often each service mask kind, a flag/node/zone action and an
    alert-less (global) family were seen."""
    env = RLView(gym.make(IDS[app], injection_s=1200, observation_s=480, reference_run=False))
    rng = np.random.default_rng(len(app))
    seen = {k: 0 for k in SERVICE_KINDS} | {"other": 0, "global": 0, "steps": 0, "source_changed": 0}
    n_svc = len(env.services)
    for seed in seeds:
        obs, _ = env.reset(seed=seed)
        while True:
            ref = observe_reference(env)
            assert _same(obs, ref), (app, seed, seen["steps"],
                                     np.flatnonzero(obs["observations"] != ref["observations"]).tolist(),
                                     np.flatnonzero(obs["action_mask"] != ref["action_mask"]).tolist())
            cv = env._episode(env.unwrapped.marathon.backend).cv
            assert all(cv.summary(s) == cv._summary_plain(s) for s in env.services), (app, seed)
            # the mask's source-change read (unrendered trees where the twin keeps them) = the rendered diff's
            changed = [cv.source_changed(s) for s in env.services]
            assert changed == [bool(cv.latest_diff(s)) for s in env.services], (app, seed)
            seen["source_changed"] += sum(changed)
            per = env._firing()[0]   # what calls_for cites
            assert per == firing_reference(env) and list(per) == list(firing_reference(env)), (app, seed)
            mask = obs["action_mask"]
            M = mask[1:1 + n_svc * K].reshape(n_svc, K)
            for k, name in enumerate(SERVICE_KINDS):
                seen[name] += int(M[:, k].sum())
            seen["other"] += int(mask[1 + 64 * K:].sum())
            seen["global"] += int((obs["observations"][44:56] > 0).any())
            valid = np.flatnonzero(mask)
            a = int(rng.choice(valid[1:])) if len(valid) > 1 and rng.random() < prefer_act else 0
            obs, _, term, trunc, _ = env.step(a)
            seen["steps"] += 1
            if term or trunc:
                ref = observe_reference(env)
                assert _same(obs, ref), (app, seed, "final")
                break
    return seen


@pytest.mark.parametrize("app,seeds,kinds", [
    ("online-boutique", [1, 2, 3, 9], SERVICE_KINDS),   # seed 9: a CPU-limit fault early enough for restore_cpu
    ("train-ticket", [1, 2], ("restart", "restart_edge", "rollback", "revert_patch", "scale_restore", "scale_out")),
    ("astronomy-shop", [1, 2, 3], ("restart", "restart_edge", "rollback", "revert_patch", "scale_restore",
                                   "scale_out", "restore_memory", "restore_config"))])
def test_observation_equals_reference_over_episodes(app, seeds, kinds):
    seen = _run(app, seeds, prefer_act=0.8)
    # the comparison covered states where each mask kind's precondition holds, flag/node/zone actions and
    # alerts naming no service
    for kind in kinds + ("other", "global", "source_changed"):
        assert seen[kind] > 0, (kind, seen)


def test_service_rows_equal_services_in_labels():
    """`RLView._service_rows` (prefix look-ups) against `services_in_labels` (the tools' definition): the label
    sets of whole episodes' alerts and made-up ones (nested service-name prefixes, unknown names, non-strings)."""
    from sremarathon_env.tools.policy import SERVICE_LABELS, services_in_labels
    from wrappers.rl import _active_alerts

    for app in sorted(IDS):
        env = RLView(gym.make(IDS[app], injection_s=1200, observation_s=480, reference_run=False))
        env.reset(seed=3)
        svcs = env.services
        labelsets = []
        for _ in range(6):
            env.step(0)
            labelsets += [labels for *_, labels in _active_alerts(env.unwrapped.marathon.alert_engine)]
        rng = np.random.default_rng(5)
        for _ in range(300):
            lab = {}
            for k in rng.choice(SERVICE_LABELS + ("pod", "other"), size=rng.integers(0, 4), replace=False):
                s = svcs[rng.integers(len(svcs))]
                lab[str(k)] = rng.choice([s, s + "-x", s[:-1], "nope", 7, None, ""])
            if rng.random() < 0.7:
                a, b = svcs[rng.integers(len(svcs))], svcs[rng.integers(len(svcs))]
                lab["pod"] = rng.choice([f"{a}-{b}-5f6d-abc12", f"{a}-7c9-q", a, f"{a}--", f"-{a}-", f"{a}{b}-1"])
            labelsets.append(lab)
        assert len(labelsets) > 300
        for lab in labelsets:
            assert [svcs[i] for i in env._service_rows(lab)] == services_in_labels(env.app, lab), lab


def test_view_of_a_bare_core_equals_the_view_through_wrappers():
    """Over a bare `SREMarathonEnv` (the RLlib factory's) the view resets the core without its observation
    (``reset(observe=False)``); over ``gym.make``'s wrappers it resets through them. Same observations, masks,
    rewards, infos and bundle digests, action for action."""
    from sremarathon_env.env import SREMarathonEnv

    kw = dict(injection_s=600, observation_s=240, reference_run=False)
    bare = RLView(SREMarathonEnv(**kw))
    wrapped = RLView(gym.make(IDS["online-boutique"], **kw))
    assert bare.env is bare.env.unwrapped and wrapped.env is not wrapped.env.unwrapped
    rng = np.random.default_rng(3)
    for seed in (1, 2):
        (oa, ia), (ob, ib) = bare.reset(seed=seed), wrapped.reset(seed=seed)
        assert _same(oa, ob) and ia == ib
        while True:
            valid = np.flatnonzero(oa["action_mask"])
            a = int(rng.choice(valid))
            oa, ra, ta, tra, ia = bare.step(a)
            ob, rb, tb, trb, ib = wrapped.step(a)
            assert _same(oa, ob) and (ra, ta, tra) == (rb, tb, trb)
            assert ia.keys() == ib.keys() and all(str(ia[k]) == str(ib[k]) for k in ia)
            if tra:
                assert ia["bundle_digest"] == ib["bundle_digest"]
                break

"""At reset the env hands the dropped marathon's alert-tape buffers to the next episode (`Marathon.release`): the
episodes' bundles and rewards are the same as with every tape on fresh memory, and the buffers are really reused."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

import sremarathon_env  # noqa: F401
import sremarathon_env.alerts.tape as tape_mod
from sremarathon_env.registration import IDS
from tests.collector import collector_off
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


def _freed_episodes(monkeypatch, keep: bool) -> tuple[list[tuple], list[list[bool]]]:
    """Three RL-view episodes with random actions, the cyclic collector off. Per reset (and after close): which twins
    made so far (the scored ones and the resets' no-action reference runs) are still alive. ``keep``: the dropped
    marathons are kept alive (nothing is freed)."""
    import weakref

    import sremarathon_env.marathon as marathon_mod

    made: list[weakref.ref] = []
    real = marathon_mod._make_backend
    monkeypatch.setattr(marathon_mod, "_make_backend",
                        lambda cfg, metrics=True, **kw: made.append(weakref.ref(twin := real(cfg, metrics, **kw))) or twin)
    marathon_mod.reference_evidence.cache_clear()   # every reset makes its reference run
    try:
        with collector_off():
            env = RLView(gym.make(IDS["online-boutique"], injection_s=600, observation_s=240))
            rng = np.random.default_rng(5)
            out, alive, kept = [], [], []
            for k in range(3):
                obs, _ = env.reset(seed=100 + k)
                alive.append([r() is not None for r in made])
                kept.append(env.env.unwrapped.marathon if keep else None)
                while True:
                    obs, r, term, trunc, info = env.step(int(rng.choice(np.flatnonzero(obs["action_mask"]))))
                    out.append(r)
                    if term or trunc:
                        break
                out.append((info["bundle_digest"], obs["observations"].tobytes()))
            env.close()
            alive.append([r() is not None for r in made])
            del kept
    finally:
        monkeypatch.setattr(marathon_mod, "_make_backend", real)
    return out, alive


def test_dropped_marathon_is_freed_by_reference_counting(monkeypatch):
    """With the cyclic collector off, a reset leaves one twin alive (its marathon's: the previous marathon's twin and
    the reset's own reference-run twin are gone), close none; the episodes are the same as with every dropped
    marathon kept alive."""
    freed, alive = _freed_episodes(monkeypatch, keep=False)
    assert [len(a) for a in alive] == [2, 4, 6, 6]   # per reset the scored twin, then the reference run's
    assert alive[:3] == [[False] * (n - 2) + [True, False] for n in (2, 4, 6)] and not any(alive[3])
    kept, alive = _freed_episodes(monkeypatch, keep=True)
    assert alive[2] == [True, False] * 3   # (kept: every scored twin)
    assert freed == kept

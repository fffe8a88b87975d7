"""The random policy: uniform over the RL view's currently valid (masked) actions, seeded.

Each invocation it builds the RL view's action mask for the current state (`wrappers.rl.RLView` over
the running marathon), draws one valid action uniformly with its own ``numpy.random.Generator``
(seeded from the run's seed and the policy's ``seed_offset``) and runs that action's calls: the read,
``report_incident`` and the intervention citing it. ``noop`` is always valid, so some invocations
do nothing.

>>> RandomPolicy(seed_offset=3).options
{'seed_offset': 3}
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from baselines.base import Policy, incident_id_of


class _Core(gym.Env):
    """The running marathon, presented the way the RL view reads its core env."""

    observation_space = gym.spaces.Discrete(1)
    action_space = gym.spaces.Discrete(1)

    def __init__(self, marathon: Any):
        self.marathon = marathon
        self.config = marathon.config
        self.n_invocations = marathon.n_invocations

    def call(self, tool: str, args: Any = None):
        return self.marathon.call(tool, args)


class RandomPolicy(Policy):
    name = "random"

    def __init__(self, seed_offset: int = 0):
        self.seed_offset = int(seed_offset)
        self.options = {"seed_offset": self.seed_offset}

    def reset(self, app: Any, seed: int) -> None:
        super().reset(app, seed)
        self.rng = np.random.default_rng(np.random.SeedSequence([int(seed), self.seed_offset, 0x52414E44]))
        self.view = None
        self._session = None

    def act(self, session: Any) -> None:
        from wrappers.rl import RLView

        if self.view is None or self._session is not session:
            self.view = RLView(_Core(session))
            self._session = session
        obs = self.view._observe()
        valid = np.flatnonzero(obs["action_mask"] > 0)
        play_rl_action(session, self.view, int(valid[self.rng.integers(len(valid))]))
        return None


def play_rl_action(session: Any, view: Any, a: int) -> None:
    """Carry out RL-view action ``a`` on a marathon session: its reads, the incident it reports, and the
    intervention citing that incident (used by every policy that acts through the RL view)."""
    calls = view.calls_for(a)
    if calls is None:
        return
    reads, report, intervention = calls
    for c in reads:
        session.call(c["tool"], c["args"])
    inc = incident_id_of(session.call("report_incident", report))
    if intervention is not None and inc is not None:
        session.call(intervention["tool"], {**intervention["args"], "incident_id": inc})

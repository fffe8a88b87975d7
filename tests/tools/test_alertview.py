"""The incremental alert view reads exactly what the engine's full rebuilds give, at every invocation of a
faulted marathon with interventions (alerts appear, fire, resolve, re-fire), read once or several times."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

import sremarathon_env  # noqa: F401
from sremarathon_env.registration import IDS
from sremarathon_env.tools import ToolContext
from sremarathon_env.tools.alertview import AlertView
from sremarathon_env.tools.reads import alert_entries, alert_history, known_fingerprints
from tool_doubles import ALERTS, OB, History, Recorder
from wrappers.rl import RLView


def test_view_equals_engine_rebuilds_through_a_marathon():
    env = RLView(gym.make(IDS["online-boutique"], injection_s=1800, observation_s=240, reference_run=False))
    obs, _ = env.reset(seed=5)
    eng = env.unwrapped.marathon.alert_engine
    view = AlertView.of(eng)
    assert view is AlertView.of(eng)
    rng = np.random.default_rng(1)
    states, resolved_seen, k = set(), False, 0
    while True:
        if k % 3:  # sometimes several invocations pass between reads
            hist = eng.history()
            assert view.history() == hist
            assert view.history() is view.history()  # no change in between: the same list
            assert view.active() == eng.active()
            assert view.fingerprints() == {d["fingerprint"] for d in hist}
            states.update(d["state"] for d in hist)
            resolved_seen |= any(d["state"] == "resolved" and d["episodes"] > 0 for d in hist)
        a = int(rng.choice(np.flatnonzero(obs["action_mask"])))
        obs, _, _, trunc, _ = env.step(a)
        k += 1
        if trunc:
            break
    assert view.history() == eng.history() and view.active() == eng.active()
    assert {"pending", "firing", "resolved"} <= states, states


def test_reads_without_a_change_log_use_history():
    ctx = ToolContext(backend=Recorder(), app=OB, alerts=History(ALERTS), now=360.0)
    assert AlertView.of(ctx.alerts) is None
    assert alert_entries(ctx) == alert_history(ctx) == ALERTS
    assert known_fingerprints(ctx) == {a["fingerprint"] for a in ALERTS}
    empty = ToolContext(backend=Recorder(), app=OB, alerts=None, now=0.0)
    assert alert_entries(empty) == [] and known_fingerprints(empty) == set()

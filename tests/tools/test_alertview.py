"""The incremental alert view reads exactly what the engine's full rebuilds give, at every invocation of a
faulted marathon with interventions (alerts appear, fire, resolve, re-fire), read once or several times."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import sremarathon_env  # noqa: F401
from sremarathon_env.registration import IDS
from sremarathon_env.tools import ToolContext
from sremarathon_env.tools.alertview import AlertView
from sremarathon_env.tools.reads import alert_entries, alert_history, known_fingerprints
from tool_doubles import ALERTS, OB, History, Recorder
from wrappers.rl import RLView


def _objects_log(eng):
    """The engine's change log with live alert objects (``changed_alerts_since``), where the engine lacks it."""
    def changed_alerts_since(pos):
        log = eng._changelog
        return len(log), [(k, eng._history[k]) for k in dict.fromkeys(log[pos:])]
    return changed_alerts_since


@pytest.mark.parametrize("objects", [False, True], ids=["dicts", "objects"])
def test_view_equals_engine_rebuilds_through_a_marathon(objects):
    env = RLView(gym.make(IDS["online-boutique"], injection_s=1800, observation_s=240, reference_run=False))
    obs, _ = env.reset(seed=5)
    eng = env.unwrapped.marathon.alert_engine
    if objects and not hasattr(eng, "changed_alerts_since"):
        eng.changed_alerts_since = _objects_log(eng)
    AlertView._views[eng] = AlertView(eng, objects=objects)  # replaces the view the reset's observation made
    view = AlertView.of(eng)
    assert view is AlertView.of(eng) and view._objects == objects
    rng = np.random.default_rng(1)
    states, k = set(), 0
    while True:
        if k % 3:  # sometimes several invocations pass between reads
            if k % 2:  # the brief first (object mode: no dict built before it)
                brief = view.active_brief()
            hist = eng.history()
            act = eng.active()
            assert view.history() == hist
            assert view.history() is view.history()  # no change in between: the same list
            assert view.active() == act
            assert view.active_brief() == [(a["alertname"], a["fingerprint"], a["state"], a["active_at"], a["labels"])
                                           for a in act]
            if k % 2:
                assert brief == view.active_brief()
            assert view.fingerprints() == {d["fingerprint"] for d in hist}
            some = {d["fingerprint"] for d in hist[k % 2::2]} | {"no-such-fp"}
            assert view.labels_of(some) == [d["labels"] for d in hist if d["fingerprint"] in some]
            states.update(d["state"] for d in hist)
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


def test_views_do_not_keep_engines_alive():
    import gc
    import weakref

    from sremarathon_env.alerts import AlertEngine
    from sremarathon_env.telemetry.store import MetricStore

    eng = AlertEngine(None, MetricStore(step_s=15.0))
    view = AlertView.of(eng)
    assert view.history() == [] and view.active_brief() == []
    ref = weakref.ref(eng)
    del eng
    gc.collect()
    assert ref() is None, "the view registry keeps the engine (and its metric store) alive"


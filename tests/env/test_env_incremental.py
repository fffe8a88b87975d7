"""The env's incremental observation pieces equal a from-scratch computation at every step.

The alert texts are cached per alert revision (`AlertEngine.history_entries`); these tests rebuild
the alert JSON from a fresh `AlertEngine.history()` with the plain algorithm and compare texts.
"""

from __future__ import annotations

import gymnasium as gym
import pytest

import sremarathon_env  # noqa: F401
from sremarathon_env.observation import bounded_json_list, dumps
from sremarathon_env.registration import IDS


def reference_alerts_json(history: list[dict], cap: int) -> str:
    """Every pending/firing alert, then resolved ones newest first while they fit, oldest first."""
    texts = [dumps(d) for d in history]
    keep = [d.get("state") in ("pending", "firing") for d in history]
    size = 2 + sum(len(t) + 1 for t, k in zip(texts, keep) if k)
    omitted, full = 0, False
    for i in range(len(history) - 1, -1, -1):
        if keep[i]:
            continue
        if not full and size + len(texts[i]) + 1 <= cap - 40:
            keep[i] = True
            size += len(texts[i]) + 1
            continue
        full = True
        omitted += 1
    kept = [t for t, k in zip(texts, keep) if k]
    if omitted:
        kept.insert(0, dumps({"omitted_resolved": omitted}))
    return bounded_json_list(kept, cap)


def _entries_alerts_json(entries: list[tuple], cap: int) -> str:
    """`SREMarathonEnv._alerts_json` over its entries as first written (per-entry loops, no shortcut)."""
    keep = [state in ("pending", "firing") for state, _ in entries]
    size = 2 + sum(len(t) + 1 for (_, t), k in zip(entries, keep) if k)
    room = cap - 40
    omitted = 0
    for i in range(len(entries) - 1, -1, -1):
        if keep[i]:
            continue
        n = len(entries[i][1]) + 1
        if size + n <= room:
            keep[i] = True
            size += n
            continue
        omitted = sum(1 for k in keep[:i + 1] if not k)
        break
    kept = [t for (_, t), k in zip(entries, keep) if k]
    if omitted:
        kept.insert(0, dumps({"omitted_resolved": omitted}))
    return bounded_json_list(kept, cap)


def test_alerts_json_equals_its_first_form_on_random_entries():
    """The definition (`alerts_json_of`: the shortcut when everything fits, compressed passes) and `AlertRows` built
    from the entries give the first form's text, at and around the boundaries (a total exactly at the room, one over
    it), with states the engine never gives too."""
    import random

    from sremarathon_env.observation import AlertRows, alerts_json_of

    rng = random.Random(5)
    taken = {"all": 0, "cut": 0}
    for case in range(3000):
        n = rng.choice([0, 1, 2, 5, 20, 60])
        entries = [(rng.choice(["pending", "firing", "resolved", "resolved", None, "inactive"]),
                    dumps({"i": i, "x": "a" * rng.randint(0, 40)})) for i in range(n)]
        total = 2 + sum(len(t) + 1 for _, t in entries)
        cap = rng.choice([total + 40, total + 39, total + 41, rng.randint(0, total + 80), 10, 42, 65536])
        want = _entries_alerts_json(entries, cap)
        assert alerts_json_of(entries, cap) == want, (case, cap)
        assert AlertRows.of(entries).alerts_json(cap) == want, (case, cap)
        taken["all" if total <= cap - 40 else "cut"] += 1
    assert min(taken.values()) > 300, taken


def test_alert_rows_kept_up_by_puts_and_appends_equal_the_definition():
    """`AlertRows` changed in place (entries put with other states and texts, entries appended) gives the
    definition's text of its entries after every change, at caps that cut anywhere (the sums it keeps, the room of
    each resolved entry and the bisection of their running room, newest first)."""
    import random

    from sremarathon_env.observation import AlertRows, alerts_json_of

    rng = random.Random(7)
    taken = {"cut": 0, "all": 0, "none_kept": 0, "unbuilt_left": 0, "unbuilt_built": 0}
    for case in range(300):
        rows = AlertRows()
        truth = []   # the entries with every text built (the definition's input)
        for step in range(rng.randint(1, 60)):
            entry = (rng.choice(["pending", "firing", "resolved", "resolved", "resolved", None]),
                     dumps({"s": step, "x": "b" * rng.randint(0, 60)}))
            given = entry
            if rng.random() < 0.5 and entry[0] not in ("pending", "firing"):   # text unbuilt: made when read
                given = (entry[0], lambda text=entry[1]: text)
            elif rng.random() < 0.1:   # (an active entry given unbuilt is built at once)
                given = (entry[0], lambda text=entry[1]: text)
            if rows.entries and rng.random() < 0.6:
                i = rng.randrange(len(rows.entries))
                rows.put(i, given)
                truth[i] = entry
            else:
                rows.append((case, step), given)
                truth.append(entry)
            assert rows.texts == [t for _, t in rows.entries]
            assert [s for s, _ in rows.entries] == [s for s, _ in truth]
            total = 2 + sum(len(t) + 1 for _, t in truth)
            for cap in (rng.randint(0, total + 60), total + 40, total + 39, 60):
                want = alerts_json_of(truth, cap)
                unbuilt = set(rows.lazy)
                assert rows.alerts_json(cap) == want == _entries_alerts_json(truth, cap), (case, step, cap)
                assert all(rows.entries[i] == truth[i] for i in unbuilt if i not in rows.lazy)
                taken["unbuilt_left"] += bool(rows.lazy)
                taken["unbuilt_built"] += len(unbuilt) > len(rows.lazy)
                taken["all" if total <= cap - 40 else "cut"] += 1
                taken["none_kept"] += want.startswith('[{"omitted_resolved"') and not any(
                    s == "resolved" for s, t in truth if t in want)
            if rng.random() < 0.1:
                assert rows.filled().entries == truth and not rows.lazy
    assert min(taken.values()) > 100, taken


class _Engine:
    """A change log and a history order like `AlertEngine`'s (`changed_texts_since`, `history_keys`: alerts are
    only added, at the end or among the known ones)."""

    def __init__(self):
        self.log, self.keys, self.texts = [], [], {}

    def changed_texts_since(self, pos, lazy=False):
        """(``lazy``: a resolved alert's text as a callable giving its text when called, as `AlertEngine`'s.)"""
        out = [(k, *self.texts[k]) for k in dict.fromkeys(self.log[pos:])]
        if lazy:
            out = [(k, st, (lambda k=k: self.texts[k][1]) if st == "resolved" else text) for k, st, text in out]
        return len(self.log), out

    def history_keys(self):
        return self.keys


def test_alert_entries_kept_between_steps_equal_the_history_each_step():
    """The entries `_alert_entries` keeps in history order (the changed and added ones taken) equal the history's
    entries at every step, with alerts added at the end or among the known ones, changed several times or not."""
    import random
    from types import SimpleNamespace

    from sremarathon_env.env import SREMarathonEnv
    from sremarathon_env.observation import AlertRows

    rng = random.Random(11)
    taken = {"inserted": 0, "changed": 0}
    for case in range(40):
        eng = _Engine()
        env = SREMarathonEnv.__new__(SREMarathonEnv)
        env.marathon = SimpleNamespace(alert_engine=eng)
        env._alert_cache, env._alert_pos, env._alert_rows = {}, 0, AlertRows()
        for step in range(rng.randint(1, 50)):
            for _ in range(rng.choice([0, 0, 1, 2, 5])):
                if not eng.keys or rng.random() < 0.5:   # a new alert, mostly at the end
                    k = (rng.randint(0, 9), f"fp{case}.{step}.{rng.random()}")
                    i = len(eng.keys) if rng.random() < 0.8 else rng.randint(0, len(eng.keys))
                    taken["inserted"] += i < len(eng.keys)
                    eng.keys.insert(i, k)
                else:
                    k = rng.choice(eng.keys)
                    taken["changed"] += 1
                eng.texts[k] = (rng.choice(["pending", "firing", "resolved"]), dumps({"k": k[1], "n": rng.random()}))
                eng.log.append(k)
            assert env._alert_entries() == [eng.texts[k] for k in eng.keys], (case, step)
    assert min(taken.values()) > 50, taken


@pytest.mark.parametrize("cap", [4000, 20000, 65536, 10**7])
def test_alert_json_matches_fresh_history_each_step(cap):
    env = gym.make(IDS["online-boutique"], injection_s=1800, observation_s=240, max_alert_chars=cap,
                   reference_run=False).unwrapped
    obs, _ = env.reset(seed=3)
    truncated_seen = 0
    while True:
        eng = env.marathon.alert_engine
        hist = eng.history()
        assert obs["alerts_json"] == reference_alerts_json(hist, cap)
        truncated_seen += '"omitted_' in obs["alerts_json"]
        # the shared dicts equal fresh ones, in the same order
        assert [d for _, _, d in eng.history_entries()] == [a.to_dict() for a in
                                                             sorted(eng._history.values(),
                                                                    key=lambda a: (a.first_pending_ms, a.rule, a.fingerprint))]
        obs, _, _, trunc, _ = env.step("[]")
        if trunc:
            break
    assert env.marathon.alert_engine.history(), "the episode raised no alert: the test checks nothing"
    if cap < 65536:
        assert truncated_seen, "the small cap never truncated: the test misses the omitted paths"


def test_history_dicts_are_the_callers_own():
    env = gym.make(IDS["online-boutique"], injection_s=1200, observation_s=240, reference_run=False).unwrapped
    env.reset(seed=3)
    while not env.step("[]")[3]:
        pass
    eng = env.marathon.alert_engine
    before = eng.history()
    assert before
    for d in eng.history() + eng.active():
        d["state"] = "mutated"
        d["labels"]["x"] = "y"
        d["annotations"]["x"] = "y"
    assert eng.history() == before
    assert all(d["state"] != "mutated" for _, _, d in eng.history_entries())


def test_alert_json_text_is_dumps_of_its_dict_for_edge_values():
    from sremarathon_env.alerts.state import _Alert

    a = _Alert(0, {"alertname": "X\u00e9", "service": 'a"b\\c', "z": "\u2603"}, "00ff", "pending", 15000, 0.1, {}, 15000)
    a.annotations = {"summary": "caf\u00e9 \"q\"", "a": "1"}
    for state, value, ff, fs, res, ep in [("pending", float("nan"), None, None, None, 1),
                                          ("firing", float("inf"), 30000, 30000, None, 2),
                                          ("inactive", -float("inf"), 30000, 45000, 60000, 3),
                                          ("firing", -0.0, 30000, 75000, 60000, 10**20),
                                          ("firing", 1e-300, 30000, 75000, None, 4)]:
        a.state, a.value, a.first_firing_ms, a.firing_ms, a.resolved_ms, a.episodes = state, value, ff, fs, res, ep
        a.rev += 1
        assert a.json_text() == dumps(a.to_dict())


def test_skipping_core_observations_changes_nothing():
    """`reset(observe=False)` and `end_invocation(observe=False)` (the RL view's path) return no observation, and
    an observation built after several skipped ones equals that of an env that observed every step (the first
    one built after the skipped reset's); rewards and infos match."""
    kw = dict(injection_s=1200, observation_s=240, reference_run=False)
    a = gym.make(IDS["online-boutique"], **kw).unwrapped
    b = gym.make(IDS["online-boutique"], **kw).unwrapped
    oa, ia = a.reset(options={"scenario_seed": 4})
    ob, ib = b.reset(options={"scenario_seed": 4}, observe=False)   # (the RL view's reset of a bare core)
    assert ob is None and ia == ib
    k, trunc = 0, False
    while not trunc:
        oa, ra, _, trunc, ia = a.step("[]")
        ob, rb, _, tb, ib = b.end_invocation(observe=False)
        assert ob is None and (ra, trunc, ia["t"]) == (rb, tb, ib["t"])
        k += 1
        if k % 4 == 0 or trunc:
            fresh = b._obs()
            assert sorted(fresh) == sorted(oa)
            for key in oa:
                assert str(fresh[key]) == str(oa[key]), key
    assert ia["bundle_digest"] == ib["bundle_digest"]


@pytest.mark.parametrize("app", ["online-boutique", "train-ticket", "astronomy-shop"])
def test_alert_texts_built_when_read_give_every_observation_of_the_eager_texts(app):
    """The env builds a resolved alert's text only when its observation shows it (or needs its room): at every
    step of whole no-op marathons of each app, at the default cap and at one that cuts early, the observation's
    alert list equals the definition over every alert's text built at once (``json_text`` in history order), and
    some texts were left unbuilt (the path is taken)."""
    from sremarathon_env.observation import alerts_json_of

    for cap in (None, 6000):
        kw = dict(injection_s=1800, observation_s=240, reference_run=False)
        if cap is not None:
            kw["max_alert_chars"] = cap
        env = gym.make(IDS[app], **kw).unwrapped
        obs, _ = env.reset(seed=1)
        unbuilt = steps = 0
        while True:
            eng = env.marathon.alert_engine
            h = eng._history
            eager = [(h[k].state if h[k].state != "inactive" else "resolved", h[k].json_text())
                     for k in eng.history_keys()]
            assert obs["alerts_json"] == alerts_json_of(eager, env.caps["alerts"]), (app, cap, steps)
            unbuilt += bool(env._alert_rows.lazy)
            steps += 1
            obs, _, _, trunc, _ = env.step("[]")
            if trunc:
                break
        eng = env.marathon.alert_engine
        assert env._alert_entries() == [(eng._history[k].state if eng._history[k].state != "inactive" else "resolved",
                                         eng._history[k].json_text()) for k in eng.history_keys()]
        if cap is not None:
            assert unbuilt, (app, "no text was left unbuilt: the test checks nothing")

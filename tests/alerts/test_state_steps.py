"""`AlertEngine._step_rule` against its definition: Prometheus's alert states written out tick by tick and label set
by label set (`_Reference`, independent of the engine's batching and fast paths), on random result streams."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from sremarathon_env.alerts import AlertEngine, load_rule_pack
from sremarathon_env.alerts.state import AlertTransition, fingerprint
from sremarathon_env.alerts.values import Vec
from sremarathon_env.telemetry.store import MetricStore


class _Reference:
    """Prometheus's alerting semantics for one engine's rules, written from the definition, tick by tick and label set
    by label set (no batching, no fast paths): a label set present at a tick is pending from its first present tick
    (with that tick's value), firing once it has been active for the rule's ``for`` duration, and when absent at a tick
    it goes inactive (``resolved`` if it was firing). Transitions of one tick come in fingerprint order. A label set
    given by several rows (which PromQL itself never returns) reads the last row present at some tick of the call."""

    def __init__(self):
        self.alerts: dict[tuple, dict] = {}   # (rule index, fingerprint) -> the alert's observable state

    def step(self, ri: int, rule, vec: Vec, times: np.ndarray) -> list[tuple]:
        rows: dict[str, tuple[int, dict]] = {}
        for r, key_lb in enumerate(vec.labels):
            if vec.p[r].any():
                lb = {k: v for k, v in key_lb if k != "__name__"}
                lb.update(dict(rule.labels))
                lb["alertname"] = rule.name
                rows[fingerprint(lb)] = (r, lb)
        live = {fp for (i, fp), a in self.alerts.items() if i == ri and a["state"] != "inactive"}
        out = []
        for k, t in enumerate(times.tolist()):
            for fp in sorted(live | set(rows)):
                a = self.alerts.get((ri, fp))
                r = rows.get(fp)
                if r is not None and vec.p[r[0], k]:
                    v = float(vec.v[r[0], k])
                    if a is None or a["state"] == "inactive":
                        if a is None:
                            a = self.alerts[(ri, fp)] = {"labels": r[1], "episodes": 0, "first_firing_ms": None,
                                                         "resolved_ms": None}
                        a.update(state="pending", active_at_ms=t, episodes=a["episodes"] + 1)
                        out.append((t / 1000, rule.name, sorted(a["labels"].items()), fp, "pending", _bits(v)))
                    a["value"] = v
                    if a["state"] == "pending" and t - a["active_at_ms"] >= rule.for_ms:
                        a["state"] = "firing"
                        if a["first_firing_ms"] is None:
                            a["first_firing_ms"] = t
                        out.append((t / 1000, rule.name, sorted(a["labels"].items()), fp, "firing", _bits(v)))
                elif a is not None and a["state"] != "inactive":
                    state = "resolved" if a["state"] == "firing" else "inactive"
                    if state == "resolved":
                        a["resolved_ms"] = t
                    a["state"] = "inactive"
                    out.append((t / 1000, rule.name, sorted(a["labels"].items()), fp, state, _bits(a["value"])))
        return out


def _bits(x: float) -> tuple:
    return (math.copysign(1.0, x), x) if x == x else ("nan",)


def _transition(tr: AlertTransition) -> tuple:
    return (tr.t, tr.alertname, sorted(tr.labels.items()), tr.fingerprint, tr.state, _bits(tr.value))


def _observable(eng: AlertEngine) -> dict:
    return {k: (a.state, a.active_at_ms, a.first_firing_ms, a.resolved_ms, a.episodes, _bits(a.value), a.labels)
            for k, a in eng._history.items()}


def _reference_observable(ref: _Reference) -> dict:
    return {k: (a["state"], a["active_at_ms"], a["first_firing_ms"], a["resolved_ms"], a["episodes"], _bits(a["value"]),
                a["labels"]) for k, a in ref.alerts.items()}


@pytest.mark.parametrize("lists,tmax", [("fresh", 9), ("kept", 9), ("small_cache", 9), ("fresh", 41), ("kept", 41)])
@pytest.mark.parametrize("steady", [True, False])
@pytest.mark.parametrize("seed", range(6))
def test_step_rule_equals_the_tick_by_tick_definition(seed, steady, lists, tmax, monkeypatch):
    """``lists``: each call's label list a new list (``fresh``), or one list per rule kept, changed in place now and
    then (``kept``: the per-row entries of an equal list are reused, those of a changed one are not), or fresh lists
    with a row cache of the process that starts again every few label sets (``small_cache``). Row entries of the
    process cache come from earlier tests' engines too (the same rules and label sets). ``tmax``: calls of up to 8
    ticks (as the env's steps give), or up to 40 (several pending, firing and resolved runs of one label set in a
    call: the values taken only where they matter)."""
    import sremarathon_env.alerts.state as ST

    if lists == "small_cache":
        monkeypatch.setattr(ST, "ROW_INFO_MAX", 3)
    rng = np.random.default_rng(seed)
    kept: dict[int, list] = {}
    pack = load_rule_pack()
    store = MetricStore(step_s=15.0)
    # rules with and without a ``for`` duration (pending then firing; firing at once)
    picks = [next(i for i, r in enumerate(pack.rules) if r.for_ms >= 120_000),
             next(i for i, r in enumerate(pack.rules) if r.for_ms == 0) if any(r.for_ms == 0 for r in pack.rules)
             else next(i for i, r in enumerate(pack.rules) if 0 < r.for_ms < 120_000)]
    # and rules whose annotations show the value and whose annotations do not
    picks += [next(i for i, r in enumerate(pack.rules) if any("$value" in t for _, t in r.annotations)),
              next(i for i, r in enumerate(pack.rules) if not any("value" in t.lower() for _, t in r.annotations))]
    # and two rules with the same labels (their alerts of one label set differ only by name)
    twins = next((i, j) for i, r in enumerate(pack.rules) for j, q in enumerate(pack.rules)
                 if i < j and r.labels == q.labels)
    picks += list(twins)
    picks = list(dict.fromkeys(picks))   # each rule once per call, as evaluate_until steps them
    fast, ref = AlertEngine(pack, store), _Reference()
    fast.steady_fast_path = steady   # with and without the fast path of steady alerts
    pool = [(("__name__", "m"), ("pod", f"p{i}"), ("service", f"s{i % 3}")) for i in range(7)]
    tick = 0
    seen = set()
    values = [0.0, -0.0, 1.5, 2.0, float("nan"), 7.25]
    for step in range(60):
        T = int(rng.integers(1, tmax))
        times = fast.interval_ms * np.arange(tick, tick + T, dtype=np.int64)
        tick += T
        out, expected = [], []
        revs, pos = {k: a.rev for k, a in fast._history.items()}, len(fast._changelog)
        for ri in picks:
            rule = pack.rules[ri]
            n = int(rng.integers(0, 6))
            rows = [pool[int(i)] for i in rng.integers(0, len(pool), size=n)]   # a label set may repeat
            mode = rng.random()
            if mode < 0.4:   # steady: present at every tick, the values move now and then
                p = np.ones((n, T), bool)
            elif mode < 0.5:
                p = np.zeros((n, T), bool)
            else:            # flapping
                p = rng.random((n, T)) < 0.6
            v = np.array(values)[rng.integers(0, len(values), size=(n, T))] if rng.random() < 0.5 \
                else np.full((n, T), float(rng.integers(0, 3)))
            if lists == "kept":   # the rule's one list object: the same rows, one row replaced, or all rows replaced
                lst = kept.setdefault(ri, [])
                u = rng.random()
                if len(lst) != n or u < 0.2:
                    lst[:] = rows
                elif u < 0.4 and n:
                    i = int(rng.integers(0, n))
                    lst[i] = rows[i]
                rows = lst
            vec = Vec(rows, v, p)
            if fast._n_active[ri] or (vec.labels and vec.p.any()):   # as evaluate_until does
                fast._step_rule(ri, rule, vec, times, out)
            expected += [(t, ri, tr) for t, ri, tr in ((tr[0], ri, tr) for tr in ref.step(ri, rule, vec, times))]
        out.sort(key=lambda x: (x[0], x[1], x[2]))
        expected.sort(key=lambda x: (x[0], x[1]))   # stable: a tick's transitions of one rule stay in order
        assert [_transition(tr) for *_, tr in out] == [tr for *_, tr in expected], step
        seen |= {tr.state for *_, tr in out}
        assert _observable(fast) == _reference_observable(ref), step
        # the change log names every alert that changed in the call (its revision moved), each once
        logged = fast._changelog[pos:]
        assert sorted(logged) == sorted(k for k, a in fast._history.items() if a.rev != revs.get(k)), step
        # annotations as rendered afresh from the alert's labels and latest value; its JSON text that of its dict
        for a in fast._history.values():
            rule = pack.rules[a.rule]
            assert a.annotations_now() == rule.render_annotations(a.sample_labels, a.value), step
            assert a.json_text() == json.dumps(a.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    assert fast._history and any(a.episodes > 1 for a in fast._history.values())
    assert seen >= {"pending", "firing", "resolved", "inactive"}   # every transition happened


def test_step_rule_takes_a_present_ticks_value_when_it_matters():
    """Within one call the value of a present tick is taken only before a transition and at the end (`_step_rule`'s
    ``due``): the firing transition carries the firing tick's value, the resolved one the last present tick's, the
    alert ends with the last present tick's value, and a value that went back to the one held is no change (no
    revision move, no change-log entry), as setting it at every tick gives."""
    pack = load_rule_pack()
    ri = next(i for i, r in enumerate(pack.rules) if r.for_ms >= 60_000)
    rule = pack.rules[ri]
    eng = AlertEngine(pack, MetricStore(step_s=15.0))
    iv = eng.interval_ms
    k_fire = -(-rule.for_ms // iv)   # the first tick at which an alert pending from tick 0 fires
    T = k_fire + 4
    lbs = [(("pod", "p0"),)]
    v = np.arange(1.0, T + 1.0)[None, :]
    p = np.ones((1, T), bool)
    p[0, k_fire + 2] = False   # resolves there, pending again at the next tick
    out: list = []
    eng._step_rule(ri, rule, Vec(lbs, v, p), iv * np.arange(T, dtype=np.int64), out)
    got = [(tr.state, tr.t, tr.value) for *_, tr in sorted(out, key=lambda x: x[:3])]
    assert got == [("pending", 0.0, 1.0), ("firing", k_fire * iv / 1000, k_fire + 1.0),
                   ("resolved", (k_fire + 2) * iv / 1000, k_fire + 2.0), ("pending", (k_fire + 3) * iv / 1000, T * 1.0)]
    (key, a), = eng._history.items()
    assert a.state == "pending" and a.value == T * 1.0 and a.episodes == 2
    # values moving away and back within a call (tick by tick: no steady path): a change only where the last
    # value differs from the one held
    ri = next(i for i, r in enumerate(pack.rules) if r.for_ms >= 120_000)
    rule = pack.rules[ri]
    eng = AlertEngine(pack, MetricStore(step_s=15.0))
    eng.steady_fast_path = False
    tick = 0

    def call(vals):
        nonlocal tick
        times = iv * np.arange(tick, tick + len(vals), dtype=np.int64)
        tick += len(vals)
        eng._step_rule(ri, rule, Vec(lbs, np.array([vals]), np.ones((1, len(vals)), bool)), times, [])

    call([3.0])
    call([3.0])   # (the annotation source now the alert's own sample labels: an unchanged value is no change)
    (key, a), = eng._history.items()
    assert tick * iv < rule.for_ms
    for vals, moved in (([5.0, 6.0, 3.0], False), ([5.0, 7.0], True), ([8.0, 7.0], False)):
        rev, pos = a.rev, len(eng._changelog)
        call(vals)
        assert a.state == "pending" and a.value == vals[-1]
        assert (a.rev != rev) is moved and (len(eng._changelog) > pos) is moved, vals
    assert tick * iv < rule.for_ms


@pytest.mark.parametrize("seed", range(8))
def test_presence_kept_per_rule_gives_what_a_fresh_look_gives(seed):
    """`_step_rule` takes again what it found from a rule's last presence matrix (present rows, their lists, row
    entries by fingerprint, the sorted fingerprints) for an equal presence over the same label list: an engine that
    forgets it before every call (the definition: everything found afresh) gives the same transitions, alerts, values
    and change log, on streams whose presence patterns repeat (a small pool), label lists kept or replaced, with
    active alerts that are absent from the present rows (resolving) and ones still present."""
    rng = np.random.default_rng(100 + seed)
    pack = load_rule_pack()
    store = MetricStore(step_s=15.0)
    picks = [next(i for i, r in enumerate(pack.rules) if r.for_ms >= 120_000),
             next(i for i, r in enumerate(pack.rules) if r.for_ms < 120_000)]
    kept, fresh = AlertEngine(pack, store), AlertEngine(pack, store)
    pool_lb = [(("__name__", "m"), ("pod", f"p{i}"), ("service", f"s{i % 3}")) for i in range(5)]
    lists = {ri: [pool_lb[i] for i in range(4)] for ri in picks}
    tick, hits = 0, 0
    for step in range(80):
        T = int(rng.choice([8, 8, 8, 3]))
        times = kept.interval_ms * np.arange(tick, tick + T, dtype=np.int64)
        tick += T
        out_k, out_f = [], []
        for ri in picks:
            rule = pack.rules[ri]
            if rng.random() < 0.1:   # a rebuild: another label list (sometimes an equal one)
                lists[ri] = list(lists[ri]) if rng.random() < 0.5 else \
                    [pool_lb[int(i)] for i in rng.permutation(5)[: int(rng.integers(1, 6))]]
            labels = lists[ri]
            n = len(labels)
            pats = [np.ones((n, T), bool), np.zeros((n, T), bool), np.eye(n, T, dtype=bool),
                    np.arange(n * T).reshape(n, T) % 3 == 0]
            p = pats[int(rng.integers(0, len(pats)))].copy()
            v = rng.choice([0.0, -0.0, 1.5, np.nan, 7.0], size=(n, T))
            vec = Vec(labels, v, p)
            fresh._present[ri] = None   # (the definition: nothing kept)
            before = kept._present[ri]
            for eng, out in ((kept, out_k), (fresh, out_f)):
                if eng._n_active[ri] or (vec.labels and vec.p.any()):
                    eng._step_rule(ri, rule, vec, times, out)
            hits += before is not None and kept._present[ri] is before
        assert [_transition(tr) for *_, tr in out_k] == [_transition(tr) for *_, tr in out_f], step
        assert _observable(kept) == _observable(fresh), step
        assert kept._changelog == fresh._changelog, step
        assert {k: a.rev for k, a in kept._history.items()} == {k: a.rev for k, a in fresh._history.items()}
    assert hits > 20
    # one key tuple per alert: its history key, which its change-log entries and its active entry are (the log
    # grows by a key per change; it keeps no tuple of its own)
    for eng in (kept, fresh):
        own = {k: k for k in eng._history}
        assert len(eng._changelog) > len(own)
        assert all(k is own[k] for k in eng._changelog) and all(k is own[k] for k in eng._active)
        assert all(a._key is k for k, a in eng._history.items())

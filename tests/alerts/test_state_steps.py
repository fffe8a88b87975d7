"""`AlertEngine._step_rule` against its definition: the straightforward tick-by-tick state machine (the engine's
code before its per-step fast paths, kept here verbatim as the reference), on random result streams."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sremarathon_env.alerts import AlertEngine, load_rule_pack
from sremarathon_env.alerts.state import AlertTransition, _Alert, fingerprint
from sremarathon_env.alerts.values import Vec
from sremarathon_env.telemetry.store import MetricStore


class _Reference(AlertEngine):
    def _step_rule(self, ri, rule, vec, times, out):
        present_rows = vec.p.any(axis=1).nonzero()[0] if len(vec.labels) else np.zeros(0, np.intp)
        rows_by_fp: dict[str, int] = {}
        info: dict[str, tuple[dict, dict]] = {}
        cache = self._row_info[ri]
        labels = vec.labels
        for j, r in enumerate(present_rows.tolist()):
            key_lb = labels[r]
            hit = cache.get(key_lb)
            if hit is None:
                sample = dict(key_lb)
                lb = {k: v for k, v in sample.items() if k != "__name__"}
                lb.update(dict(rule.labels))
                lb["alertname"] = rule.name
                hit = cache[key_lb] = (fingerprint(lb), lb, sample)
            fp, lb, sample = hit
            rows_by_fp[fp] = j
            info[fp] = (lb, sample)
        mine = self._active_fps[ri]
        fps = sorted(mine.union(rows_by_fp)) if mine else sorted(rows_by_fp)
        if not fps:
            return
        pblock = vec.p[present_rows]
        pres_l, vals_l, all_l = pblock.tolist(), vec.v[present_rows].tolist(), pblock.all(axis=1).tolist()
        times_l = times.tolist()
        last_ms = times_l[-1]
        absent = [False] * len(times_l)
        seq = 0
        for fp in fps:
            j = rows_by_fp.get(fp)
            pres = pres_l[j] if j is not None else absent
            vals = vals_l[j] if j is not None else None
            key = (ri, fp)
            a = self._active.get(key)
            if (self.steady_fast_path and a is not None and j is not None and a.state != "inactive" and all_l[j]
                    and (a.state == "firing" or last_ms - a.active_at_ms < rule.for_ms)):
                if a.set_value(rule, vals[-1]):
                    self._changelog.append(key)
                continue
            for k, t_ms in enumerate(times_l):
                a = self._active.get(key)
                if pres[k]:
                    v = vals[k]
                    if a is not None and a.state != "inactive":
                        if a.set_value(rule, v):
                            self._changelog.append(key)
                    else:
                        lb, sample = info[fp]
                        h = self._history.get(key)
                        if h is None:
                            a = _Alert(ri, dict(lb), fp, "pending", t_ms, v, {}, t_ms, sample_labels=dict(sample),
                                       ann_src=(rule, dict(sample), v))
                            self._history[key] = a
                            self._order.append(key)
                            self._changelog.append(key)
                        else:
                            a = h
                            a.state, a.active_at_ms, a.value = "pending", t_ms, v
                            a.ann_src = (rule, dict(sample), v)
                            a.episodes += 1
                            a.rev += 1
                            self._changelog.append(key)
                        self._active[key] = a
                        self._active_fps[ri].add(fp)
                        self._n_active[ri] += 1
                        out.append((t_ms, ri, seq, AlertTransition(t_ms / 1000, rule.name, dict(lb), fp, "pending", v)))
                        seq += 1
                    if a.state == "pending" and t_ms - a.active_at_ms >= rule.for_ms:
                        a.state = "firing"
                        a.rev += 1
                        self._changelog.append(key)
                        a.firing_ms = t_ms
                        if a.first_firing_ms is None:
                            a.first_firing_ms = t_ms
                        out.append((t_ms, ri, seq, AlertTransition(t_ms / 1000, rule.name, dict(a.labels), fp, "firing",
                                                                   a.value)))
                        seq += 1
                elif a is not None and a.state != "inactive":
                    was = a.state
                    a.state = "inactive"
                    a.rev += 1
                    self._changelog.append(key)
                    if was == "firing":
                        a.resolved_ms = t_ms
                    out.append((t_ms, ri, seq, AlertTransition(t_ms / 1000, rule.name, dict(a.labels), fp,
                                                               "resolved" if was == "firing" else "inactive", a.value)))
                    seq += 1
                    del self._active[key]
                    self._active_fps[ri].discard(fp)
                    self._n_active[ri] -= 1


def _bits(x: float) -> tuple:
    return (math.copysign(1.0, x), x) if x == x else ("nan",)


def _transition(tr: AlertTransition) -> tuple:
    return (tr.t, tr.alertname, sorted(tr.labels.items()), tr.fingerprint, tr.state, _bits(tr.value))


def _state(eng: AlertEngine) -> tuple:
    hist = {k: (a.state, a.active_at_ms, a.first_pending_ms, a.first_firing_ms, a.firing_ms, a.resolved_ms,
                a.episodes, a.rev, _bits(a.value), a.labels, a.sample_labels, a.json_text())   # (dicts: NaN != NaN)
            for k, a in eng._history.items()}
    return (hist, list(eng._order), list(eng._changelog), sorted(eng._active), list(eng._n_active),
            [sorted(s) for s in eng._active_fps])


@pytest.mark.parametrize("steady", [True, False])
@pytest.mark.parametrize("seed", range(6))
def test_step_rule_equals_the_tick_by_tick_definition(seed, steady):
    rng = np.random.default_rng(seed)
    pack = load_rule_pack()
    store = MetricStore(step_s=15.0)
    # rules with and without a ``for`` duration (pending then firing; firing at once)
    picks = [next(i for i, r in enumerate(pack.rules) if r.for_ms >= 120_000),
             next(i for i, r in enumerate(pack.rules) if r.for_ms == 0) if any(r.for_ms == 0 for r in pack.rules)
             else next(i for i, r in enumerate(pack.rules) if 0 < r.for_ms < 120_000)]
    fast, ref = AlertEngine(pack, store), _Reference(pack, store)
    fast.steady_fast_path = ref.steady_fast_path = steady   # the same fast path of steady alerts on both sides
    pool = [(("__name__", "m"), ("pod", f"p{i}"), ("service", f"s{i % 3}")) for i in range(7)]
    tick = 0
    seen = set()
    values = [0.0, -0.0, 1.5, 2.0, float("nan"), 7.25]
    for step in range(60):
        T = int(rng.integers(1, 9))
        times = fast.interval_ms * np.arange(tick, tick + T, dtype=np.int64)
        tick += T
        outs = ([], [])
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
            vec = Vec(rows, v, p)
            for eng, out in zip((fast, ref), outs):
                if not eng._n_active[ri] and (not vec.labels or not vec.p.any()):
                    continue   # as evaluate_until: nothing present and nothing active
                eng._step_rule(ri, rule, vec, times, out)
        for out in outs:
            out.sort(key=lambda x: (x[0], x[1], x[2]))
        assert [_transition(tr) for *_, tr in outs[0]] == [_transition(tr) for *_, tr in outs[1]], step
        seen |= {tr.state for *_, tr in outs[0]}
        assert _state(fast) == _state(ref), step
    assert fast._history and any(a.episodes > 1 for a in fast._history.values())
    assert seen >= {"pending", "firing", "resolved", "inactive"}   # every transition happened

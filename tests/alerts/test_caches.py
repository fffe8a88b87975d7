"""The alert engine's module-level caches stay bounded across episodes and never change a result.

Every cache of ``sremarathon_env.alerts`` that outlives an engine (identity memo, grown-list records,
per-label-set results, aggregation layouts, formatted values, row items of families, first selections and
family contents shared across stores) is bounded; with tiny bounds, a run of
several short marathons keeps each cache within its bound after every episode and gives exactly the
alert history of a run with the default bounds.
"""

from __future__ import annotations

import gymnasium as gym
import pytest

import sremarathon_env  # noqa: F401 - registers the environments
from sremarathon_env.alerts import engine as EN
from sremarathon_env.alerts import plan as P
from sremarathon_env.alerts import rulepack as RP
from sremarathon_env.alerts import values as VA


def _episodes(seeds, check=None):
    env = gym.make("SREMarathon/OnlineBoutique-v0", reference_run=False, injection_s=900, observation_s=240).unwrapped
    out = []
    for s in seeds:
        env.reset(seed=s)
        done = False
        while not done:
            _, _, term, trunc, _ = env.step("[]")
            done = term or trunc
        out.append(env.marathon.alert_engine.history())
        if check is not None:
            check()
    return out


@pytest.mark.slow
def test_caches_stay_bounded_across_episodes_without_changing_results(monkeypatch):
    seeds = [0, 1, 2, 3]
    want = _episodes(seeds)
    for mod, name, value in ((VA, "MEMO_GENERATION", 150), (VA, "GROWN_MAX", 40), (VA, "PER_LABEL_SET_MAX", 120),
                             (P, "AGG_LAYOUT_MAX", 15), (RP, "GO_FLOAT_MAX", 10), (EN, "ROW_ITEM_GENERATION", 300),
                             (P, "SHARED_SEL_MAX", 8), (P, "SHARED_SEL_ITEMS_MAX", 150),
                             (P, "FAM_CONTENT_MAX", 6)):
        monkeypatch.setattr(mod, name, value)
    # start from empty caches (a cache is trimmed when it takes a new entry)
    for cache in (VA._MEMO, VA._MEMO_OLD, VA._MEMO_HELD, VA._MEMO_HELD_OLD, VA._GROWN, VA._PER_LB, P._AGG_LAYOUT, RP._GO_FLOAT, EN._ROW_ITEMS,
                  EN._ROW_ITEMS_OLD, P._SHARED_SEL, P._FAM_CONTENT):
        cache.clear()
    EN._ROW_ITEMS_COUNT[0] = P._SHARED_ITEMS[0] = 0
    sizes = []

    def check():
        s = (len(VA._MEMO) + len(VA._MEMO_OLD), len(VA._GROWN), max(len(d) for d in VA._PER_LB.values()),
             len(P._AGG_LAYOUT), len(RP._GO_FLOAT), sum(map(len, EN._ROW_ITEMS.values())),
             sum(map(len, EN._ROW_ITEMS_OLD.values())), len(P._SHARED_SEL), len(P._FAM_CONTENT),
             sum(len(v[4]) for v in P._SHARED_SEL.values()))
        sizes.append(s)
        # a per-label-set cache is checked when a label function starts, which may then add one list's sets
        assert s[0] <= 2 * 150 and s[1] <= 41 and s[2] <= 120 + 600 and s[3] <= 16 and s[4] <= 11, s
        assert s[5] <= 300 and s[6] <= 300, s   # row items: one generation each
        assert s[7] <= 8 and s[8] <= 6 and s[9] <= 150, s   # shared first selections (and their series), contents

    got = _episodes(seeds, check)
    assert got == want
    assert len(sizes) == len(seeds) and sizes[-1][0] > 150   # the bounds were reached (the memo turned over)
    assert sizes[-1][6] > 0   # the row items turned over

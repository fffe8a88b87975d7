"""``engine.match_rows`` held to its definition (every matcher on every row, a missing label reading "") on random
families and matcher lists; ``PromQLEngine._row_info``'s inline count of new row items held to ``_row_items_add``."""

from __future__ import annotations

import re

import numpy as np
import pytest

from sremarathon_env.alerts import syntax as S
from sremarathon_env.alerts.engine import match_rows


def reference(info, pos, matchers, lo, hi, name):
    rows, lbs, keys = [], [], []
    for r in range(lo, hi):
        lv, lb, k = info[r]
        va = {"__name__": name, **{nm: lv[i] for nm, i in pos.items()}}
        if all(m.matches(va.get(m.name, "")) for m in matchers):
            rows.append(r)
            lbs.append(lb)
            keys.append(k)
    return rows, lbs, keys


def _matcher(rng, names, values):
    name = str(rng.choice(names + ["absent"]))
    op = str(rng.choice(["=", "=", "=", "!=", "=~", "!~"]))
    value = str(rng.choice(values + [""]))
    if op in ("=~", "!~"):
        value = value + "|" + str(rng.choice(values)) if rng.random() < 0.5 else value
        return S.Matcher(name, op, value, re.compile(value))
    return S.Matcher(name, op, value, None)


@pytest.mark.parametrize("seed", range(60))
def test_match_rows_equals_every_matcher_on_every_row(seed):
    rng = np.random.default_rng(seed)
    names = ["__name__"] + [f"l{k}" for k in range(int(rng.integers(1, 4)))]
    values = ["a", "b", "c", "x1"]
    pos = {nm: i for i, nm in enumerate(names[1:])}   # (the label values' positions: the name is not among them)
    n = int(rng.integers(0, 40))
    info = [(tuple(str(rng.choice(values + [""])) for _ in names[1:]), ("lb", r), ("key", r)) for r in range(n)]
    for _ in range(8):
        matchers = [_matcher(rng, names, values) for _ in range(int(rng.integers(0, 4)))]
        lo = int(rng.integers(0, n + 1))
        hi = int(rng.integers(lo, n + 1))
        rows, lbs, keys = [-1], ["x"], ["y"]   # (appended to, never replaced)
        name = str(rng.choice(["m", "a"]))   # (the family's name, for __name__ matchers)
        match_rows(info, pos, matchers, lo, hi, rows, lbs, keys, name)
        want = reference(info, pos, matchers, lo, hi, name)
        assert (rows[1:], lbs[1:], keys[1:]) == want and rows[0] == -1 and lbs[0] == "x" and keys[0] == "y"
        assert all(type(r) is int for r in rows)


def _growth(rng):
    """A family ("m": pod, svc) of a fresh store and its engine, growing by random rows before each of six calls, in
    two stores in turn (the second one's rows recur in the first one's generations): yields (engine, family, its row
    count before this call's rows)."""
    from sremarathon_env.alerts import PromQLEngine
    from sremarathon_env.telemetry.store import MetricStore

    for _ in range(2):
        store = MetricStore(step_s=15.0)
        fam = store.family("m", ("pod", "svc"))
        eng = PromQLEngine(store)
        for _ in range(6):
            done = len(fam)
            for _ in range(int(rng.integers(0, 6))):
                fam.row((f"p{int(rng.integers(30))}", str(rng.choice(["a", "", "b"]))))
            yield eng, fam, done


class _Generations:
    """The definition of the row-item cache's two generations for one family shape (``_row_items_add`` per new
    item): an item already in the current generation is not made again; a new one opens a fresh generation (the
    current one becoming the old) once ``gen`` items were added to the current one."""

    def __init__(self, gen: int):
        self.gen, self.cur, self.old, self.count = gen, {}, {}, 0

    @classmethod
    def fresh(cls, monkeypatch, gen: int) -> "_Generations":
        """The engine's row-item cache emptied for the test, with generations of ``gen`` items, and its definition."""
        from sremarathon_env.alerts import engine as EN
        monkeypatch.setattr(EN, "ROW_ITEM_GENERATION", gen)
        monkeypatch.setattr(EN, "_ROW_ITEMS", {})
        monkeypatch.setattr(EN, "_ROW_ITEMS_OLD", {})
        monkeypatch.setattr(EN, "_ROW_ITEMS_COUNT", [0])
        return cls(gen)

    def add(self, label_values: tuple, item) -> None:
        if label_values in self.cur:
            return
        if self.count >= self.gen:
            self.old, self.cur, self.count = self.cur, {}, 1
        else:
            self.count += 1
        self.cur[label_values] = item

    def check(self, EN, shape: tuple) -> None:
        """The engine's cache equals the definition's: its count and both generations of ``shape``."""
        assert EN._ROW_ITEMS_COUNT[0] == self.count
        assert EN._ROW_ITEMS.get(shape, {}) == self.cur and EN._ROW_ITEMS_OLD.get(shape, {}) == self.old


@pytest.mark.parametrize("gen", [1, 3, 7, 1000])
def test_row_info_counts_and_turns_generations_as_row_items_add(gen, monkeypatch):
    """``_row_info`` counts each new row item (and turns the generations over) inline: the counts and the
    generations' contents equal those of the definition (``_row_items_add`` per new item) over families that grow
    call by call, rows recurring across two stores."""
    from sremarathon_env.alerts import engine as EN

    want = _Generations.fresh(monkeypatch, gen)   # (the definition's, one family shape)
    for eng, fam, done in _growth(np.random.default_rng(gen)):
        info, _ = eng._row_info(fam, len(fam))
        for r in range(done, len(fam)):
            want.add(tuple(fam._label_values[r]), info[r])
        want.check(EN, ("m", ("__name__", "pod", "svc")))


@pytest.mark.parametrize("seed", range(30))
def test_lazy_row_items_select_as_made_items(seed):
    """``match_rows`` over ``_row_info_lazy`` (items made only for the rows it keeps) keeps the rows, label sets and
    sort keys of ``match_rows`` over ``_row_info`` (every row's item made), on families that grow call by call with
    random matchers; ``_row_info`` on the same engine afterwards makes the missing items: its lists equal an eager
    engine's item for item."""
    from sremarathon_env.alerts import PromQLEngine
    from sremarathon_env.telemetry.store import MetricStore

    rng = np.random.default_rng(1000 + seed)
    store = MetricStore(step_s=15.0)
    names = [f"l{k}" for k in range(int(rng.integers(1, 4)))]
    fam = store.family("m", tuple(names))
    values = ["a", "b", "", "x%1", "c"]
    lazy, eager = PromQLEngine(store), PromQLEngine(store)
    done = 0
    for _ in range(8):
        for _ in range(int(rng.integers(0, 7))):
            fam.row(tuple(str(rng.choice(values)) + str(int(rng.integers(3))) * int(rng.random() < 0.5)
                          for _ in names))
        n = len(fam)
        for _ in range(int(rng.integers(1, 4))):
            matchers = [_matcher(rng, ["__name__"] + names, values) for _ in range(int(rng.integers(0, 3)))]
            lo = int(rng.integers(0, done + 1))
            got, want = ([], [], []), ([], [], [])
            info, pos, ent = lazy._row_info_lazy(fam, n)
            match_rows(info, pos, matchers, lo, n, *got, "m", ent)
            info_e, pos_e = eager._row_info(fam, n)
            match_rows(info_e, pos_e, matchers, lo, n, *want, "m")
            assert got == want
            assert all(info[r] == info_e[r] for r in got[0])
        done = n
    info, _ = lazy._row_info(fam, len(fam))
    assert info == eager._row_info(fam, len(fam))[0] and None not in info


@pytest.mark.parametrize("gen", [1, 3, 7, 1000])
def test_lazy_row_items_count_and_turn_generations_as_row_items_add(gen, monkeypatch):
    """Items made by ``match_rows`` over ``_row_info_lazy`` are counted (and turn the generations over) as the
    definition does per new item (``_row_items_add``), in the order they are made; rows it does not keep are
    neither made nor counted."""
    from sremarathon_env.alerts import engine as EN

    want = _Generations.fresh(monkeypatch, gen)
    keep_b = S.Matcher("svc", "=", "b", None)
    for eng, fam, done in _growth(np.random.default_rng(gen)):
        info, pos, ent = eng._row_info_lazy(fam, len(fam))
        rows: list = []
        match_rows(info, pos, [keep_b], done, len(fam), rows, [], [], "m", ent)
        for r in rows:
            want.add(tuple(fam._label_values[r]), info[r])
        assert all(info[r] is None for r in range(done, len(fam)) if r not in rows)
        want.check(EN, ("m", ("__name__", "pod", "svc")))

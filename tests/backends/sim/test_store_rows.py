"""The metric store's families reserve row capacity without initialising it (rows are made NaN as they come
into use, the array grows by copying the rows in use) and allocate COLS_RESERVED tick columns until a tick
needs more: every read of the rows in use equals the plain definition - an array of NaN that grows by
doubling with every cell NaN until written - through growth in rows and in time, copies and pickles."""

import copy
import pickle

import numpy as np

from sremarathon_env.telemetry import store as store_mod
from sremarathon_env.telemetry.store import MetricStore


class _Plain:
    """The definition: every cell NaN until written, rows and columns grown as needed."""

    def __init__(self, cap: int):
        self.data = np.full((0, cap), np.nan)

    def row(self, idx: int) -> None:
        while idx >= self.data.shape[0]:
            self.data = np.concatenate([self.data, np.full((1, self.data.shape[1]), np.nan)])

    def grow_time(self, cap: int) -> None:
        grown = np.full((self.data.shape[0], cap), np.nan)
        grown[:, : self.data.shape[1]] = self.data
        self.data = grown


class _JunkEmpty:
    """numpy, but ``empty`` arrays are full of a number (uninitialised memory is often zeros)."""

    def __getattr__(self, name):
        return getattr(np, name)

    @staticmethod
    def empty(shape, *args, **kwargs):
        return np.full(shape, 7.5)


def _same(fam, plain: _Plain, n_ticks: int) -> None:
    got = fam.values(n_ticks)
    assert got.shape == (len(fam), n_ticks)
    assert np.array_equal(got, plain.data[: len(fam), :n_ticks], equal_nan=True)


def test_rows_in_use_read_as_their_definition(monkeypatch):
    monkeypatch.setattr(store_mod, "ROWS_RESERVED", 3)   # small, so that rows outgrow it often
    monkeypatch.setattr(store_mod, "FILL_STEP", 5)
    monkeypatch.setattr(store_mod, "COLS_RESERVED", 2)   # and columns grow to the capacity early
    rng = np.random.default_rng(0)
    store = MetricStore(step_s=15.0, capacity=6)
    fams = [store.family("a", ("x",)), store.family("b", ("x", "y"))]
    plains = [_Plain(6), _Plain(6)]
    monkeypatch.setattr(store_mod, "np", _JunkEmpty())   # junk in every allocation: spare rows must never show
    n_ticks = 0
    for step in range(400):
        i = int(rng.integers(2))
        fam, plain = fams[i], plains[i]
        labels = ("r%d" % int(rng.integers(0, 150)),) + (("y",) if i else ())
        row = fam.row(labels)
        plain.row(row)
        if rng.random() < 0.5:   # write a column of some rows
            tick = int(rng.integers(0, n_ticks + 2))
            rows = rng.choice(len(fam), size=min(len(fam), 3), replace=False)
            vals = rng.standard_normal(len(rows))
            if tick >= store.capacity:
                store.write(fam, rows, tick, vals)
                for f, p in zip(fams, plains):
                    p.grow_time(store.capacity)
            else:
                store.write(fam, rows, tick, vals)
            plain.data[rows, tick] = vals
            n_ticks = store.n_ticks
        if step % 50 == 0:   # copies and pickles hold the same rows and grow on as the original
            fams = [copy.deepcopy(f) for f in fams] if step % 100 == 0 else [pickle.loads(pickle.dumps(f)) for f in fams]
            store._order = fams
            store._families = {"a": [fams[0]], "b": [fams[1]]}
        for f, p in zip(fams, plains):
            _same(f, p, max(n_ticks, 1))
    assert len(fams[0]) > 3 * 3 and fams[0]._data.shape[1] == store.capacity > 6


def test_spare_rows_are_not_copied():
    store = MetricStore(step_s=15.0, capacity=368)
    fam = store.family("up", ("service",))
    for k in range(5):
        fam.row((str(k),))
    assert fam._data.shape[0] >= store_mod.ROWS_RESERVED
    clone = copy.deepcopy(fam)
    assert clone._data.shape[0] == clone._filled < store_mod.ROWS_RESERVED
    assert np.isnan(clone.values(368)).all() and len(clone) == 5
    clone.row(("new",))
    assert np.isnan(clone.values(368)).all() and len(clone) == 6


def test_columns_grow_to_the_capacity_when_a_tick_needs_them(monkeypatch):
    monkeypatch.setattr(store_mod, "COLS_RESERVED", 4)
    monkeypatch.setattr(store_mod, "np", _JunkEmpty())   # junk in every allocation: unwritten cells must read NaN
    store = MetricStore(step_s=15.0, capacity=10)
    a = store.family("a", ("x",))
    rows = a.rows([("p",), ("q",)])
    assert a._data.shape[1] == 4 and store.capacity == 10
    store.set_n_ticks(4)
    store.write(a, rows[:1], 3, np.array([1.0]))
    assert a._data.shape[1] == 4   # still within the reserved columns
    store.write(a, rows[1:], 4, np.array([2.0]))   # the first tick past them: every family grows to the capacity
    assert a._data.shape[1] == 10 == store._cols
    b = store.family("b", ("x",))   # a family made later has the store's columns
    b.row(("r",))
    assert b._data.shape[1] == 10
    store.set_n_ticks(12)           # past the capacity: it doubles, as before
    assert store.capacity == 20 and a._data.shape[1] == b._data.shape[1] == 20
    want = np.full((2, 12), np.nan)
    want[0, 3] = 1.0
    want[1, 4] = 2.0
    assert np.array_equal(a.values(12), want, equal_nan=True)
    assert np.isnan(b.values(12)).all()


def test_a_short_twin_run_allocates_the_reserved_columns_only():
    from sremarathon_env.backends.sim import SimBackend

    sim = SimBackend("online-boutique", seed=3)
    sim.advance_to(600.0)
    st = sim.store
    assert st.n_ticks == 41 and st.capacity == 368
    assert {f._data.shape[1] for f in st._order} == {store_mod.COLS_RESERVED}
    sim.advance_to(store_mod.COLS_RESERVED * 15.0)   # the first tick past them
    assert {f._data.shape[1] for f in st._order} == {368} and st.capacity == 368


def test_reserved_rows_read_as_their_definition(monkeypatch):
    """`Family.reserve` allocates room without initialising it: rows made after it read NaN until written,
    rows made before keep their samples, and a reservation below the allocation changes nothing."""
    monkeypatch.setattr(store_mod, "np", _JunkEmpty())
    store = MetricStore(step_s=15.0, capacity=8)
    fam = store.family("a", ("x",))
    plain = _Plain(8)
    for k in range(5):
        plain.row(fam.row((str(k),)))
    store.write(fam, np.array([1, 3]), 2, np.array([4.0, 5.0]))
    plain.data[[1, 3], 2] = [4.0, 5.0]
    fam.reserve(3)                         # below the allocation: nothing to do
    assert fam._data.shape[0] == store_mod.ROWS_RESERVED
    fam.reserve(100)
    assert fam._data.shape[0] == 100
    for k in range(5, 90):
        plain.row(fam.row((str(k),)))
    assert fam._data.shape[0] == 100       # no growth while within the reservation
    store.write(fam, np.array([70]), 5, np.array([6.0]))
    plain.data[70, 5] = 6.0
    _same(fam, plain, 8)


def test_a_twin_with_a_horizon_allocates_its_columns_at_once_and_writes_the_same_samples():
    """``SimBackend(horizon_s=...)`` (the run loop passes a marathon's horizon): the store allocates the run's
    tick columns at the start (no growth along time mid-run) and every family reads as without it, through a
    run with faults past `COLS_RESERVED` ticks."""
    from faults.catalogue import load_catalogue
    from faults.realise import inject, revert
    from sremarathon_env.backends.sim import SimBackend

    horizon = 2400.0
    ticks = int(horizon / 15.0) + 1
    assert ticks > store_mod.COLS_RESERVED
    plain = SimBackend("online-boutique", seed=5)
    sized = SimBackend("online-boutique", seed=5, horizon_s=horizon)
    assert sized.store._cols == ticks and plain.store._cols == store_mod.COLS_RESERVED
    faults = [f for f in load_catalogue("online-boutique") if f.realisation.kind in ("effects", "scale", "deploy")][:4]
    for sim in (plain, sized):
        handles = []
        for i, f in enumerate(faults):
            sim.advance_to(300.0 * (i + 1))
            handles.append(inject(f, sim))
        for h in handles:
            sim.advance_to(sim.now + 240.0)
            revert(h, sim)
        sim.advance_to(horizon)
    assert {f._data.shape[1] for f in sized.store._order} == {ticks}
    assert plain.store.names() == sized.store.names()
    n = plain.store.n_ticks
    assert n == sized.store.n_ticks == ticks
    for a, b in zip(plain.store._order, sized.store._order):
        assert a.name == b.name and a._label_values == b._label_values
        assert np.array_equal(a.values(n), b.values(n), equal_nan=True)
    # no horizon for a twin without metrics (its store stays empty)
    assert SimBackend("online-boutique", seed=5, metrics=False, horizon_s=horizon).store._cols == store_mod.COLS_RESERVED


def test_rows_hint_sizes_later_families_and_changes_no_sample(monkeypatch):
    """A store with ``rows_hint`` records the rows its families made ready; a later store sharing the hint
    allocates that many rows per family at once (no growth by copying for a run like the earlier one), and
    reads the same samples as a store without hints, through junk-filled allocations, copies and pickles."""
    monkeypatch.setattr(store_mod, "np", _JunkEmpty())
    rng = np.random.default_rng(3)
    hint: dict = {}
    script = [(int(rng.integers(2)), int(rng.integers(40)), int(rng.integers(6)), float(rng.normal()))
              for _ in range(300)]

    def play(store):
        fams = [store.family("a", ("x",)), store.family("a", ("x", "y"))]
        for i, name, tick, value in script:
            fam = fams[i]
            row = fam.row((str(name),) if i == 0 else (str(name), "y"))
            store.set_n_ticks(max(store._n, tick + 1))
            store.write(fam, np.array([row]), tick, np.array([value]))
        return fams

    plain = play(MetricStore(step_s=15.0, capacity=8))
    first = play(MetricStore(step_s=15.0, capacity=8, rows_hint=hint))
    assert hint == {("a", ("x",)): first[0]._filled, ("a", ("x", "y")): first[1]._filled}
    assert all(h >= len(f) > store_mod.ROWS_RESERVED for h, f in zip(hint.values(), first))
    later = MetricStore(step_s=15.0, capacity=8, rows_hint=hint)
    fams = [later.family("a", ("x",)), later.family("a", ("x", "y"))]
    assert [f._data.shape[0] for f in fams] == list(hint.values())   # allocated at once
    arrays = [f._data for f in fams]
    second = play(later)
    assert all(f._data is a for f, a in zip(second, arrays))   # never grown
    for fams_ in (first, second, [copy.deepcopy(f) for f in second], [pickle.loads(pickle.dumps(f)) for f in second]):
        for p, f in zip(plain, fams_):
            assert f._label_values == p._label_values
            assert np.array_equal(f.values(6), p.values(6), equal_nan=True)
    assert pickle.loads(pickle.dumps(second[0]))._hints is None


def test_twins_of_an_app_share_row_hints():
    from sremarathon_env.backends.sim import SimBackend
    from sremarathon_env.backends.sim import backend as backend_mod

    backend_mod._ROWS_HINT.pop("online-boutique", None)
    a = SimBackend("online-boutique", seed=2)
    a.advance_to(900.0)
    hint = backend_mod._ROWS_HINT["online-boutique"]
    assert hint and all(hint[(f.name, f.label_names)] >= len(f) for f in a.store._order if len(f))
    b = SimBackend("online-boutique", seed=2)
    assert all(f._data.shape[0] >= hint.get((f.name, f.label_names), 0) for f in b.store._order)
    b.advance_to(900.0)
    assert SimBackend("online-boutique", seed=2, metrics=False).store._rows_hint is None
    n = a.store.n_ticks
    for fa, fb in zip(a.store._order, b.store._order):
        assert fa._label_values == fb._label_values
        assert np.array_equal(fa.values(n), fb.values(n), equal_nan=True)

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

"""The compiled tape extension (one call for every family of a sync, the families' store arrays read by address)
against the numpy reference: store arrays replaced between syncs (rows and columns added), arrays the kernel cannot
read in place (read from a copy, never from a stale one), bounds, and a rewritten column in any family."""

from __future__ import annotations

import numpy as np
import pytest

from sremarathon_env.alerts import compiled
from sremarathon_env.alerts.tape import Tape
from sremarathon_env.telemetry.store import MetricStore

numba = pytest.importorskip("numba")

from .test_compiled import _series, _tapes_equal  # noqa: E402


def _both(monkeypatch, fn):
    """``fn(tape)`` on a numpy tape and on a compiled one (each over its own store built by ``fn``); both tapes."""
    out = {}
    for mode in ("0", "1"):
        monkeypatch.setenv("SREMARATHON_NUMBA", mode)
        out[mode] = fn(mode)
    return out["0"], out["1"]


def test_families_growing_rows_and_columns_between_syncs(monkeypatch):
    # series appear batch by batch (a family's array is replaced when its rows outgrow it) and the store grows in time
    # (every array replaced): each sync reads the arrays the families hold now
    monkeypatch.setenv("SREMARATHON_NUMBA", "1")
    assert compiled.kernels() is not None
    data = _series(np.random.default_rng(11), 90, 200)

    def run(mode):
        monkeypatch.setenv("SREMARATHON_NUMBA", mode)
        store = MetricStore(step_s=15.0, capacity=24)
        fams = [store.family(f"f{j}_total", ("i",)) for j in range(4)]
        tape = Tape(store, capacity=8)
        n_rows, seen = 0, set()
        for k in range(200):
            if k % 9 == 0 and n_rows < 90:
                n_rows = min(90, n_rows + 13)
            for j, fam in enumerate(fams):
                idx = [i for i in range(n_rows) if i % 4 == j]
                rows = fam.rows([(str(i),) for i in idx])
                store.write(fam, rows, k, data[idx, k])
                new = [(fam, int(r)) for r, i in zip(rows, idx) if (j, i) not in seen]
                seen.update((j, i) for i in idx)
                if new:
                    tape.slots(new)
            if k % 5 == 4:
                tape.sync()
        tape.sync()
        return tape

    a, b = _both(monkeypatch, run)
    assert a.N == b.N == 200 and a.resets == b.resets == 0
    _tapes_equal(a, b)


def test_arrays_not_readable_in_place_are_read_from_a_fresh_copy_each_sync(monkeypatch):
    # a family array that is not C-contiguous float64 is copied for the call, never kept: later writes are seen
    monkeypatch.setenv("SREMARATHON_NUMBA", "1")
    assert compiled.kernels() is not None
    data = _series(np.random.default_rng(5), 12, 60)

    def run(mode):
        monkeypatch.setenv("SREMARATHON_NUMBA", mode)
        store = MetricStore(step_s=15.0, capacity=64)
        a, b = store.family("a_total", ("i",)), store.family("b_total", ("i",))
        ra, rb = a.rows([(str(i),) for i in range(6)]), b.rows([(str(i),) for i in range(6)])
        b._data = np.asfortranarray(b._data)   # Fortran order: written in place by the store, not C-contiguous
        tape = Tape(store)
        tape.slots([(a, int(r)) for r in ra] + [(b, int(r)) for r in rb])
        for k in range(60):
            store.write(a, ra, k, data[:6, k])
            store.write(b, rb, k, data[6:, k])
            if k % 7 == 3:
                tape.sync()
        tape.sync()
        assert not b._data.flags.c_contiguous
        return tape

    x, y = _both(monkeypatch, run)
    assert x.N == y.N == 60 and x.resets == y.resets == 0
    _tapes_equal(x, y)
    assert y._slot_arrays.datas == [] and y._slot_arrays.held == []   # no address kept for a copied array


def test_kernel_refuses_rows_and_columns_beyond_a_familys_array():
    nb = compiled.warm()
    if nb is None:
        pytest.skip("compiled kernels off here")
    cells = np.zeros((5, 4, 4))
    ints = cells.view(np.int32)
    data = np.arange(12.0).reshape(3, 4)
    addrs = np.array([data.ctypes.data], np.intp)
    shapes = np.array([[3, 4]], np.intp)
    fams = np.array([0, 0], np.intp)    # (both slots read family 0)
    slots = np.array([0, 1], np.intp)

    def call(rows, c0, c1):
        return nb.extend(addrs, shapes, fams, np.array(rows, np.intp), slots, c0, c1, c0 > 0, cells, ints, 2)

    assert call([0, 3], 0, 2) == -1      # row 3 of a 3-row array
    assert call([0, -1], 0, 2) == -1
    assert call([0, 2], 0, 5) == -1      # column 4 of a 4-column array
    assert (cells == 0).all()            # nothing written
    assert call([0, 2], 0, 4) == 1
    assert cells[:4, :2, 0].T.tolist() == [[0.0, 1.0, 2.0, 3.0], [8.0, 9.0, 10.0, 11.0]]
    assert ints[:5, :2, 2].T.tolist() == [[0, 1, 2, 3, 4]] * 2   # CS
    assert call([0, 2], 4, 4) == 1       # an empty range (checks column 3 only)


def test_tape_raises_on_a_store_array_shorter_than_its_columns(monkeypatch):
    monkeypatch.setenv("SREMARATHON_NUMBA", "1")
    assert compiled.kernels() is not None
    store = MetricStore(step_s=15.0, capacity=32)
    fam = store.family("c_total", ("i",))
    rows = fam.rows([("a",), ("b",)])
    for k in range(10):
        store.write(fam, rows, k, np.array([1.0 * k, 2.0 * k]))
    tape = Tape(store)
    tape.slots([(fam, int(r)) for r in rows])
    tape.sync(5)
    fam._data = np.ascontiguousarray(fam._data[:, :8])   # (not how a store behaves: a broken contract)
    with pytest.raises(IndexError):
        tape.sync(10)
    assert tape.N == 5


@pytest.mark.parametrize("which", [0, 1, 2])
def test_a_rewritten_column_in_any_family_writes_nothing_and_restarts(which, monkeypatch):
    monkeypatch.setenv("SREMARATHON_NUMBA", "1")
    assert compiled.kernels() is not None
    data = _series(np.random.default_rng(17 + which), 18, 50)

    def run(mode):
        monkeypatch.setenv("SREMARATHON_NUMBA", mode)
        store = MetricStore(step_s=15.0, capacity=64)
        fams = [store.family(f"m{j}_total", ("i",)) for j in range(3)]
        rows = [f.rows([(str(i),) for i in range(6)]) for f in fams]
        tape = Tape(store)
        tape.slots([(f, int(r)) for f, rr in zip(fams, rows) for r in rr])
        for k in range(30):
            for j, f in enumerate(fams):
                store.write(f, rows[j], k, data[6 * j : 6 * j + 6, k])
        tape.sync()
        vals = data[6 * which : 6 * which + 6, 29].copy()
        vals[2] = 123.5
        store.write(fams[which], rows[which], 29, vals)
        for k in range(30, 50):
            for j, f in enumerate(fams):
                store.write(f, rows[j], k, data[6 * j : 6 * j + 6, k])
        tape.sync()
        assert tape.resets == 1 and tape.N == 50
        return tape

    a, b = _both(monkeypatch, run)
    _tapes_equal(a, b)

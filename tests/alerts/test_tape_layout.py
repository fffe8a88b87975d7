"""The tape's summaries are fields of one record per cell (column, slot), column-major: the summary views, the flat
views the numpy path indexes and the records the compiled kernels read are the same memory, cell for cell, through
growth in slots and in time; a column's used slots are one stretch of memory."""

from __future__ import annotations

import numpy as np
import pytest

from sremarathon_env.alerts.tape import FIELDS, Tape
from sremarathon_env.telemetry.store import MetricStore


def _grown_tape(tape_cls=Tape):
    store = MetricStore(step_s=15.0, capacity=16)
    fam = store.family("c_total", ("i",))
    tape = tape_cls(store, capacity=4)
    for k in range(40):
        n = 3 + k // 5
        rows = fam.rows([(str(i),) for i in range(n)])
        store.write(fam, rows, k, np.arange(n, dtype=float) + k)
        tape.slots([(fam, int(r)) for r in rows])
        tape.sync(k + 1)
    return store, tape


def test_views_share_the_records_memory_and_address_each_cell():
    store, tape = _grown_tape()
    assert tape.cap_s >= 10 and tape.cap_t >= 40   # grown in slots and in time
    cells, ints, f0 = tape._cells, tape._ints, tape._f0
    assert cells.flags.c_contiguous and ints.flags.c_contiguous and np.shares_memory(cells, ints)
    assert cells.shape[:2] == ints.shape[:2] == (tape.cap_t + 1, tape.cap_s) and ints.shape[2] == 8
    assert ints.dtype.itemsize * f0 == 8   # the value takes the record's first 8 bytes, the integers follow
    for name, extra in Tape._SUMMARIES:
        arr = getattr(tape, name)
        assert arr.shape == (tape.cap_s, tape.cap_t + extra)
        flat = tape._flat[name]
        assert np.shares_memory(flat, cells) and np.shares_memory(arr, cells) and flat.base is not None
        for s, c in ((7, 33), (0, 0), (tape.cap_s - 1, tape.cap_t - 1)):
            rec = cells[c, s, 0] if name == "V" else ints[c, s, f0 + FIELDS.index(name)]
            assert flat[c * tape.cap_s + s] == arr[s, c] or (name == "V" and np.isnan(arr[s, c]) and np.isnan(rec))
            assert rec.tobytes() == np.asarray(arr[s, c]).tobytes()
    # the values the tape holds are the store's (slot s is row s here)
    assert np.array_equal(tape.V[:10, :40], store.families("c_total")[0]._data[:10, :40], equal_nan=True)


def test_a_columns_used_slots_are_one_stretch_of_memory():
    _, tape = _grown_tape()
    cells = tape._cells
    rec = cells.strides[1]
    assert rec == cells.shape[2] * 8 and rec in (32, 64) and cells.strides[0] == rec * tape.cap_s
    # every summary of cell (c, s) lies within the record's bytes
    base = cells.__array_interface__["data"][0]
    c, s = 5, 3
    for name, _ in Tape._SUMMARIES:
        arr = getattr(tape, name)
        addr = arr[s:, c:].__array_interface__["data"][0] - base
        assert (c * tape.cap_s + s) * rec <= addr < (c * tape.cap_s + s + 1) * rec


@pytest.mark.parametrize("big", [False, True])
def test_integer_width_follows_the_tape_size(big, monkeypatch):
    # int64 records (64 bytes, a spare field) where int32 flat offsets could overflow: the same summaries
    if big:
        monkeypatch.setattr(Tape, "_int_dtype", staticmethod(lambda n_slots, cap: np.int64))
    _, tape = _grown_tape()
    _, ref = _grown_tape()
    assert tape._ints.dtype == (np.int64 if big else np.int32) and tape._f0 == (1 if big else 2)
    S, N = len(tape._row_of), tape.N
    for name, extra in Tape._SUMMARIES:
        x, y = getattr(tape, name)[:S, : N + extra], getattr(ref, name)[:S, : N + extra]
        if name == "POS":
            for s in range(S):
                c = int(ref.CS[s, N])
                assert x[s, :c].tolist() == y[s, :c].tolist()
        elif name == "V":
            assert x.tobytes() == y.tobytes()
        else:
            assert x.tolist() == y.tolist(), name


def test_slots_by_pairs_and_by_row_arrays_agree_whichever_registers_first():
    store = MetricStore(step_s=15.0)
    a = store.family("a_total", ("i",))
    b = store.family("b_total", ("i",))
    a.rows([(str(i),) for i in range(6)])
    b.rows([(str(i),) for i in range(4)])
    tape = Tape(store)
    first = tape.slots_of([(a, np.array([4, 1])), (b, np.array([2]))]).tolist()
    assert first == [0, 1, 2]
    assert tape.slots([(b, 2), (a, 1), (a, 5), (a, 4), (b, 0), (a, 5)]).tolist() == [2, 1, 3, 0, 4, 3]
    assert tape.slots_of([(a, np.array([5, 0])), (b, np.array([0, 3]))]).tolist() == [3, 5, 4, 6]
    assert tape._fam_of == [0, 0, 1, 0, 1, 0, 1] and tape._row_of == [4, 1, 2, 5, 0, 0, 3]
    assert tape._pending == list(range(7))

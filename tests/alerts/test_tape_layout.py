"""The tape's summary arrays are column-major: the flat offsets the tape and the window kernel compute address
the arrays' own memory, through growth in slots and in time."""

from __future__ import annotations

import numpy as np

from sremarathon_env.alerts.tape import Tape
from sremarathon_env.telemetry.store import MetricStore


def test_flat_views_share_the_arrays_memory_and_address_each_cell():
    store = MetricStore(step_s=15.0, capacity=16)
    fam = store.family("c_total", ("i",))
    tape = Tape(store, capacity=4)
    for k in range(40):
        n = 3 + k // 5
        rows = fam.rows([(str(i),) for i in range(n)])
        store.write(fam, rows, k, np.arange(n, dtype=float) + k)
        tape.slots([(fam, int(r)) for r in rows])
        tape.sync(k + 1)
    assert tape.cap_s >= 10 and tape.cap_t >= 40   # grown in slots and in time
    for name, _, extra in Tape._ARRAYS:
        arr = getattr(tape, name)
        assert arr.shape == (tape.cap_s, tape.cap_t + extra)
        flat = arr.T.ravel()
        assert np.shares_memory(flat, arr) and flat.base is not None   # a view, never a copy
        s, c = 7, 33
        assert flat[c * tape.cap_s + s] == arr[s, c]
    # the values the tape holds are the store's (slot s is row s here)
    assert np.array_equal(tape.V[:10, :40], store.families("c_total")[0]._data[:10, :40], equal_nan=True)


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

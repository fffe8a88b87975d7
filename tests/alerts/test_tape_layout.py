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

"""The numpy extension's shortcuts give what its general steps give: a family's slots taken as a slice where their
positions form one run (positions ascend within a family, also after pending slots registered in any order join their
families), and the sample ranks written without a selection where every cell of a sync is present."""

from __future__ import annotations

import numpy as np
import pytest

from sremarathon_env.alerts.tape import Tape
from sremarathon_env.telemetry.store import MetricStore

from .test_compiled import _tapes_equal


def _store(rng, n_fams: int, n_rows: int, n_ticks: int, gaps: float):
    store = MetricStore(step_s=15.0, capacity=n_ticks)
    fams = [store.family(f"m{j}_total", ("i",)) for j in range(n_fams)]
    for fam in fams:
        rows = fam.rows([(str(i),) for i in range(n_rows)])
        vals = np.cumsum(rng.integers(0, 5, (n_rows, n_ticks)), axis=1).astype(float)
        vals[rng.random(vals.shape) < gaps] = np.nan
        for k in range(n_ticks):
            store.write(fam, rows, k, vals[:, k])
    return store, fams


@pytest.mark.parametrize("gaps", [0.0, 0.02, 0.3])
@pytest.mark.parametrize("order", ["registered", "reversed", "shuffled"])
def test_pending_slots_in_any_order_give_the_same_summaries(order, gaps, monkeypatch):
    monkeypatch.setenv("SREMARATHON_NUMBA", "0")
    rng = np.random.default_rng(["registered", "reversed", "shuffled"].index(order) + int(gaps * 100))
    store, fams = _store(rng, 3, 20, 90, gaps)
    ref, tape = Tape(store), Tape(store)
    # families interleaved, registered in batches as a plan does (pods appearing)
    batches = [[(fams[j % 3], r) for j in range(3) for r in range(lo, lo + 5)] for lo in range(0, 20, 5)]
    for n, batch in zip((8, 30, 31, 60), batches):
        ref.slots(batch)
        tape.slots(batch)
        if order == "reversed":
            tape._pending.reverse()
        elif order == "shuffled":
            rng.shuffle(tape._pending)
        ref.sync(n)
        tape.sync(n)
        for _, m, _ in tape._groups:
            assert (np.diff(m) > 0).all()   # positions ascend within each family
    for n in (75, 90):
        ref.sync(n)
        tape.sync(n)
    assert ref.N == tape.N == 90
    _tapes_equal(ref, tape)


def test_a_family_in_one_run_and_one_split_give_the_same_summaries(monkeypatch):
    # the same series as one family (its slots one run: the slice) and split over two interleaved families (runs of
    # one slot: the index arrays)
    monkeypatch.setenv("SREMARATHON_NUMBA", "0")
    rng = np.random.default_rng(9)
    vals = np.cumsum(rng.integers(0, 4, (12, 50)), axis=1).astype(float)
    vals[rng.random(vals.shape) < 0.1] = np.nan
    tapes = []
    for split in (False, True):
        store = MetricStore(step_s=15.0, capacity=50)
        fams = [store.family("a_total", ("i",)), store.family("b_total", ("i",))]
        rows = [fams[0].rows([(str(i),) for i in range(12)]), fams[1].rows([(str(i),) for i in range(12)])]
        fam_of = [(i % 2 if split else 0) for i in range(12)]
        for k in range(50):
            for j in (0, 1):
                store.write(fams[j], rows[j], k, vals[:, k])
        tape = Tape(store)
        tape.slots([(fams[fam_of[i]], i) for i in range(12)])
        for n in (7, 20, 21, 50):
            tape.sync(n)
        tapes.append(tape)
    _tapes_equal(tapes[0], tapes[1])

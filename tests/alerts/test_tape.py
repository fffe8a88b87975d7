"""The tape's window kernel equals ``rangefuncs`` bit for bit, also when columns arrive a few at a time."""

from __future__ import annotations

import numpy as np
import pytest

from sremarathon_env.alerts.rangefuncs import RANGE_FUNCS
from sremarathon_env.alerts.tape import CODES, KernelSpec, Tape, window_kernel
from sremarathon_env.alerts.values import Win
from sremarathon_env.telemetry.store import MetricStore

ST = 15000


@pytest.fixture(autouse=True, params=["numpy", "compiled"])
def kernels_mode(request, monkeypatch):
    """Every test here runs with the numpy kernels and with the compiled ones (where numba is installed; else the
    numpy ones again)."""
    monkeypatch.setenv("SREMARATHON_NUMBA", "0" if request.param == "numpy" else "1")
    return request.param


def _store(seed: int, n_rows: int, n_ticks: int) -> MetricStore:
    rng = np.random.default_rng(seed)
    store = MetricStore(step_s=15.0, capacity=64)
    fam = store.family("c_total", ("i",))
    rows = fam.rows([(str(i),) for i in range(n_rows)])
    acc = rng.integers(0, 50, size=n_rows).astype(float)
    for k in range(n_ticks):
        acc += rng.integers(0, 30, size=n_rows)
        reset = rng.random(n_rows) < 0.05
        acc[reset] = rng.integers(0, 5, size=int(reset.sum()))
        vals = acc.copy()
        vals[rng.random(n_rows) < 0.1] = np.nan  # gaps
        store.write(fam, rows, k, vals)
    return store


def _reference(store, fam, rows, name, range_ms, offset_ms, times):
    n = store.n_ticks
    ref = times - offset_ms
    lo = np.maximum(-((-(ref - range_ms)) // ST), 0)
    hi = np.minimum(ref // ST, n - 1)
    c0, c1 = int(lo.min()), int(hi.max())
    cols = np.arange(c0, c1 + 1)
    v = fam.values(n)[rows[:, None], cols[None, :]]
    w = Win([], v, ~np.isnan(v), cols.astype(np.int64) * ST, lo - c0, hi - c0, range_ms, offset_ms)
    return RANGE_FUNCS[name](w, times, None)


def _check_kernel(tape, store, fam, rows, slots, windows, a):
    """Sync ``tape`` to tick a + 8 and check the window kernel at ticks a .. a + 7, for every (function, range,
    offset) of ``windows`` over the series ``rows`` of ``fam`` (at ``slots``), against `_reference`: the same
    presence, and the same bits where present."""
    n_rows = len(rows)
    spec = KernelSpec(np.tile(slots, len(windows)), np.repeat([w[1] for w in windows], n_rows),
                      np.repeat([w[2] for w in windows], n_rows), np.repeat([CODES[w[0]] for w in windows], n_rows))
    times = np.arange(a, a + 8, dtype=np.int64) * ST
    tape.sync(a + 8)
    v, p = window_kernel(tape, spec, times, 0, ST)
    for k, (name, r, o) in enumerate(windows):
        rv, rp = _reference(store, fam, rows, name, r, o, times)
        sl = slice(n_rows * k, n_rows * (k + 1))
        assert np.array_equal(p[sl], rp), (name, r, o, a)
        assert np.where(rp, rv, 0.0).tobytes() == np.where(rp, v[sl], 0.0).tobytes(), (name, r, o, a)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_kernel_matches_rangefuncs_incrementally(seed):
    store = _store(seed, 12, 200)
    fam = store.families("c_total")[0]
    rows = np.arange(12)
    windows = [(name, r, o) for name in CODES for r, o in ((300_000, 0), (120_000, 60_000), (3_600_000, 0))]
    tape = Tape(store, capacity=16)
    slots = tape.slots([(fam, int(r)) for r in rows])
    spec = KernelSpec(np.tile(slots, len(windows)), np.repeat([w[1] for w in windows], 12),
                      np.repeat([w[2] for w in windows], 12), np.repeat([CODES[w[0]] for w in windows], 12))
    for a in range(0, 200, 8):  # 8 evaluation ticks per call, as the alert engine
        times = np.arange(a, a + 8, dtype=np.int64) * ST
        tape.sync(a + 8)
        v, p = window_kernel(tape, spec, times, 0, ST)
        for k, (name, r, o) in enumerate(windows):
            rv, rp = _reference(store, fam, rows, name, r, o, times)
            sl = slice(12 * k, 12 * (k + 1))
            assert np.array_equal(p[sl], rp), (name, r, o, a)
            assert np.where(rp, rv, 0.0).tobytes() == np.where(rp, v[sl], 0.0).tobytes(), (name, r, o, a)
    assert tape.resets == 0


def test_tape_restarts_when_a_read_column_is_rewritten():
    store = _store(3, 4, 40)
    fam = store.families("c_total")[0]
    tape = Tape(store)
    tape.slots([(fam, 0), (fam, 1)])
    tape.sync()
    store.write(fam, np.array([0]), 39, np.array([1e9]))  # a column already read, rewritten
    tape.sync()
    assert tape.resets == 0  # nothing new to read: not noticed yet
    store.write(fam, np.array([0, 1]), 40, np.array([5.0, 6.0]))
    tape.sync()
    assert tape.resets == 1 and tape.N == 41 and tape.V[0, 39] == 1e9 and tape.V[1, 40] == 6.0


def test_slots_of_agrees_with_slots_and_shares_slots():
    from sremarathon_env.alerts.tape import Tape
    from sremarathon_env.telemetry.store import MetricStore

    store = MetricStore(step_s=15.0)
    a = store.family("a_total", ("i",))
    b = store.family("b_total", ("i",))
    a.rows([(str(i),) for i in range(6)])
    b.rows([(str(i),) for i in range(4)])
    t1, t2 = Tape(store), Tape(store)
    flat = [(a, np.array([4, 1, 3])), (b, np.array([2])), (a, np.array([1, 5]))]
    want = t1.slots([(fam, r) for fam, rows in flat for r in rows.tolist()])
    got = t2.slots_of(flat)
    assert got.tolist() == want.tolist() == [0, 1, 2, 3, 1, 4]
    # the two entry points share slots in either order
    assert t2.slots([(a, 3), (b, 0)]).tolist() == [2, 5]
    assert t2.slots_of([(b, np.array([0, 2])), (a, np.array([0]))]).tolist() == [5, 3, 6]
    assert t2._pending == list(range(7))


def test_family_index_by_identity_holds_each_family():
    """``Tape._fam_index`` finds a family's slot by its identity: the tape holds every family it numbered, so no
    family made later (the others dropped by everyone else) can take a numbered one's identity; a single-part
    ``slots_of`` returns a new array, never the tape's row map."""
    import gc

    store = MetricStore(step_s=15.0)
    tape = Tape(store)
    seen = []
    for k in range(50):
        fam = store.family(f"f{k}_total", ("i",)) if k % 2 else MetricStore(step_s=15.0).family("x_total", ("i",))
        fam.rows([("0",), ("1",)])
        fi = tape._fam_index(fam)
        assert fi == k and tape._fams[fi] is fam and tape._fam_index(fam) == fi
        seen.append(id(fam))
        del fam
        gc.collect()
    assert len(set(seen)) == 50   # (held by the tape: no identity was reused)
    fam = tape._fams[3]
    out = tape.slots_of([(fam, np.array([1, 0]))])
    out[:] = -7
    assert tape.slots_of([(fam, np.array([1, 0]))]).tolist() != [-7, -7]


def test_tape_sized_by_the_store_and_slot_growth_keeps_every_summary():
    store = _store(5, 40, 70)
    fam = store.families("c_total")[0]
    assert Tape(store).cap_t == store.capacity + 1   # a marathon's columns: no growth in time
    whole = Tape(store)
    whole.slots([(fam, r) for r in range(40)])
    whole.sync()
    grown = Tape(store, capacity=4)                  # grows in time and, batch by batch, in slots
    for lo in range(0, 40, 7):
        grown.slots([(fam, r) for r in range(lo, min(lo + 7, 40))])
        grown.sync(min(70, 10 + 2 * lo))
    grown.sync()
    assert grown.cap_s >= 40 and grown.cap_t >= 70
    for name in ("V", "CS", "PV", "RC", "CC", "LR"):
        a, b = getattr(whole, name), getattr(grown, name)
        n = 71 if name == "CS" else 70
        assert np.array_equal(a[:40, :n], b[:40, :n], equal_nan=name == "V"), name
    for s in range(40):   # POS: the column of each present sample (ranks past a slot's count are never read)
        c = int(whole.CS[s, 70])
        assert np.array_equal(whole.POS[s, :c], grown.POS[s, :c])


class _PoisonTape(Tape):
    """A tape whose arrays start full of junk: a cell read before it is written shows in the results."""

    def _alloc(self, n_slots, cap):
        super()._alloc(n_slots, cap)
        for name, _ in self._SUMMARIES:
            arr = getattr(self, name)
            arr[...] = np.nan if arr.dtype == np.float64 else np.iinfo(arr.dtype).min + 7


def test_every_cell_is_written_before_it_is_read():
    # the arrays are not initialised (rows and columns never used are never touched): junk in them must not
    # change any result, through slot and time growth, new slots arriving late and windows of every kind
    store = _store(7, 30, 120)
    fam = store.families("c_total")[0]
    windows = [(name, r, o) for name in CODES for r, o in ((300_000, 0), (900_000, 60_000), (3_600_000, 0))]
    tape = _PoisonTape(store, capacity=8)
    assert np.isnan(tape.V).all()
    for a in range(0, 120, 8):
        n_rows = min(30, 4 + a // 4)   # series registered batch by batch, as pods appear
        rows = np.arange(n_rows)
        _check_kernel(tape, store, fam, rows, tape.slots([(fam, int(r)) for r in rows]), windows, a)
    assert tape.resets == 0 and tape.cap_s >= 30 and tape.cap_t >= 120


def test_slots_of_a_part_listing_a_new_row_twice():
    store = MetricStore(step_s=15.0)
    a = store.family("a_total", ("i",))
    a.rows([(str(i),) for i in range(4)])
    t = Tape(store)
    got = t.slots_of([(a, np.array([2, 2, 0, 2]))])
    assert got.tolist() == [0, 0, 1, 0] and t._row_of == [2, 0] and t._pending == [0, 1]
    assert t.slots_of([(a, np.array([3, 0, 3]))]).tolist() == [2, 1, 2] and t._row_of == [2, 0, 3]


def _summaries_by_definition(vals: np.ndarray) -> dict[str, list]:
    """Every summary of one series, column by column, straight from the definitions in ``Tape._alloc``."""
    out = {k: [] for k in ("CS", "PV", "PREV", "RC", "CC", "LR", "POS")}
    cs, pv, prev, rc, cc, lr = 0, -1, None, 0, 0, 0
    out["CS"].append(0)
    for k, x in enumerate(vals.tolist()):
        present = x == x
        out["PREV"].append(0.0 if prev is None else prev)
        if present:
            if prev is not None and x < prev:
                rc, lr = rc + 1, k
            if prev is not None and x != prev:
                cc += 1
            cs, pv, prev = cs + 1, k, x
            out["POS"].append(k)
        out["CS"].append(cs)
        for name, v in (("PV", pv), ("RC", rc), ("CC", cc), ("LR", lr)):
            out[name].append(v)
    return out


@pytest.mark.parametrize("shuffled", [False, True])
@pytest.mark.parametrize("rowwise", [False, True])
@pytest.mark.parametrize("chunks", [(1, 8), (8,), (3, 40, 1, 70)])
def test_summaries_equal_their_definitions_in_any_chunking(chunks, rowwise, shuffled, monkeypatch):
    # columns arrive in chunks of these sizes (in turn; with ``rowwise`` chunks of up to 32 columns take the
    # row-by-row running sums, all others numpy's accumulate), series registered in batches (late ones from column 0,
    # through a slice; ``shuffled``: their pending list out of order, through the index array)
    import sremarathon_env.alerts.tape as tape_mod

    if rowwise:
        monkeypatch.setattr(tape_mod, "_ROWWISE_MIN_SLOTS", 0)
    store = _store(11, 24, 150)
    fam = store.families("c_total")[0]
    tape = Tape(store, capacity=16)
    n, i, registered = 0, 0, 0
    while n < 150:
        want = min(24, 6 + n // 5)   # every series registered by column 90
        if want > registered:
            tape.slots([(fam, r) for r in range(registered, want)])
            registered = want
            if shuffled:
                tape._pending.reverse()
        n = min(150, n + chunks[i % len(chunks)])
        i += 1
        tape.sync(n)
    assert tape.N == 150 and tape.resets == 0
    vals = fam.values(150)
    for s in range(24):
        ref = _summaries_by_definition(vals[s])
        assert np.array_equal(tape.V[s, :150], vals[s], equal_nan=True)
        assert tape.CS[s, :151].tolist() == ref["CS"]
        for name in ("PV", "RC", "CC", "LR"):
            assert getattr(tape, name)[s, :150].tolist() == ref[name], (name, s)
        # the value before each column's sample, as the kernel reads it at a reset: V at PV of the column before
        prev = [float(tape.V[s, tape.PV[s, c - 1]]) if c and tape.PV[s, c - 1] >= 0 else 0.0 for c in range(150)]
        assert np.array(prev).tobytes() == np.array(ref["PREV"]).tobytes()
        assert tape.POS[s, : len(ref["POS"])].tolist() == ref["POS"]


def test_released_buffers_serve_the_next_tape_and_change_no_result(monkeypatch):
    # a released tape's buffers hold its summaries: the next tape (another store, other values) takes them and must
    # compute exactly what a fresh tape does; the released tape itself, used again, starts over and agrees too
    import sremarathon_env.alerts.tape as tape_mod

    monkeypatch.setattr(tape_mod, "_POOL", [])
    monkeypatch.setattr(tape_mod, "POOL_MIN_BYTES", 0)
    windows = [(name, r, o) for name in CODES for r, o in ((300_000, 0), (900_000, 60_000))]

    def run(tape, store, n_rows, a0=0, a1=120):
        fam = store.families("c_total")[0]
        rows = np.arange(n_rows)
        slots = tape.slots([(fam, int(r)) for r in rows])
        for a in range(a0, a1, 8):
            _check_kernel(tape, store, fam, rows, slots, windows, a)

    first_store, second_store = _store(7, 30, 120), _store(8, 28, 120)
    first = Tape(first_store, capacity=130)
    run(first, first_store, 30, 0, 64)
    released = list(first._bufs)
    first.release()
    assert len(tape_mod._POOL) == 1 and first.N == 0   # one buffer holds all of a tape's cells
    second = Tape(second_store, capacity=130)
    run(second, second_store, 28)
    assert any(b is r for b in second._bufs for r in released)   # the pooled buffers were taken
    run(first, first_store, 30, 64, 120)                         # used after release: starts over, same results
    assert first.N == 120 and not any(b is r for b in first._bufs for r in second._bufs)
    # bounded: POOL_MAX buffers at most, and no buffer twice
    for t in (first, second, Tape(first_store, capacity=130)):
        t.release()
        t.release()
    assert len(tape_mod._POOL) <= tape_mod.POOL_MAX
    assert len({id(b) for b in tape_mod._POOL}) == len(tape_mod._POOL)


def test_a_pooled_buffer_keeps_its_slot_capacity_and_changes_no_result(monkeypatch):
    # a tape taking a released tape's buffer lays it out with that tape's slot capacity (the same pages for the
    # same cells) where the buffer fits (up to twice the slots asked for); results are a fresh tape's
    import sremarathon_env.alerts.tape as tape_mod

    monkeypatch.setattr(tape_mod, "_POOL", [])
    monkeypatch.setattr(tape_mod, "POOL_MIN_BYTES", 0)
    windows = [(name, r, o) for name in CODES for r, o in ((300_000, 0), (900_000, 60_000))]

    def run(tape, store, n_rows):
        fam = store.families("c_total")[0]
        rows = np.arange(n_rows)
        slots = tape.slots([(fam, int(r)) for r in rows])
        for a in range(0, 120, 8):
            _check_kernel(tape, store, fam, rows, slots, windows, a)

    big_store, small_store = _store(7, 100, 120), _store(8, 60, 120)
    big = Tape(big_store, capacity=130)
    run(big, big_store, 100)
    assert big.cap_s == 512      # (4 x 100, rounded)
    big.release()
    small = Tape(small_store, capacity=130)
    run(small, small_store, 60)
    assert small.cap_s == 512    # (4 x 60 rounds to 256: the pooled buffer's 512 taken as it was laid out)
    fresh = Tape(small_store, capacity=130)
    run(fresh, small_store, 60)
    assert fresh.cap_s == 256    # (no pooled buffer left)
    for name, _ in Tape._SUMMARIES:
        a, b = getattr(small, name), getattr(fresh, name)
        if name == "POS":   # (ranks at or past a slot's sample count are never written: compared below them)
            seen = np.arange(120)[None, :] < fresh.CS[:60, 120][:, None]
            assert np.array_equal(a[:60, :120][seen], b[:60, :120][seen])
        else:
            assert np.array_equal(a[:60, :120], b[:60, :120], equal_nan=name == "V"), name
    # a buffer of another number of columns: the slot capacity asked for
    small.release()
    other = Tape(small_store, capacity=200)
    run(other, small_store, 60)
    assert other.cap_s == 256


def test_small_arrays_are_not_pooled_and_slot_capacities_are_rounded(monkeypatch):
    import sremarathon_env.alerts.tape as tape_mod

    monkeypatch.setattr(tape_mod, "_POOL", [])
    store = _store(9, 20, 30)
    fam = store.families("c_total")[0]
    tape = Tape(store)
    tape.slots([(fam, r) for r in range(20)])
    tape.sync()
    assert tape.cap_s % tape_mod.SLOT_ROUND == 0 and tape.cap_s >= 80
    tape.release()
    assert all(b.nbytes >= tape_mod.POOL_MIN_BYTES for b in tape_mod._POOL)


def test_window_runs_and_row_by_row_windows_give_the_same_results():
    # rows listed in runs of one window take the per-run bounds; the same rows shuffled (no runs) take per-row
    # bounds: the same values and presence, bit for bit, row for row
    store = _store(4, 16, 90)
    fam = store.families("c_total")[0]
    tape = Tape(store)
    slots = tape.slots([(fam, r) for r in range(16)])
    windows = [(name, r, o) for name in CODES for r, o in ((300_000, 0), (120_000, 60_000), (3_600_000, 0))]
    args = (np.tile(slots, len(windows)), np.repeat([w[1] for w in windows], 16), np.repeat([w[2] for w in windows], 16),
            np.repeat([CODES[w[0]] for w in windows], 16))
    grouped = KernelSpec(*args)
    perm = np.random.default_rng(0).permutation(len(args[0]))
    shuffled = KernelSpec(*(a[perm] for a in args))
    assert grouped.runs is not None and shuffled.runs is None
    for a in range(0, 88, 8):
        times = np.arange(a, a + 8, dtype=np.int64) * ST
        tape.sync(a + 8)
        v1, p1 = window_kernel(tape, grouped, times, 0, ST)
        v2, p2 = window_kernel(tape, shuffled, times, 0, ST)
        assert np.array_equal(p1[perm], p2)
        assert v1[perm].tobytes() == v2.tobytes()   # every cell, present or not


def test_each_function_on_its_own_rows_equals_the_function_alone():
    # a spec mixing every function: each row's values and presence, cell for cell, equal those of a spec holding
    # that function's rows only (the non-extrapolated functions are computed on their own rows)
    store = _store(6, 10, 80)
    fam = store.families("c_total")[0]
    tape = Tape(store)
    slots = tape.slots([(fam, r) for r in range(10)])
    rng = np.random.default_rng(1)
    codes = rng.integers(0, len(CODES), size=60)
    sl, rng_ms, off = np.tile(slots, 6), rng.choice([120_000, 300_000, 900_000], 60), rng.choice([0, 60_000], 60)
    mixed = KernelSpec(sl, rng_ms, off, codes)
    tape.sync(80)
    times = np.arange(70, 78, dtype=np.int64) * ST
    v, p = window_kernel(tape, mixed, times, 0, ST)
    for c in range(len(CODES)):
        rows = np.flatnonzero(codes == c)
        if not len(rows):
            continue
        v1, p1 = window_kernel(tape, KernelSpec(sl[rows], rng_ms[rows], off[rows], codes[rows]), times, 0, ST)
        assert np.array_equal(p[rows], p1), c
        assert v[rows].tobytes() == v1.tobytes(), c


def test_max_min_over_time_follow_rangefuncs_on_special_values():
    # the kernel's max / min_over_time (codes 8, 9) against the definition on signed zeros, infinities, negative
    # values and gaps: the same presence and the same bits where present (which of 0.0 / -0.0 is kept included)
    rng = np.random.default_rng(5)
    special = np.array([0.0, -0.0, np.inf, -np.inf, -3.5, 2.0, 7.25, -1e300, 5e-324, np.nan])
    store = MetricStore(step_s=15.0, capacity=64)
    fam = store.family("c_total", ("i",))
    rows = fam.rows([(str(i),) for i in range(24)])
    for k in range(150):
        vals = special[rng.integers(0, len(special), 24)]
        vals[rng.random(24) < 0.25] = np.nan
        if k % 37 < 6:
            vals[:6] = np.nan   # whole windows without a sample for some series
        store.write(fam, rows, k, vals)
    windows = [(name, r, o) for name in ("max_over_time", "min_over_time")
               for r, o in ((60_000, 0), (300_000, 0), (120_000, 45_000), (900_000, 0))]
    tape = Tape(store, capacity=16)
    slots = tape.slots([(fam, int(r)) for r in rows])
    for a in range(0, 142, 8):
        _check_kernel(tape, store, fam, np.arange(24), slots, windows, a)
